/* revolve: the thesis' precise-cost AD-model DP (src/solvers/revolve.c).
 * Checked against the simulator, hand-worked plans, an independent
 * brute-force enumeration of AD-model plans, and the classic binomial
 * (Griewank-Walther) optimum on homogeneous chains. */
#include <stdlib.h>

#include "common/testlib.h"
#include "solvers/revolve_internal.h"
#include "test.h"

static remat_solve_options rv_opts(uint64_t memory, uint64_t bucket, remat_revolve_mode mode) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_REVOLVE;
    o.memory = memory;
    o.bucket_bytes = bucket;
    o.revolve_mode = mode;
    return o;
}

/* A chain of n stages with the given per-stage values (same for all stages). */
static remat_chain *flat_chain(size_t n, uint64_t in, uint64_t out, uint64_t saved, uint64_t grad,
                               uint64_t in_grad, double fwd, double bwd) {
    remat_stage st[64];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        st[i].out_bytes = out;
        st[i].saved_bytes = saved;
        st[i].grad_bytes = grad;
        st[i].fwd_time = fwd;
        st[i].bwd_time = bwd;
    }
    remat_chain *c = NULL;
    if (remat_chain_create("flat", in, in_grad, st, n, &c, NULL) != REMAT_OK) return NULL;
    return c;
}

/* Ops as text, joined by ", ". */
static void ops_text(const remat_schedule *s, char *buf, size_t cap) {
    test_ops_text(s, ", ", buf, cap);
}

static uint64_t sim_peak(const remat_chain *c, const remat_schedule *s) {
    remat_sim_result *r = NULL;
    uint64_t p = UINT64_MAX;
    if (remat_simulate(c, s, NULL, &r, NULL) == REMAT_OK && r->valid) p = r->peak_bytes;
    remat_sim_result_free(r);
    return p;
}

/* ---- independent brute force: every AD-model plan of (i, j), Pareto sets ---- */

typedef struct bf_point { uint64_t peak; double cost; } bf_point;
typedef struct bf_set { size_t n; bf_point v[4096]; } bf_set;

static void bf_add(bf_set *s, uint64_t peak, double cost) {
    for (size_t k = 0; k < s->n; k++)
        if (s->v[k].peak <= peak && s->v[k].cost <= cost) return; /* dominated */
    size_t w = 0;
    for (size_t k = 0; k < s->n; k++)
        if (!(peak <= s->v[k].peak && cost <= s->v[k].cost)) s->v[w++] = s->v[k];
    s->n = w;
    if (s->n < sizeof s->v / sizeof *s->v) s->v[s->n++] = (bf_point){peak, cost};
}

