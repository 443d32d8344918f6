/* exact: golden cases, brute-force agreement on tiny chains, limits. */
#include <stdlib.h>

#include "common/testlib.h"
#include "remat/remat.h"
#include "test.h"

static remat_chain *make_chain(uint64_t input, const uint64_t *a, const uint64_t *abar,
                               const double *f, const double *b, size_t n) {
    remat_stage st[16];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        st[i].fwd_time = f[i];
        st[i].bwd_time = b[i];
        st[i].out_bytes = a[i];
        st[i].saved_bytes = abar[i];
        st[i].grad_bytes = a[i];
    }
    remat_chain *c = NULL;
    if (remat_chain_create("t", input, input, st, n, &c, NULL) != REMAT_OK) return NULL;
    return c;
}

static remat_status solve(const remat_chain *c, remat_algorithm alg, uint64_t m, int no_del,
                          remat_schedule **s, remat_error *e) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = alg;
    o.memory = m;
    o.exact_no_del = no_del;
    o.slots = 0;
    return remat_solve(c, &o, s, e);
}

static int count_kind(const remat_schedule *s, remat_op_kind k) {
    int n = 0;
    for (size_t i = 0; i < s->n_ops; i++) n += s->ops[i].kind == k;
    return n;
}

/* Worked by hand (docs/exact.md): M = 27. Storing everything needs 31 at B 4.
 * With Del: Fck 1, Fall 2, Del a[1], Fall 3, Fall 4, B 4, B 3, Fall 1, B 2, B 1
 * costs 45 + f1 = 47 with peak 25. Without Del, a[1] can only go by B 2 or by
 * running F2 again, so the best is 45 + f1 + f2 = 48. */
static remat_chain *del_gain_chain(void) {
    static const uint64_t a[] = {4, 1, 3, 4}, abar[] = {6, 3, 9, 6};
    static const double f[] = {2, 1, 3, 4}, b[] = {9, 8, 9, 9};
    return make_chain(4, a, abar, f, b, 4);
}

static void test_del_beats_no_del(void) {
    remat_chain *c = del_gain_chain();
    ASSERT_TRUE(c);
    remat_schedule *s = NULL, *t = NULL;
    remat_error e;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, 27, 0, &s, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, 27));
    ASSERT_NEAR(s->time, 47, 1e-12);
    ASSERT_EQ_U64(s->peak_bytes, 25);
    ASSERT_TRUE(count_kind(s, REMAT_OP_DEL) >= 1);
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, 27, 1, &t, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, t, 27));
    ASSERT_NEAR(t->time, 48, 1e-12);
    ASSERT_EQ_INT(count_kind(t, REMAT_OP_DEL), 0);
    remat_schedule_free(s);
    remat_schedule_free(t);
    /* The persistent optimum cannot use the Del either. */
    remat_status st = solve(c, REMAT_ALG_OPTIMAL, 27, 0, &s, &e);
    if (st == REMAT_OK) {
        ASSERT_TRUE(test_schedule_ok(c, s, 27));
        ASSERT_LE_DBL(48, s->time, 1e-9);
        remat_schedule_free(s);
    } else if (!strstr(e.message, "not implemented")) {
        TEST_FAIL_("optimal failed: %s", e.message);
    }
    remat_chain_free(c);
}

