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

/* ---- An independent reference: Bellman-Ford over every op, no pruning. ----
 * It reads the chain's fields itself (SPEC section 2's table), partial saves
 * and fall_overhead included, and shares no code with the library. */

typedef struct ref_state {
    int b;
    uint8_t v[8]; /* 0 none, 1 a, 2 + k abar made with option k; every index, even above b */
} ref_state;

/* Codes per index: none, a, and abar with each option of the chain's widest stage. */
static size_t ref_radix(const remat_chain *c) {
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->stages[i].n_options > k) k = c->stages[i].n_options;
    return 3 + k;
}

static size_t ref_count(const remat_chain *c) {
    size_t k = c->n + 1, r = ref_radix(c);
    for (size_t j = 0; j <= c->n; j++) k *= r;
    return k;
}

static size_t ref_id(const remat_chain *c, const ref_state *s) {
    size_t id = (size_t)s->b, r = ref_radix(c);
    for (size_t j = 0; j <= c->n; j++) id = id * r + s->v[j];
    return id;
}

static void ref_decode(const remat_chain *c, size_t id, ref_state *s) {
    size_t r = ref_radix(c);
    for (size_t j = c->n + 1; j-- > 0;) {
        s->v[j] = (uint8_t)(id % r);
        id /= r;
    }
    s->b = (int)id;
}

static uint64_t vbytes(const remat_chain *c, size_t j, int h) {
    if (h == 0) return 0;
    if (h == 1) return j == 0 ? c->input_bytes : c->stages[j - 1].out_bytes;
    const remat_stage *sg = &c->stages[j - 1];
    return h == 2 ? sg->saved_bytes : sg->options[h - 3].saved_bytes;
}

static uint64_t ref_mem(const remat_chain *c, const ref_state *s) {
    uint64_t m = remat_chain_d_bytes(c, (size_t)s->b);
    for (size_t j = 0; j <= c->n; j++) m += vbytes(c, j, s->v[j]);
    return m;
}

/* op: 0 Fn, 1 Fck, 2 + k Fall i/k, then B, Del a, Del abar. */
enum { REF_B = 100, REF_DEL_A, REF_DEL_ABAR };

/* B, Del a and Del abar from state s (t = *s on entry, mem its bytes), with
 * or without the stopped Fall: a v[i] of `stop` (-1: none) is a stopped
 * abar, whose B is the full save's. */
static int ref_apply_bdel(const remat_chain *c, const ref_state *s, int op, size_t i, int stop,
                          uint64_t mem, ref_state *t, uint64_t *during, double *time) {
    if (op == REF_B) {
        if (i < 1 || (int)i != s->b || s->v[i] < 2 || s->v[i - 1] == 0) return 0;
        const remat_stage *sg = &c->stages[i - 1];
        int k = s->v[i] == stop ? 0 : s->v[i] - 2;
        *during = mem + remat_chain_d_bytes(c, i - 1) +
                  (k ? sg->options[k - 1].bwd_overhead : sg->bwd_overhead);
        *time = k ? sg->options[k - 1].bwd_time : sg->bwd_time;
        t->b = (int)i - 1;
        t->v[i] = 0;
        if (s->v[i - 1] == 1) t->v[i - 1] = 0;
        return 1;
    }
    if (op == REF_DEL_A ? s->v[i] != 1 : s->v[i] < 2) return 0;
    *during = mem;
    *time = 0;
    t->v[i] = 0;
    return 1;
}

static int ref_apply(const remat_chain *c, const ref_state *s, int op, size_t i, ref_state *t,
                     uint64_t *during, double *time) {
    *t = *s;
    uint64_t mem = ref_mem(c, s);
    const remat_stage *sg = i >= 1 ? &c->stages[i - 1] : NULL;
    if (op < REF_B) {
        if (i < 1 || (int)i > s->b || s->v[i - 1] == 0) return 0;
        int k = op - 2; /* the option of a Fall */
        if (k > (int)sg->n_options) return 0;
        int fall = op >= 2, have = s->v[i];
        int adds = fall ? have < 2 : have == 0;
        uint64_t add = adds ? vbytes(c, i, fall ? op : 1) : 0;
        uint64_t ov = !fall ? sg->fwd_overhead
                      : k > 0 ? sg->options[k - 1].fall_overhead
                      : sg->has_fall_overhead ? sg->fall_overhead : sg->fwd_overhead;
        *during = mem + add + ov; /* an a[i] it upgrades is still held while it runs */
        *time = sg->fwd_time;
        if (adds) t->v[i] = (uint8_t)(fall ? op : 1);
        if (op == 0 && s->v[i - 1] == 1) t->v[i - 1] = 0;
        return 1;
    }
    return ref_apply_bdel(c, s, op, i, -1, mem, t, during, time);
}

