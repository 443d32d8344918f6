/* The "remat-chain-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). The reader checks types and number forms; everything
 * about the model itself is checked by remat__chain_adopt, the one path
 * every chain goes through. */
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"

/* Fields of a stage, in the order their absence is reported. */
enum { F_FWD, F_BWD, F_OUT, F_SAVED, F_GRAD, F_FWD_OV, F_BWD_OV, F_NAME, F_COUNT };
static const char *const stage_keys[F_COUNT] = {
    "fwd_time", "bwd_time", "out_bytes", "saved_bytes", "grad_bytes",
    "fwd_overhead", "bwd_overhead", "name"};

/* Reads stage i, the value v, into *st; `outer` is the path of the object
 * holding "stages" ("" in a chain). When a key appears twice, the first one
 * counts. */
remat_status remat__json_stage(const remat__jdoc *d, const cJSON *v, const char *outer, size_t i,
                               remat_stage *st) {
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%sstages[%zu].", outer, i);
    REMAT__RETURN_IF(!cJSON_IsObject(v), d->err, REMAT_E_INPUT,
                     "%s: %sstages[%zu]: expected an object, got %s", d->src, outer, i,
                     remat__json_type_name(v));
    unsigned seen = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const char *key = m->string;
        remat_status s;
        switch (remat__json_member(stage_keys, F_COUNT, key, &seen)) {
        case F_FWD: s = remat__json_time(d, m, prefix, key, &st->fwd_time); break;
        case F_BWD: s = remat__json_time(d, m, prefix, key, &st->bwd_time); break;
        case F_OUT: s = remat__json_bytes(d, m, prefix, key, &st->out_bytes); break;
        case F_SAVED: s = remat__json_bytes(d, m, prefix, key, &st->saved_bytes); break;
        case F_GRAD: s = remat__json_bytes(d, m, prefix, key, &st->grad_bytes); break;
        case F_FWD_OV: s = remat__json_bytes(d, m, prefix, key, &st->fwd_overhead); break;
        case F_BWD_OV: s = remat__json_bytes(d, m, prefix, key, &st->bwd_overhead); break;
        case F_NAME: s = remat__json_string(d, m, prefix, key, st->name, sizeof st->name); break;
        default: s = REMAT_OK; break; /* not a field of a stage, or a repeat */
        }
        REMAT__FORWARD(s);
    }
    for (int f = F_FWD; f <= F_SAVED; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), d->err, REMAT_E_INPUT,
                         "%s: %s%s: missing required field", d->src, prefix, stage_keys[f]);
    if (!(seen & (1u << F_GRAD))) st->grad_bytes = st->out_bytes;
    return REMAT_OK;
}

/* The stages table of the "stages" member v, allocated once at its size. */
static remat_status stages_table(const remat__jdoc *d, const cJSON *v, remat_stage **out,
                                 size_t *count) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: stages: expected an array, got %s", d->src, remat__json_type_name(v));
    size_t n = remat__json_count(v);
    REMAT__RETURN_IF(n == 0, d->err, REMAT_E_INPUT,
                     "%s: stages: empty; a chain needs at least the loss stage", d->src);
    REMAT__RETURN_IF(n > REMAT_MAX_STAGES, d->err, REMAT_E_INPUT,
                     "%s: stages: %zu stages, more than the limit of %u", d->src, n,
                     REMAT_MAX_STAGES);
    *out = remat__calloc(n, sizeof **out);
    REMAT__RETURN_IF(!*out, d->err, REMAT_E_NOMEM, "%s: out of memory for %zu stages", d->src, n);
    *count = n;
    size_t i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        REMAT__FORWARD(remat__json_stage(d, s, "", i, &(*out)[i]));
        i++;
    }
    return REMAT_OK;
}

enum { T_NAME, T_UNIT, T_INPUT, T_INPUT_GRAD, T_STAGES, T_COUNT };
static const char *const top_keys[T_COUNT] = {"name", "time_unit", "input_bytes",
                                              "input_grad_bytes", "stages"};

/* The chain of a parsed document. The tree is freed once the stages table
 * is built, before the chain is checked. */