static void test_store_all_when_loose(void) {
    static const uint64_t a[] = {4, 1, 3, 4}, abar[] = {6, 3, 9, 6};
    static const double f[] = {2, 1, 3, 4}, b[] = {9, 8, 9, 9};
    remat_chain *c = make_chain(4, a, abar, f, b, 4);
    ASSERT_TRUE(c);
    uint64_t peak;
    double t;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, &t, NULL), REMAT_OK);
    ASSERT_EQ_U64(peak, 31);
    remat_schedule *s = NULL;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, peak, 0, &s, NULL), REMAT_OK);
    ASSERT_NEAR(s->time, t, 1e-12);
    ASSERT_TRUE(test_schedule_ok(c, s, peak));
    remat_schedule_free(s);
    /* One byte less: some forward must run twice, the cheapest is F2. */
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, peak - 1, 0, &s, NULL), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, peak - 1));
    ASSERT_NEAR(s->time, t + 1, 1e-12);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_infeasible_min_memory(void) {
    remat_chain *c = del_gain_chain();
    ASSERT_TRUE(c);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, 5, 0, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(s == NULL);
    uint64_t need = e.min_memory;
    ASSERT_TRUE(need > 5);
    ASSERT_CONTAINS(e.message, "exact");
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, need, 0, &s, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, need));
    remat_schedule_free(s);
    s = NULL;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, need - 1, 0, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(e.min_memory, need);
    /* remat_min_memory's bisection agrees with the search's own answer. */
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_EXACT;
    uint64_t m = 0;
    ASSERT_STATUS(remat_min_memory(c, &o, &m, NULL), REMAT_OK);
    ASSERT_EQ_U64(m, need);
    remat_chain_free(c);
}

static void test_refuses_large(void) {
    test_rng r = {3};
    test_chain_spec sp = {.n = 13, .max_bytes = 10, .int_times = 1};
    remat_chain *c = test_random_chain(&r, &sp);
    uint64_t peak;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, peak, 0, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "at most 12");
    remat_chain_free(c);
    /* The work cap applies below the stage limit too. */
    sp.n = 8;
    c = test_random_chain(&r, &sp);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_EXACT;
    o.memory = REMAT_MAX_BYTES - 1;
    o.max_work_bytes = 1000;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "exact: state table");
    remat_chain_free(c);
}

/* The largest chain accepted, with a limit that forces recomputation. */
static void test_twelve_stages(void) {
    test_rng r = {11};
    test_chain_spec sp = {.n = 12, .max_bytes = 10, .int_times = 1};
    remat_chain *c = test_random_chain(&r, &sp);
    uint64_t peak;
    double t;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, &t, NULL), REMAT_OK);
    remat_schedule *s = NULL;
    ASSERT_STATUS(solve(c, REMAT_ALG_EXACT, peak, 0, &s, NULL), REMAT_OK);
    ASSERT_NEAR(s->time, t, 1e-9);
    remat_schedule_free(s);
    uint64_t m = peak * 3 / 4;
    remat_error e;
    remat_status st = solve(c, REMAT_ALG_EXACT, m, 0, &s, &e);
    if (st == REMAT_OK) {
        ASSERT_TRUE(test_schedule_ok(c, s, m));
        ASSERT_TRUE(s->time > t);
        remat_schedule_free(s);
    } else {
        ASSERT_EQ_INT(st, REMAT_E_INFEASIBLE);
        ASSERT_TRUE(e.min_memory > m);
    }
    remat_chain_free(c);
}

/* ---- An independent reference: Bellman-Ford over every op, no pruning. ---- */

typedef struct ref_state {
    int b;
    uint8_t v[8]; /* 0 none, 1 a, 2 abar; every index, even above b */
} ref_state;

static size_t ref_count(size_t n) {
    size_t k = n + 1;
    for (size_t j = 0; j <= n; j++) k *= 3;
    return k;
}

static size_t ref_id(const ref_state *s, size_t n) {
    size_t id = (size_t)s->b;
    for (size_t j = 0; j <= n; j++) id = id * 3 + s->v[j];
    return id;
}

static void ref_decode(size_t id, size_t n, ref_state *s) {
    for (size_t j = n + 1; j-- > 0;) {
        s->v[j] = (uint8_t)(id % 3);
        id /= 3;
    }
    s->b = (int)id;
}

static uint64_t vbytes(const remat_chain *c, size_t j, int h) {
    return h == 1 ? remat_chain_a_bytes(c, j) : h == 2 ? remat_chain_abar_bytes(c, j) : 0;
}

