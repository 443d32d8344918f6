/* The "remat-schedule-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). Only syntax is checked here; remat_simulate() judges
 * whether the ops make sense for a chain. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"

#define OPS_PER_LINE 8

/* Op text longer than this is not an op. */
#define OP_TEXT_CAP 64

/* Reads op k, the value v, into *op. */
static remat_status read_op(const remat__jdoc *d, const cJSON *v, size_t k, remat_op *op) {
    REMAT__RETURN_IF(!cJSON_IsString(v), d->err, REMAT_E_INPUT,
                     "%s: ops[%zu]: expected a string, got %s", d->src, k,
                     remat__json_type_name(v));
    char text[OP_TEXT_CAP], where[48];
    snprintf(where, sizeof where, "ops[%zu]", k);
    REMAT__FORWARD(remat__json_string(d, v, "", where, text, sizeof text));
    remat_error why;
    /* remat_op_parse says what is wrong; this adds where. */
    REMAT__RETURN_IF(remat_op_parse(text, op, &why) != REMAT_OK, d->err, REMAT_E_INPUT,
                     "%s: ops[%zu]: %s", d->src, k, why.message);
    return REMAT_OK;
}

/* The ops array v, straight into an exact table. */
static remat_status read_ops(const remat__jdoc *d, const cJSON *v, remat_schedule *s) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: ops: expected an array, got %s", d->src, remat__json_type_name(v));
    size_t count = remat__json_count(v);
    s->ops = remat__calloc(count, sizeof *s->ops);
    REMAT__RETURN_IF(!s->ops, d->err, REMAT_E_NOMEM, "%s: out of memory for %zu ops",
                     d->src, count);
    s->cap = count;
    const cJSON *o;
    cJSON_ArrayForEach(o, v) {
        REMAT__FORWARD(read_op(d, o, s->n_ops, &s->ops[s->n_ops]));
        s->n_ops++;
    }
    return REMAT_OK;
}

enum { K_ALGORITHM, K_LIMIT, K_TIME, K_PEAK, K_OPS, K_COUNT };
static const char *const keys[K_COUNT] = {"algorithm", "memory_limit", "time", "peak_bytes",
                                          "ops"};

/* The fields of a parsed document into s; the tree is freed here. */
static remat_status schedule_from_doc(remat__jdoc *d, remat_schedule *s) {
    unsigned seen = 0;
    remat_status st = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        switch (remat__json_member(keys, K_COUNT, key, &seen)) {
        case K_ALGORITHM:
            st = remat__json_string(d, m, "", key, s->algorithm, sizeof s->algorithm);
            break;
        case K_LIMIT: st = remat__json_bytes(d, m, "", key, &s->memory_limit); break;
        case K_TIME: st = remat__json_time(d, m, "", key, &s->time); break;
        case K_PEAK: st = remat__json_bytes(d, m, "", key, &s->peak_bytes); break;
        case K_OPS: st = read_ops(d, m, s); break;
        default: break; /* ignored, or a repeat: the first counts */
        }
        if (st != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    REMAT__FORWARD(st);
    REMAT__RETURN_IF(!(seen & (1u << K_OPS)), d->err, REMAT_E_INPUT,
                     "%s: ops: missing required field", d->src);
    return REMAT_OK;
}

/* The schedule of a parsed document (consumed). */
static remat_status schedule_of(remat__jdoc *d, remat_schedule **out) {
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create("", &s, d->err);
    if (st == REMAT_OK) st = schedule_from_doc(d, s);
    remat__jdoc_free(d);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_schedule_from_json(const char *text, size_t len, const char *source,
                                      remat_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_schedule_from_json: out is NULL");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_parse(&d, text, len, source ? source : "<string>",
                                     "remat-schedule-1", err));
    return schedule_of(&d, out);
}

remat_status remat_schedule_load(const char *path, remat_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_schedule_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, "remat-schedule-1", err));
    return schedule_of(&d, out);
}

remat_status remat_schedule_to_json(const remat_schedule *s, char **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_schedule_to_json: NULL argument");
    REMAT__FORWARD(remat__schedule_validate(s, "remat_schedule_to_json", err));
    REMAT__RETURN_IF(!isfinite(s->time) || s->time < 0, err, REMAT_E_INPUT,
                     "schedule: time: %g is not a finite number >= 0", s->time);
    remat__buf b = {0};
    remat__buf_printf(&b, "{\n  \"format\": \"remat-schedule-1\",\n  \"algorithm\": \"");
    remat__buf_json_string(&b, s->algorithm);
    remat__buf_printf(&b, "\",\n  \"memory_limit\": %llu,\n  \"time\": ",
                      (unsigned long long)s->memory_limit);
    remat__json_number(&b, s->time);
    remat__buf_printf(&b, ",\n  \"peak_bytes\": %llu,\n  \"ops\": [",
                      (unsigned long long)s->peak_bytes);
    for (size_t k = 0; k < s->n_ops; k++) {
        char text[REMAT_OP_TEXT_MAX];
        remat_op_format(s->ops[k], text);
        const char *sep = k == 0 ? "\n    " : k % OPS_PER_LINE == 0 ? ",\n    " : ", ";
        remat__buf_printf(&b, "%s\"%s\"", sep, text);
    }
    remat__buf_printf(&b, s->n_ops ? "\n  ]\n}\n" : "]\n}\n");
    return remat__buf_finish(&b, out, err);
}

remat_status remat_schedule_save(const remat_schedule *s, const char *path, remat_error *err) {
    REMAT__RETURN_IF(!path, err, REMAT_E_INPUT, "remat_schedule_save: path is NULL");
    char *text;
    REMAT__FORWARD(remat_schedule_to_json(s, &text, err));
    remat_status st = remat_write_file(path, text, strlen(text), err);
    remat_free(text);
    return st;
}
