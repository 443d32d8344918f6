/* JSON for the document readers and writers: a validating scanner that reads
 * a document in place, without building a tree, so that memory stays within
 * the text plus what the reader keeps (a tree of every value costs 20 to 40
 * times the text); typed field readers whose messages name the field; and
 * number formatting that round-trips.
 *
 * Reading a document: remat__js_open() checks the whole text (syntax, nesting,
 * nothing after it, an object with the expected "format"), then the reader
 * walks the top-level object with remat__js_object_next() and reads each value
 * it knows with the typed readers, skipping the others. */
#ifndef REMAT_JSON_UTIL_H
#define REMAT_JSON_UTIL_H

#include "internal.h"

/* Documents larger than this are refused before parsing (docs/formats.md). */
#define REMAT__JSON_MAX_BYTES REMAT_MAX_DOCUMENT_BYTES
/* Arrays and objects may nest this deep. */
#define REMAT__JSON_MAX_DEPTH 1000

typedef enum remat__js_type {
    REMAT__JS_BAD = 0, /* not the start of a value */
    REMAT__JS_OBJECT,
    REMAT__JS_ARRAY,
    REMAT__JS_STRING,
    REMAT__JS_NUMBER,
    REMAT__JS_BOOL,
    REMAT__JS_NULL
} remat__js_type;

typedef struct remat__js {
    const char *text;
    size_t len, pos;
    const char *src; /* names the document in messages */
    remat_error *err;
} remat__js;

/* Checks text as a whole and positions js at the top-level object; see above.
 * On success *count is the number of elements of the top-level array member
 * `count_key` (its first occurrence; 0 when absent or not an array). */
remat_status remat__js_open(remat__js *js, const char *text, size_t len, const char *src,
                            const char *format, const char *count_key, size_t *count,
                            remat_error *err);
/* 1 when text is a valid document whose top-level "format" is `format`. */
int remat__js_has_format(const char *text, size_t len, const char *format);

/* The type of the next value, not consumed. */
remat__js_type remat__js_peek(remat__js *js);
/* "a string", "an array", ... for messages. */
const char *remat__js_type_name(remat__js_type t);
/* Skips the next value. */
void remat__js_skip(remat__js *js);

/* Objects and arrays (already checked by remat__js_open, so these cannot
 * meet a syntax error). Call begin at the '{' or '[', then next with the
 * number of members read so far: it returns 1 and positions js at the next
 * value (for objects, copies its key into key[cap]; "" when longer), or 0 at
 * the end. Keys must not contain NUL: such a key is reported (REMAT_E_INPUT)
 * through *st. */
void remat__js_begin(remat__js *js);
int remat__js_object_next(remat__js *js, size_t index, char *key, size_t cap, remat_status *st);
int remat__js_array_next(remat__js *js, size_t index);

/* Typed readers of the next value. `prefix` is the path of the enclosing
 * object ("" at the top, "stages[3]." inside a stage) and key the field, so
 * that messages read "<src>: <prefix><key>: <problem>". */
remat_status remat__js_bytes(remat__js *js, const char *prefix, const char *key, uint64_t *out);
remat_status remat__js_time(remat__js *js, const char *prefix, const char *key, double *out);
/* A finite number, any sign. */
remat_status remat__js_number(remat__js *js, const char *prefix, const char *key, double *out);
/* A string of at most cap - 1 bytes without NUL, into dst. */
remat_status remat__js_string(remat__js *js, const char *prefix, const char *key, char *dst,
                              size_t cap);

/* Appends the shortest of %.15g, %.16g, %.17g that reads back as v; null when
 * v is not finite (JSON has no infinity). */
void remat__json_number(remat__buf *b, double v);

#endif
