/* optimal against rotor's rule, its slots and bounds; bounded time (estimates
 * and refusals), progress, curves without repeated memories, and the shared
 * parallel-for. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/parallel.h"
#include "solvers/optimal_test.h"
#include "solvers/solvers_internal.h"
#include "test.h"
#include "common/testlib.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- rotor's rule, reproduced (not rotor's code) ----
 * rotor's persistent DP (rockmate 41f9c43, dynamic_programs.c) checks a
 * Fall s that starts a longer sub-chain (s, t) with the single-stage need
 * (d[s] held, not d[t]) and with the checkpoint need d[t] + a[s] + of[s]
 * (a[s], not abar[s]); the Fall then runs with d[t] + abar[s] + of[s]. Its
 * model has gradients as large as activations. Same recurrence otherwise. */

typedef struct rotor_rule {
    const remat_chain *c;
    size_t n;
    uint64_t M;    /* budget beside a[0] */
    double *tab;   /* C[s][t][m], s, t in 1..n, m in 0..M */
    int *what;     /* -1 Fall, s' for Fck */
} rotor_rule;

static uint64_t A(const rotor_rule *r, size_t i) { return remat_chain_a_bytes(r->c, i); }
static uint64_t AB(const rotor_rule *r, size_t i) { return remat_chain_abar_bytes(r->c, i); }
static uint64_t D(const rotor_rule *r, size_t i) { return remat_chain_d_bytes(r->c, i); }
static size_t ridx(const rotor_rule *r, size_t s, size_t t, uint64_t m) {
    return ((s - 1) * r->n + (t - 1)) * (r->M + 1) + m;
}

static double rotor_single(const rotor_rule *r, size_t s, uint64_t m) {
    const remat_stage *st = &r->c->stages[s - 1];
    if (m < D(r, s) + AB(r, s) + st->fwd_overhead) return INFINITY;
    if (m < AB(r, s) + D(r, s) + D(r, s - 1) + st->bwd_overhead) return INFINITY;
    return st->fwd_time + st->bwd_time;
}

static double rotor_at(const rotor_rule *r, size_t s, size_t t, uint64_t m) {
    return s == t ? rotor_single(r, s, m) : r->tab[ridx(r, s, t, m)];
}

static void rotor_fill(rotor_rule *r) {
    for (size_t len = 1; len < r->n; len++)
        for (size_t s = 1; s + len <= r->n; s++) {
            size_t t = s + len;
            uint64_t mmin = D(r, t) + A(r, s) + r->c->stages[s - 1].fwd_overhead;
            for (size_t j = s + 1; j < t; j++) {
                uint64_t v = D(r, t) + A(r, j - 1) + A(r, j) + r->c->stages[j - 1].fwd_overhead;
                if (v > mmin) mmin = v;
            }
            for (uint64_t m = 0; m <= r->M; m++) {
                double best = INFINITY, sum = 0;
                int what = 0;
                if (m >= mmin) {
                    for (size_t sp = s + 1; sp <= t; sp++) {
                        sum += r->c->stages[sp - 2].fwd_time;
                        if (m < A(r, sp - 1)) continue;
                        double v = sum + rotor_at(r, sp, t, m - A(r, sp - 1)) + rotor_at(r, s, sp - 1, m);
                        if (v < best) {
                            best = v;
                            what = (int)sp;
                        }
                    }
                    double chain = m >= AB(r, s) ? rotor_single(r, s, m) +
                                                        rotor_at(r, s + 1, t, m - AB(r, s))
                                                  : INFINITY;
                    if (!(best <= chain)) {
                        best = chain;
                        what = -1;
                    }
                }
                r->tab[ridx(r, s, t, m)] = best;
                r->what[ridx(r, s, t, m)] = what;
            }
        }
}

static void rotor_emit(const rotor_rule *r, remat_schedule *sch, size_t s, size_t t, uint64_t m) {
    if (s == t) {
        remat__push(sch, REMAT_OP_FALL, (uint32_t)s, NULL);
        remat__push(sch, REMAT_OP_B, (uint32_t)s, NULL);
        return;
    }
    int w = r->what[ridx(r, s, t, m)];
    if (w < 0) {
        remat__push(sch, REMAT_OP_FALL, (uint32_t)s, NULL);
        rotor_emit(r, sch, s + 1, t, m - AB(r, s));
        remat__push(sch, REMAT_OP_B, (uint32_t)s, NULL);
        return;
    }
    size_t sp = (size_t)w;
    remat__push(sch, REMAT_OP_FCK, (uint32_t)s, NULL);
    for (size_t j = s + 1; j < sp; j++) remat__push(sch, REMAT_OP_FN, (uint32_t)j, NULL);
    rotor_emit(r, sch, sp, t, m - A(r, sp - 1));
    rotor_emit(r, sch, s, sp - 1, m);
}