static double fwd_t(const remat_chain *c, size_t l) { return c->stages[l - 1].fwd_time; }
static double bwd_t(const remat_chain *c, size_t l) { return c->stages[l - 1].bwd_time; }
static uint64_t fo_b(const remat_chain *c, size_t l) { return c->stages[l - 1].fwd_overhead; }
static uint64_t bo_b(const remat_chain *c, size_t l) { return c->stages[l - 1].bwd_overhead; }
static uint64_t mx(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Memory beside `outside` while the forward of l runs in a sweep from a[i], holding d[j]. */
static uint64_t bf_fwd(const remat_chain *c, size_t i, size_t j, size_t l) {
    return remat_chain_d_bytes(c, j) + (l == i + 1 ? 0 : remat_chain_a_bytes(c, l - 1)) +
           remat_chain_a_bytes(c, l) + fo_b(c, l);
}

/* Peak of "Fall t, B t" with h bytes of a[t-1] inside. */
static uint64_t bf_back(const remat_chain *c, size_t t, uint64_t h) {
    uint64_t base = remat_chain_d_bytes(c, t) + h + remat_chain_abar_bytes(c, t);
    return mx(base + fo_b(c, t), base + remat_chain_d_bytes(c, t - 1) + bo_b(c, t));
}

static bf_set *bf_sets; /* [(n+1)^2] */
static size_t bf_n;
#define BF(i, j) (&bf_sets[(i) * (bf_n + 1) + (j)])

static void bf_solve(const remat_chain *c) {
    bf_n = c->n;
    bf_sets = calloc((bf_n + 1) * (bf_n + 1), sizeof *bf_sets);
    for (size_t len = 1; len <= bf_n; len++)
        for (size_t i = 0; i + len <= bf_n; i++) {
            size_t j = i + len;
            bf_set *s = BF(i, j);
            /* the quadratic plan, stage by stage */
            uint64_t qp = 0;
            double qc = 0;
            for (size_t t = j; t > i; t--) {
                for (size_t l = i + 1; l < t; l++) qp = mx(qp, bf_fwd(c, i, t, l)), qc += fwd_t(c, l);
                qp = mx(qp, bf_back(c, t, t - 1 > i ? remat_chain_a_bytes(c, t - 1) : 0));
                qc += fwd_t(c, t) + bwd_t(c, t);
            }
            bf_add(s, qp, qc);
            uint64_t sw = 0;
            double sc = 0;
            for (size_t k = i + 1; k < j; k++) {
                sw = mx(sw, bf_fwd(c, i, j, k));
                sc += fwd_t(c, k);
                const bf_set *r = BF(k, j), *l = BF(i, k);
                for (size_t x = 0; x < r->n; x++)
                    for (size_t y = 0; y < l->n; y++)
                        bf_add(s, mx(sw, mx(remat_chain_a_bytes(c, k) + r->v[x].peak, l->v[y].peak)),
                               sc + r->v[x].cost + l->v[y].cost);
            }
        }
}

/* Least time of a plan within `memory` (bytes, a[0] included); -1 when none. */
static double bf_best(const remat_chain *c, uint64_t memory) {
    double best = -1;
    if (memory < c->input_bytes) return -1;
    const bf_set *s = BF(0, c->n);
    for (size_t k = 0; k < s->n; k++)
        if (s->v[k].peak <= memory - c->input_bytes && (best < 0 || s->v[k].cost < best))
            best = s->v[k].cost;
    return best;
}

/* ---- tests ---- */

/* 3 stages, unit sizes, no gradients: memory 4 holds a[0] and both
 * checkpoints; memory 3 holds only a[1] (a[2] is swept and recomputed), memory
 * 2 none, and "Fall 2" needs a[0], a[1] and abar[2]. */
static void test_golden_three_stages(void) {
    remat_chain *c = flat_chain(3, 1, 1, 1, 0, 0, 1, 1);
    ASSERT_TRUE(c != NULL);
    static const struct { uint64_t mem; double time; const char *ops; } want[] = {
        {4, 8, "Fck 1, Fck 2, Fall 3, B 3, Fall 2, B 2, Fall 1, B 1"},
        {3, 9, "Fck 1, Fn 2, Fall 3, B 3, Fck 1, Fall 2, B 2, Fall 1, B 1"},
    };
    for (size_t w = 0; w < 2; w++) {
        remat_solve_options o = rv_opts(want[w].mem, 1, REMAT_REVOLVE_PRECISE);
        remat_schedule *s = NULL;
        ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
        char buf[512];
        ops_text(s, buf, sizeof buf);
        ASSERT_TRUE(strcmp(buf, want[w].ops) == 0);
        ASSERT_NEAR(s->time, want[w].time, 1e-12);
        ASSERT_EQ_U64(s->peak_bytes, want[w].mem);
        ASSERT_TRUE(test_schedule_ok(c, s, want[w].mem));
        remat_schedule_free(s);
    }
    remat_solve_options o = rv_opts(2, 1, REMAT_REVOLVE_PRECISE);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(e.min_memory, 3); /* fixed bucket: the solver knows the least memory */
    ASSERT_TRUE(s == NULL);
    remat_chain_free(c);
}

/* A sub-segment can be infeasible while the longer segment holding it is not:
 * (0,2) must sweep stage 1 (overhead 100) holding d[2] (100 bytes), (0,3) can
 * sweep it holding the empty seed. The thesis' "a failed (i,j) fails every
 * (i,j'>j)" shortcut would call this chain infeasible. */
static void test_failure_not_monotone(void) {
    remat_stage st[3];
    memset(st, 0, sizeof st);
    for (int i = 0; i < 3; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%d", i + 1);
        st[i].out_bytes = st[i].saved_bytes = st[i].grad_bytes = 1;
        st[i].fwd_time = st[i].bwd_time = 1;
    }
    st[0].fwd_overhead = 100;
    st[1].grad_bytes = 100;
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_create("fail", 1, 1, st, 3, &c, NULL), REMAT_OK);
    remat_solve_options o = rv_opts(104, 1, REMAT_REVOLVE_PRECISE);
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
    char buf[512];
    ops_text(s, buf, sizeof buf);
    ASSERT_TRUE(strcmp(buf, "Fck 1, Fck 2, Fall 3, B 3, Fall 2, B 2, Fall 1, B 1") == 0);
    ASSERT_EQ_U64(s->peak_bytes, 104);
    ASSERT_TRUE(test_schedule_ok(c, s, 104));
    remat_schedule_free(s);
    remat_error e;
    o.memory = 103;
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(e.min_memory, 104);
    remat_chain_free(c);
}

