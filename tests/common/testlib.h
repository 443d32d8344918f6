/* Shared test helpers: a seeded RNG, random chains and a simulator check. */
#ifndef REMAT_TESTLIB_H
#define REMAT_TESTLIB_H

#include "remat/remat.h"

typedef struct test_rng { uint64_t s; } test_rng;
uint64_t test_rng_next(test_rng *r);
/* Uniform in [lo, hi]. */
uint64_t test_rng_range(test_rng *r, uint64_t lo, uint64_t hi);
double test_rng_unit(test_rng *r); /* [0, 1) */

typedef struct test_chain_spec {
    size_t n;            /* stages, loss included */
    uint64_t max_bytes;  /* sizes drawn in [1, max_bytes] */
    int overheads;       /* nonzero: random fwd/bwd overheads */
    int grad_sizes;      /* nonzero: grad_bytes differ from out_bytes */
    int zero_sizes;      /* nonzero: some sizes may be 0 */
    int int_times;       /* nonzero: integer times in [0, 10]; else reals */
} test_chain_spec;

/* SPEC section 1's optional stage fields, for test_random_chain_with. */
typedef struct test_option_spec {
    int fall_overheads;  /* nonzero: about half the stages get a fall_overhead of their own */
    size_t options;      /* up to this many partial saves per stage (<= REMAT_MAX_OPTIONS) */
} test_option_spec;

/* A hand-built stage: grad_bytes = out_bytes, no overheads; and with all fields. */
remat_stage test_stage(double fwd, double bwd, uint64_t out, uint64_t saved);
remat_stage test_stage_full(double fwd, double bwd, uint64_t out, uint64_t saved, uint64_t grad,
                            uint64_t fwd_overhead, uint64_t bwd_overhead);

/* A random chain; never NULL (aborts the test binary on OOM). Free with remat_chain_free. */
remat_chain *test_random_chain(test_rng *r, const test_chain_spec *spec);
/* The same with fall_overhead and partial saves as x says (NULL: none, the
 * chain test_random_chain makes from the same numbers). */
remat_chain *test_random_chain_with(test_rng *r, const test_chain_spec *spec,
                                    const test_option_spec *x);

/* A copy of c whose stages before the loss get the stopped Fall's fields:
 * TEST_STOPS_DEFAULTS sets each to its default explicitly; TEST_STOPS_RANDOM
 * draws each, or leaves it unset, at random (stop_time in [0, fwd_time],
 * stop_saved_bytes in [0, saved_bytes], stop_overhead in [0, fall_overhead +
 * max_bytes], so it may raise the Fall's memory); TEST_STOPS_BENIGN draws
 * them so that the stopped Fall never needs more memory than the plain one
 * (stop_saved_bytes + stop_overhead <= saved_bytes + fall_overhead). */
enum { TEST_STOPS_DEFAULTS, TEST_STOPS_RANDOM, TEST_STOPS_BENIGN };
remat_chain *test_with_stops(test_rng *r, const remat_chain *c, int mode, uint64_t max_bytes);
/* A chain with c's name and inputs and the stages st (c->n of them); exits
 * the test binary when remat_chain_create refuses them. */
remat_chain *test_chain_like(const remat_chain *c, const remat_stage *st);

/* Simulates s on c; returns 1 when valid with peak <= limit and the
 * simulated time within 1e-9 relative of s->time, else prints why and returns 0. */
int test_schedule_ok(const remat_chain *c, const remat_schedule *s, uint64_t limit);

/* 1 when a and b have the same ops, field by field (remat_op has padding,
 * which memcmp would compare too). */
int test_same_ops(const remat_schedule *a, const remat_schedule *b);

/* The ops of s as text joined by sep into out (cap bytes, truncated). */
void test_ops_text(const remat_schedule *s, const char *sep, char *out, size_t cap);

#endif