/* The peak of rotor's rule's schedule at limit M in exact bytes, or 0 when
 * its DP finds none. */
static uint64_t rotor_peak(const remat_chain *c, uint64_t limit) {
    rotor_rule r = {c, c->n, limit - c->input_bytes, NULL, NULL};
    size_t cells = c->n * c->n * (r.M + 1);
    r.tab = calloc(cells, sizeof *r.tab);
    r.what = calloc(cells, sizeof *r.what);
    uint64_t peak = 0;
    if (r.tab && r.what) {
        rotor_fill(&r);
        if (rotor_at(&r, 1, c->n, r.M) < INFINITY) {
            remat_schedule *s = NULL;
            remat_schedule_create("rotor-rule", &s, NULL);
            rotor_emit(&r, s, 1, c->n, r.M);
            remat_sim_options so;
            remat_sim_options_init(&so);
            remat_sim_result *res = NULL;
            if (remat_simulate(c, s, &so, &res, NULL) == REMAT_OK && res->valid)
                peak = res->peak_bytes;
            remat_sim_result_free(res);
            remat_schedule_free(s);
        }
    }
    free(r.tab);
    free(r.what);
    return peak;
}

/* A small chain in rotor's model (gradients as large as activations) with
 * large forward overheads, where its Fall check is too lax. */
static remat_chain *rotor_chain(test_rng *rng, size_t n) {
    remat_stage st[8];
    for (size_t i = 0; i < n; i++) {
        uint64_t out = test_rng_range(rng, 1, 6);
        st[i] = test_stage_full((double)test_rng_range(rng, 1, 5), (double)test_rng_range(rng, 1, 5),
                                out, out + test_rng_range(rng, 0, 8), out,
                                test_rng_range(rng, 0, 1) ? 0 : test_rng_range(rng, 5, 20),
                                test_rng_range(rng, 0, 4));
    }
    remat_chain *c = NULL;
    uint64_t in = test_rng_range(rng, 1, 6);
    remat_chain_create("rotor-rule", in, in, st, n, &c, NULL);
    return c;
}

/* Small chains in exact bytes: rotor's rule returns schedules above the
 * limit on some of them; remat's optimal never does. */
static void t_rotor_rule_exceeds(void) {
    test_rng rng = {2024};
    int over = 0, solved = 0;
    for (int it = 0; it < 2000; it++) {
        remat_chain *c = rotor_chain(&rng, 3 + (size_t)(it % 5));
        uint64_t peak = 0, mm = 0;
        remat_solve_options om;
        remat_solve_options_init(&om);
        om.slots = 0;
        remat_store_all_cost(c, &peak, NULL, NULL);
        remat_min_memory(c, &om, &mm, NULL);
        /* half near remat's smallest limit, where a lax check finds more */
        uint64_t lim = it % 2 ? test_rng_range(&rng, mm > 6 ? mm - 6 : 0, mm + 2)
                              : test_rng_range(&rng, mm, peak);
        uint64_t rp = rotor_peak(c, lim);
        if (rp > lim) over++;
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.memory = lim;
        o.slots = 0;
        remat_schedule *s = NULL;
        remat_error e;
        remat_status st = remat_solve(c, &o, &s, &e);
        if (st == REMAT_OK) {
            solved++;
            ASSERT_TRUE(test_schedule_ok(c, s, lim));
        } else {
            ASSERT_STATUS(st, REMAT_E_INFEASIBLE);
        }
        remat_schedule_free(s);
        remat_chain_free(c);
    }
    printf("  rotor's rule above the limit on %d of 2000 chains; remat solved %d, none above\n",
           over, solved);
    ASSERT_TRUE(over > 0);
    ASSERT_TRUE(solved > 500);
}

/* --slots S: the slot is the largest power of two not above M/S, so the
 * budget has at least S slots (and fewer than 2S). */
static void t_slots_at_least_s(void) {
    test_rng rng = {5};
    for (int it = 0; it < 2000; it++) {
        uint64_t slots = test_rng_range(&rng, 1, 2000);
        uint64_t mem = test_rng_range(&rng, 0, (uint64_t)1 << (10 + it % 40));
        uint64_t u = remat__optimal_slot(slots, mem);
        ASSERT_TRUE((u & (u - 1)) == 0);
        if (u > 1) ASSERT_TRUE(mem / u >= slots);
        ASSERT_TRUE(mem / u < 2 * slots || u == 1);
    }
    ASSERT_EQ_U64(remat__optimal_slot(0, 12345), 1);
}