/* The classic recurrence (Gruslys et al. / Griewank): forward steps to
 * reverse t steps with s snapshots besides the start. */
static long long classic(int t, int s, long long memo[40][40]) {
    if (t == 1) return 0;
    if (s == 1) return (long long)t * (t - 1) / 2;
    if (memo[t][s] >= 0) return memo[t][s];
    long long best = -1;
    for (int y = 1; y < t; y++) {
        long long v = y + classic(t - y, s - 1, memo) + classic(y, s, memo);
        if (best < 0 || v < best) best = v;
    }
    return memo[t][s] = best;
}

static long long binom(int a, int b) {
    long long r = 1;
    for (int k = 1; k <= b; k++) r = r * (a - b + k) / k;
    return r;
}

/* Griewank-Walther closed form: t(l, s) = r l - beta(s+1, r-1), beta(s, r) = C(s+r, s),
 * r the least with beta(s, r) >= l. */
static long long binomial_optimum(int l, int s) {
    int r = 0;
    while (binom(s + r, s) < l) r++;
    return (long long)r * l - (r ? binom(s + 1 + r - 1, s + 1) : 0);
}

static void test_homogeneous_binomial(void) {
    long long memo[40][40];
    memset(memo, -1, sizeof memo);
    for (int l = 1; l <= 30; l++)
        for (int s = 1; s <= 8; s++) ASSERT_EQ_INT(classic(l, s, memo), binomial_optimum(l, s));
    /* Unit sizes, no gradients: a budget of m beside a[0] leaves m - 1
     * snapshots (the swept value needs one), so memory = s + 2. */
    for (size_t n = 1; n <= 16; n++) {
        remat_chain *c = flat_chain(n, 1, 1, 1, 0, 0, 1, 1);
        ASSERT_TRUE(c != NULL);
        remat_schedule *s = NULL;
        remat_solve_options o = rv_opts(2, 1, REMAT_REVOLVE_PRECISE);
        ASSERT_STATUS(remat__solve_revolve(c, &o, &s, NULL), n == 1 ? REMAT_OK : REMAT_E_INFEASIBLE);
        remat_schedule_free(s);
        for (int snaps = 1; snaps <= (int)n; snaps++) {
            o = rv_opts((uint64_t)snaps + 2, 1, REMAT_REVOLVE_PRECISE);
            s = NULL;
            ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
            ASSERT_TRUE(test_schedule_ok(c, s, o.memory));
            ASSERT_NEAR(s->time, (double)(binomial_optimum((int)n, snaps) + 2 * (long long)n), 1e-9);
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
}

/* Bucketing rounds each checkpoint up on its own but the quadratic plan's
 * steps as a whole: with 10-byte buckets and 1-byte values only it fits in one
 * bucket, so every action fails and the fallback must be taken. */
static void test_quadratic_fallback(void) {
    remat_chain *c = flat_chain(4, 1, 1, 1, 0, 0, 1, 1);
    ASSERT_TRUE(c != NULL);
    remat_solve_options o = rv_opts(11, 10, REMAT_REVOLVE_PRECISE);
    remat_schedule *s = NULL;
    remat__revolve_stats st;
    ASSERT_STATUS(remat__revolve_solve_stats(c, &o, &s, &st, NULL), REMAT_OK);
    ASSERT_EQ_INT(st.buckets, 1);
    ASSERT_EQ_INT(st.quad_nodes, 1);
    ASSERT_EQ_INT(st.ckpt_nodes, 0);
    char buf[512];
    ops_text(s, buf, sizeof buf);
    ASSERT_TRUE(strcmp(buf, "Fck 1, Fn 2, Fn 3, Fall 4, B 4, Fck 1, Fn 2, Fall 3, B 3, "
                            "Fck 1, Fall 2, B 2, Fall 1, B 1") == 0);
    ASSERT_NEAR(s->time, 6 + 8, 1e-12); /* 3+2+1 sweeps, then Fall+B per stage */
    ASSERT_TRUE(test_schedule_ok(c, s, 11));
    ASSERT_EQ_U64(s->peak_bytes, 3);
    remat_schedule_free(s);
    /* With exact bytes, checkpoints fit instead. */
    o.bucket_bytes = 1;
    ASSERT_STATUS(remat__revolve_solve_stats(c, &o, &s, &st, NULL), REMAT_OK);
    ASSERT_EQ_INT(st.quad_nodes, 0);
    ASSERT_TRUE(st.ckpt_nodes > 0);
    ASSERT_TRUE(s->time < 14);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Exact bytes: the DP equals the brute-force optimum of the AD model, its
 * schedules pass the simulator at the predicted time and peak. */
static void test_matches_brute_force(void) {
    test_rng rng = {0xbeef};
    int solved = 0, infeasible = 0;
    for (int it = 0; it < 150; it++) {
        test_chain_spec spec = {.n = 1 + (size_t)test_rng_range(&rng, 0, 6), .max_bytes = 20,
                                .overheads = it % 2, .grad_sizes = it % 3 == 0,
                                .zero_sizes = it % 5 == 0, .int_times = it % 4 == 0};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t top = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &top, NULL, NULL), REMAT_OK);
        bf_solve(c);
        for (int q = 0; q < 4; q++) {
            uint64_t mem = test_rng_range(&rng, c->input_bytes, top + 20);
            double want = bf_best(c, mem);
            remat_solve_options o = rv_opts(mem, 1, REMAT_REVOLVE_PRECISE);
            o.threads = 1 + (unsigned)(it % 3);
            remat_schedule *s = NULL;
            remat_error e;
            remat_status rc = remat__solve_revolve(c, &o, &s, &e);
            if (want < 0) {
                ASSERT_STATUS(rc, REMAT_E_INFEASIBLE);
                ASSERT_TRUE(e.min_memory > mem && bf_best(c, e.min_memory) >= 0 &&
                            bf_best(c, e.min_memory - 1) < 0);
                infeasible++;
                continue;
            }
            ASSERT_STATUS(rc, REMAT_OK);
            ASSERT_NEAR(s->time, want, 1e-9 * (1 + want));
            ASSERT_TRUE(test_schedule_ok(c, s, mem));
            ASSERT_EQ_U64(s->peak_bytes, sim_peak(c, s));
            remat_schedule_free(s);
            solved++;
        }
        free(bf_sets);
        remat_chain_free(c);
    }
    ASSERT_TRUE(solved > 200 && infeasible > 30);
}

/* Hundreds of chains, tight and loose limits, default and odd buckets, all
 * modes: every schedule passes the simulator within the limit, predicted
 * time equals the simulated one and the predicted peak the simulated one. */
static void test_random_schedules_valid(void) {
    test_rng rng = {42};
    int ok = 0;
    for (int it = 0; it < 300; it++) {
        test_chain_spec spec = {.n = 1 + (size_t)test_rng_range(&rng, 0, 24),
                                .max_bytes = 1 + test_rng_range(&rng, 0, 5000),
                                .overheads = it % 2, .grad_sizes = (it / 2) % 2,
                                .zero_sizes = it % 7 == 0, .int_times = it % 3 == 0};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t top = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &top, NULL, NULL), REMAT_OK);
        uint64_t mem = test_rng_range(&rng, c->input_bytes, top + top / 4);
        static const uint64_t buckets[] = {0, 1, 3, 64};
        remat_solve_options o = rv_opts(mem, buckets[it % 4], (remat_revolve_mode)(it % 3));
        remat_schedule *s = NULL;
        remat_status rc = remat__solve_revolve(c, &o, &s, NULL);
        ASSERT_TRUE(rc == REMAT_OK || rc == REMAT_E_INFEASIBLE);
        if (rc == REMAT_OK) {
            ASSERT_TRUE(test_schedule_ok(c, s, mem));
            ASSERT_EQ_U64(s->peak_bytes, sim_peak(c, s));
            ok++;
        }
        remat_schedule_free(s);
        /* With room to spare, every stage is checkpointed: each forward runs
         * once in the sweep and once before its backward. */
        uint64_t roomy = 4 * top + 4 * spec.max_bytes;
        o = rv_opts(roomy, 0, REMAT_REVOLVE_PRECISE);
        ASSERT_STATUS(remat__solve_revolve(c, &o, &s, NULL), REMAT_OK);
        ASSERT_TRUE(test_schedule_ok(c, s, roomy));
        double least = 0;
        for (size_t l = 1; l <= c->n; l++) least += fwd_t(c, l) * (l < c->n ? 2 : 1) + bwd_t(c, l);
        ASSERT_NEAR(s->time, least, 1e-9 * (1 + least));
        remat_schedule_free(s);
        remat_chain_free(c);
    }
    ASSERT_TRUE(ok > 150);
}

