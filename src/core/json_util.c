/* JSON helpers for the document readers and writers. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"

const char *remat__json_type_name(const cJSON *v) {
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

/* Line and column (from 1) of byte `pos` of text. */
static void locate(const char *text, size_t pos, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t k = 0; k < pos; k++) {
        if (text[k] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

remat_status remat__json_parse(const char *text, size_t len, const char *src, const char *format,
                               cJSON **out, remat_error *err) {
    *out = NULL;
    REMAT__RETURN_IF(!text, err, REMAT_E_INPUT, "%s: no text", src);
    REMAT__RETURN_IF(len > REMAT__JSON_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: %zu bytes, more than the limit of %zu MiB for a document", src, len,
                     REMAT__JSON_MAX_BYTES >> 20);
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (doc) {
        /* Only whitespace may follow the document. */
        size_t pos = (size_t)(end - text);
        while (pos < len && text[pos] && strchr(" \t\r\n", text[pos])) pos++;
        if (pos < len) {
            size_t line, col;
            locate(text, pos, &line, &col);
            cJSON_Delete(doc);
            return remat__fail(err, REMAT_E_INPUT,
                               "%s: line %zu, column %zu: text after the end of the document",
                               src, line, col);
        }
    } else {
        /* cJSON reports where it stopped; a document nested deeper than its
         * limit fails the same way. */
        if (end && end >= text && end <= text + len) {
            size_t line, col;
            locate(text, (size_t)(end - text), &line, &col);
            return remat__fail(err, REMAT_E_INPUT,
                               "%s: line %zu, column %zu: malformed JSON (or nested more than "
                               "%d deep)",
                               src, line, col, CJSON_NESTING_LIMIT);
        }
        return remat__fail(err, REMAT_E_INPUT, "%s: malformed JSON", src);
    }
    if (!cJSON_IsObject(doc)) {
        remat__fail(err, REMAT_E_INPUT, "%s: expected a JSON object at the top level, got %s", src,
                    remat__json_type_name(doc));
        cJSON_Delete(doc);
        return REMAT_E_INPUT;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "format");
    remat_status st = REMAT_OK;
    if (!f)
        st = remat__fail(err, REMAT_E_INPUT, "%s: format: missing required field (expected \"%s\")",
                         src, format);
    else if (!cJSON_IsString(f))
        st = remat__fail(err, REMAT_E_INPUT, "%s: format: expected a string, got %s", src,
                         remat__json_type_name(f));
    else if (strcmp(f->valuestring, format) != 0)
        st = remat__fail(err, REMAT_E_INPUT, "%s: format: \"%.64s\" is not \"%s\"", src,
                         f->valuestring, format);
    if (st != REMAT_OK) {
        cJSON_Delete(doc);
        return st;
    }
    *out = doc;
    return REMAT_OK;
}

/* Looks up obj.key; reports a missing required field. *v is NULL when absent. */
static remat_status lookup(const cJSON *obj, const char *key, const char *src, const char *prefix,
                           int required, const cJSON **v, remat_error *err) {
    *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    REMAT__RETURN_IF(!*v && required, err, REMAT_E_INPUT, "%s: %s%s: missing required field", src,
                     prefix, key);
    return REMAT_OK;
}

static remat_status number(const cJSON *v, const char *key, const char *src, const char *prefix,
                           double *out, remat_error *err) {
    REMAT__RETURN_IF(!cJSON_IsNumber(v), err, REMAT_E_INPUT, "%s: %s%s: expected a number, got %s",
                     src, prefix, key, remat__json_type_name(v));
    double x = v->valuedouble;
    REMAT__RETURN_IF(!isfinite(x), err, REMAT_E_INPUT, "%s: %s%s: not a finite number", src,
                     prefix, key);
    *out = x;
    return REMAT_OK;
}

remat_status remat__json_bytes(const cJSON *obj, const char *key, const char *src,
                               const char *prefix, int required, uint64_t dflt, uint64_t *out,
                               remat_error *err) {
    const cJSON *v;
    REMAT__FORWARD(lookup(obj, key, src, prefix, required, &v, err));
    if (!v) {
        *out = dflt;
        return REMAT_OK;
    }
    double x;
    REMAT__FORWARD(number(v, key, src, prefix, &x, err));
    REMAT__RETURN_IF(x < 0, err, REMAT_E_INPUT, "%s: %s%s: negative size %.17g", src, prefix, key,
                     x);
    REMAT__RETURN_IF(x >= (double)REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is 2^53 or more", src, prefix, key, x);
    REMAT__RETURN_IF(floor(x) != x, err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is not a whole number of bytes", src, prefix, key, x);
    *out = (uint64_t)x;
    return REMAT_OK;
}

remat_status remat__json_time(const cJSON *obj, const char *key, const char *src,
                              const char *prefix, int required, double dflt, double *out,
                              remat_error *err) {
    const cJSON *v;
    REMAT__FORWARD(lookup(obj, key, src, prefix, required, &v, err));
    if (!v) {
        *out = dflt;
        return REMAT_OK;
    }
    double x;
    REMAT__FORWARD(number(v, key, src, prefix, &x, err));
    REMAT__RETURN_IF(x < 0, err, REMAT_E_INPUT, "%s: %s%s: negative time %.17g", src, prefix, key,
                     x);
    *out = x;
    return REMAT_OK;
}

remat_status remat__json_string(const cJSON *obj, const char *key, const char *src,
                                const char *prefix, int required, char *dst, size_t cap,
                                remat_error *err) {
    const cJSON *v;
    REMAT__FORWARD(lookup(obj, key, src, prefix, required, &v, err));
    if (!v) return REMAT_OK;
    REMAT__RETURN_IF(!cJSON_IsString(v), err, REMAT_E_INPUT, "%s: %s%s: expected a string, got %s",
                     src, prefix, key, remat__json_type_name(v));
    size_t n = strlen(v->valuestring);
    REMAT__RETURN_IF(n >= cap, err, REMAT_E_INPUT,
                     "%s: %s%s: %zu bytes long, more than the limit of %zu", src, prefix, key, n,
                     cap - 1);
    memcpy(dst, v->valuestring, n + 1);
    return REMAT_OK;
}

void remat__json_number(remat__buf *b, double v) {
    if (!isfinite(v)) { /* JSON has no infinity: a sum past DBL_MAX is written as null */
        remat__buf_printf(b, "null");
        return;
    }
    char text[40];
    for (int p = 15; p <= 17; p++) {
        snprintf(text, sizeof text, "%.*g", p, v);
        if (strtod(text, NULL) == v) break;
    }
    remat__buf_printf(b, "%s", text);
}