/* The O(n^3) min-peak recurrence, written plainly, against the solver's
 * (which skips most choices by exact bounds), on chains whose overheads and
 * gradient sizes make the shortcuts fail often. */
static void t_bounds_match_plain(void) {
    test_rng rng = {77};
    for (int it = 0; it < 150; it++) {
        test_chain_spec sp = {2 + (size_t)(it % 14), 1000, 1, it % 2, it % 3 == 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        size_t n = c->n;
        uint64_t *got = NULL, *lo = calloc(n * n, sizeof *lo);
        ASSERT_STATUS(remat__optimal_needs(c, &got, NULL), REMAT_OK);
#define L_(s, t) lo[((s) - 1) * n + (t) - 1]
        for (size_t s = n; s >= 1; s--) {
            const remat_stage *st = &c->stages[s - 1];
            uint64_t ab = remat_chain_abar_bytes(c, s), ds = remat_chain_d_bytes(c, s);
            uint64_t bneed = ab + ds + remat_chain_d_bytes(c, s - 1) + st->bwd_overhead;
            for (size_t t = s; t <= n; t++) {
                uint64_t dt = remat_chain_d_bytes(c, t), fall = dt + ab + st->fwd_overhead;
                if (bneed > fall) fall = bneed;
                if (t == s) {
                    L_(s, t) = fall;
                    continue;
                }
                if (ab + L_(s + 1, t) > fall) fall = ab + L_(s + 1, t);
                uint64_t best = fall, run = remat_chain_a_bytes(c, s) + st->fwd_overhead;
                for (size_t q = s + 1; q <= t; q++) {
                    if (q > s + 1) {
                        uint64_t f = remat_chain_a_bytes(c, q - 2) + remat_chain_a_bytes(c, q - 1) +
                                     c->stages[q - 2].fwd_overhead;
                        if (f > run) run = f;
                    }
                    uint64_t v = dt + run, w = remat_chain_a_bytes(c, q - 1) + L_(q, t);
                    if (w > v) v = w;
                    if (L_(s, q - 1) > v) v = L_(s, q - 1);
                    if (v < best) best = v;
                }
                L_(s, t) = best;
            }
        }
        for (size_t s = 1; s <= n; s++)
            for (size_t t = s; t <= n; t++) ASSERT_EQ_U64(got[(s - 1) * n + t - 1], L_(s, t));
#undef L_
        free(got);
        free(lo);
        remat_chain_free(c);
    }
}

/* ---- bounded time ---- */

static remat_chain *long_chain(size_t n) {
    test_rng rng = {31};
    test_chain_spec sp = {n, 100000000, 1, 0, 0, 0};
    return test_random_chain(&rng, &sp);
}

/* Work estimated above max_seconds is refused at once, with the estimate. */
static void t_refusals(void) {
    remat_chain *c = long_chain(300);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_algorithm algs[] = {REMAT_ALG_OPTIMAL, REMAT_ALG_REVOLVE, REMAT_ALG_POFO,
                              REMAT_ALG_OFFLOAD_ONLY, REMAT_ALG_AUTOCAPPER};
    for (size_t k = 0; k < sizeof algs / sizeof *algs; k++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = algs[k];
        o.memory = peak / 2;
        o.bandwidth = 1e6;
        o.max_seconds = 1e-4;
        remat_schedule *s = NULL;
        remat_error e;
        double t0 = now_s();
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_TOO_LARGE);
        ASSERT_TRUE(now_s() - t0 < 1.0);
        ASSERT_CONTAINS(e.message, "estimated to take about");
        ASSERT_CONTAINS(e.message, "max_seconds");
        remat_curve *cv = NULL;
        t0 = now_s();
        ASSERT_STATUS(remat_curve_compute(c, &o, 10, &cv, &e), REMAT_E_TOO_LARGE);
        ASSERT_TRUE(now_s() - t0 < 1.0);
        ASSERT_TRUE(cv == NULL);
    }
    /* negative: no limit; the default lets a small solve through */
    remat_chain_free(c);
    c = long_chain(60);
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = peak / 2;
    o.max_seconds = -1;
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
    remat_schedule_free(s);
    o.max_seconds = NAN;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_E_INPUT);
    remat_chain_free(c);
}

/* Curves never list (or solve) one memory twice, even when the range is
 * narrower than the points asked for. */