/* Uniform plans are feasible in the precise model at the same buckets, so the
 * precise plan is never slower on the real chain, as long as the uniform plan
 * is one the precise DP may pick: the thesis takes the quadratic fallback only
 * where every checkpoint fails, and rounding can make that differ between
 * sizes (never between times). */
static void test_uniform_modes_never_better(void) {
    test_rng rng = {7};
    int compared = 0;
    for (int it = 0; it < 120; it++) {
        test_chain_spec spec = {.n = 2 + (size_t)test_rng_range(&rng, 0, 14), .max_bytes = 1000,
                                .overheads = it % 2, .grad_sizes = 1, .int_times = it % 2};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t top = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &top, NULL, NULL), REMAT_OK);
        uint64_t mem = test_rng_range(&rng, top / 3, top);
        remat_schedule *p = NULL, *u = NULL;
        remat_solve_options o = rv_opts(mem, 0, REMAT_REVOLVE_PRECISE);
        remat_status rp = remat__solve_revolve(c, &o, &p, NULL);
        for (int mode = 1; mode <= 2; mode++) {
            o.revolve_mode = (remat_revolve_mode)mode;
            remat__revolve_stats st;
            remat_status ru = remat__revolve_solve_stats(c, &o, &u, &st, NULL);
            ASSERT_TRUE(ru == REMAT_OK || ru == REMAT_E_INFEASIBLE);
            if (ru != REMAT_OK) continue;
            ASSERT_STATUS(rp, REMAT_OK); /* uniform feasible => precise feasible */
            ASSERT_TRUE(test_schedule_ok(c, u, mem));
            ASSERT_EQ_U64(u->peak_bytes, sim_peak(c, u));
            if (mode == REMAT_REVOLVE_UNIFORM_COST || st.quad_nodes == 0)
                ASSERT_LE_DBL(p->time, u->time, 1e-9 * (1 + u->time));
            remat_schedule_free(u);
            u = NULL;
            compared++;
        }
        remat_schedule_free(p);
        remat_chain_free(c);
    }
    ASSERT_TRUE(compared > 100);
}

