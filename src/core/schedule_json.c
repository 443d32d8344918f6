/* The "remat-schedule-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). Only syntax is checked here; remat_simulate() judges
 * whether the ops make sense for a chain. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"

#define OPS_PER_LINE 8

/* Op text longer than this is not an op. */
#define OP_TEXT_CAP 64

/* Reads op k, the value at js, into *op. */
static remat_status read_op(remat__js *js, size_t k, remat_op *op) {
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_STRING, js->err, REMAT_E_INPUT,
                     "%s: ops[%zu]: expected a string, got %s", js->src, k,
                     remat__js_type_name(t));
    char text[OP_TEXT_CAP], where[48];
    snprintf(where, sizeof where, "ops[%zu]", k);
    REMAT__FORWARD(remat__js_string(js, "", where, text, sizeof text));
    remat_error why;
    /* remat_op_parse says what is wrong; this adds where. */
    REMAT__RETURN_IF(remat_op_parse(text, op, &why) != REMAT_OK, js->err, REMAT_E_INPUT,
                     "%s: ops[%zu]: %s", js->src, k, why.message);
    return REMAT_OK;
}

/* The ops array at js, `count` elements, straight into an exact table. */
static remat_status read_ops(remat__js *js, size_t count, remat_schedule *s) {
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_ARRAY, js->err, REMAT_E_INPUT,
                     "%s: ops: expected an array, got %s", js->src, remat__js_type_name(t));
    s->ops = remat__calloc(count, sizeof *s->ops);
    REMAT__RETURN_IF(!s->ops, js->err, REMAT_E_NOMEM, "%s: out of memory for %zu ops", js->src,
                     count);
    s->cap = count;
    remat__js_begin(js);
    for (size_t k = 0; remat__js_array_next(js, k); k++) {
        if (k >= count) return remat__fail(js->err, REMAT_E_INTERNAL, "ops: miscounted");
        REMAT__FORWARD(read_op(js, k, &s->ops[k]));
        s->n_ops = k + 1;
    }
    return REMAT_OK;
}

enum { K_ALGORITHM, K_LIMIT, K_TIME, K_PEAK, K_OPS, K_COUNT };
static const char *const keys[K_COUNT] = {"algorithm", "memory_limit", "time", "peak_bytes",
                                          "ops"};

static remat_status schedule_from_doc(remat__js *js, size_t count, remat_schedule *s) {
    char key[32];
    unsigned seen = 0;
    remat_status st = REMAT_OK;
    remat__js_begin(js);
    for (size_t m = 0; st == REMAT_OK && remat__js_object_next(js, m, key, sizeof key, &st); m++) {
        int f = -1;
        for (int k = 0; k < K_COUNT; k++)
            if (strcmp(keys[k], key) == 0) f = k;
        if (f < 0 || (seen & (1u << f))) { /* unknown, or a repeat: the first counts */
            remat__js_skip(js);
            continue;
        }
        seen |= 1u << f;
        switch (f) {
        case K_ALGORITHM:
            st = remat__js_string(js, "", key, s->algorithm, sizeof s->algorithm);
            break;
        case K_LIMIT: st = remat__js_bytes(js, "", key, &s->memory_limit); break;
        case K_TIME: st = remat__js_time(js, "", key, &s->time); break;
        case K_PEAK: st = remat__js_bytes(js, "", key, &s->peak_bytes); break;
        default: st = read_ops(js, count, s); break;
        }
    }
    REMAT__FORWARD(st);
    REMAT__RETURN_IF(!(seen & (1u << K_OPS)), js->err, REMAT_E_INPUT,
                     "%s: ops: missing required field", js->src);
    return REMAT_OK;
}

remat_status remat_schedule_from_json(const char *text, size_t len, const char *source,
                                      remat_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_schedule_from_json: out is NULL");
    const char *src = source ? source : "<string>";
    remat__js js;
    size_t count = 0;
    REMAT__FORWARD(remat__js_open(&js, text, len, src, "remat-schedule-1", "ops", &count, err));
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create("", &s, err);
    if (st == REMAT_OK) st = schedule_from_doc(&js, count, s);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_schedule_load(const char *path, remat_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_schedule_load: NULL argument");
    char *text;
    size_t len;
    REMAT__FORWARD(remat_read_file(path, &text, &len, err));
    remat_status s = remat_schedule_from_json(text, len, path, out, err);
    free(text);
    return s;
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