static void t_curve_memories_distinct(void) {
    test_rng rng = {12};
    remat_algorithm algs[] = {REMAT_ALG_SEQUENTIAL, REMAT_ALG_REVOLVE, REMAT_ALG_OPTIMAL};
    for (int it = 0; it < 12; it++) {
        test_chain_spec sp = {2 + (size_t)(it % 5), 6, 0, 0, 0, 1};
        remat_chain *c = test_random_chain(&rng, &sp);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = algs[it % 3];
        o.slots = 0;
        remat_curve *cv = NULL;
        remat_error e;
        ASSERT_STATUS(remat_curve_compute(c, &o, 1000, &cv, &e), REMAT_OK);
        ASSERT_TRUE(cv->n >= 1 && cv->n <= 100);
        for (size_t k = 1; k < cv->n; k++) {
            ASSERT_TRUE(cv->points[k].memory > cv->points[k - 1].memory);
            ASSERT_TRUE(cv->points[k].time < cv->points[k - 1].time);
        }
        remat_curve_free(cv);
        remat_chain_free(c);
    }
}

typedef struct seen {
    int calls, bad;
    double last;
} seen;

static void record(void *arg, double done, const char *what) {
    seen *s = arg;
    if (!(done >= 0 && done <= 1) || !what || !what[0]) s->bad++;
    s->calls++;
    s->last = done;
}

/* The progress callback sees fractions in [0, 1], ending at 1, for optimal's
 * table, pofo's runs and a curve's sweep; NULL stays silent. */
static void t_progress_callback(void) {
    remat_chain *c = long_chain(40);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_algorithm algs[] = {REMAT_ALG_OPTIMAL, REMAT_ALG_POFO};
    for (int k = 0; k < 2; k++) {
        seen sn = {0, 0, -1};
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = algs[k];
        o.memory = peak / 3;
        o.bandwidth = 1e7;
        o.offload_values = 10;
        o.progress = record;
        o.progress_arg = &sn;
        remat_schedule *s = NULL;
        remat_error e;
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
        ASSERT_TRUE(sn.calls >= 2);
        ASSERT_EQ_INT(sn.bad, 0);
        ASSERT_NEAR(sn.last, 1, 1e-12);
        remat_schedule_free(s);
    }
    seen sn = {0, 0, -1};
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_SEQUENTIAL;
    o.progress = record;
    o.progress_arg = &sn;
    remat_curve *cv = NULL;
    ASSERT_STATUS(remat_curve_compute(c, &o, 20, &cv, NULL), REMAT_OK);
    ASSERT_TRUE(sn.calls >= 10);
    ASSERT_EQ_INT(sn.bad, 0);
    ASSERT_NEAR(sn.last, 1, 1e-12);
    remat_curve_free(cv);
    remat_chain_free(c);
}

/* ---- the shared parallel-for ---- */

typedef struct par_ctx {
    atomic_int *hits;    /* per item */
    remat__gates *gates; /* item i waits for item i-1 */
    int chain;
} par_ctx;

static void par_item(const void *arg, size_t i, unsigned worker) {
    const par_ctx *p = arg;
    (void)worker;
    if (p->chain && i > 0) remat__gate_wait(p->gates, i - 1, 1);
    atomic_fetch_add(&p->hits[i], 1);
    if (p->chain) remat__gate_raise(p->gates, i, 1);
}

static void t_parallel_for(void) {
    enum { N = 5000 };
    static atomic_int hits[N];
    for (unsigned threads = 1; threads <= 9; threads += 4)
        for (int chain = 0; chain <= 1; chain++) {
            for (int i = 0; i < N; i++) atomic_init(&hits[i], 0);
            par_ctx p = {hits, remat__gates_new(N), chain};
            ASSERT_TRUE(p.gates != NULL);
            unsigned used = remat__parallel_for(threads, N, par_item, &p);
            ASSERT_TRUE(used >= 1 && used <= threads);
            for (int i = 0; i < N; i++) ASSERT_EQ_INT(atomic_load(&hits[i]), 1);
            remat__gates_free(p.gates);
        }
    ASSERT_EQ_INT(remat__parallel_for(4, 0, par_item, NULL), 1);
}

static const test_case cases[] = {
    {"rotor_rule_exceeds", t_rotor_rule_exceeds},
    {"slots_at_least_s", t_slots_at_least_s},
    {"bounds_match_plain", t_bounds_match_plain},
    {"refusals", t_refusals},
    {"curve_memories_distinct", t_curve_memories_distinct},
    {"progress_callback", t_progress_callback},
    {"parallel_for", t_parallel_for},
};
TEST_MAIN(cases)
