/* Helpers shared by the JSON readers and writers (chain_json.c,
 * schedule_json.c): parsing with a position in the error, typed field getters
 * whose messages name the field, and number formatting that round-trips. */
#ifndef REMAT_JSON_UTIL_H
#define REMAT_JSON_UTIL_H

#include <cjson/cJSON.h>

#include "internal.h"

/* Documents larger than this are refused before parsing (docs/formats.md). */
#define REMAT__JSON_MAX_BYTES REMAT_MAX_DOCUMENT_BYTES

/* Parses `len` bytes of text into *out (free with cJSON_Delete). The top level
 * must be an object whose "format" is `format`. */
remat_status remat__json_parse(const char *text, size_t len, const char *src, const char *format,
                               cJSON **out, remat_error *err);

/* Field getters. `prefix` is the path of obj ("" at the top, "stages[3]."
 * inside a stage); messages read "<src>: <prefix><key>: <problem>". When the
 * field is absent, a required one is an error and an optional one takes dflt. */
remat_status remat__json_bytes(const cJSON *obj, const char *key, const char *src,
                               const char *prefix, int required, uint64_t dflt, uint64_t *out,
                               remat_error *err);
remat_status remat__json_time(const cJSON *obj, const char *key, const char *src,
                              const char *prefix, int required, double dflt, double *out,
                              remat_error *err);
/* Copies a string field into dst[cap]; longer strings are an error. Absent
 * optional strings leave dst unchanged. */
remat_status remat__json_string(const cJSON *obj, const char *key, const char *src,
                                const char *prefix, int required, char *dst, size_t cap,
                                remat_error *err);

/* Name of a JSON value's type for messages ("a string", "an array", ...). */
const char *remat__json_type_name(const cJSON *v);

/* Appends the shortest of %.15g, %.16g, %.17g that reads back as v; null when
 * v is not finite (JSON has no infinity). */
void remat__json_number(remat__buf *b, double v);

#endif
