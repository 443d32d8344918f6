/* The JSON scanner and the typed field readers (json_util.h). The grammar is
 * RFC 8259's; strings are decoded (escapes, surrogate pairs) only where a
 * reader asks for one, and a decoded NUL is refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"

/* ---- positions and syntax errors ---- */

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

static remat_status syntax(remat__js *js, size_t pos, const char *what) {
    size_t line, col;
    locate(js->text, pos, &line, &col);
    return remat__fail(js->err, REMAT_E_INPUT, "%s: line %zu, column %zu: %s", js->src, line, col,
                       what);
}

static int at(const remat__js *js, char c) { return js->pos < js->len && js->text[js->pos] == c; }

static void ws(remat__js *js) {
    while (js->pos < js->len) {
        char c = js->text[js->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        js->pos++;
    }
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* Appends code point u as UTF-8 to dst[*n] when it fits in cap - 1 bytes;
 * *n counts every byte, fitting or not. */
static void put_utf8(char *dst, size_t cap, size_t *n, unsigned u) {
    unsigned char b[4];
    size_t k;
    if (u < 0x80) {
        b[0] = (unsigned char)u;
        k = 1;
    } else if (u < 0x800) {
        b[0] = (unsigned char)(0xC0 | (u >> 6));
        b[1] = (unsigned char)(0x80 | (u & 0x3F));
        k = 2;
    } else if (u < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (u >> 12));
        b[1] = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (u & 0x3F));
        k = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (u >> 18));
        b[1] = (unsigned char)(0x80 | ((u >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (u & 0x3F));
        k = 4;
    }
    for (size_t i = 0; i < k; i++, (*n)++)
        if (dst && *n + 1 < cap) dst[*n] = (char)b[i];
}

/* Scans the string at js->pos (at its opening quote). With dst, decodes it
 * into dst[cap] (NUL-terminated, cut at cap - 1 bytes) and sets *n to its full
 * decoded length and *nul when it holds a NUL. 0 on a syntax error. */
static int scan_string(remat__js *js, char *dst, size_t cap, size_t *n, int *nul) {
    const char *t = js->text;
    size_t p = js->pos + 1, len = js->len, k = 0;
    *nul = 0;
    for (;;) {
        if (p >= len) {
            js->pos = p;
            return 0;
        }
        unsigned char c = (unsigned char)t[p];
        if (c == '"') break;
        if (c < 0x20) { /* raw control characters are not allowed */
            js->pos = p;
            return 0;
        }
        if (c != '\\') {
            if (dst && k + 1 < cap) dst[k] = (char)c;
            k++;
            p++;
            continue;
        }
        if (p + 1 >= len) {
            js->pos = p;
            return 0;
        }
        char e = t[p + 1];
        unsigned u = 0;
        p += 2;
        switch (e) {
        case '"': u = '"'; break;
        case '\\': u = '\\'; break;
        case '/': u = '/'; break;
        case 'b': u = '\b'; break;
        case 'f': u = '\f'; break;
        case 'n': u = '\n'; break;
        case 'r': u = '\r'; break;
        case 't': u = '\t'; break;
        case 'u': {
            if (p + 4 > len || !hex4(t + p, &u)) {
                js->pos = p;
                return 0;
            }
            p += 4;
            unsigned lo;
            if (u >= 0xD800 && u < 0xDC00 && p + 6 <= len && t[p] == '\\' && t[p + 1] == 'u' &&
                hex4(t + p + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            break;
        }
        default:
            js->pos = p - 1;
            return 0;
        }
        if (u == 0) *nul = 1;
        put_utf8(dst, cap, &k, u);
    }
    if (dst && cap) dst[k < cap ? k : cap - 1] = '\0';
    if (n) *n = k;
    js->pos = p + 1;
    return 1;
}

static int digits(remat__js *js) {
    size_t start = js->pos;
    while (js->pos < js->len && js->text[js->pos] >= '0' && js->text[js->pos] <= '9') js->pos++;
    return js->pos > start;
}

/* Scans a number (RFC 8259 grammar); 0 on a syntax error. */
static int scan_number(remat__js *js) {
    if (at(js, '-')) js->pos++;
    if (at(js, '0')) js->pos++;
    else if (!digits(js)) return 0;
    if (at(js, '.')) {
        js->pos++;
        if (!digits(js)) return 0;
    }
    if (at(js, 'e') || at(js, 'E')) {
        js->pos++;
        if (at(js, '+') || at(js, '-')) js->pos++;
        if (!digits(js)) return 0;
    }
    return 1;
}

static int scan_word(remat__js *js, const char *w) {
    size_t n = strlen(w);
    if (js->len - js->pos < n || memcmp(js->text + js->pos, w, n) != 0) return 0;
    js->pos += n;
    return 1;
}

/* One scalar value at js->pos; 0 on a syntax error. */
static int scan_scalar(remat__js *js) {
    size_t n;
    int nul;
    switch (remat__js_peek(js)) {
    case REMAT__JS_STRING: return scan_string(js, NULL, 0, &n, &nul);
    case REMAT__JS_NUMBER: return scan_number(js);
    case REMAT__JS_BOOL: return scan_word(js, "true") || scan_word(js, "false");
    case REMAT__JS_NULL: return scan_word(js, "null");
    default: return 0;
    }
}

/* `"key" ws ':'` at js->pos; 0 on a syntax error. */
static int scan_key(remat__js *js) {
    size_t n;
    int nul;
    if (!at(js, '"') || !scan_string(js, NULL, 0, &n, &nul)) return 0;
    ws(js);
    if (!at(js, ':')) return 0;
    js->pos++;
    return 1;
}

/* Checks one whole value of any depth, iteratively (nesting is bounded by a
 * stack of REMAT__JSON_MAX_DEPTH bytes, not by the C stack). */
static remat_status check_value(remat__js *js) {
    char stack[REMAT__JSON_MAX_DEPTH];
    size_t depth = 0;
    for (;;) {
        ws(js); /* a value is expected here */
        if (at(js, '{') || at(js, '[')) {
            if (depth == REMAT__JSON_MAX_DEPTH)
                return syntax(js, js->pos, "arrays and objects nested more than 1000 deep");
            char open = js->text[js->pos++];
            stack[depth++] = open;
            ws(js);
            if (at(js, open == '{' ? '}' : ']')) {
                js->pos++;
                depth--;
            } else {
                if (open == '{' && !scan_key(js))
                    return syntax(js, js->pos, "malformed JSON (expected a \"key\": value)");
                continue;
            }
        } else if (!scan_scalar(js)) {
            return syntax(js, js->pos, "malformed JSON (expected a value)");
        }
        for (;;) { /* after a value: ',' or the end of the enclosing containers */
            if (depth == 0) return REMAT_OK;
            ws(js);
            char close = stack[depth - 1] == '{' ? '}' : ']';
            if (at(js, close)) {
                js->pos++;
                depth--;
                continue;
            }
            if (!at(js, ','))
                return syntax(js, js->pos,
                              close == '}' ? "malformed JSON (expected ',' or '}')"
                                           : "malformed JSON (expected ',' or ']')");
            js->pos++;
            ws(js);
            if (close == '}' && !scan_key(js))
                return syntax(js, js->pos, "malformed JSON (expected a \"key\": value)");
            break;
        }
    }
}

/* ---- walking a checked document ---- */

remat__js_type remat__js_peek(remat__js *js) {
    ws(js);
    if (js->pos >= js->len) return REMAT__JS_BAD;
    char c = js->text[js->pos];
    if (c == '{') return REMAT__JS_OBJECT;
    if (c == '[') return REMAT__JS_ARRAY;
    if (c == '"') return REMAT__JS_STRING;
    if (c == '-' || (c >= '0' && c <= '9')) return REMAT__JS_NUMBER;
    if (c == 't' || c == 'f') return REMAT__JS_BOOL;
    if (c == 'n') return REMAT__JS_NULL;
    return REMAT__JS_BAD;
}

const char *remat__js_type_name(remat__js_type t) {
    switch (t) {
    case REMAT__JS_OBJECT: return "an object";
    case REMAT__JS_ARRAY: return "an array";
    case REMAT__JS_STRING: return "a string";
    case REMAT__JS_NUMBER: return "a number";
    case REMAT__JS_BOOL: return "a boolean";
    case REMAT__JS_NULL: return "null";
    default: return "an invalid value";
    }
}

void remat__js_skip(remat__js *js) {
    remat_error ignored;
    remat_error *keep = js->err;
    js->err = &ignored;
    (void)check_value(js); /* already checked: cannot fail */
    js->err = keep;
}

void remat__js_begin(remat__js *js) {
    ws(js);
    js->pos++;
}

int remat__js_array_next(remat__js *js, size_t index) {
    ws(js);
    if (at(js, ']')) {
        js->pos++;
        return 0;
    }
    if (index > 0) js->pos++; /* the ',' */
    ws(js);
    return 1;
}

int remat__js_object_next(remat__js *js, size_t index, char *key, size_t cap, remat_status *st) {
    *st = REMAT_OK;
    ws(js);
    if (at(js, '}')) {
        js->pos++;
        return 0;
    }
    if (index > 0) js->pos++; /* the ',' */
    ws(js);
    size_t start = js->pos, n;
    int nul;
    scan_string(js, key, cap, &n, &nul);
    if (nul) {
        *st = syntax(js, start, "a key contains a NUL character (\\u0000)");
        return 0;
    }
    if (n >= cap) key[0] = '\0'; /* longer than any key a reader knows */
    ws(js);
    js->pos++; /* the ':' */
    ws(js);
    return 1;
}

/* Finds the first top-level member `key`; leaves js at its value. */
static int find_member(remat__js *js, const char *key) {
    char k[64];
    remat_status st;
    js->pos = 0;
    remat__js_begin(js);
    for (size_t i = 0; remat__js_object_next(js, i, k, sizeof k, &st); i++) {
        if (strcmp(k, key) == 0) return 1;
        remat__js_skip(js);
    }
    return 0;
}

static size_t count_elements(remat__js *js) {
    size_t n = 0;
    remat__js_begin(js);
    while (remat__js_array_next(js, n)) {
        remat__js_skip(js);
        n++;
    }
    return n;
}

/* Whole-text checks shared by remat__js_open and remat__js_has_format. */
static remat_status check_document(remat__js *js) {
    REMAT__RETURN_IF(js->len > REMAT__JSON_MAX_BYTES, js->err, REMAT_E_INPUT,
                     "%s: %zu bytes, more than the limit of %zu MiB for a document", js->src,
                     js->len, REMAT__JSON_MAX_BYTES >> 20);
    REMAT__FORWARD(check_value(js));
    ws(js);
    if (js->pos < js->len) return syntax(js, js->pos, "text after the end of the document");
    js->pos = 0;
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_OBJECT, js->err, REMAT_E_INPUT,
                     "%s: expected a JSON object at the top level, got %s", js->src,
                     remat__js_type_name(t));
    /* A NUL in any top-level key is refused, even in a key no reader knows. */
    char k[8];
    remat_status st = REMAT_OK;
    remat__js_begin(js);
    for (size_t i = 0; remat__js_object_next(js, i, k, sizeof k, &st); i++) remat__js_skip(js);
    return st;
}

remat_status remat__js_open(remat__js *js, const char *text, size_t len, const char *src,
                            const char *format, const char *count_key, size_t *count,
                            remat_error *err) {
    js->text = text;
    js->len = len;
    js->pos = 0;
    js->src = src;
    js->err = err;
    if (count) *count = 0;
    REMAT__RETURN_IF(!text, err, REMAT_E_INPUT, "%s: no text", src);
    REMAT__FORWARD(check_document(js));
    REMAT__RETURN_IF(!find_member(js, "format"), err, REMAT_E_INPUT,
                     "%s: format: missing required field (expected \"%s\")", src, format);
    char f[64];
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_STRING, err, REMAT_E_INPUT,
                     "%s: format: expected a string, got %s", src, remat__js_type_name(t));
    REMAT__FORWARD(remat__js_string(js, "", "format", f, sizeof f));
    REMAT__RETURN_IF(strcmp(f, format) != 0, err, REMAT_E_INPUT,
                     "%s: format: \"%.64s\" is not \"%s\"", src, f, format);
    if (count_key && count && find_member(js, count_key) && remat__js_peek(js) == REMAT__JS_ARRAY)
        *count = count_elements(js);
    js->pos = 0;
    return REMAT_OK;
}

int remat__js_has_format(const char *text, size_t len, const char *format) {
    remat__js js;
    return text && remat__js_open(&js, text, len, "", format, NULL, NULL, NULL) == REMAT_OK;
}

/* ---- typed readers ---- */

remat_status remat__js_number(remat__js *js, const char *prefix, const char *key, double *out) {
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_NUMBER, js->err, REMAT_E_INPUT,
                     "%s: %s%s: expected a number, got %s", js->src, prefix, key,
                     remat__js_type_name(t));
    size_t start = js->pos;
    scan_number(js);
    size_t n = js->pos - start;
    char buf[512];
    REMAT__RETURN_IF(n >= sizeof buf, js->err, REMAT_E_INPUT,
                     "%s: %s%s: a number written with %zu characters, more than %zu", js->src,
                     prefix, key, n, sizeof buf - 1);
    memcpy(buf, js->text + start, n);
    buf[n] = '\0';
    double x = strtod(buf, NULL);
    REMAT__RETURN_IF(!isfinite(x), js->err, REMAT_E_INPUT, "%s: %s%s: not a finite number",
                     js->src, prefix, key);
    *out = x;
    return REMAT_OK;
}

