#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int remat_version_number(void) { return REMAT_VERSION_NUMBER; }

const char *remat_version_string(void) {
#define REMAT__STR2(x) #x
#define REMAT__STR(x) REMAT__STR2(x)
    return REMAT__STR(REMAT_VERSION_MAJOR) "." REMAT__STR(REMAT_VERSION_MINOR) "." REMAT__STR(
        REMAT_VERSION_PATCH);
}

const char *remat_status_name(remat_status s) {
    switch (s) {
#define REMAT__STATUS_NAME(name, value, text) \
    case REMAT_##name: return "REMAT_" #name;
        REMAT_STATUS_MAP(REMAT__STATUS_NAME)
#undef REMAT__STATUS_NAME
    }
    return "REMAT_E_UNKNOWN";
}

const char *remat_strerror(remat_status s) {
    switch (s) {
#define REMAT__STATUS_TEXT(name, value, text) \
    case REMAT_##name: return text;
        REMAT_STATUS_MAP(REMAT__STATUS_TEXT)
#undef REMAT__STATUS_TEXT
    }
    return "unknown status";
}

/* Every public struct, for remat_sizeof(). */
#define REMAT__PUBLIC_STRUCTS(X)                                                                   \
    X(remat_error) X(remat_stage_option) X(remat_stage) X(remat_chain) X(remat_op)                \
    X(remat_schedule)                                                                              \
    X(remat_solve_options) X(remat_curve_point) X(remat_curve) X(remat_sim_options)               \
    X(remat_sim_event) X(remat_sim_mem_point) X(remat_sim_result) X(remat_exec_ref)               \
    X(remat_exec_step) X(remat_exec_plan) X(remat_join_problem) X(remat_join_op)                  \
    X(remat_join_schedule) X(remat_join_sim_result) X(remat_join_options)                         \
    X(remat_join_curve_point) X(remat_join_curve) X(remat_hjoin_branch) X(remat_hjoin)          \
    X(remat_hjoin_op) X(remat_hjoin_schedule) X(remat_hjoin_sim_result) X(remat_hjoin_exec_ref)   \
    X(remat_hjoin_exec_step) X(remat_hjoin_exec_plan)

size_t remat_sizeof(const char *type_name) {
    if (!type_name) return 0;
#define REMAT__SIZE_OF(t) \
    if (strcmp(type_name, #t) == 0) return sizeof(t);
    REMAT__PUBLIC_STRUCTS(REMAT__SIZE_OF)
#undef REMAT__SIZE_OF
    return 0;
}

void remat_free(void *p) { free(p); }

void remat__clear(remat_error *err) {
    if (!err) return;
    err->status = REMAT_OK;
    err->message[0] = '\0';
    err->min_memory = 0;
}

remat_status remat__fail(remat_error *err, remat_status s, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = s;
    }
    return s;
}

void *remat__calloc(size_t n, size_t size) {
    size_t total;
    if (!remat__mul_size(n, size, &total)) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

remat_status remat__alloc_table(void **out, size_t n, size_t size, uint64_t max_bytes,
                                const char *what, remat_error *err) {
    size_t total;
    *out = NULL;
    if (max_bytes == 0) max_bytes = REMAT_DEFAULT_MAX_WORK_BYTES;
    REMAT__RETURN_IF(!remat__mul_size(n, size, &total) || (uint64_t)total > max_bytes, err,
                     REMAT_E_TOO_LARGE,
                     "%s would need %zu x %zu bytes, more than the limit of %llu bytes; use "
                     "fewer slots or a larger max_work_bytes",
                     what, n, size, (unsigned long long)max_bytes);
    *out = calloc(n ? n : 1, size ? size : 1);
    REMAT__RETURN_IF(!*out, err, REMAT_E_NOMEM, "%s: out of memory allocating %zu bytes", what,
                     total);
    return REMAT_OK;
}

void remat__strlcpy(char *dst, const char *src, size_t cap) {
    size_t n = strlen(src);
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void remat__buf_printf(remat__buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->data && (size_t)k < room) { b->len += (size_t)k; return; }
        size_t ncap = b->cap ? b->cap * 2 : 256;
        while (ncap < b->len + (size_t)k + 1) ncap *= 2;
        char *nd = realloc(b->data, ncap);
        if (!nd) { b->oom = 1; return; }
        b->data = nd;
        b->cap = ncap;
    }
}

remat_status remat__buf_finish(remat__buf *b, char **out, remat_error *err) {
    *out = NULL;
    if (b->oom || !b->data) {
        free(b->data);
        b->data = NULL;
        return remat__fail(err, REMAT_E_NOMEM, "out of memory writing text");
    }
    *out = b->data;
    b->data = NULL;
    return REMAT_OK;
}

unsigned remat__threads(unsigned want) {
    if (want) return want > REMAT__MAX_WORKERS ? REMAT__MAX_WORKERS : want;
    long k = sysconf(_SC_NPROCESSORS_ONLN);
    return k < 1 ? 1u : (k > REMAT__MAX_WORKERS ? REMAT__MAX_WORKERS : (unsigned)k);
}

size_t remat__utf8_invalid_at(const char *text) {
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    while (p[i]) {
        unsigned c = p[i];
        int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        /* the second byte's range rules out overlong forms, surrogates and > U+10FFFF */
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (n == 0 || (n > 1 && (p[i + 1] < lo || p[i + 1] > hi))) return i;
        for (int k = 2; k < n; k++)
            if (p[i + (size_t)k] < 0x80 || p[i + (size_t)k] > 0xBF) return i;
        i += (size_t)n;
    }
    return SIZE_MAX;
}