/* Feasibility is monotone: in a bucket that divides the old one and in a
 * larger memory. So is the time when the coarser (or smaller) plan has no
 * quadratic node, since the finer (larger) DP can then pick the same plan. */
static void test_bucket_and_memory_monotone(void) {
    test_rng rng = {99};
    for (int it = 0; it < 60; it++) {
        test_chain_spec spec = {.n = 2 + (size_t)test_rng_range(&rng, 0, 12), .max_bytes = 4000,
                                .overheads = 1, .grad_sizes = it % 2, .int_times = 0};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t top = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &top, NULL, NULL), REMAT_OK);
        uint64_t mem = test_rng_range(&rng, top / 3, top);
        double prev = -1;
        int failed = 0;
        for (uint64_t b = 1; b <= 64; b *= 4) {
            remat_solve_options o = rv_opts(mem, b, REMAT_REVOLVE_PRECISE);
            remat_schedule *s = NULL;
            remat__revolve_stats st;
            remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, NULL);
            if (rc != REMAT_OK) {
                ASSERT_STATUS(rc, REMAT_E_INFEASIBLE);
                failed = 1; /* coarser buckets must fail too */
                continue;
            }
            ASSERT_TRUE(!failed);
            if (st.quad_nodes == 0 && prev >= 0) ASSERT_LE_DBL(prev, s->time, 1e-9 * (1 + prev));
            prev = s->time;
            remat_schedule_free(s);
        }
        prev = -1;
        int feasible = 0;
        size_t prev_quad = 0;
        for (uint64_t m = mem / 2; m <= top; m += (top - mem / 2) / 6 + 1) {
            remat_solve_options o = rv_opts(m, 16, REMAT_REVOLVE_PRECISE);
            remat_schedule *s = NULL;
            remat__revolve_stats st;
            if (remat__revolve_solve_stats(c, &o, &s, &st, NULL) != REMAT_OK) {
                ASSERT_TRUE(!feasible);
                continue;
            }
            feasible = 1;
            if (prev >= 0 && prev_quad == 0) ASSERT_LE_DBL(s->time, prev, 1e-9 * (1 + prev));
            prev = s->time;
            prev_quad = st.quad_nodes;
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
}

