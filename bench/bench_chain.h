/* The random chains of the benchmarks (bench_optimal, bench_bounded): L
 * stages plus a loss, sizes of 1 to 100 MB like a CNN, seeded. */
#ifndef REMAT_BENCH_CHAIN_H
#define REMAT_BENCH_CHAIN_H

#include <stdio.h>
#include <stdlib.h>

#include "remat/remat.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

static remat_chain *random_chain(size_t L, uint64_t seed) {
    size_t n = L + 1;
    remat_stage *st = calloc(n, sizeof *st);
    if (!st) return NULL;
    for (size_t i = 0; i < n; i++) {
        remat_stage *s = &st[i];
        snprintf(s->name, sizeof s->name, "layer%zu", i + 1);
        s->fwd_time = 0.1 + 5 * unit(&seed);
        s->bwd_time = s->fwd_time * (1 + 2 * unit(&seed));
        s->out_bytes = (uint64_t)(1e6 + 99e6 * unit(&seed));
        s->saved_bytes = s->out_bytes + (uint64_t)(2 * s->out_bytes * unit(&seed));
        s->grad_bytes = s->out_bytes;
        s->fwd_overhead = (uint64_t)(1e7 * unit(&seed));
        s->bwd_overhead = (uint64_t)(2e7 * unit(&seed));
    }
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("bench", 50000000, 50000000, st, n, &c, &e) != REMAT_OK)
        fprintf(stderr, "bench: %s\n", e.message);
    free(st);
    return c;
}

#endif