static uint64_t ref_mem(const remat_chain *c, const ref_state *s) {
    uint64_t m = remat_chain_d_bytes(c, (size_t)s->b);
    for (size_t j = 0; j <= c->n; j++) m += vbytes(c, j, s->v[j]);
    return m;
}

/* op: 0 Fn, 1 Fck, 2 Fall, 3 B, 4 Del a, 5 Del abar; SPEC section 2 table. */
static int ref_apply(const remat_chain *c, const ref_state *s, int op, size_t i, ref_state *t,
                     uint64_t *during, double *time) {
    *t = *s;
    uint64_t mem = ref_mem(c, s);
    const remat_stage *sg = i >= 1 ? &c->stages[i - 1] : NULL;
    if (op <= 2) {
        if (i < 1 || (int)i > s->b || s->v[i - 1] == 0) return 0;
        int want = op == 2 ? 2 : 1;
        uint64_t add = s->v[i] >= want ? 0 : vbytes(c, i, want);
        *during = mem + add + sg->fwd_overhead;
        *time = sg->fwd_time;
        if (s->v[i] < want) t->v[i] = (uint8_t)want;
        if (op == 0 && s->v[i - 1] == 1) t->v[i - 1] = 0;
        return 1;
    }
    if (op == 3) {
        if (i < 1 || (int)i != s->b || s->v[i] != 2 || s->v[i - 1] == 0) return 0;
        *during = mem + remat_chain_d_bytes(c, i - 1) + sg->bwd_overhead;
        *time = sg->bwd_time;
        t->b = (int)i - 1;
        t->v[i] = 0;
        if (s->v[i - 1] == 1) t->v[i - 1] = 0;
        return 1;
    }
    int want = op == 4 ? 1 : 2;
    if (s->v[i] != want) return 0;
    *during = mem;
    *time = 0;
    t->v[i] = 0;
    return 1;
}

/* Best time within `limit` (by_peak = 0) or the smallest peak (by_peak = 1);
 * returns 0 when the end is unreachable. */
static int reference(const remat_chain *c, uint64_t limit, int no_del, int by_peak,
                     double *best_time, uint64_t *best_peak) {
    size_t n = c->n, N = ref_count(n);
    double *dist = malloc(N * sizeof *dist);
    uint64_t *pk = malloc(N * sizeof *pk);
    if (!dist || !pk) exit(3);
    for (size_t k = 0; k < N; k++) dist[k] = INFINITY, pk[k] = UINT64_MAX;
    ref_state s0;
    memset(&s0, 0, sizeof s0);
    s0.b = (int)n;
    s0.v[0] = 1;
    size_t start = ref_id(&s0, n);
    dist[start] = 0;
    pk[start] = c->input_bytes;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t u = 0; u < N; u++) {
            if (by_peak ? pk[u] == UINT64_MAX : !(dist[u] < INFINITY)) continue;
            ref_state s, t;
            ref_decode(u, n, &s);
            for (int op = 0; op <= 5; op++) {
                if (no_del && op >= 4) continue;
                for (size_t i = 0; i <= n; i++) {
                    uint64_t during;
                    double tm;
                    if (!ref_apply(c, &s, op, i, &t, &during, &tm)) continue;
                    size_t v = ref_id(&t, n);
                    uint64_t p = during > pk[u] ? during : pk[u];
                    if (by_peak) {
                        if (p < pk[v]) pk[v] = p, changed = 1;
                    } else if (during <= limit && dist[u] + tm < dist[v]) {
                        dist[v] = dist[u] + tm;
                        changed = 1;
                    }
                }
            }
        }
    }
    ref_state g;
    memset(&g, 0, sizeof g);
    size_t goal = ref_id(&g, n); /* b = 0, nothing held: B 1 frees plain a[0] */
    int ok = by_peak ? pk[goal] != UINT64_MAX : dist[goal] < INFINITY;
    *best_time = dist[goal];
    *best_peak = pk[goal];
    free(dist);
    free(pk);
    return ok;
}