/* Threads change nothing: the same table, the same plan. */
static void test_threads_same_plan(void) {
    test_rng rng = {5};
    test_chain_spec spec = {.n = 40, .max_bytes = 1 << 20, .overheads = 1, .grad_sizes = 1};
    remat_chain *c = test_random_chain(&rng, &spec);
    uint64_t top = 0;
    ASSERT_STATUS(remat_store_all_cost(c, &top, NULL, NULL), REMAT_OK);
    remat_solve_options o = rv_opts(top / 3, 0, REMAT_REVOLVE_PRECISE);
    o.threads = 1;
    remat_schedule *a = NULL, *b = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &a, NULL), REMAT_OK);
    o.threads = 4;
    ASSERT_STATUS(remat_solve(c, &o, &b, NULL), REMAT_OK);
    ASSERT_EQ_U64(a->n_ops, b->n_ops);
    ASSERT_TRUE(test_same_ops(a, b));
    ASSERT_TRUE(a->time == b->time);
    ASSERT_TRUE(test_schedule_ok(c, a, o.memory));
    remat_schedule_free(a);
    remat_schedule_free(b);
    remat_chain_free(c);
}

static void test_bad_options(void) {
    remat_chain *c = flat_chain(3, 5, 1, 1, 0, 0, 1, 1);
    ASSERT_TRUE(c != NULL);
    remat_schedule *s = NULL;
    remat_error e;
    remat_solve_options o = rv_opts(0, 0, REMAT_REVOLVE_PRECISE); /* memory 0, default bucket */
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(s == NULL);
    o = rv_opts(100, 0, (remat_revolve_mode)7);
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    o = rv_opts(100, REMAT_MAX_BYTES, REMAT_REVOLVE_PRECISE);
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat__solve_revolve(NULL, &o, &s, &e), REMAT_E_INPUT);
    o = rv_opts(100, 1, REMAT_REVOLVE_PRECISE);
    o.max_work_bytes = 64; /* too small for any table */
    ASSERT_STATUS(remat__solve_revolve(c, &o, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "revolve");
    /* A huge budget in 1-byte buckets: refused before allocating. */
    o = rv_opts((uint64_t)1 << 50, 1, REMAT_REVOLVE_PRECISE);
    remat_chain *big = flat_chain(3, 1, (uint64_t)1 << 40, (uint64_t)1 << 41, 1, 1, 1, 1);
    ASSERT_STATUS(remat__solve_revolve(big, &o, &s, &e), REMAT_E_TOO_LARGE);
    remat_chain_free(big);
    /* memory 0 with an all-zero chain: bucket 1, a valid schedule. */
    remat_chain *z = flat_chain(3, 0, 0, 0, 0, 0, 1, 1);
    o = rv_opts(0, 0, REMAT_REVOLVE_PRECISE);
    ASSERT_STATUS(remat_solve(z, &o, &s, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(z, s, 0));
    remat_schedule_free(s);
    remat_chain_free(z);
    remat_chain_free(c);
}

/* The dispatcher's min-memory answer for the default bucket is feasible. */
static void test_dispatcher_min_memory(void) {
    test_rng rng = {3};
    test_chain_spec spec = {.n = 8, .max_bytes = 1000, .overheads = 1, .grad_sizes = 1};
    remat_chain *c = test_random_chain(&rng, &spec);
    remat_solve_options o = rv_opts(c->input_bytes, 0, REMAT_REVOLVE_PRECISE);
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(e.min_memory > c->input_bytes);
    uint64_t need = e.min_memory;
    o.memory = need - 1; /* the boundary the solver's own bisection found */
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    o.memory = need;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, o.memory));
    remat_schedule_free(s);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"golden_three_stages", test_golden_three_stages},
    {"failure_not_monotone", test_failure_not_monotone},
    {"homogeneous_binomial", test_homogeneous_binomial},
    {"quadratic_fallback", test_quadratic_fallback},
    {"matches_brute_force", test_matches_brute_force},
    {"random_schedules_valid", test_random_schedules_valid},
    {"uniform_modes_never_better", test_uniform_modes_never_better},
    {"bucket_and_memory_monotone", test_bucket_and_memory_monotone},
    {"threads_same_plan", test_threads_same_plan},
    {"bad_options", test_bad_options},
    {"dispatcher_min_memory", test_dispatcher_min_memory},
};
TEST_MAIN(cases)
