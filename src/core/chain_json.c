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

static int key_index(const char *const *keys, int n, const char *key) {
    for (int k = 0; k < n; k++)
        if (strcmp(keys[k], key) == 0) return k;
    return -1;
}

/* Reads stage i, the object at js, into *st. When a key appears twice, the
 * first one counts. */
static remat_status read_stage(remat__js *js, size_t i, remat_stage *st) {
    char prefix[48], key[32];
    snprintf(prefix, sizeof prefix, "stages[%zu].", i);
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_OBJECT, js->err, REMAT_E_INPUT,
                     "%s: stages[%zu]: expected an object, got %s", js->src, i,
                     remat__js_type_name(t));
    unsigned seen = 0;
    remat_status s = REMAT_OK;
    remat__js_begin(js);
    for (size_t m = 0; remat__js_object_next(js, m, key, sizeof key, &s); m++) {
        int f = key_index(stage_keys, F_COUNT, key);
        if (f < 0 || (seen & (1u << f))) {
            remat__js_skip(js);
            continue;
        }
        seen |= 1u << f;
        switch (f) {
        case F_FWD: s = remat__js_time(js, prefix, key, &st->fwd_time); break;
        case F_BWD: s = remat__js_time(js, prefix, key, &st->bwd_time); break;
        case F_OUT: s = remat__js_bytes(js, prefix, key, &st->out_bytes); break;
        case F_SAVED: s = remat__js_bytes(js, prefix, key, &st->saved_bytes); break;
        case F_GRAD: s = remat__js_bytes(js, prefix, key, &st->grad_bytes); break;
        case F_FWD_OV: s = remat__js_bytes(js, prefix, key, &st->fwd_overhead); break;
        case F_BWD_OV: s = remat__js_bytes(js, prefix, key, &st->bwd_overhead); break;
        default: s = remat__js_string(js, prefix, key, st->name, sizeof st->name); break;
        }
        if (s != REMAT_OK) return s;
    }
    REMAT__FORWARD(s);
    for (int f = F_FWD; f <= F_SAVED; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), js->err, REMAT_E_INPUT,
                         "%s: %s%s: missing required field", js->src, prefix, stage_keys[f]);
    if (!(seen & (1u << F_GRAD))) st->grad_bytes = st->out_bytes;
    return REMAT_OK;
}

/* Reads the stages array at js into st[count] (count from remat__js_open). */
static remat_status read_stages(remat__js *js, remat_stage *st, size_t count) {
    remat__js_begin(js);
    for (size_t i = 0; remat__js_array_next(js, i); i++) {
        if (i >= count) return remat__fail(js->err, REMAT_E_INTERNAL, "stages: miscounted");
        REMAT__FORWARD(read_stage(js, i, &st[i]));
    }
    return REMAT_OK;
}

enum { T_NAME, T_UNIT, T_INPUT, T_INPUT_GRAD, T_STAGES, T_COUNT };
static const char *const top_keys[T_COUNT] = {"name", "time_unit", "input_bytes",
                                              "input_grad_bytes", "stages"};

/* The stages table for a checked "stages" member at js of `count` elements. */
static remat_status stages_table(remat__js *js, size_t count, remat_stage **out) {
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_ARRAY, js->err, REMAT_E_INPUT,
                     "%s: stages: expected an array, got %s", js->src, remat__js_type_name(t));
    REMAT__RETURN_IF(count == 0, js->err, REMAT_E_INPUT,
                     "%s: stages: empty; a chain needs at least the loss stage", js->src);
    REMAT__RETURN_IF(count > REMAT_MAX_STAGES, js->err, REMAT_E_INPUT,
                     "%s: stages: %zu stages, more than the limit of %u", js->src, count,
                     REMAT_MAX_STAGES);
    *out = remat__calloc(count, sizeof **out);
    REMAT__RETURN_IF(!*out, js->err, REMAT_E_NOMEM, "%s: out of memory for %zu stages", js->src,
                     count);
    return read_stages(js, *out, count);
}

static remat_status chain_from_doc(remat__js *js, size_t count, remat_chain **out) {
    char name[REMAT_NAME_MAX] = "", key[32];
    char unit[sizeof((remat_chain *)0)->time_unit] = "";
    uint64_t input_bytes = 0, input_grad_bytes = 0;
    remat_stage *stages = NULL;
    unsigned seen = 0;
    remat_status s = REMAT_OK;
    remat__js_begin(js);
    for (size_t m = 0; s == REMAT_OK && remat__js_object_next(js, m, key, sizeof key, &s); m++) {
        int f = key_index(top_keys, T_COUNT, key);
        if (f < 0 || (seen & (1u << f))) {
            remat__js_skip(js);
            continue;
        }
        seen |= 1u << f;
        switch (f) {
        case T_NAME: s = remat__js_string(js, "", key, name, sizeof name); break;
        case T_UNIT: s = remat__js_string(js, "", key, unit, sizeof unit); break;
        case T_INPUT: s = remat__js_bytes(js, "", key, &input_bytes); break;
        case T_INPUT_GRAD: s = remat__js_bytes(js, "", key, &input_grad_bytes); break;
        default: s = stages_table(js, count, &stages); break;
        }
    }
    if (s == REMAT_OK && !(seen & (1u << T_INPUT)))
        s = remat__fail(js->err, REMAT_E_INPUT, "%s: input_bytes: missing required field", js->src);
    if (s == REMAT_OK && !(seen & (1u << T_STAGES)))
        s = remat__fail(js->err, REMAT_E_INPUT, "%s: stages: missing required field", js->src);
    if (s != REMAT_OK) {
        free(stages);
        return s;
    }
    if (!(seen & (1u << T_INPUT_GRAD))) input_grad_bytes = input_bytes;
    /* The table is handed over, not copied: one copy of the stages at a time. */
    s = remat__chain_adopt(js->src, name, input_bytes, input_grad_bytes, stages, count, out,
                           js->err);
    if (s == REMAT_OK) remat__strlcpy((*out)->time_unit, unit, sizeof (*out)->time_unit);
    return s;
}

remat_status remat_chain_from_json(const char *text, size_t len, const char *source,
                                   remat_chain **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_chain_from_json: out is NULL");
    const char *src = source ? source : "<string>";
    remat__js js;
    size_t count = 0;
    REMAT__FORWARD(remat__js_open(&js, text, len, src, "remat-chain-1", "stages", &count, err));
    return chain_from_doc(&js, count, out);
}

remat_status remat_chain_load(const char *path, remat_chain **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_chain_load: NULL argument");
    char *text;
    size_t len;
    REMAT__FORWARD(remat_read_file(path, &text, &len, err));
    remat_status s = remat_chain_from_json(text, len, path, out, err);
    free(text);
    return s;
}

/* "key": "escaped value" */
static void put_string(remat__buf *b, const char *key, const char *v) {
    remat__buf_printf(b, "\"%s\": \"", key);
    remat__buf_json_string(b, v);
    remat__buf_printf(b, "\"");
}

static void put_stage(remat__buf *b, const remat_stage *s) {
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
        put_stage(&b, &c->stages[i]);
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
