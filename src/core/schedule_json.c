/* The "remat-schedule-1" document: reader and writer (SPEC section 3,
 * docs/formats.md). Only syntax is checked here; remat_simulate() judges
 * whether the ops make sense for a chain. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"

#define OPS_PER_LINE 8

static remat_status read_ops(const cJSON *doc, const char *src, remat_schedule *s,
                             remat_error *err) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "ops");
    REMAT__RETURN_IF(!arr, err, REMAT_E_INPUT, "%s: ops: missing required field", src);
    REMAT__RETURN_IF(!cJSON_IsArray(arr), err, REMAT_E_INPUT, "%s: ops: expected an array, got %s",
                     src, remat__json_type_name(arr));
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        REMAT__RETURN_IF(!cJSON_IsString(it), err, REMAT_E_INPUT,
                         "%s: ops[%zu]: expected a string, got %s", src, k,
                         remat__json_type_name(it));
        remat_op op;
        remat_error why;
        /* remat_op_parse says what is wrong; this adds where. */
        REMAT__RETURN_IF(remat_op_parse(it->valuestring, &op, &why) != REMAT_OK, err,
                         REMAT_E_INPUT, "%s: ops[%zu]: %s", src, k, why.message);
        REMAT__FORWARD(remat_schedule_push(s, op, err));
        k++;
    }
    return REMAT_OK;
}

static remat_status schedule_from_doc(const cJSON *doc, const char *src, remat_schedule *s,
                                      remat_error *err) {
    REMAT__FORWARD(remat__json_string(doc, "algorithm", src, "", 0, s->algorithm,
                                      sizeof s->algorithm, err));
    REMAT__FORWARD(remat__json_bytes(doc, "memory_limit", src, "", 0, 0, &s->memory_limit, err));
    REMAT__FORWARD(remat__json_time(doc, "time", src, "", 0, 0, &s->time, err));
    REMAT__FORWARD(remat__json_bytes(doc, "peak_bytes", src, "", 0, 0, &s->peak_bytes, err));
    return read_ops(doc, src, s, err);
}

remat_status remat_schedule_from_json(const char *text, size_t len, const char *source,
                                      remat_schedule **out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_schedule_from_json: out is NULL");
    *out = NULL;
    const char *src = source ? source : "<string>";
    cJSON *doc;
    REMAT__FORWARD(remat__json_parse(text, len, src, "remat-schedule-1", &doc, err));
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create("", &s, err);
    if (st == REMAT_OK) st = schedule_from_doc(doc, src, s, err);
    cJSON_Delete(doc);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_schedule_load(const char *path, remat_schedule **out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_schedule_load: NULL argument");
    *out = NULL;
    char *text;
    size_t len;
    REMAT__FORWARD(remat_read_file(path, &text, &len, err));
    remat_status s = remat_schedule_from_json(text, len, path, out, err);
    free(text);
    return s;
}

remat_status remat_schedule_to_json(const remat_schedule *s, char **out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!s || !out, err, REMAT_E_INPUT, "remat_schedule_to_json: NULL argument");
    *out = NULL;
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
