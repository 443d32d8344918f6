/* The "remat-chain-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). The reader checks types and number forms; everything
 * about the model itself is checked by remat__chain_create_src, the one path
 * every chain goes through. */
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"

/* Reads stages[i] into *st. */
static remat_status read_stage(const cJSON *obj, size_t i, const char *src, remat_stage *st,
                               remat_error *err) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "stages[%zu].", i);
    REMAT__RETURN_IF(!cJSON_IsObject(obj), err, REMAT_E_INPUT,
                     "%s: stages[%zu]: expected an object, got %s", src, i,
                     remat__json_type_name(obj));
    REMAT__FORWARD(remat__json_string(obj, "name", src, prefix, 0, st->name, sizeof st->name, err));
    REMAT__FORWARD(remat__json_time(obj, "fwd_time", src, prefix, 1, 0, &st->fwd_time, err));
    REMAT__FORWARD(remat__json_time(obj, "bwd_time", src, prefix, 1, 0, &st->bwd_time, err));
    REMAT__FORWARD(remat__json_bytes(obj, "out_bytes", src, prefix, 1, 0, &st->out_bytes, err));
    REMAT__FORWARD(remat__json_bytes(obj, "saved_bytes", src, prefix, 1, 0, &st->saved_bytes, err));
    REMAT__FORWARD(remat__json_bytes(obj, "grad_bytes", src, prefix, 0, st->out_bytes,
                                     &st->grad_bytes, err));
    REMAT__FORWARD(remat__json_bytes(obj, "fwd_overhead", src, prefix, 0, 0, &st->fwd_overhead, err));
    REMAT__FORWARD(remat__json_bytes(obj, "bwd_overhead", src, prefix, 0, 0, &st->bwd_overhead, err));
    return REMAT_OK;
}

/* Reads the stages array into a new table *out of *n stages (free()). */
static remat_status read_stages(const cJSON *doc, const char *src, remat_stage **out, size_t *n,
                                remat_error *err) {
    *out = NULL;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "stages");
    REMAT__RETURN_IF(!arr, err, REMAT_E_INPUT, "%s: stages: missing required field", src);
    REMAT__RETURN_IF(!cJSON_IsArray(arr), err, REMAT_E_INPUT, "%s: stages: expected an array, got %s",
                     src, remat__json_type_name(arr));
    size_t count = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) count++;
    REMAT__RETURN_IF(count == 0, err, REMAT_E_INPUT,
                     "%s: stages: empty; a chain needs at least the loss stage", src);
    REMAT__RETURN_IF(count > REMAT_MAX_STAGES, err, REMAT_E_INPUT,
                     "%s: stages: %zu stages, more than the limit of %u", src, count,
                     REMAT_MAX_STAGES);
    remat_stage *st = remat__calloc(count, sizeof *st);
    REMAT__RETURN_IF(!st, err, REMAT_E_NOMEM, "%s: out of memory for %zu stages", src, count);
    size_t i = 0;
    cJSON_ArrayForEach(it, arr) {
        remat_status s = read_stage(it, i, src, &st[i], err);
        if (s != REMAT_OK) {
            free(st);
            return s;
        }
        i++;
    }
    *out = st;
    *n = count;
    return REMAT_OK;
}

static remat_status chain_from_doc(const cJSON *doc, const char *src, remat_chain **out,
                                   remat_error *err) {
    char name[REMAT_NAME_MAX] = "";
    char unit[sizeof((remat_chain *)0)->time_unit] = "";
    uint64_t input_bytes, input_grad_bytes;
    REMAT__FORWARD(remat__json_string(doc, "name", src, "", 0, name, sizeof name, err));
    REMAT__FORWARD(remat__json_string(doc, "time_unit", src, "", 0, unit, sizeof unit, err));
    REMAT__FORWARD(remat__json_bytes(doc, "input_bytes", src, "", 1, 0, &input_bytes, err));
    REMAT__FORWARD(remat__json_bytes(doc, "input_grad_bytes", src, "", 0, input_bytes,
                                     &input_grad_bytes, err));
    remat_stage *stages = NULL;
    size_t n = 0;
    REMAT__FORWARD(read_stages(doc, src, &stages, &n, err));
    remat_status s =
        remat__chain_create_src(src, name, input_bytes, input_grad_bytes, stages, n, out, err);
    free(stages);
    if (s == REMAT_OK) remat__strlcpy((*out)->time_unit, unit, sizeof (*out)->time_unit);
    return s;
}

remat_status remat_chain_from_json(const char *text, size_t len, const char *source,
                                   remat_chain **out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_chain_from_json: out is NULL");
    *out = NULL;
    const char *src = source ? source : "<string>";
    cJSON *doc;
    REMAT__FORWARD(remat__json_parse(text, len, src, "remat-chain-1", &doc, err));
    remat_status s = chain_from_doc(doc, src, out, err);
    cJSON_Delete(doc);
    return s;
}

remat_status remat_chain_load(const char *path, remat_chain **out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_chain_load: NULL argument");
    *out = NULL;
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
    REMAT__RETURN_IF(!c || !out, err, REMAT_E_INPUT, "remat_chain_to_json: NULL argument");
    *out = NULL;
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