static void test_brute_force_tiny(void) {
    test_rng r = {2024};
    int checked = 0, infeasible = 0;
    for (int it = 0; it < 240; it++) {
        test_chain_spec sp = {.n = 1 + (size_t)(it % 4), .max_bytes = 6,
                              .overheads = it % 3 == 0, .grad_sizes = it % 2,
                              .zero_sizes = it % 5 == 0, .int_times = it % 4 != 3};
        remat_chain *c = test_random_chain(&r, &sp);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = test_rng_range(&r, c->input_bytes, peak);
        for (int no_del = 0; no_del <= 1; no_del++) {
            double rt;
            uint64_t rp, minp;
            double dummy;
            ASSERT_TRUE(reference(c, m, no_del, 1, &dummy, &minp)); /* store-all exists */
            int feas = reference(c, m, no_del, 0, &rt, &rp);
            remat_schedule *s = NULL;
            remat_error e;
            remat_status st = solve(c, REMAT_ALG_EXACT, m, no_del, &s, &e);
            if (feas) {
                if (st != REMAT_OK) TEST_FAIL_("it %d: exact failed (%s), reference %g", it, e.message, rt);
                ASSERT_TRUE(test_schedule_ok(c, s, m));
                ASSERT_NEAR(s->time, rt, 1e-9 * (1 + rt));
                if (no_del) ASSERT_EQ_INT(count_kind(s, REMAT_OP_DEL), 0);
                remat_schedule_free(s);
                ASSERT_LE_U64(minp, m);
            } else {
                ASSERT_EQ_INT(st, REMAT_E_INFEASIBLE);
                ASSERT_EQ_U64(e.min_memory, minp);
                ASSERT_TRUE(minp > m);
                infeasible++;
            }
            checked++;
        }
        remat_chain_free(c);
    }
    ASSERT_TRUE(checked == 480);
    ASSERT_TRUE(infeasible > 10); /* the limits do bite */
}

/* Del never hurts: exact <= exact_no_del, on slightly longer chains. */
static void test_del_never_hurts(void) {
    test_rng r = {77};
    int gains = 0;
    for (int it = 0; it < 150; it++) {
        test_chain_spec sp = {.n = 3 + (size_t)(it % 4), .max_bytes = 8, .int_times = 1,
                              .overheads = it % 2};
        remat_chain *c = test_random_chain(&r, &sp);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = test_rng_range(&r, c->input_bytes, peak);
        remat_schedule *s = NULL, *t = NULL;
        remat_error e, e2;
        remat_status a = solve(c, REMAT_ALG_EXACT, m, 0, &s, &e);
        remat_status b = solve(c, REMAT_ALG_EXACT, m, 1, &t, &e2);
        if (b == REMAT_OK) ASSERT_EQ_INT(a, REMAT_OK);
        if (a == REMAT_E_INFEASIBLE) ASSERT_LE_U64(e.min_memory, e2.min_memory);
        if (a == REMAT_OK && b == REMAT_OK) {
            ASSERT_LE_DBL(s->time, t->time, 1e-9);
            gains += s->time < t->time - 1e-9;
        }
        remat_schedule_free(s);
        remat_schedule_free(t);
        remat_chain_free(c);
    }
    ASSERT_TRUE(gains > 0);
}

static const test_case cases[] = {
    {"del_beats_no_del", test_del_beats_no_del},
    {"store_all_when_loose", test_store_all_when_loose},
    {"infeasible_min_memory", test_infeasible_min_memory},
    {"refuses_large", test_refuses_large},
    {"twelve_stages", test_twelve_stages},
    {"brute_force_tiny", test_brute_force_tiny},
    {"del_never_hurts", test_del_never_hurts},
};
TEST_MAIN(cases)