static remat_status chain_from_doc(remat__jdoc *d, remat_chain **out) {
    char name[REMAT_NAME_MAX] = "";
    char unit[sizeof((remat_chain *)0)->time_unit] = "";
    uint64_t input_bytes = 0, input_grad_bytes = 0;
    remat_stage *stages = NULL;
    size_t count = 0;
    unsigned seen = 0;
    remat_status s = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        switch (remat__json_member(top_keys, T_COUNT, key, &seen)) {
        case T_NAME: s = remat__json_string(d, m, "", key, name, sizeof name); break;
        case T_UNIT: s = remat__json_string(d, m, "", key, unit, sizeof unit); break;
        case T_INPUT: s = remat__json_bytes(d, m, "", key, &input_bytes); break;
        case T_INPUT_GRAD: s = remat__json_bytes(d, m, "", key, &input_grad_bytes); break;
        case T_STAGES: s = stages_table(d, m, &stages, &count); break;
        default: break; /* ignored, or a repeat */
        }
        if (s != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    if (s == REMAT_OK && !(seen & (1u << T_INPUT)))
        s = remat__fail(d->err, REMAT_E_INPUT, "%s: input_bytes: missing required field", d->src);
    if (s == REMAT_OK && !(seen & (1u << T_STAGES)))
        s = remat__fail(d->err, REMAT_E_INPUT, "%s: stages: missing required field", d->src);
    if (s != REMAT_OK) {
        free(stages);
        return s;
    }
    if (!(seen & (1u << T_INPUT_GRAD))) input_grad_bytes = input_bytes;
    /* The table is handed over, not copied: one copy of the stages at a time. */
    s = remat__chain_adopt(d->src, name, input_bytes, input_grad_bytes, stages, count, out,
                           d->err);
    if (s == REMAT_OK) remat__strlcpy((*out)->time_unit, unit, sizeof (*out)->time_unit);
    return s;
}

remat_status remat_chain_from_json(const char *text, size_t len, const char *source,
                                   remat_chain **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_chain_from_json: out is NULL");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_parse(&d, text, len, source ? source : "<string>",
                                     "remat-chain-1", err));
    return chain_from_doc(&d, out);
}

remat_status remat_chain_load(const char *path, remat_chain **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_chain_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, "remat-chain-1", err));
    return chain_from_doc(&d, out);
}

/* "key": "escaped value" */
static void put_string(remat__buf *b, const char *key, const char *v) {
    remat__buf_printf(b, "\"%s\": \"", key);
    remat__buf_json_string(b, v);
    remat__buf_printf(b, "\"");
}

void remat__json_put_stage(remat__buf *b, const remat_stage *s) {
    remat__buf_printf(b, "    {");
    put_string(b, "name", s->name);
    remat__buf_printf(b, ", \"fwd_time\": ");
    remat__json_number(b, s->fwd_time);
    remat__buf_printf(b, ", \"bwd_time\": ");
    remat__json_number(b, s->bwd_time);
    remat__buf_printf(b,
                      ", \"out_bytes\": %llu, \"saved_bytes\": %llu, \"grad_bytes\": %llu, "
                      "\"fwd_overhead\": %llu, \"bwd_overhead\": %llu}",
                      (unsigned long long)s->out_bytes, (unsigned long long)s->saved_bytes,
                      (unsigned long long)s->grad_bytes, (unsigned long long)s->fwd_overhead,
                      (unsigned long long)s->bwd_overhead);
}

remat_status remat_chain_to_json(const remat_chain *c, char **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_chain_to_json: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_chain_to_json", err));
    remat__buf b = {0};
    remat__buf_printf(&b, "{\n  \"format\": \"remat-chain-1\",\n  ");
    put_string(&b, "name", c->name);
    remat__buf_printf(&b, ",\n  ");
    put_string(&b, "time_unit", c->time_unit);
    remat__buf_printf(&b, ",\n  \"input_bytes\": %llu,\n  \"input_grad_bytes\": %llu,\n",
                      (unsigned long long)c->input_bytes, (unsigned long long)c->input_grad_bytes);
    remat__buf_printf(&b, "  \"stages\": [\n");
    for (size_t i = 0; i < c->n; i++) {
        remat__json_put_stage(&b, &c->stages[i]);
        remat__buf_printf(&b, i + 1 < c->n ? ",\n" : "\n");
    }
    remat__buf_printf(&b, "  ]\n}\n");
    return remat__buf_finish(&b, out, err);
}

remat_status remat_chain_save(const remat_chain *c, const char *path, remat_error *err) {
    REMAT__RETURN_IF(!path, err, REMAT_E_INPUT, "remat_chain_save: path is NULL");
    char *text;
    REMAT__FORWARD(remat_chain_to_json(c, &text, err));
    remat_status s = remat_write_file(path, text, strlen(text), err);
    remat_free(text);
    return s;
}
