/* Parsing with cJSON under a memory bound, and the typed field readers
 * (json_util.h). cJSON checks the grammar; this file sizes its tree before
 * it is built and checks what cJSON leaves to the caller. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"

/* ---- sizing the tree ---- */

/* What one malloc(n) costs: rounded to 16 bytes, plus 16 of bookkeeping. */
static uint64_t alloc_cost(uint64_t n) { return (n + 15) / 16 * 16 + 16; }

/* One pass over the text that counts tokens outside strings; not a parser. */
typedef struct census {
    uint64_t tree_bytes;
    size_t values;
    size_t nul_string; /* ordinal (from 1) of the first string holding a NUL; 0 none */
    size_t nul_pos;    /* where that string starts */
    size_t deep_pos;   /* the first '[' or '{' nested deeper than the limit; SIZE_MAX none */
} census;

/* The string whose opening quote is at text[p]: returns the position of its
 * closing quote (len when there is none); *nul when it holds a NUL, raw or
 * written \u0000. */
static size_t string_end(const char *text, size_t len, size_t p, int *nul) {
    *nul = 0;
    for (p++; p < len && text[p] != '"'; p++) {
        if (text[p] == '\0') {
            *nul = 1;
        } else if (text[p] == '\\' && p + 1 < len) {
            p++;
            if (text[p] == 'u' && len - p > 4 && memcmp(text + p + 1, "0000", 4) == 0) *nul = 1;
        }
    }
    return p;
}

static void take_census(const char *text, size_t len, census *c) {
    size_t strings = 0, colons = 0, containers = 0, scalars = 0, depth = 0;
    int in_scalar = 0;
    memset(c, 0, sizeof *c);
    c->deep_pos = SIZE_MAX;
    /* cJSON skips a UTF-8 byte order mark (when 5 bytes or more follow) */
    size_t start = len > 4 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    for (size_t p = start; p < len; p++) {
        unsigned char ch = (unsigned char)text[p];
        int scalar = 0;
        if (ch == '"') {
            int nul;
            size_t end = string_end(text, len, p, &nul);
            strings++;
            c->tree_bytes += alloc_cost(end - p + 1); /* cJSON's copy, an upper bound */
            if (nul && !c->nul_string) {
                c->nul_string = strings;
                c->nul_pos = p;
            }
            p = end;
        } else if (ch == ':') {
            colons++; /* one per key: a key is a string but not a value */
        } else if (ch == '{' || ch == '[') {
            containers++;
            if (++depth > REMAT__JSON_MAX_DEPTH && c->deep_pos == SIZE_MAX) c->deep_pos = p;
        } else if (ch == '}' || ch == ']') {
            depth -= depth > 0;
        } else if (ch > ' ' && ch != ',') { /* cJSON skips every byte <= ' ' */
            scalars += !in_scalar;
            scalar = 1;
        }
        in_scalar = scalar;
    }
    size_t v = containers + scalars + strings;
    c->values = v > colons ? v - colons : 0;
    c->tree_bytes += (uint64_t)c->values * alloc_cost(sizeof(cJSON));
}

uint64_t remat__json_tree_bytes(const char *text, size_t len, size_t *values) {
    census c;
    take_census(text, len, &c);
    if (values) *values = c.values;
    return c.tree_bytes;
}

/* ---- checks around cJSON ---- */

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

static remat_status at(const char *text, size_t pos, const char *src, const char *what,
                       remat_error *err) {
    size_t line, col;
    locate(text, pos, &line, &col);
    return remat__fail(err, REMAT_E_INPUT, "%s: line %zu, column %zu: %s", src, line, col, what);
}

static remat_status too_large(const census *c, size_t len, uint64_t limit, const char *src,
                              remat_error *err) {
    return remat__fail(err, REMAT_E_INPUT,
                       "%s: %zu values in %zu bytes would take about %llu MiB to read, more than "
                       "the limit of %llu MiB (%d times the document's size, at least %llu MiB)",
                       src, c->values, len, (unsigned long long)(c->tree_bytes >> 20),
                       (unsigned long long)(limit >> 20), REMAT__JSON_TREE_FACTOR,
                       (unsigned long long)(REMAT__JSON_TREE_FLOOR >> 20));
}

/* cJSON returned NULL with its error position at end. malloc sets errno to
 * ENOMEM when it fails, and cJSON gives up at once then: that is the one
 * failure that is not about the text. */
static remat_status parse_failure(const char *text, size_t len, const char *end, int oom,
                                  const census *c, const char *src, remat_error *err) {
    if (oom)
        return remat__fail(err, REMAT_E_NOMEM,
                           "%s: out of memory while parsing (the tree takes about %llu MiB)", src,
                           (unsigned long long)(c->tree_bytes >> 20));
    size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    if (pos == c->deep_pos) /* cJSON stops at the first bracket past its limit */
        return at(text, pos, src, "arrays and objects nested more than 1000 deep", err);
    return at(text, pos, src, "malformed JSON", err);
}

