/* JSON for the document readers and writers: parsing with cJSON under a
 * memory bound, typed field readers whose messages name the field, and
 * number formatting that round-trips.
 *
 * Reading a document: remat__json_parse() sizes the cJSON tree first (one
 * pass that counts values and string bytes, outside cJSON), refuses a
 * document whose tree would be too large, parses it with cJSON, and checks
 * what cJSON leaves to its caller (text after the document, NUL characters
 * in strings, an object with the expected "format" at the top). The reader
 * then walks the tree with the typed readers and frees it as soon as its
 * structs are built. */
#ifndef REMAT_JSON_UTIL_H
#define REMAT_JSON_UTIL_H

#include <cjson/cJSON.h>

#include "internal.h"

/* Documents larger than this are refused before parsing (docs/formats.md). */
#define REMAT__JSON_MAX_BYTES REMAT_MAX_DOCUMENT_BYTES
/* Arrays and objects may nest this deep (cJSON's own limit). */
#define REMAT__JSON_MAX_DEPTH CJSON_NESTING_LIMIT
/* The cJSON tree of a document may take at most max(FLOOR, FACTOR x its
 * size) bytes, by the estimate of remat__json_tree_bytes(). */
#define REMAT__JSON_TREE_FLOOR ((uint64_t)64 << 20)
#define REMAT__JSON_TREE_FACTOR 16

/* A parsed document: its top-level object, and where messages go. */
typedef struct remat__jdoc {
    cJSON *root;
    const char *src; /* names the document in messages */
    remat_error *err;
} remat__jdoc;

/* Parses len bytes of text (src names it in messages) into d, whose root is
 * an object whose "format" is `format`; see above. On failure d->root is
 * NULL and err says why: REMAT_E_INPUT for the document, REMAT_E_NOMEM when
 * memory ran out while parsing. Free with remat__jdoc_free(). */
remat_status remat__json_parse(remat__jdoc *d, const char *text, size_t len, const char *src,
                               const char *format, remat_error *err);
/* remat_read_file(path), then remat__json_parse; the text is freed before
 * this returns, so that it and the structs built from d never coexist. */
remat_status remat__json_load(remat__jdoc *d, const char *path, const char *format,
                              remat_error *err);
void remat__jdoc_free(remat__jdoc *d);
/* 1 when text is a valid document whose top-level "format" is `format`. */
int remat__json_has_format(const char *text, size_t len, const char *format);

/* The bytes cJSON would allocate for the tree of text: every value's node
 * and every string's copy (keys included), with malloc's rounding. Exact in
 * count for valid JSON; garbage in, garbage out (cJSON refuses it anyway).
 * *values is the number of nodes. */
uint64_t remat__json_tree_bytes(const char *text, size_t len, size_t *values);

/* "a string", "an array", ... for messages. */
const char *remat__json_type_name(const cJSON *v);
/* Number of elements of an array (or members of an object). */
size_t remat__json_count(const cJSON *v);

/* Typed readers of the value v. `prefix` is the path of the enclosing
 * object ("" at the top, "stages[3]." inside a stage) and key the field, so
 * that messages read "<src>: <prefix><key>: <problem>". */
remat_status remat__json_bytes(const remat__jdoc *d, const cJSON *v, const char *prefix,
                               const char *key, uint64_t *out);
remat_status remat__json_time(const remat__jdoc *d, const cJSON *v, const char *prefix,
                              const char *key, double *out);
/* A finite number, any sign. */
remat_status remat__json_finite(const remat__jdoc *d, const cJSON *v, const char *prefix,
                                const char *key, double *out);
/* A string of at most cap - 1 bytes, into dst (remat__json_parse has already
 * refused strings holding a NUL). */
remat_status remat__json_string(const remat__jdoc *d, const cJSON *v, const char *prefix,
                                const char *key, char *dst, size_t cap);

/* chain_json.c: reads the stage object v, stage i of the "stages" array
 * of the object at path `outer` ("" for a chain, "branches[1]." in a join),
 * into *st; grad_bytes defaults to out_bytes. */
remat_status remat__json_stage(const remat__jdoc *d, const cJSON *v, const char *outer, size_t i,
                               remat_stage *st);

/* chain_json.c: writes stage s as the JSON object of a "stages" array. */
void remat__json_put_stage(remat__buf *b, const remat_stage *s);

/* Index of key in keys[n], or -1; a key already in *seen (one bit per index)
 * is -1 too, so that the first occurrence of a repeated key counts. */
int remat__json_member(const char *const *keys, int n, const char *key, unsigned *seen);

/* Appends the shortest of %.15g, %.16g, %.17g that reads back as v; null when
 * v is not finite (JSON has no infinity). */
void remat__json_number(remat__buf *b, double v);

/* Escapes s as the inside of a JSON string into b. */
void remat__buf_json_string(remat__buf *b, const char *s);

#endif
