/* Shared by the fuzz targets. Fuzzers may abort on a broken property; the
 * library itself must not. */
#ifndef REMAT_FUZZ_COMMON_H
#define REMAT_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remat/remat.h"

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

/* The fuzz input, read one byte at a time; 0 once it is used up. */
typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static inline unsigned byte(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* A failure must come with its status and a NUL-terminated, non-empty message. */
static inline void check_error(remat_status st, const remat_error *e) {
    CHECK(st != REMAT_OK);
    CHECK(e->status == st);
    CHECK(e->message[0] != '\0');
    CHECK(memchr(e->message, '\0', sizeof e->message) != NULL);
}

#endif