/* Best time within `limit` (by_peak = 0) or the smallest peak (by_peak = 1);
 * returns 0 when the end is unreachable. */
static int reference(const remat_chain *c, uint64_t limit, int no_del, int by_peak,
                     double *best_time, uint64_t *best_peak) {
    size_t n = c->n, N = ref_count(c);
    double *dist = malloc(N * sizeof *dist);
    uint64_t *pk = malloc(N * sizeof *pk);
    if (!dist || !pk) exit(3);
    for (size_t k = 0; k < N; k++) dist[k] = INFINITY, pk[k] = UINT64_MAX;
    ref_state s0;
    memset(&s0, 0, sizeof s0);
    s0.b = (int)n;
    s0.v[0] = 1;
    size_t start = ref_id(c, &s0);
    dist[start] = 0;
    pk[start] = c->input_bytes;
    int ops[3 + REMAT_MAX_OPTIONS + 3], n_ops = 0;
    for (int op = 0; op < 3 + (int)ref_radix(c) - 2; op++) ops[n_ops++] = op;
    ops[n_ops++] = REF_B;
    if (!no_del) ops[n_ops++] = REF_DEL_A, ops[n_ops++] = REF_DEL_ABAR;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t u = 0; u < N; u++) {
            if (by_peak ? pk[u] == UINT64_MAX : !(dist[u] < INFINITY)) continue;
            ref_state s, t;
            ref_decode(c, u, &s);
            for (int o = 0; o < n_ops; o++) {
                for (size_t i = 0; i <= n; i++) {
                    uint64_t during;
                    double tm;
                    if (!ref_apply(c, &s, ops[o], i, &t, &during, &tm)) continue;
                    size_t v = ref_id(c, &t);
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
    size_t goal = ref_id(c, &g); /* b = 0, nothing held: B 1 frees plain a[0] */
    int ok = by_peak ? pk[goal] != UINT64_MAX : dist[goal] < INFINITY;
    *best_time = dist[goal];
    *best_peak = pk[goal];
    free(dist);
    free(pk);
    return ok;
}

/* exact against the reference on random tiny chains; 1 when every case agrees. */
static int agrees_with_reference(test_rng *r, int chains, int with_options, int *infeasible,
                                 int *partial) {
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = {.n = 1 + (size_t)(it % 4), .max_bytes = 6,
                              .overheads = it % 3 == 0, .grad_sizes = it % 2,
                              .zero_sizes = it % 5 == 0, .int_times = it % 4 != 3};
        test_option_spec x = {1, 1 + (size_t)(it % 2)};
        if (with_options) {
            sp.n = 1 + (size_t)(it % 3);
            sp.overheads = it % 3 != 0;
        }
        remat_chain *c = test_random_chain_with(r, &sp, with_options ? &x : NULL);
        uint64_t peak;
        if (remat_store_all_cost(c, &peak, NULL, NULL) != REMAT_OK) return 0;
        uint64_t m = test_rng_range(r, c->input_bytes, peak);
        for (int no_del = 0; no_del <= 1; no_del++) {
            double rt, dummy;
            uint64_t rp, minp;
            if (!reference(c, m, no_del, 1, &dummy, &minp)) return 0; /* store-all exists */
            int feas = reference(c, m, no_del, 0, &rt, &rp);
            remat_schedule *s = NULL;
            remat_error e;
            remat_status st = solve(c, REMAT_ALG_EXACT, m, no_del, &s, &e);
            int good = feas ? st == REMAT_OK && test_schedule_ok(c, s, m) &&
                                  fabs(s->time - rt) <= 1e-9 * (1 + rt) &&
                                  (!no_del || count_kind(s, REMAT_OP_DEL) == 0) && minp <= m
                            : st == REMAT_E_INFEASIBLE && e.min_memory == minp && minp > m;
            if (!good) {
                fprintf(stderr, "  chain %d (no_del %d, limit %llu): exact %s (time %g), reference "
                        "%s time %g, min peak %llu\n", it, no_del, (unsigned long long)m,
                        remat_status_name(st), s ? s->time : -1.0, feas ? "feasible" : "infeasible",
                        rt, (unsigned long long)minp);
                remat_schedule_free(s);
                remat_chain_free(c);
                return 0;
            }
            *infeasible += !feas;
            for (size_t k = 0; s && k < s->n_ops; k++) *partial += s->ops[k].option != 0;
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
    return 1;
}

static void test_brute_force_tiny(void) {
    test_rng r = {2024};
    int infeasible = 0, partial = 0;
    ASSERT_TRUE(agrees_with_reference(&r, 240, 0, &infeasible, &partial));
    ASSERT_TRUE(infeasible > 10); /* the limits do bite */
    ASSERT_EQ_INT(partial, 0);
}

/* Partial saves and fall_overhead: every option of every Fall is explored. */
static void test_brute_force_options(void) {
    test_rng r = {4242};
    int infeasible = 0, partial = 0;
    ASSERT_TRUE(agrees_with_reference(&r, 300, 1, &infeasible, &partial));
    ASSERT_TRUE(infeasible > 10);
    ASSERT_TRUE(partial > 20); /* the optimum often uses a partial save */
}

/* ---- The stopped Fall: the reference with the op after each op known ----
 * A state is the values held, next_b and the op chosen to run next but not
 * yet run (pending). Choosing the op after it runs the pending one, which
 * then knows whether it stops (docs/formats.md: a full-save Fall i, i < n,
 * that finds abar[i] not held and is followed by B i). It reads the stop
 * fields itself and shares no code with the library. */

/* The code of an abar[i] made by a stopped Fall: past every option's. */
static uint8_t sref_stop(const remat_chain *c) { return (uint8_t)ref_radix(c); }

static uint64_t sref_vbytes(const remat_chain *c, size_t j, int h) {
    if (h != sref_stop(c)) return vbytes(c, j, h);
    const remat_stage *sg = &c->stages[j - 1];
    return sg->has_stop_saved_bytes ? sg->stop_saved_bytes : sg->saved_bytes;
}

static size_t sref_states(const remat_chain *c) {
    size_t k = c->n + 1, r = ref_radix(c) + 1;
    for (size_t j = 0; j <= c->n; j++) k *= r;
    return k;
}

static size_t sref_id(const remat_chain *c, const ref_state *s) {
    size_t id = (size_t)s->b, r = ref_radix(c) + 1;
    for (size_t j = 0; j <= c->n; j++) id = id * r + s->v[j];
    return id;
}

static void sref_decode(const remat_chain *c, size_t id, ref_state *s) {
    size_t r = ref_radix(c) + 1;
    for (size_t j = c->n + 1; j-- > 0;) {
        s->v[j] = (uint8_t)(id % r);
        id /= r;
    }
    s->b = (int)id;
}

/* ref_apply with the stopped Fall (op: 0 Fn, 1 Fck, 2 + k Fall i/k, REF_*). */
static int sref_apply(const remat_chain *c, const ref_state *s, int op, size_t i, int stops,
                      ref_state *t, uint64_t *during, double *time) {
    *t = *s;
    uint64_t mem = remat_chain_d_bytes(c, (size_t)s->b);
    for (size_t j = 0; j <= c->n; j++) mem += sref_vbytes(c, j, s->v[j]);
    const remat_stage *sg = i >= 1 ? &c->stages[i - 1] : NULL;
    if (op < REF_B) {
        if (i < 1 || (int)i > s->b || s->v[i - 1] == 0) return 0;
        int k = op - 2;
        if (k > (int)sg->n_options) return 0;
        int fall = op >= 2, have = s->v[i];
        int adds = fall ? have < 2 : have == 0;
        int code = stops ? sref_stop(c) : fall ? op : 1;
        uint64_t fall_ov = sg->has_fall_overhead ? sg->fall_overhead : sg->fwd_overhead;
        uint64_t ov = !fall ? sg->fwd_overhead
                      : stops ? (sg->has_stop_overhead ? sg->stop_overhead : fall_ov)
                      : k > 0 ? sg->options[k - 1].fall_overhead
                              : fall_ov;
        *during = mem + (adds ? sref_vbytes(c, i, code) : 0) + ov;
        *time = stops && sg->has_stop_time ? sg->stop_time : sg->fwd_time;
        if (adds) t->v[i] = (uint8_t)code;
        if (op == 0 && s->v[i - 1] == 1) t->v[i - 1] = 0;
        return 1;
    }
    return ref_apply_bdel(c, s, op, i, sref_stop(c), mem, t, during, time);
}

/* As reference(), over (state, pending op) pairs, by a work list. */
static int stop_reference(const remat_chain *c, uint64_t limit, int no_del, int by_peak,
                          double *best_time, uint64_t *best_peak) {
    size_t n = c->n, S = sref_states(c);
    int ops[3 + REMAT_MAX_OPTIONS + 3], n_ops = 0;
    for (int op = 0; op < 3 + (int)ref_radix(c) - 2; op++) ops[n_ops++] = op;
    ops[n_ops++] = REF_B;
    if (!no_del) ops[n_ops++] = REF_DEL_A, ops[n_ops++] = REF_DEL_ABAR;
    size_t P = 1 + (size_t)n_ops * (n + 1); /* pending: 0 none, else 1 + o * (n + 1) + i */
    size_t N = S * P;
    double *dist = malloc(N * sizeof *dist);
    uint64_t *pk = malloc(N * sizeof *pk);
    size_t *queue = malloc(N * sizeof *queue);
    uint8_t *queued = calloc(N, 1);
    if (!dist || !pk || !queue || !queued) exit(3);
    for (size_t k = 0; k < N; k++) dist[k] = INFINITY, pk[k] = UINT64_MAX;
    ref_state s0;
    memset(&s0, 0, sizeof s0);
    s0.b = (int)n;
    s0.v[0] = 1;
    size_t start = sref_id(c, &s0) * P, head = 0, len = 1;
    dist[start] = 0;
    pk[start] = c->input_bytes;
    queue[0] = start;
    queued[start] = 1;
    ref_state g;
    memset(&g, 0, sizeof g);
    size_t goal = sref_id(c, &g);
    double best = INFINITY;
    uint64_t bpeak = UINT64_MAX;
    while (len) {
        size_t u = queue[head];
        head = (head + 1) % N;
        len--;
        queued[u] = 0;
        ref_state s, t;
        sref_decode(c, u / P, &s);
        size_t p = u % P;
        int pop = p ? ops[(p - 1) / (n + 1)] : -1;
        size_t pi = p ? (p - 1) % (n + 1) : 0;
        for (size_t q = 0; q < P; q++) { /* q = 0: the schedule ends after the pending op */
            if (!p && !q) continue;
            int qop = q ? ops[(q - 1) / (n + 1)] : -1;
            size_t qi = q ? (q - 1) % (n + 1) : 0;
            uint64_t during = 0;
            double tm = 0;
            t = s;
            if (p) {
                int stops = pop == 2 && pi < n && s.v[pi] < 2 && qop == REF_B && qi == pi;
                if (!sref_apply(c, &s, pop, pi, stops, &t, &during, &tm)) break; /* for any q */
            }
            uint64_t pv = during > pk[u] ? during : pk[u];
            double dv = dist[u] + tm;
            if (!by_peak && during > limit) continue; /* it may stop before another q */
            if (!q) {
                if (sref_id(c, &t) == goal && (by_peak ? pv < bpeak : dv < best))
                    best = dv, bpeak = pv;
                continue;
            }
            size_t v = sref_id(c, &t) * P + q;
            if (by_peak ? pv < pk[v] : dv < dist[v]) {
                if (by_peak) pk[v] = pv;
                else dist[v] = dv;
                if (!queued[v]) {
                    queue[(head + len) % N] = v;
                    len++;
                    queued[v] = 1;
                }
            }
        }
    }
    *best_time = best;
    *best_peak = bpeak;
    free(dist);
    free(pk);
    free(queue);
    free(queued);
    return by_peak ? bpeak != UINT64_MAX : best < INFINITY;
}

/* exact against the stop reference on random tiny chains with stop fields;
 * *stopped counts the stopped Falls in exact's schedules whose figures
 * differ from the plain ones, *gains the cases where the stop fields make
 * exact faster than on the chain without them. */
static void test_brute_force_stops(void) {
    test_rng r = {26112026};
    int infeasible = 0, stopped = 0, gains = 0, worse = 0;
    for (int it = 0; it < 300; it++) {
        test_chain_spec sp = {.n = 2 + (size_t)(it % 3), .max_bytes = 6,
                              .overheads = it % 3 != 0, .grad_sizes = it % 2,
                              .zero_sizes = it % 5 == 0, .int_times = it % 4 != 3};
        test_option_spec x = {1, 1};
        remat_chain *base = test_random_chain_with(&r, &sp, it % 5 == 0 && sp.n < 4 ? &x : NULL);
        remat_chain *c = test_with_stops(&r, base, it % 2 ? TEST_STOPS_RANDOM : TEST_STOPS_BENIGN,
                                         sp.max_bytes);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = test_rng_range(&r, c->input_bytes, peak);
        for (int no_del = 0; no_del <= 1; no_del++) {
            double rt, dummy;
            uint64_t rp, minp;
            ASSERT_TRUE(stop_reference(c, m, no_del, 1, &dummy, &minp));
            int feas = stop_reference(c, m, no_del, 0, &rt, &rp);
            remat_schedule *s = NULL, *t = NULL;
            remat_error e, e2;
            remat_status st = solve(c, REMAT_ALG_EXACT, m, no_del, &s, &e);
            int good = feas ? st == REMAT_OK && test_schedule_ok(c, s, m) &&
                                  fabs(s->time - rt) <= 1e-9 * (1 + rt) && minp <= m
                            : st == REMAT_E_INFEASIBLE && e.min_memory == minp && minp > m;
            if (!good)
                fprintf(stderr, "  chain %d (no_del %d, limit %llu): exact %s (time %g), "
                        "reference %s time %g, min peak %llu\n", it, no_del,
                        (unsigned long long)m, remat_status_name(st), s ? s->time : -1.0,
                        feas ? "feasible" : "infeasible", rt, (unsigned long long)minp);
            ASSERT_TRUE(good);
            infeasible += !feas;
            if (s) {
                remat_exec_plan *pl = NULL;
                ASSERT_STATUS(remat_exec_plan_create(c, s, &pl, NULL), REMAT_OK);
                for (size_t k = 0; k < pl->n_steps; k++) {
                    const remat_stage *sg = &c->stages[pl->steps[k].op.index - 1];
                    stopped += pl->steps[k].stops &&
                               (sg->stop_time != sg->fwd_time ||
                                sg->stop_saved_bytes != sg->saved_bytes ||
                                sg->stop_overhead != sg->fall_overhead);
                }
                remat_exec_plan_free(pl);
            }
            remat_status st2 = solve(base, REMAT_ALG_EXACT, m, no_del, &t, &e2);
            if (st == REMAT_OK && st2 == REMAT_OK) {
                gains += s->time < t->time - 1e-9 * (1 + t->time);
                worse += s->time > t->time + 1e-9 * (1 + t->time);
                if (it % 2 == 0) ASSERT_LE_DBL(s->time, t->time, 1e-9 * (1 + t->time));
            }
            if (it % 2 == 0 && st2 == REMAT_OK) ASSERT_EQ_INT(st, REMAT_OK); /* benign */
            remat_schedule_free(s);
            remat_schedule_free(t);
        }
        remat_chain_free(c);
        remat_chain_free(base);
    }
    printf("  stop reference: %d infeasible, %d stopped Falls that differ, faster on %d, slower "
           "on %d\n", infeasible, stopped, gains, worse);
    ASSERT_TRUE(infeasible > 10);
    ASSERT_TRUE(stopped > 50);
    ASSERT_TRUE(gains > 20);
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
    {"brute_force_options", test_brute_force_options},
    {"del_never_hurts", test_del_never_hurts},
    {"brute_force_stops", test_brute_force_stops},
};
TEST_MAIN(cases)
