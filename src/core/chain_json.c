/* The "remat-chain-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). The reader checks types and number forms; everything
 * about the model itself is checked by remat__chain_adopt, the one path
 * every chain goes through. */
#include <stdio.h>
#include <string.h>

#include "json_util.h"

/* Fields of a stage, in the order their absence is reported. */
enum { F_FWD, F_BWD, F_OUT, F_SAVED, F_GRAD, F_FWD_OV, F_BWD_OV, F_NAME, F_FALL_OV, F_OPTIONS,
       F_STOP_TIME, F_STOP_SAVED, F_STOP_OV, F_COUNT };
static const char *const stage_keys[F_COUNT] = {
    "fwd_time", "bwd_time", "out_bytes", "saved_bytes", "grad_bytes",
    "fwd_overhead", "bwd_overhead", "name", "fall_overhead", "options",
    "stop_time", "stop_saved_bytes", "stop_overhead"};

/* Fields of an option, the required ones first. */
enum { O_SAVED, O_BWD, O_FALL_OV, O_BWD_OV, O_NAME, O_COUNT };
static const char *const option_keys[O_COUNT] = {"saved_bytes", "bwd_time", "fall_overhead",
                                                 "bwd_overhead", "name"};

/* Reads option k of the stage at `stage` (its path, "stages[3]."), the value
 * v, into *o. */
static remat_status read_option(const remat__jdoc *d, const cJSON *v, const char *stage, size_t k,
                                remat_stage_option *o) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%soptions[%zu].", stage, k);
    REMAT__RETURN_IF(!cJSON_IsObject(v), d->err, REMAT_E_INPUT,
                     "%s: %soptions[%zu]: expected an object, got %s", d->src, stage, k,
                     remat__json_type_name(v));
    unsigned seen = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const char *key = m->string;
        remat_status s;
        switch (remat__json_member(option_keys, O_COUNT, key, &seen)) {
        case O_SAVED: s = remat__json_bytes(d, m, prefix, key, &o->saved_bytes); break;
        case O_BWD: s = remat__json_time(d, m, prefix, key, &o->bwd_time); break;
        case O_FALL_OV: s = remat__json_bytes(d, m, prefix, key, &o->fall_overhead); break;
        case O_BWD_OV: s = remat__json_bytes(d, m, prefix, key, &o->bwd_overhead); break;
        case O_NAME: s = remat__json_string(d, m, prefix, key, o->name, sizeof o->name); break;
        default: s = REMAT_OK; break; /* not a field of an option, or a repeat */
        }
        REMAT__FORWARD(s);
    }
    for (int f = O_SAVED; f <= O_BWD; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), d->err, REMAT_E_INPUT,
                         "%s: %s%s: missing required field", d->src, prefix, option_keys[f]);
    return REMAT_OK;
}

/* The options of the stage at `stage` (its path), the array v, into st
 * (allocated at its size). An empty array is the same as none. */
static remat_status read_options(const remat__jdoc *d, const cJSON *v, const char *stage,
                                 remat_stage *st) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: %soptions: expected an array, got %s", d->src, stage,
                     remat__json_type_name(v));
    size_t n = remat__json_count(v);
    REMAT__RETURN_IF(n > REMAT_MAX_OPTIONS, d->err, REMAT_E_INPUT,
                     "%s: %soptions: %zu options, more than the limit of %u", d->src, stage, n,
                     REMAT_MAX_OPTIONS);
    if (n == 0) return REMAT_OK;
    st->options = remat__calloc(n, sizeof *st->options);
    REMAT__RETURN_IF(!st->options, d->err, REMAT_E_NOMEM,
                     "%s: out of memory for the %soptions", d->src, stage);
    st->n_options = n;
    size_t k = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, v) {
        REMAT__FORWARD(read_option(d, o, stage, k, &st->options[k]));
        k++;
    }
    return REMAT_OK;
}

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
        case F_FALL_OV:
            s = remat__json_bytes(d, m, prefix, key, &st->fall_overhead);
            st->has_fall_overhead = 1;
            break;
        case F_OPTIONS: s = read_options(d, m, prefix, st); break;
        case F_STOP_TIME:
            s = remat__json_time(d, m, prefix, key, &st->stop_time);
            st->has_stop_time = 1;
            break;
        case F_STOP_SAVED:
            s = remat__json_bytes(d, m, prefix, key, &st->stop_saved_bytes);
            st->has_stop_saved_bytes = 1;
            break;
        case F_STOP_OV:
            s = remat__json_bytes(d, m, prefix, key, &st->stop_overhead);
            st->has_stop_overhead = 1;
            break;
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
        remat__stages_free(stages, count);
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

static void put_option(remat__buf *b, const remat_stage_option *o) {
    remat__buf_printf(b, "{");
    put_string(b, "name", o->name);
    remat__buf_printf(b, ", \"saved_bytes\": %llu, \"fall_overhead\": %llu, \"bwd_time\": ",
                      (unsigned long long)o->saved_bytes, (unsigned long long)o->fall_overhead);
    remat__json_number(b, o->bwd_time);
    remat__buf_printf(b, ", \"bwd_overhead\": %llu}", (unsigned long long)o->bwd_overhead);
}

/* fall_overhead, the stop fields and options only when the stage has them,
 * so that a chain without them is written as before. */
void remat__json_put_stage(remat__buf *b, const remat_stage *s) {
    remat__buf_printf(b, "    {");
    put_string(b, "name", s->name);
    remat__buf_printf(b, ", \"fwd_time\": ");
    remat__json_number(b, s->fwd_time);
    remat__buf_printf(b, ", \"bwd_time\": ");
    remat__json_number(b, s->bwd_time);
    remat__buf_printf(b,
                      ", \"out_bytes\": %llu, \"saved_bytes\": %llu, \"grad_bytes\": %llu, "
                      "\"fwd_overhead\": %llu, \"bwd_overhead\": %llu",
                      (unsigned long long)s->out_bytes, (unsigned long long)s->saved_bytes,
                      (unsigned long long)s->grad_bytes, (unsigned long long)s->fwd_overhead,
                      (unsigned long long)s->bwd_overhead);
    if (s->has_fall_overhead)
        remat__buf_printf(b, ", \"fall_overhead\": %llu", (unsigned long long)s->fall_overhead);
    if (s->has_stop_time) {
        remat__buf_printf(b, ", \"stop_time\": ");
        remat__json_number(b, s->stop_time);
    }
    if (s->has_stop_saved_bytes)
        remat__buf_printf(b, ", \"stop_saved_bytes\": %llu",
                          (unsigned long long)s->stop_saved_bytes);
    if (s->has_stop_overhead)
        remat__buf_printf(b, ", \"stop_overhead\": %llu", (unsigned long long)s->stop_overhead);
    if (s->n_options) {
        remat__buf_printf(b, ", \"options\": [");
        for (size_t k = 0; k < s->n_options; k++) {
            if (k) remat__buf_printf(b, ", ");
            put_option(b, &s->options[k]);
        }
        remat__buf_printf(b, "]");
    }
    remat__buf_printf(b, "}");
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