/* Appends to path[cap] at plen; returns the new length (cut at cap - 1). */
static size_t append(char *path, size_t cap, size_t plen, const char *fmt, ...)
    REMAT__PRINTF(4, 5);
static size_t append(char *path, size_t cap, size_t plen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path + plen, cap - plen, fmt, ap);
    va_end(ap);
    size_t end = plen + (n > 0 ? (size_t)n : 0);
    return end < cap ? end : cap - 1;
}

/* The search for the string the census numbered: strings (keys included)
 * are met in the order of the text. */
typedef struct nul_hunt {
    size_t left; /* strings to pass, the one sought included */
    int key;     /* it is a key (path: its object) */
    char path[160];
} nul_hunt;

static int hunt(const cJSON *v, nul_hunt *h, size_t plen) {
    h->path[plen] = '\0';
    if (cJSON_IsString(v)) return --h->left == 0;
    size_t i = 0;
    for (const cJSON *m = v->child; m; m = m->next, i++) {
        size_t n;
        if (cJSON_IsObject(v)) {
            if (--h->left == 0) {
                h->path[plen] = '\0';
                h->key = 1;
                return 1;
            }
            n = append(h->path, sizeof h->path, plen, plen ? ".%s" : "%s", m->string);
        } else {
            n = append(h->path, sizeof h->path, plen, "[%zu]", i);
        }
        if (hunt(m, h, n)) return 1;
    }
    h->path[plen] = '\0';
    return 0;
}

/* cJSON cuts a string at a NUL; the census found one, in string number c->nul_string. */
static remat_status nul_found(const cJSON *root, const char *text, const census *c,
                              const char *src, remat_error *err) {
    nul_hunt h = {c->nul_string, 0, ""};
    if (hunt(root, &h, 0) && !h.key)
        return remat__fail(err, REMAT_E_INPUT, "%s: %s: contains a NUL character (\\u0000)", src,
                           h.path);
    char what[sizeof h.path + 64];
    snprintf(what, sizeof what, "a %s%s%s contains a NUL character (\\u0000)",
             h.key ? "key" : "string", h.path[0] ? " in " : "", h.path);
    return at(text, c->nul_pos, src, what, err);
}

static remat_status check_format(const cJSON *root, const char *src, const char *format,
                                 remat_error *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    REMAT__RETURN_IF(!f, err, REMAT_E_INPUT, "%s: format: missing required field (expected \"%s\")",
                     src, format);
    REMAT__RETURN_IF(!cJSON_IsString(f), err, REMAT_E_INPUT, "%s: format: expected a string, got %s",
                     src, remat__json_type_name(f));
    REMAT__RETURN_IF(strcmp(f->valuestring, format) != 0, err, REMAT_E_INPUT,
                     "%s: format: \"%.64s\" is not \"%s\"", src, f->valuestring, format);
    return REMAT_OK;
}

/* Everything after cJSON accepted text: nothing but whitespace after the
 * document, an object at the top, no NUL in any string, the format. */
static remat_status check_document(const cJSON *root, const char *text, size_t len, size_t pos,
                                   const census *c, const char *src, const char *format,
                                   remat_error *err) {
    while (pos < len && text[pos] && strchr(" \t\r\n", text[pos])) pos++;
    if (pos < len) return at(text, pos, src, "text after the end of the document", err);
    REMAT__RETURN_IF(!cJSON_IsObject(root), err, REMAT_E_INPUT,
                     "%s: expected a JSON object at the top level, got %s", src,
                     remat__json_type_name(root));
    if (c->nul_string) return nul_found(root, text, c, src, err);
    return check_format(root, src, format, err);
}

remat_status remat__json_parse(remat__jdoc *d, const char *text, size_t len, const char *src,
                               const char *format, remat_error *err) {
    d->root = NULL;
    d->src = src;
    d->err = err;
    REMAT__RETURN_IF(!text, err, REMAT_E_INPUT, "%s: no text", src);
    REMAT__RETURN_IF(len > REMAT__JSON_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: %zu bytes, more than the limit of %zu MiB for a document", src, len,
                     REMAT__JSON_MAX_BYTES >> 20);
    census c;
    take_census(text, len, &c);
    uint64_t limit = (uint64_t)len * REMAT__JSON_TREE_FACTOR;
    if (limit < REMAT__JSON_TREE_FLOOR) limit = REMAT__JSON_TREE_FLOOR;
    if (c.tree_bytes > limit) return too_large(&c, len, limit, src, err);
    /* cJSON stores its error position in a global on every parse (we read
     * ours from `end`): one parse at a time, so that loads in several threads
     * do not race there. errno is per thread. */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    const char *end = NULL;
    pthread_mutex_lock(&lock);
    errno = 0;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    int oom = !root && errno == ENOMEM;
    pthread_mutex_unlock(&lock);
    if (!root) return parse_failure(text, len, end, oom, &c, src, err);
    remat_status s = check_document(root, text, len, (size_t)(end - text), &c, src, format, err);
    if (s != REMAT_OK) {
        cJSON_Delete(root);
        return s;
    }
    d->root = root;
    return REMAT_OK;
}

