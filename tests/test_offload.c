/* Offloading: the timed simulator (SPEC section 2, Offloading), pofo, offload-only
 * and the heuristics opportunist / autocapper. */
#include <stdlib.h>

#include "common/testlib.h"
#include "solvers/pofo_impl.h"
#include "test.h"

/* ---- helpers ---- */

static remat_chain *chain_of(const remat_stage *st, size_t n, uint64_t input) {
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("hand", input, input, st, n, &c, &e) != REMAT_OK) {
        fprintf(stderr, "chain: %s\n", e.message);
        exit(3);
    }
    return c;
}

static remat_schedule *parse_ops(const char *const *ops, size_t n) {
    remat_schedule *s = NULL;
    remat_error e;
    remat_schedule_create("hand", &s, &e);
    for (size_t k = 0; k < n; k++) {
        remat_op op;
        if (remat_op_parse(ops[k], &op, &e) != REMAT_OK) {
            fprintf(stderr, "op \"%s\": %s\n", ops[k], e.message);
            exit(3);
        }
        remat_schedule_push(s, op, &e);
    }
    return s;
}

static remat_sim_result *sim(const remat_chain *c, const remat_schedule *s, double bw,
                             int timeline) {
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = bw;
    o.record_timeline = timeline;
    remat_sim_result *r = NULL;
    remat_error e;
    if (remat_simulate(c, s, &o, &r, &e) != REMAT_OK) {
        fprintf(stderr, "simulate: %s\n", e.message);
        return NULL;
    }
    return r;
}

/* A three-stage chain: a[0] 10, stages of 10/20 bytes, loss 1/2 bytes. */
static remat_chain *small3(void) {
    remat_stage st[3] = {test_stage(1, 2, 10, 20), test_stage(1, 2, 10, 20), test_stage(1, 1, 1, 2)};
    return chain_of(st, 3, 10);
}

/* ---- timed simulator ---- */

/* With a bandwidth but no offload ops the timed simulator is the plain one;
 * asking for a timeline without a bandwidth gives the same numbers, with events. */