remat_status remat__js_bytes(remat__js *js, const char *prefix, const char *key, uint64_t *out) {
    double x;
    REMAT__FORWARD(remat__js_number(js, prefix, key, &x));
    const char *src = js->src;
    REMAT__RETURN_IF(x < 0, js->err, REMAT_E_INPUT, "%s: %s%s: negative size %.17g", src, prefix,
                     key, x);
    REMAT__RETURN_IF(x >= (double)REMAT_MAX_BYTES, js->err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is 2^53 or more", src, prefix, key, x);
    REMAT__RETURN_IF(floor(x) != x, js->err, REMAT_E_INPUT,
                     "%s: %s%s: size %.17g is not a whole number of bytes", src, prefix, key, x);
    *out = (uint64_t)x;
    return REMAT_OK;
}

remat_status remat__js_time(remat__js *js, const char *prefix, const char *key, double *out) {
    double x;
    REMAT__FORWARD(remat__js_number(js, prefix, key, &x));
    REMAT__RETURN_IF(x < 0, js->err, REMAT_E_INPUT, "%s: %s%s: negative time %.17g", js->src,
                     prefix, key, x);
    *out = x;
    return REMAT_OK;
}

remat_status remat__js_string(remat__js *js, const char *prefix, const char *key, char *dst,
                              size_t cap) {
    remat__js_type t = remat__js_peek(js);
    REMAT__RETURN_IF(t != REMAT__JS_STRING, js->err, REMAT_E_INPUT,
                     "%s: %s%s: expected a string, got %s", js->src, prefix, key,
                     remat__js_type_name(t));
    size_t n;
    int nul;
    scan_string(js, dst, cap, &n, &nul);
    REMAT__RETURN_IF(nul, js->err, REMAT_E_INPUT,
                     "%s: %s%s: contains a NUL character (\\u0000)", js->src, prefix, key);
    REMAT__RETURN_IF(n >= cap, js->err, REMAT_E_INPUT,
                     "%s: %s%s: %zu bytes long, more than the limit of %zu", js->src, prefix, key,
                     n, cap - 1);
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
