/* sequential: torch-style segmentation, hand-worked schedules, the choice of K. */
#include <stdlib.h>

#include "common/testlib.h"
#include "remat/remat.h"
#include "test.h"

static remat_status solve_k(const remat_chain *c, uint64_t m, uint32_t k, remat_schedule **s,
                            remat_error *e) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_SEQUENTIAL;
    o.memory = m;
    o.segments = k;
    return remat_solve(c, &o, s, e);
}

static void ops_text(const remat_schedule *s, char *out, size_t cap) {
    test_ops_text(s, ", ", out, cap);
}

/* n stages, every a = 2, abar = 5, f = 1, b = 2, input 2. */
static remat_chain *uniform(size_t n) {
    remat_stage st[64];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        st[i].fwd_time = 1;
        st[i].bwd_time = 2;
        st[i].out_bytes = 2;
        st[i].saved_bytes = 5;
        st[i].grad_bytes = 2;
    }
    remat_chain *c = NULL;
    if (remat_chain_create("u", 2, 2, st, n, &c, NULL) != REMAT_OK) return NULL;
    return c;
}

static void test_two_segments_by_hand(void) {
    remat_chain *c = uniform(4);
    ASSERT_TRUE(c);
    remat_schedule *s = NULL;
    char text[512];
    ASSERT_STATUS(solve_k(c, 1000, 2, &s, NULL), REMAT_OK);
    ops_text(s, text, sizeof text);
    ASSERT_CONTAINS(text, "Fck 1, Fn 2, Fall 3, Fall 4, B 4, B 3, Fall 1, Fall 2, B 2, B 1");
    ASSERT_EQ_U64(s->n_ops, 10);
    /* 4 forwards + 4 backwards + the first segment again: 4 + 8 + 2. */
    ASSERT_NEAR(s->time, 14, 1e-12);
    /* Peak at B 4: a[0] 2 + a[2] 2 + abar[3] 5 + abar[4] 5 + d[3] 2 = 16. */
    ASSERT_EQ_U64(s->peak_bytes, 16);
    ASSERT_TRUE(test_schedule_ok(c, s, 1000));
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* torch: segment size n // K, the remainder goes to the last segment. */
static void test_torch_split(void) {
    remat_chain *c = uniform(7);
    ASSERT_TRUE(c);
    remat_schedule *s = NULL;
    char text[1024];
    ASSERT_STATUS(solve_k(c, 1000, 3, &s, NULL), REMAT_OK);
    ops_text(s, text, sizeof text);
    /* segments {1,2}, {3,4}, {5,6,7} */
    ASSERT_CONTAINS(text, "Fck 1, Fn 2, Fck 3, Fn 4, Fall 5, Fall 6, Fall 7, B 7, B 6, B 5, "
                          "Fall 3, Fall 4, B 4, B 3, Fall 1, Fall 2, B 2, B 1");
    ASSERT_NEAR(s->time, 7 + 14 + 4, 1e-12);
    ASSERT_TRUE(test_schedule_ok(c, s, 1000));
    remat_schedule_free(s);
    /* K = n: every segment one stage, each but the last forward is one Fck. */
    ASSERT_STATUS(solve_k(c, 1000, 7, &s, NULL), REMAT_OK);
    ops_text(s, text, sizeof text);
    ASSERT_CONTAINS(text, "Fck 1, Fck 2, Fck 3, Fck 4, Fck 5, Fck 6, Fall 7, B 7, Fall 6, B 6");
    ASSERT_NEAR(s->time, 7 + 14 + 6, 1e-12);
    ASSERT_TRUE(test_schedule_ok(c, s, 1000));
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_one_segment_is_store_all(void) {
    test_rng r = {5};
    test_chain_spec sp = {.n = 9, .max_bytes = 100, .overheads = 1, .grad_sizes = 1};
    remat_chain *c = test_random_chain(&r, &sp);
    uint64_t peak;
    double t;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, &t, NULL), REMAT_OK);
    remat_schedule *s = NULL;
    ASSERT_STATUS(solve_k(c, peak, 1, &s, NULL), REMAT_OK);
    ASSERT_EQ_U64(s->peak_bytes, peak);
    ASSERT_NEAR(s->time, t, 1e-9);
    remat_schedule_free(s);
    /* Auto K with room for everything picks K = 1 (fastest, fewest segments). */
    ASSERT_STATUS(solve_k(c, peak, 0, &s, NULL), REMAT_OK);
    ASSERT_NEAR(s->time, t, 1e-9);
    ASSERT_EQ_INT(s->ops[0].kind, REMAT_OP_FALL);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_bad_k(void) {
    remat_chain *c = uniform(4);
    ASSERT_TRUE(c);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(solve_k(c, 1000, 5, &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "segments");
    ASSERT_TRUE(s == NULL);
    /* A fixed K that does not fit reports that K's own peak. */
    ASSERT_STATUS(solve_k(c, 15, 2, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(e.min_memory, 16);
    ASSERT_CONTAINS(e.message, "2 segments need 16 bytes");
    remat_chain_free(c);
}

/* Auto K equals the best of all fixed K (fastest feasible, ties to fewer
 * segments); when none fits, min_memory is the smallest peak over K. Every
 * fixed-K solve also checks the closed-form peak against the simulator. */
static void test_auto_k_matches_sweep(void) {
    test_rng r = {99};
    int infeasible = 0, multi = 0;
    for (int it = 0; it < 120; it++) {
        test_chain_spec sp = {.n = 1 + (size_t)(it % 14), .max_bytes = 50,
                              .overheads = it % 2, .grad_sizes = it % 3 == 0,
                              .zero_sizes = it % 7 == 0, .int_times = it % 2};
        remat_chain *c = test_random_chain(&r, &sp);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = test_rng_range(&r, c->input_bytes, peak);
        uint32_t best = 0;
        double best_t = 0;
        uint64_t min_peak = UINT64_MAX;
        for (uint32_t k = 1; k <= c->n; k++) {
            remat_schedule *s = NULL;
            remat_error e;
            remat_status st = solve_k(c, REMAT_MAX_BYTES - 1, k, &s, &e);
            if (st != REMAT_OK) TEST_FAIL_("K=%u: %s", k, e.message);
            ASSERT_TRUE(test_schedule_ok(c, s, REMAT_MAX_BYTES - 1));
            if (s->peak_bytes < min_peak) min_peak = s->peak_bytes;
            if (s->peak_bytes <= m && (best == 0 || s->time < best_t - 1e-9 * (1 + best_t)))
                best = k, best_t = s->time; /* ties (within rounding) to fewer segments */
            remat_schedule_free(s);
        }
        remat_schedule *s = NULL;
        remat_error e;
        remat_status st = solve_k(c, m, 0, &s, &e);
        if (best == 0) {
            ASSERT_EQ_INT(st, REMAT_E_INFEASIBLE);
            ASSERT_EQ_U64(e.min_memory, min_peak);
            infeasible++;
        } else {
            ASSERT_EQ_INT(st, REMAT_OK);
            ASSERT_TRUE(test_schedule_ok(c, s, m));
            ASSERT_NEAR(s->time, best_t, 1e-9 * (1 + best_t));
            remat_schedule *f = NULL;
            ASSERT_STATUS(solve_k(c, m, best, &f, NULL), REMAT_OK);
            ASSERT_EQ_U64(f->n_ops, s->n_ops);
            for (size_t k = 0; k < s->n_ops; k++)
                ASSERT_TRUE(f->ops[k].kind == s->ops[k].kind && f->ops[k].index == s->ops[k].index);
            multi += best > 1;
            remat_schedule_free(f);
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
    ASSERT_TRUE(infeasible > 0);
    ASSERT_TRUE(multi > 0);
}

/* Choosing K on a long chain stays fast: all K cost O(n sqrt n) together. */
static void test_long_chain(void) {
    test_rng r = {1};
    test_chain_spec sp = {.n = 20000, .max_bytes = 1000, .overheads = 1};
    remat_chain *c = test_random_chain(&r, &sp);
    uint64_t peak;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(solve_k(c, peak / 8, 0, &s, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, peak / 8));
    remat_schedule_free(s);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"two_segments_by_hand", test_two_segments_by_hand},
    {"torch_split", test_torch_split},
    {"one_segment_is_store_all", test_one_segment_is_store_all},
    {"bad_k", test_bad_k},
    {"auto_k_matches_sweep", test_auto_k_matches_sweep},
    {"long_chain", test_long_chain},
};
TEST_MAIN(cases)