remat_status remat__json_load(remat__jdoc *d, const char *path, const char *format,
                              remat_error *err) {
    d->root = NULL;
    d->src = path;
    d->err = err;
    char *text;
    size_t len;
    REMAT__FORWARD(remat_read_file(path, &text, &len, err));
    remat_status s = remat__json_parse(d, text, len, path, format, err);
    free(text);
    return s;
}

void remat__jdoc_free(remat__jdoc *d) {
    cJSON_Delete(d->root);
    d->root = NULL;
}

int remat__json_has_format(const char *text, size_t len, const char *format) {
    remat__jdoc d;
    if (remat__json_parse(&d, text, len, "", format, NULL) != REMAT_OK) return 0;
    remat__jdoc_free(&d);
    return 1;
}

/* ---- typed readers ---- */

const char *remat__json_type_name(const cJSON *v) {
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

size_t remat__json_count(const cJSON *v) {
    size_t n = 0;
    for (const cJSON *m = v ? v->child : NULL; m; m = m->next) n++;
    return n;
}

int remat__json_member(const char *const *keys, int n, const char *key, unsigned *seen) {
    for (int k = 0; k < n; k++)
        if (strcmp(keys[k], key) == 0) {
            if (*seen & (1u << k)) return -1;
            *seen |= 1u << k;
            return k;
        }
    return -1;
}

remat_status remat__json_finite(const remat__jdoc *d, const cJSON *v, const char *prefix,
                                const char *key, double *out) {
    REMAT__RETURN_IF(!cJSON_IsNumber(v), d->err, REMAT_E_INPUT,
                     "%s: %s%s: expected a number, got %s", d->src, prefix, key,
                     remat__json_type_name(v));
    REMAT__RETURN_IF(!isfinite(v->valuedouble), d->err, REMAT_E_INPUT,
                     "%s: %s%s: not a finite number", d->src, prefix, key);
    *out = v->valuedouble;
    return REMAT_OK;
}

remat_status remat__json_bytes(const remat__jdoc *d, const cJSON *v, const char *prefix,
                               const char *key, uint64_t *out) {
    double x = 0;
    REMAT__FORWARD(remat__json_finite(d, v, prefix, key, &x));
    const char *src = d->src;
    REMAT__RETURN_IF(x < 0, d->err, REMAT_E_INPUT, "%s: %s%s: negative size %.17g", src, prefix,
                     key, x);
    REMAT__RETURN_IF(x >= (double)REMAT_MAX_BYTES, d->err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is 2^53 or more", src, prefix, key, x);
    REMAT__RETURN_IF(floor(x) != x, d->err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is not a whole number of bytes", src, prefix, key, x);
    *out = (uint64_t)x;
    return REMAT_OK;
}

remat_status remat__json_time(const remat__jdoc *d, const cJSON *v, const char *prefix,
                              const char *key, double *out) {
    double x = 0;
    REMAT__FORWARD(remat__json_finite(d, v, prefix, key, &x));
    REMAT__RETURN_IF(x < 0, d->err, REMAT_E_INPUT, "%s: %s%s: negative time %.17g", d->src,
                     prefix, key, x);
    *out = x;
    return REMAT_OK;
}

remat_status remat__json_string(const remat__jdoc *d, const cJSON *v, const char *prefix,
                                const char *key, char *dst, size_t cap) {
    REMAT__RETURN_IF(!cJSON_IsString(v) || !v->valuestring, d->err, REMAT_E_INPUT,
                     "%s: %s%s: expected a string, got %s", d->src, prefix, key,
                     remat__json_type_name(v));
    size_t n = strlen(v->valuestring);
    REMAT__RETURN_IF(n >= cap, d->err, REMAT_E_INPUT,
                     "%s: %s%s: %zu bytes long, more than the limit of %zu", d->src, prefix, key,
                     n, cap - 1);
    /* JSON text is UTF-8 (RFC 8259); a string kept from it is written back */
    size_t bad = remat__utf8_invalid_at(v->valuestring);
    REMAT__RETURN_IF(bad != SIZE_MAX, d->err, REMAT_E_INPUT,
                     "%s: %s%s: not valid UTF-8 (byte %zu is 0x%02X)", d->src, prefix, key, bad,
                     (unsigned)(unsigned char)v->valuestring[bad]);
    memcpy(dst, v->valuestring, n + 1);
    return REMAT_OK;
}

/* ---- writing ---- */

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

void remat__buf_json_string(remat__buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            remat__buf_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            remat__buf_printf(b, "\\u%04x", ch);
        else
            remat__buf_printf(b, "%c", ch);
    }
}