static void timed_matches_plain(void) {
    test_rng rng = {11};
    for (int t = 0; t < 60; t++) {
        test_chain_spec sp = {3 + (size_t)(t % 9), 30, t % 2, t % 3 == 0, t % 5 == 0, t % 4 == 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        remat_schedule *s = NULL;
        uint64_t m = peak / 2 + c->input_bytes + 60;
        remat_status st = remat__pofo_plan(c, m, 40, 0, REMAT__POFO_REMAT_ONLY, 0, &s, NULL);
        if (st != REMAT_OK) remat__pofo_plan(c, peak + 1, 40, 0, REMAT__POFO_REMAT_ONLY, 0, &s, NULL);
        ASSERT_TRUE(s != NULL);
        remat_sim_result *a = sim(c, s, 0, 0), *b = sim(c, s, 3.5, 1), *z = sim(c, s, 0, 1);
        ASSERT_TRUE(a && b && z && a->valid && b->valid && z->valid);
        ASSERT_TRUE(a->time == b->time);
        ASSERT_EQ_U64(a->peak_bytes, b->peak_bytes);
        ASSERT_TRUE(z->time == a->time && z->peak_bytes == a->peak_bytes);
        ASSERT_TRUE(a->n_events == 0 && z->n_events > 0 && z->n_mem_points > 0);
        for (size_t k = 0; k < z->n_events; k++) ASSERT_TRUE(z->events[k].lane == 0);
        ASSERT_TRUE(z->events[z->n_events - 1].end == z->time);
        for (size_t k = 0; k < s->n_ops; k++) {
            ASSERT_EQ_U64(a->mem_during[k], b->mem_during[k]);
            ASSERT_EQ_U64(a->mem_after[k], b->mem_after[k]);
        }
        ASSERT_NEAR(b->compute_idle, 0, 1e-9 * (1 + b->time));
        remat_sim_result_free(a);
        remat_sim_result_free(b);
        remat_sim_result_free(z);
        remat_schedule_free(s);
        remat_chain_free(c);
    }
}

/* Hand-computed timeline: abar[1] goes to the host during the forward and
 * comes back for B 2, which waits for it. */
static void timed_golden(void) {
    remat_chain *c = small3();
    static const char *const ops[] = {"Fall 1", "Off abar[1]", "Fall 2", "Fall 3", "B 3",
                                      "Pre abar[1]", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 8);
    remat_sim_result *r = sim(c, s, 10, 1);
    ASSERT_TRUE(r && r->valid);
    ASSERT_NEAR(r->time, 10, 1e-12);
    ASSERT_EQ_U64(r->peak_bytes, 70);
    static const uint64_t during[8] = {30, 30, 50, 52, 42, 40, 70, 50};
    static const uint64_t after[8] = {30, 30, 50, 52, 40, 40, 40, 10};
    for (size_t k = 0; k < 8; k++) {
        ASSERT_EQ_U64(r->mem_during[k], during[k]);
        ASSERT_EQ_U64(r->mem_after[k], after[k]);
    }
    ASSERT_NEAR(r->compute_idle, 2, 1e-12);
    ASSERT_NEAR(r->d2h_idle, 8, 1e-12);
    ASSERT_NEAR(r->h2d_idle, 8, 1e-12);
    /* events: 6 compute ops on lane 0, one copy each way */
    ASSERT_EQ_U64(r->n_events, 8);
    static const double starts[8] = {0, 1, 1, 2, 3, 4, 6, 8};
    static const double ends[8] = {1, 3, 2, 3, 4, 6, 8, 10};
    static const int lanes[8] = {0, 1, 0, 0, 0, 2, 0, 0};
    for (size_t k = 0; k < 8; k++) {
        ASSERT_EQ_INT(r->events[k].op, k);
        ASSERT_EQ_INT(r->events[k].lane, lanes[k]);
        ASSERT_NEAR(r->events[k].start, starts[k], 1e-12);
        ASSERT_NEAR(r->events[k].end, ends[k], 1e-12);
    }
    /* memory over time: the release at t = 3 and the prefetch at t = 4 show */
    int saw_release = 0, saw_pre = 0;
    for (size_t k = 0; k < r->n_mem_points; k++) {
        if (r->mem_points[k].time == 3 && r->mem_points[k].bytes == 42) saw_release = 1;
        if (r->mem_points[k].time == 4 && r->mem_points[k].bytes == 60) saw_pre = 1;
    }
    ASSERT_TRUE(saw_release && saw_pre);
    char *js = NULL;
    ASSERT_STATUS(remat_sim_result_to_json(r, &js, NULL), REMAT_OK);
    ASSERT_CONTAINS(js, "\"lane\": 2");
    remat_free(js);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* A slow link: Wait makes compute idle until the copy ends, and the memory
 * is released only then. */
static void timed_wait_and_release(void) {
    remat_chain *c = small3();
    static const char *const ops[] = {"Fall 1", "Off abar[1]", "Fall 2", "Wait abar[1]", "Fall 3",
                                      "B 3", "Pre abar[1]", "Wait abar[1]", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 10);
    remat_sim_result *r = sim(c, s, 2, 0); /* 20 bytes take 10 time units */
    ASSERT_TRUE(r && r->valid);
    /* Fall 1 [0,1], copy [1,11], Fall 2 [1,2], wait to 11, Fall 3 [11,12],
     * B 3 [12,13], Pre [13,23], B 2 [23,25], B 1 [25,27]. */
    ASSERT_NEAR(r->time, 27, 1e-12);
    ASSERT_EQ_U64(r->mem_during[4], 32); /* abar[1] already released */
    ASSERT_EQ_U64(r->mem_during[2], 50);     /* still held while copying */
    ASSERT_NEAR(r->compute_idle, 27 - 8, 1e-12);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void expect_invalid(const remat_chain *c, const char *const *ops, size_t n, double bw,
                           size_t failed_op, const char *why) {
    remat_schedule *s = parse_ops(ops, n);
    remat_sim_result *r = sim(c, s, bw, 0);
    if (!r) TEST_FAIL_("simulate failed");
    if (r->valid) TEST_FAIL_("schedule accepted, expected \"%s\"", why);
    if (r->failed_op != failed_op)
        TEST_FAIL_("failed at op %zu (%s: %s), expected %zu", r->failed_op, r->failed_op_text,
                   r->reason, failed_op);
    if (!strstr(r->reason, why)) TEST_FAIL_("reason \"%s\" lacks \"%s\"", r->reason, why);
    remat_sim_result_free(r);
    remat_schedule_free(s);
}

static void timed_rejects(void) {
    remat_chain *c = small3();
    {   /* a value used while on the host */
        static const char *const ops[] = {"Fall 1", "Off abar[1]", "Wait abar[1]", "Fall 2"};
        expect_invalid(c, ops, 4, 10, 3, "on the host");
    }
    {   /* a copy that ended before the reader started */
        static const char *const ops[] = {"Fck 1", "Off a[0]", "Fn 2", "Fall 3", "Fall 1"};
        expect_invalid(c, ops, 5, 100, 4, "Pre it first");
    }
    {   /* offloading a value never produced */
        static const char *const ops[] = {"Off a[2]"};
        expect_invalid(c, ops, 1, 10, 0, "not held");
    }
    {   /* prefetching what was never offloaded */
        static const char *const ops[] = {"Fall 1", "Pre abar[1]"};
        expect_invalid(c, ops, 2, 10, 1, "not offloaded");
    }
    {   /* waiting for nothing, naming values outside the chain */
        static const char *const ops[] = {"Wait a[1]"};
        expect_invalid(c, ops, 1, 10, 0, "no copy");
        static const char *const ops2[] = {"Off abar[9]"};
        expect_invalid(c, ops2, 1, 10, 0, "not a value");
    }
    {   /* freeing a value while it is copied */
        static const char *const ops[] = {"Fall 1", "Off abar[1]", "Del abar[1]"};
        expect_invalid(c, ops, 3, 10, 2, "being copied");
    }
    {   /* offload ops without a link */
        static const char *const ops[] = {"Fall 1", "Off abar[1]"};
        expect_invalid(c, ops, 2, 0, 1, "host link");
    }
    {   /* ends before every B */
        static const char *const ops[] = {"Fall 1", "Off abar[1]", "Wait abar[1]"};
        expect_invalid(c, ops, 3, 10, 3, "ends before B 3");
    }
    remat_chain_free(c);
}

static void bad_bandwidth(void) {
    remat_chain *c = small3();
    static const char *const ops[] = {"Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 6);
    remat_sim_options o;
    remat_sim_options_init(&o);
    remat_sim_result *r = NULL;
    remat_error e;
    const double bad[3] = {-1, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        o.bandwidth = bad[k];
        ASSERT_STATUS(remat_simulate(c, s, &o, &r, &e), REMAT_E_INPUT);
        ASSERT_TRUE(r == NULL);
        ASSERT_CONTAINS(e.message, "bandwidth");
        remat_solve_options so;
        remat_solve_options_init(&so);
        so.algorithm = REMAT_ALG_POFO;
        so.memory = 1000;
        so.bandwidth = bad[k];
        remat_schedule *out = NULL;
        ASSERT_STATUS(remat_solve(c, &so, &out, &e), REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, "bandwidth");
    }
    /* missing bandwidth for the offload algorithms */
    remat_algorithm algs[3] = {REMAT_ALG_OFFLOAD_ONLY, REMAT_ALG_OPPORTUNIST, REMAT_ALG_AUTOCAPPER};
    for (int k = 0; k < 3; k++) {
        remat_solve_options so;
        remat_solve_options_init(&so);
        so.algorithm = algs[k];
        so.memory = 1000;
        remat_schedule *out = NULL;
        ASSERT_STATUS(remat_solve(c, &so, &out, &e), REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, "bandwidth");
    }
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Lemma 1 for an offload overlapping a run of forwards: idle is
 * max(0, size / bandwidth - forward time), and the DP predicts it. */
static void lemma1_idle(void) {
    remat_stage st[4] = {test_stage(1, 1, 8, 8), test_stage(2, 1, 8, 8), test_stage(1.5, 1, 8, 8),
                         test_stage(1, 1, 1, 1)};
    remat_chain *c = chain_of(st, 4, 40);
    static const char *const ops[] = {"Off a[0]", "Fck 1", "Fn 2", "Fn 3", "Wait a[0]"};
    const double bws[4] = {100, 10, 8, 2};
    for (int k = 0; k < 4; k++) {
        remat_schedule *s = parse_ops(ops, 5);
        /* finish the chain so the schedule is valid: loss, then B 4..1 with recomputation */
        static const char *const rest[] = {"Fall 4", "B 4", "Pre a[0]", "Wait a[0]", "Fck 1",
                                           "Fall 2", "Fall 3", "B 3", "B 2", "Fall 1", "B 1"};
        for (size_t h = 0; h < 11; h++) {
            remat_op op;
            remat_op_parse(rest[h], &op, NULL);
            remat_schedule_push(s, op, NULL);
        }
        remat_sim_result *r = sim(c, s, bws[k], 1);
        ASSERT_TRUE(r && r->valid);
        double fwd = 4.5, copy = 40 / bws[k];
        double idle_f = copy > fwd ? copy - fwd : 0;
        /* backward: B 4 (1) overlaps nothing of the prefetch, issued after it */
        double idle_b = copy;
        ASSERT_NEAR(r->compute_idle, idle_f + idle_b, 1e-9);
        /* the loss forward starts where Lemma 1 says */
        ASSERT_NEAR(r->events[4].start, fwd + idle_f, 1e-9);
        remat_sim_result_free(r);
        remat_schedule_free(s);
    }
    remat_chain_free(c);
}

/* ---- solvers ---- */

static remat_status solve(const remat_chain *c, remat_algorithm a, uint64_t m, double bw,
                          uint32_t values, remat_schedule **out, remat_error *e) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = a;
    o.memory = m;
    o.bandwidth = bw;
    o.offload_values = values;
    return remat_solve(c, &o, out, e);
}

/* Valid with peak <= limit under the bandwidth; returns the simulated time or -1. */
static double check_offload_schedule(const remat_chain *c, const remat_schedule *s, uint64_t m,
                                     double bw, int bound) {
    remat_sim_result *r = sim(c, s, bw, 0);
    double t = -1;
    if (!r) return -1;
    if (!r->valid)
        fprintf(stderr, "  %s invalid at op %zu (%s): %s\n", s->algorithm, r->failed_op,
                r->failed_op_text, r->reason);
    else if (r->peak_bytes > m)
        fprintf(stderr, "  %s peak %llu > %llu\n", s->algorithm,
                (unsigned long long)r->peak_bytes, (unsigned long long)m);
    else if (bound && r->time > s->time * (1 + 1e-9) + 1e-9)
        fprintf(stderr, "  %s simulated %.17g > predicted %.17g\n", s->algorithm, r->time,
                s->time);
    else
        t = r->time;
    remat_sim_result_free(r);
    return t;
}

static const remat_algorithm offload_algs[4] = {REMAT_ALG_POFO, REMAT_ALG_OFFLOAD_ONLY,
                                                REMAT_ALG_OPPORTUNIST, REMAT_ALG_AUTOCAPPER};

static void solvers_valid_random(void) {
    test_rng rng = {7};
    int solved[4] = {0, 0, 0, 0};
    for (int t = 0; t < 24; t++) {
        test_chain_spec sp = {3 + (size_t)(t % 6), 40, t % 2, t % 3 == 0, 0, t % 4 == 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        uint64_t m = peak * (uint64_t)(3 + t % 6) / 10 + 20;
        double bw = 1 + 20 * test_rng_unit(&rng);
        for (int a = 0; a < 4; a++) {
            remat_schedule *s = NULL;
            remat_error e;
            remat_status st = solve(c, offload_algs[a], m, bw, 30, &s, &e);
            if (st == REMAT_E_INFEASIBLE) continue;
            if (st != REMAT_OK) TEST_FAIL_("%s: %s", remat_algorithm_name(offload_algs[a]), e.message);
            solved[a]++;
            int bound = offload_algs[a] == REMAT_ALG_POFO || offload_algs[a] == REMAT_ALG_OFFLOAD_ONLY;
            ASSERT_TRUE(check_offload_schedule(c, s, m, bw, bound) >= 0);
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
    for (int a = 0; a < 4; a++) ASSERT_TRUE(solved[a] > 0);
}

/* pofo's space holds offload-only's and rotor's at the same discretization;
 * against an exact-byte remat optimum it loses at most the rounding of held
 * values: each of at most n held values (and the prefetch reserve) rounds up
 * by less than one unit, so pofo(M) <= remat(M - (n + 2) * M / values). */
static void pofo_dominates(void) {
    test_rng rng = {5};
    int compared_opt = 0;
    for (int t = 0; t < 25; t++) {
        test_chain_spec sp = {3 + (size_t)(t % 5), 30, t % 2, 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        uint64_t m = peak * (uint64_t)(4 + t % 5) / 10 + 30;
        double bw = 2 + 10 * test_rng_unit(&rng);
        const uint32_t N = 120;
        remat_schedule *p = NULL, *oo = NULL, *r = NULL;
        remat_status sp_ = remat__pofo_plan(c, m, N, bw, REMAT__POFO_FULL, 0, &p, NULL);
        remat_status so_ = remat__pofo_plan(c, m, N, bw, REMAT__POFO_OFFLOAD_ONLY, 0, &oo, NULL);
        remat_status sr_ = remat__pofo_plan(c, m, N, bw, REMAT__POFO_REMAT_ONLY, 0, &r, NULL);
        if (so_ == REMAT_OK || sr_ == REMAT_OK) ASSERT_STATUS(sp_, REMAT_OK);
        if (sp_ == REMAT_OK) {
            double tp = check_offload_schedule(c, p, m, bw, 1);
            ASSERT_TRUE(tp >= 0);
            if (oo) ASSERT_LE_DBL(p->time, oo->time, 1e-9 * oo->time);
            if (r) ASSERT_LE_DBL(p->time, r->time, 1e-9 * r->time);
            /* against the exact remat optimum at a reduced limit */
            uint64_t slack = (uint64_t)(c->n + 2) * (m / N + 1);
            remat_schedule *opt = NULL;
            remat_error e;
            if (m > slack + c->input_bytes) {
                remat_solve_options o;
                remat_solve_options_init(&o);
                o.algorithm = REMAT_ALG_OPTIMAL;
                o.memory = m - slack;
                o.slots = 0;
                remat_status st = remat_solve(c, &o, &opt, &e);
                if (st == REMAT_OK) {
                    ASSERT_LE_DBL(p->time, opt->time, 1e-9 * opt->time);
                    compared_opt++;
                } else if (st == REMAT_E_INPUT) {
                    ASSERT_CONTAINS(e.message, "not implemented"); /* optimal not in yet */
                }
            }
            remat_schedule_free(opt);
        }
        remat_schedule_free(p);
        remat_schedule_free(oo);
        remat_schedule_free(r);
        remat_chain_free(c);
    }
    ASSERT_TRUE(compared_opt >= 5); /* the bound was exercised */
}

/* End to end, pofo's simulated time is never above optimal's or
 * offload-only's at the same limit and bandwidth, and offloading helps on a chain where it should:
 * big early activations, a fast link. */
static void pofo_vs_optimal_end_to_end(void) {
    test_rng rng = {21};
    for (int t = 0; t < 10; t++) {
        test_chain_spec sp = {4 + (size_t)(t % 5), 50, 1, 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        uint64_t m = peak / 2 + 50;
        remat_schedule *p = NULL, *o = NULL;
        remat_error e;
        remat_status so = solve(c, REMAT_ALG_OPTIMAL, m, 0, 0, &o, &e);
        remat_status sp_ = solve(c, REMAT_ALG_POFO, m, 4, 0, &p, &e);
        if (so == REMAT_OK) {
            ASSERT_STATUS(sp_, REMAT_OK);
            double tp = check_offload_schedule(c, p, m, 4, 1);
            ASSERT_TRUE(tp >= 0);
            ASSERT_LE_DBL(tp, o->time, 1e-9 * o->time);
        }
        remat_schedule *q = NULL;
        if (solve(c, REMAT_ALG_OFFLOAD_ONLY, m, 4, 0, &q, &e) == REMAT_OK) {
            double tq = check_offload_schedule(c, q, m, 4, 1);
            ASSERT_TRUE(tq >= 0 && p != NULL);
            ASSERT_LE_DBL(check_offload_schedule(c, p, m, 4, 1), tq, 1e-9 * tq);
        }
        remat_schedule_free(q);
        remat_schedule_free(p);
        remat_schedule_free(o);
        remat_chain_free(c);
    }
    remat_stage st[6];
    for (int i = 0; i < 5; i++) st[i] = test_stage(2, 4, 40, 60);
    st[5] = test_stage(1, 1, 1, 2);
    remat_chain *c = chain_of(st, 6, 40);
    remat_schedule *p = NULL, *o = NULL;
    remat_error e;
    remat_solve_options oo;
    remat_solve_options_init(&oo);
    uint64_t m;
    ASSERT_STATUS(remat_min_memory(c, &oo, &m, &e), REMAT_OK);
    ASSERT_STATUS(solve(c, REMAT_ALG_OPTIMAL, m, 0, 0, &o, &e), REMAT_OK);
    ASSERT_STATUS(solve(c, REMAT_ALG_POFO, m, 100, 100, &p, &e), REMAT_OK);
    double tp = check_offload_schedule(c, p, m, 100, 1);
    ASSERT_TRUE(tp >= 0 && tp < o->time - 1);
    remat_schedule_free(p);
    remat_schedule_free(o);
    remat_chain_free(c);
}

/* With no link pofo is rotor's optimum. */
static void pofo_bandwidth_zero(void) {
    test_rng rng = {9};
    for (int t = 0; t < 8; t++) {
        test_chain_spec sp = {4 + (size_t)t, 30, 1, 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        uint64_t m = peak * 6 / 10 + 30;
        remat_schedule *a = NULL, *b = NULL;
        remat_error ea, eb;
        remat_status sa = solve(c, REMAT_ALG_POFO, m, 0, 0, &a, &ea);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.memory = m;
        remat_status sb = remat_solve(c, &o, &b, &eb);
        ASSERT_EQ_INT(sa, sb);
        if (sa == REMAT_OK) {
            ASSERT_NEAR(a->time, b->time, 1e-9 * b->time);
            ASSERT_EQ_U64(a->n_ops, b->n_ops);
        }
        remat_schedule_free(a);
        remat_schedule_free(b);
        remat_chain_free(c);
    }
}

/* A very fast link: offloading everything costs nothing, so pofo reaches the
 * store-all time with far less memory than store-all. */
static void pofo_fast_link_store_all_time(void) {
    remat_stage st[9];
    for (int i = 0; i < 8; i++) st[i] = test_stage(1 + i % 3, 2 + i % 2, 10, 20);
    st[8] = test_stage(1, 1, 1, 2);
    remat_chain *c = chain_of(st, 9, 10);
    uint64_t peak;
    double t_all;
    remat_store_all_cost(c, &peak, &t_all, NULL);
    uint64_t m = 90;
    ASSERT_TRUE(m < peak / 2);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(solve(c, REMAT_ALG_POFO, m, 1e12, 90, &s, &e), REMAT_OK);
    double t = check_offload_schedule(c, s, m, 1e12, 1);
    ASSERT_NEAR(t, t_all, 1e-6);
    ASSERT_NEAR(s->time, t_all, 1e-6);
    remat_schedule_free(s);
    /* offload-only too, and with a slow link it must pay idle time */
    ASSERT_STATUS(solve(c, REMAT_ALG_OFFLOAD_ONLY, m, 1e12, 90, &s, &e), REMAT_OK);
    ASSERT_NEAR(check_offload_schedule(c, s, m, 1e12, 1), t_all, 1e-6);
    remat_schedule_free(s);
    ASSERT_STATUS(solve(c, REMAT_ALG_OFFLOAD_ONLY, m, 1, 90, &s, &e), REMAT_OK);
    ASSERT_TRUE(check_offload_schedule(c, s, m, 1, 1) > t_all + 1);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* The carry-mode candidates (dF carried across segments): with them pofo is
 * never slower than with them switched off, and every schedule stays valid
 * within the limit. */
static void pofo_carry_never_slower(void) {
    test_rng rng = {33};
    int carry_won = 0;
    for (int t = 0; t < 8; t++) {
        test_chain_spec sp = {4 + (size_t)(t % 4), 50, 1, 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_POFO;
        o.memory = peak / 3 + 50;
        o.bandwidth = 2 + t % 3;
        remat_schedule *full = NULL, *strict = NULL;
        remat_error e;
        remat_status s1 = remat_solve(c, &o, &full, &e);
        remat_status s2 = remat__solve_pofo_flags(c, &o, REMAT__POFO_NO_CARRY, &strict, &e);
        ASSERT_STATUS(s1, s2);
        if (s1 == REMAT_OK) {
            double tf = check_offload_schedule(c, full, o.memory, o.bandwidth, 1);
            double ts = check_offload_schedule(c, strict, o.memory, o.bandwidth, 1);
            ASSERT_TRUE(tf >= 0 && ts >= 0);
            ASSERT_LE_DBL(tf, ts, 1e-9 * ts);
            carry_won += tf < ts * (1 - 1e-9);
        }
        remat_schedule_free(full);
        remat_schedule_free(strict);
        remat_chain_free(c);
    }
    fprintf(stderr, "  carry candidates won %d of 8\n", carry_won);
}

/* dB carried across segments (a prefetch issued during the backward of a
 * later segment than the next one): valid, and never slower than without. */
static void pofo_db_carry_never_slower(void) {
    test_rng rng = {77};
    int won = 0;
    for (int t = 0; t < 12; t++) {
        test_chain_spec sp = {5 + (size_t)(t % 5), 50, 1, 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &sp);
        uint64_t peak;
        remat_store_all_cost(c, &peak, NULL, NULL);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_POFO;
        o.memory = peak / (2 + (uint64_t)(t % 3)) + 50;
        o.bandwidth = 1 + t % 4;
        remat_schedule *with = NULL, *without = NULL;
        remat_error e;
        unsigned nc = REMAT__POFO_NO_CARRY; /* strict and relaxed candidates only */
        remat_status s1 = remat__solve_pofo_flags(c, &o, nc, &with, &e);
        remat_status s2 =
            remat__solve_pofo_flags(c, &o, nc | REMAT__POFO_NO_DB_CARRY, &without, &e);
        ASSERT_STATUS(s1, s2);
        if (s1 == REMAT_OK) {
            double tw = check_offload_schedule(c, with, o.memory, o.bandwidth, 1);
            double tn = check_offload_schedule(c, without, o.memory, o.bandwidth, 1);
            ASSERT_TRUE(tw >= 0 && tn >= 0);
            ASSERT_LE_DBL(tw, tn, 1e-9 * tn);
            won += tw < tn * (1 - 1e-9);
        }
        /* the strict plan carries dB: valid, its prediction bounds the simulation */
        remat_schedule *s = NULL;
        if (remat__pofo_plan(c, o.memory, 50, o.bandwidth, REMAT__POFO_FULL, 0, &s, &e) ==
            REMAT_OK) {
            double ts = check_offload_schedule(c, s, o.memory, o.bandwidth, 0);
            ASSERT_TRUE(ts >= 0);
            ASSERT_LE_DBL(ts, s->time, 1e-9 * s->time);
        }
        remat_schedule_free(s);
        remat_schedule_free(with);
        remat_schedule_free(without);
        remat_chain_free(c);
    }
    fprintf(stderr, "  dB carry won %d of 12\n", won);
}

/* A fuzzer's chain (a 1e300 forward): the min-memory search behind an
 * infeasible limit used to spend minutes in repair(), one simulation per
 * inserted Wait. Passing means finishing at all. */
static void pofo_fuzz_repair_bounded(void) {
    static const char text[] =
        "{\"format\": \"remat-chain-1\", \"name\": \"fuzz\", \"time_unit\": \"\","
        " \"input_bytes\": 5, \"input_grad_bytes\": 0, \"stages\": ["
        "{\"name\": \"\", \"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 3, \"saved_bytes\": 10,"
        " \"grad_bytes\": 3, \"fwd_overhead\": 0, \"bwd_overhead\": 7},"
        "{\"name\": \"\", \"fwd_time\": 1e+300, \"bwd_time\": 1e-300, \"out_bytes\": 1000,"
        " \"saved_bytes\": 1010, \"grad_bytes\": 1000, \"fwd_overhead\": 0, \"bwd_overhead\": 0},"
        "{\"name\": \"\", \"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 3, \"saved_bytes\": 10,"
        " \"grad_bytes\": 3, \"fwd_overhead\": 1, \"bwd_overhead\": 0},"
        "{\"name\": \"\", \"fwd_time\": 0, \"bwd_time\": 0.5, \"out_bytes\": 7, \"saved_bytes\": 17,"
        " \"grad_bytes\": 1000, \"fwd_overhead\": 0, \"bwd_overhead\": 0},"
        "{\"name\": \"\", \"fwd_time\": 0, \"bwd_time\": 0, \"out_bytes\": 0, \"saved_bytes\": 0,"
        " \"grad_bytes\": 0, \"fwd_overhead\": 0, \"bwd_overhead\": 0}]}";
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_from_json(text, sizeof text - 1, "fuzz", &c, &e), REMAT_OK);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_POFO;
    o.bandwidth = 1;
    o.memory = 0;
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(e.min_memory > 0);
    o.memory = e.min_memory;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
    ASSERT_TRUE(check_offload_schedule(c, s, o.memory, o.bandwidth, 0) >= 0);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* A long chain (the carry modes once ran on short chains only): every
 * candidate runs, the result is valid, never slower than without the
 * carries, and the same op for op with 1 and with 3 threads. */
static void pofo_long_chain_threads(void) {
    test_rng rng = {2024};
    test_chain_spec sp = {90, 1000, 1, 0, 0, 0};
    remat_chain *c = test_random_chain(&rng, &sp);
    uint64_t peak;
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_POFO;
    o.memory = peak / 4;
    o.bandwidth = 30;
    o.offload_values = 16;
    o.threads = 1;
    remat_schedule *one = NULL, *three = NULL, *plain = NULL;
    remat_error e;
    remat_status s1 = remat_solve(c, &o, &one, &e);
    o.threads = 3;
    remat_status s2 = remat_solve(c, &o, &three, &e);
    remat_status s3 = remat__solve_pofo_flags(
        c, &o, REMAT__POFO_NO_CARRY | REMAT__POFO_NO_DB_CARRY, &plain, &e);
    ASSERT_STATUS(s1, REMAT_OK);
    ASSERT_STATUS(s2, REMAT_OK);
    ASSERT_STATUS(s3, REMAT_OK);
    if (s1 == REMAT_OK && s2 == REMAT_OK && s3 == REMAT_OK) {
        double t1 = check_offload_schedule(c, one, o.memory, o.bandwidth, 1);
        double tp = check_offload_schedule(c, plain, o.memory, o.bandwidth, 1);
        ASSERT_TRUE(t1 >= 0 && tp >= 0);
        ASSERT_LE_DBL(t1, tp, 1e-9 * tp);
        ASSERT_EQ_U64(one->n_ops, three->n_ops);
        for (size_t k = 0; k < one->n_ops && k < three->n_ops; k++)
            ASSERT_TRUE(one->ops[k].kind == three->ops[k].kind &&
                        one->ops[k].index == three->ops[k].index &&
                        one->ops[k].value == three->ops[k].value);
        fprintf(stderr, "  L = 89: %.4g with the carries, %.4g without\n", t1, tp);
    }
    remat_schedule_free(one);
    remat_schedule_free(three);
    remat_schedule_free(plain);
    remat_chain_free(c);
}

static void pofo_too_large_and_infeasible(void) {
    remat_chain *c = small3();
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat__pofo_plan(c, 1000, 50, 1, REMAT__POFO_FULL, 64, &s, &e),
                  REMAT_E_TOO_LARGE);
    ASSERT_STATUS(remat__pofo_plan(c, 5, 50, 1, REMAT__POFO_FULL, 0, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(s == NULL);
    remat_chain_free(c);
}

/* The packed choice keeps every field, and the next state of a choice is
 * the one the model describes (Fall i -> (i+1, abar), Fck i..j -> (j+1, a),
 * the input kept in A or offloaded into dB, dB carried on or not). */
static void pofo_choice_and_next_state(void) {
    for (unsigned bits = 0; bits < 16; bits++)
        for (uint32_t len = 0; len < 300; len += 37) {
            pofo_choice ch = {bits & 1, (bits >> 1) & 1, (bits >> 2) & 1, (bits >> 3) & 1, len};
            pofo_choice back = pofo_choice_unpack(pofo_choice_pack(ch));
            ASSERT_TRUE(back.fck == ch.fck && back.off == ch.off && back.drain == ch.drain &&
                        back.push == ch.push && back.len == ch.len);
        }
    test_rng rng = {3};
    test_chain_spec sp = {8, 1000, 0, 0, 0, 1};
    remat_chain *c = test_random_chain(&rng, &sp);
    pofo_shared sh;
    ASSERT_STATUS(pofo_shared_init(&sh, c, 4000, 40, 0, 1, 0, NULL), REMAT_OK);
    pofo_run r;
    ASSERT_STATUS(pofo_run_init(&r, &sh, 0, NULL), REMAT_OK);
    pofo_run_reset(&r, sh.base_cap, 10, REMAT__POFO_FULL, 0, 1);
    oc_state s = {3, 1, 5, 2, 0}, nx;
    uint64_t ui = pofo_units(&sh, pofo_input_bytes(&sh, 3, 1));
    pofo_choice fall_keep = {0, 0, 0, 0, 0}, fck_off_push = {1, 1, 0, 1, 2};
    ASSERT_TRUE(pofo_next_state(&r, s, fall_keep, 1, &nx));
    ASSERT_TRUE(nx.i == 4 && nx.x == 1 && nx.a == 5 + ui && nx.b == 0 && nx.f == 0);
    ASSERT_TRUE(pofo_next_state(&r, s, fck_off_push, 1, &nx));
    ASSERT_TRUE(nx.i == 6 && nx.x == 0 && nx.a == 5 && nx.b == ui + 2 && nx.f == 0);
    pofo_run_free(&r);
    pofo_shared_free(&sh);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"pofo_choice_and_next_state", pofo_choice_and_next_state},
    {"timed_matches_plain", timed_matches_plain},
    {"timed_golden", timed_golden},
    {"timed_wait_and_release", timed_wait_and_release},
    {"timed_rejects", timed_rejects},
    {"bad_bandwidth", bad_bandwidth},
    {"lemma1_idle", lemma1_idle},
    {"solvers_valid_random", solvers_valid_random},
    {"pofo_dominates", pofo_dominates},
    {"pofo_bandwidth_zero", pofo_bandwidth_zero},
    {"pofo_vs_optimal_end_to_end", pofo_vs_optimal_end_to_end},
    {"pofo_fast_link_store_all_time", pofo_fast_link_store_all_time},
    {"pofo_carry_never_slower", pofo_carry_never_slower},
    {"pofo_db_carry_never_slower", pofo_db_carry_never_slower},
    {"pofo_fuzz_repair_bounded", pofo_fuzz_repair_bounded},
    {"pofo_long_chain_threads", pofo_long_chain_threads},
    {"pofo_too_large_and_infeasible", pofo_too_large_and_infeasible},
};
TEST_MAIN(cases)
