/* Randomized properties across solvers, over thousands of seeded chains:
 *  - every schedule of every solver passes the simulator within the limit;
 *  - optimal (exact bytes) <= revolve, sequential, store-all, and is feasible
 *    whenever one of them is; its schedules are persistent;
 *  - exact <= exact without Del <= every persistent schedule; on chains of
 *    <= 5 stages optimal equals a brute-force persistent optimum. (exact
 *    without Del may beat optimal: Fn can still drop a kept value early; see
 *    no_del_counterexample);
 *  - with room for everything, optimal and exact take the store-all time;
 *  - on failure, min memories keep the same order (exact <= optimal <=
 *    sequential, store-all) and exceed the limit.
 * Seeds are fixed; REMAT_TEST_QUICK (or ASan) runs a tenth of the chains,
 * REMAT_TEST_SCALE=k k times as many. A
 * solver still reporting "not implemented" is skipped and named in the output. */
#include <stdlib.h>

#include "common/testlib.h"
#include "remat/remat.h"
#include "test.h"

static int missing[REMAT_ALG_COUNT_];

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static int scale(int full) {
    const char *mul = getenv("REMAT_TEST_SCALE"); /* deeper runs: e.g. 20 */
    if (mul && atoi(mul) > 0) return full * atoi(mul);
    if (UNDER_ASAN || getenv("REMAT_TEST_QUICK")) return full / 10 > 0 ? full / 10 : 1;
    return full;
}

typedef struct run {
    remat_status st;
    remat_schedule *s;
    uint64_t min_memory;
    int skipped; /* the solver is not written yet */
} run;

static run solve(const remat_chain *c, remat_algorithm alg, uint64_t m, int64_t slots, int no_del) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = alg;
    o.memory = m;
    o.slots = slots;
    o.exact_no_del = no_del;
    o.threads = 1;
    run r = {0};
    remat_error e;
    r.st = remat_solve(c, &o, &r.s, &e);
    r.min_memory = r.st == REMAT_E_INFEASIBLE ? e.min_memory : 0;
    if (r.st == REMAT_E_INPUT && strstr(e.message, "not implemented")) {
        missing[alg] = 1;
        r.skipped = 1;
    } else if (r.st != REMAT_OK && r.st != REMAT_E_INFEASIBLE) {
        fprintf(stderr, "  %s failed: %s: %s\n", remat_algorithm_name(alg),
                remat_status_name(r.st), e.message);
    }
    return r;
}

static void run_free(run *r) {
    remat_schedule_free(r->s);
    r->s = NULL;
}

static int ok(const run *r) { return r->st == REMAT_OK; }
/* The solver answered (a schedule or a clean "does not fit"). */
static int answered(const run *r) { return r->st == REMAT_OK || r->st == REMAT_E_INFEASIBLE; }

static void print_schedule(const char *label, const remat_schedule *s) {
    fprintf(stderr, "  %s:", label);
    if (!s) {
        fprintf(stderr, " (none)\n");
        return;
    }
    fprintf(stderr, " time %.17g peak %llu:", s->time, (unsigned long long)s->peak_bytes);
    for (size_t k = 0; k < s->n_ops; k++) {
        char t[REMAT_OP_TEXT_MAX];
        remat_op_format(s->ops[k], t);
        fprintf(stderr, " %s", t);
    }
    fprintf(stderr, "\n");
}

static void print_chain(const remat_chain *c, uint64_t m) {
    char *j = NULL;
    if (remat_chain_to_json(c, &j, NULL) == REMAT_OK) fprintf(stderr, "  limit %llu, chain %s\n", (unsigned long long)m, j);
    remat_free(j);
}

/* SPEC 2 persistence: no Del, and no Fn i frees a plain a[i-1] that an
 * earlier Fck i / Fall i kept (before the B i that frees it). */
static int is_persistent(const remat_chain *c, const remat_schedule *s) {
    uint8_t val[64] = {0}, kept[64] = {0}; /* val: 0 none, 1 plain a, 2 abar */
    if (c->n >= 63) return 1;
    val[0] = 1;
    for (size_t k = 0; k < s->n_ops; k++) {
        uint32_t i = s->ops[k].index;
        switch (s->ops[k].kind) {
        case REMAT_OP_FN:
            if (val[i - 1] == 1 && kept[i - 1]) return 0;
            if (val[i - 1] == 1) val[i - 1] = 0;
            if (val[i] == 0) val[i] = 1, kept[i] = 0;
            break;
        case REMAT_OP_FCK:
        case REMAT_OP_FALL:
            kept[i - 1] = 1;
            if (s->ops[k].kind == REMAT_OP_FALL) val[i] = 2;
            else if (val[i] == 0) val[i] = 1, kept[i] = 0;
            break;
        case REMAT_OP_B:
            val[i] = 0;
            if (val[i - 1] == 1) val[i - 1] = 0;
            kept[i - 1] = 0;
            break;
        default: return 0; /* Del (or offload ops) */
        }
    }
    return 1;
}

/* ---- Brute-force persistent optimum (n <= 5): Dijkstra over states where a
 * plain a[j] is either free to consume (1) or kept (3); 2 is abar[j]. ---- */

typedef struct pst { int b; uint8_t v[6]; } pst;

static size_t pst_count(size_t n) {
    size_t k = n + 1;
    for (size_t j = 0; j <= n; j++) k *= 4;
    return k;
}

static size_t pst_id(const pst *s, size_t n) {
    size_t id = (size_t)s->b;
    for (size_t j = 0; j <= n; j++) id = id * 4 + s->v[j];
    return id;
}

static void pst_decode(size_t id, size_t n, pst *s) {
    for (size_t j = n + 1; j-- > 0;) s->v[j] = (uint8_t)(id % 4), id /= 4;
    s->b = (int)id;
}

static uint64_t pst_mem(const remat_chain *c, const pst *s) {
    uint64_t m = remat_chain_d_bytes(c, (size_t)s->b);
    for (size_t j = 0; j <= c->n; j++) {
        if (s->v[j] == 1 || s->v[j] == 3) m += remat_chain_a_bytes(c, j);
        if (s->v[j] == 2) m += remat_chain_abar_bytes(c, j);
    }
    return m;
}

/* op 0 Fn, 1 Fck, 2 Fall, 3 B; SPEC 2 semantics minus non-persistent Fn. */
static int pst_apply(const remat_chain *c, const pst *s, int op, size_t i, pst *t,
                     uint64_t *during, double *time) {
    *t = *s;
    const remat_stage *sg = &c->stages[i - 1];
    uint64_t mem = pst_mem(c, s);
    if (op <= 2) {
        if ((int)i > s->b || s->v[i - 1] == 0) return 0;
        if (op == 0 && s->v[i - 1] == 3) return 0; /* would consume a kept value */
        int have = s->v[i] == 2 ? 2 : s->v[i] ? 1 : 0, want = op == 2 ? 2 : 1;
        *during = mem + (have < want ? (want == 2 ? remat_chain_abar_bytes(c, i)
                                                  : remat_chain_a_bytes(c, i))
                                     : 0) + sg->fwd_overhead;
        *time = sg->fwd_time;
        if (have < want) t->v[i] = (uint8_t)(want == 2 ? 2 : 1);
        if (op == 0 && s->v[i - 1] == 1) t->v[i - 1] = 0;
        if (op >= 1 && s->v[i - 1] == 1) t->v[i - 1] = 3;
        return 1;
    }
    if ((int)i != s->b || s->v[i] != 2 || s->v[i - 1] == 0) return 0;
    *during = mem + remat_chain_d_bytes(c, i - 1) + sg->bwd_overhead;
    *time = sg->bwd_time;
    t->b = (int)i - 1;
    t->v[i] = 0;
    if (s->v[i - 1] != 2) t->v[i - 1] = 0;
    return 1;
}

typedef struct hent { double key; size_t id; } hent;

static void hpush(hent *h, size_t *len, hent e) {
    size_t k = (*len)++;
    while (k > 0 && h[(k - 1) / 2].key > e.key) h[k] = h[(k - 1) / 2], k = (k - 1) / 2;
    h[k] = e;
}

static hent hpop(hent *h, size_t *len) {
    hent top = h[0], last = h[--*len];
    size_t k = 0;
    for (;;) {
        size_t l = 2 * k + 1;
        if (l >= *len) break;
        if (l + 1 < *len && h[l + 1].key < h[l].key) l++;
        if (h[l].key >= last.key) break;
        h[k] = h[l], k = l;
    }
    h[k] = last;
    return top;
}

/* Best persistent time within limit; INFINITY when none fits. */
static double persistent_opt(const remat_chain *c, uint64_t limit) {
    size_t n = c->n, N = pst_count(n), cap = N * 4 * (n + 1) + 1, len = 0;
    double *dist = malloc(N * sizeof *dist);
    hent *h = malloc(cap * sizeof *h);
    if (!dist || !h) exit(3);
    for (size_t k = 0; k < N; k++) dist[k] = INFINITY;
    pst s0;
    memset(&s0, 0, sizeof s0);
    s0.b = (int)n;
    s0.v[0] = 1;
    size_t start = pst_id(&s0, n);
    dist[start] = 0;
    hpush(h, &len, (hent){0, start});
    double best = INFINITY;
    while (len > 0) {
        hent e = hpop(h, &len);
        if (e.key > dist[e.id]) continue;
        pst s, t;
        pst_decode(e.id, n, &s);
        if (s.b == 0) {
            best = e.key;
            break;
        }
        for (int op = 0; op <= 3; op++)
            for (size_t i = 1; i <= n; i++) {
                uint64_t during;
                double tm;
                if (!pst_apply(c, &s, op, i, &t, &during, &tm) || during > limit) continue;
                size_t v = pst_id(&t, n);
                if (e.key + tm < dist[v] && len < cap) {
                    dist[v] = e.key + tm;
                    hpush(h, &len, (hent){dist[v], v});
                }
            }
    }
    free(dist);
    free(h);
    return best;
}

/* ---- The properties. ---- */

static int tol_le(double a, double b) { return a <= b + 1e-9 * (1 + fabs(b)); }

static test_chain_spec random_spec(test_rng *r, size_t max_n) {
    test_chain_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.n = (size_t)test_rng_range(r, 1, max_n);
    static const uint64_t sizes[] = {4, 10, 60, 200};
    sp.max_bytes = sizes[test_rng_range(r, 0, 3)];
    sp.overheads = (int)test_rng_range(r, 0, 1);
    sp.grad_sizes = (int)test_rng_range(r, 0, 1);
    sp.zero_sizes = test_rng_range(r, 0, 4) == 0;
    sp.int_times = (int)test_rng_range(r, 0, 1);
    return sp;
}

/* A limit: tight, anywhere, exactly store-all, or above it. */
static uint64_t random_limit(test_rng *r, const remat_chain *c, uint64_t peak) {
    uint64_t lo = c->input_bytes;
    switch (test_rng_range(r, 0, 5)) {
    case 0:
    case 1: return test_rng_range(r, lo, lo + (peak - lo) / 3);
    case 2:
    case 3: return test_rng_range(r, lo, peak);
    case 4: return peak;
    default: return peak + test_rng_range(r, 0, peak);
    }
}

static void test_all_solvers(void) {
    test_rng r = {20240601};
    int chains = scale(6000), compared = 0, loose = 0, solved[6] = {0};
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 12);
        remat_chain *c = test_random_chain(&r, &sp);
        uint64_t peak;
        double all_t;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, &all_t, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        run opt0 = solve(c, REMAT_ALG_OPTIMAL, m, 0, 0);
        run opt = solve(c, REMAT_ALG_OPTIMAL, m, -1, 0);
        run rev = solve(c, REMAT_ALG_REVOLVE, m, -1, 0);
        run seq = solve(c, REMAT_ALG_SEQUENTIAL, m, -1, 0);
        run sta = solve(c, REMAT_ALG_STORE_ALL, m, -1, 0);
        run ex = {0};
        if (c->n <= 7) ex = solve(c, REMAT_ALG_EXACT, m, -1, 0);
        else ex.skipped = 1;
        run *all[] = {&opt0, &opt, &rev, &seq, &sta, &ex};
        int fail = 0;
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
            if (all[k]->skipped) continue;
            if (!answered(all[k])) fail = 1;
            if (ok(all[k]) && !test_schedule_ok(c, all[k]->s, m)) fail = 1;
            solved[k] += ok(all[k]);
        }
        if (!fail && !opt0.skipped) {
            for (size_t k = 2; k < 5; k++) {
                if (all[k]->skipped || !ok(all[k])) continue;
                if (!ok(&opt0) || !tol_le(opt0.s->time, all[k]->s->time)) fail = 2;
            }
            if (ok(&opt0) && !is_persistent(c, opt0.s)) fail = 3;
            if (ok(&opt) && !is_persistent(c, opt.s)) fail = 3;
            compared++;
        }
        if (!fail && ok(&seq) && !is_persistent(c, seq.s)) fail = 3;
        if (!fail && !ex.skipped) {
            for (size_t k = 0; k < 5; k++)
                if (!all[k]->skipped && ok(all[k]) &&
                    (!ok(&ex) || !tol_le(ex.s->time, all[k]->s->time)))
                    fail = 4;
        }
        /* Min memories reported on failure keep the same order. */
        if (!fail && !opt0.skipped && opt0.st == REMAT_E_INFEASIBLE) {
            for (size_t k = 3; k < 5; k++)
                if (all[k]->st == REMAT_E_INFEASIBLE && opt0.min_memory > all[k]->min_memory) fail = 6;
            if (!ex.skipped && ex.st == REMAT_E_INFEASIBLE && ex.min_memory > opt0.min_memory) fail = 6;
            if (opt0.min_memory <= m) fail = 6;
        }
        if (!fail && !ex.skipped && ex.st == REMAT_E_INFEASIBLE && ex.min_memory <= m) fail = 6;
        if (!fail && m >= peak) {
            loose++;
            if (!opt0.skipped && (!ok(&opt0) || fabs(opt0.s->time - all_t) > 1e-9 * (1 + all_t))) fail = 5;
            if (!ex.skipped && (!ok(&ex) || fabs(ex.s->time - all_t) > 1e-9 * (1 + all_t))) fail = 5;
            if (!opt.skipped && m >= 2 * peak && (!ok(&opt) || fabs(opt.s->time - all_t) > 1e-9 * (1 + all_t))) fail = 5;
        }
        if (fail) {
            fprintf(stderr, "  chain %d: property %d fails\n", it, fail);
            print_chain(c, m);
            const char *names[] = {"optimal(slots=0)", "optimal", "revolve", "sequential", "store-all", "exact"};
            for (size_t k = 0; k < 6; k++)
                if (!all[k]->skipped) print_schedule(names[k], all[k]->s);
        }
        for (size_t k = 0; k < sizeof all / sizeof *all; k++) run_free(all[k]);
        remat_chain_free(c);
        if (fail) TEST_FAIL_("property %d failed on chain %d (printed above)", fail, it);
    }
    printf("  %d chains; schedules from optimal(slots=0) %d, optimal %d, revolve %d, "
           "sequential %d, store-all %d, exact %d\n", chains, solved[0], solved[1], solved[2],
           solved[3], solved[4], solved[5]);
    ASSERT_TRUE(loose > chains / 10);
    if (!missing[REMAT_ALG_OPTIMAL]) ASSERT_TRUE(compared > chains / 2);
}

/* exact <= exact_no_del <= persistent optimum, and optimal (exact bytes) ==
 * the brute-force persistent optimum, on chains of <= 5 stages. Counts the
 * chains where forbidding Del still leaves a non-persistent gain. */
static void test_exact_vs_persistent(void) {
    test_rng r = {777};
    int chains = scale(5000), nonpersistent_gain = 0, del_gain = 0, shown = 0;
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 5);
        remat_chain *c = test_random_chain(&r, &sp);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        double pers = persistent_opt(c, m);
        run ex = solve(c, REMAT_ALG_EXACT, m, -1, 0);
        run nd = solve(c, REMAT_ALG_EXACT, m, -1, 1);
        run opt0 = solve(c, REMAT_ALG_OPTIMAL, m, 0, 0);
        int fail = 0;
        if (!answered(&ex) || !answered(&nd) || (!opt0.skipped && !answered(&opt0))) fail = 1;
        if (!fail && ok(&ex) && !test_schedule_ok(c, ex.s, m)) fail = 1;
        if (!fail && ok(&nd) && !test_schedule_ok(c, nd.s, m)) fail = 1;
        if (!fail && ok(&nd) && !ok(&ex)) fail = 2;
        if (!fail && ok(&ex) && ok(&nd) && !tol_le(ex.s->time, nd.s->time)) fail = 2;
        if (!fail && isfinite(pers) && (!ok(&nd) || !tol_le(nd.s->time, pers))) fail = 3;
        if (!fail && !opt0.skipped) {
            if (ok(&opt0) != isfinite(pers)) fail = 4;
            else if (ok(&opt0) && fabs(opt0.s->time - pers) > 1e-9 * (1 + pers)) fail = 4;
            else if (ok(&opt0) && !test_schedule_ok(c, opt0.s, m)) fail = 4;
        }
        if (!fail && ok(&nd) && isfinite(pers) && nd.s->time < pers - 1e-9 * (1 + pers)) {
            nonpersistent_gain++;
            if (is_persistent(c, nd.s)) fail = 5; /* the brute force missed a persistent schedule */
            if (shown++ < 1 && getenv("REMAT_TEST_VERBOSE")) {
                fprintf(stderr, "  no-Del non-persistent gain: persistent %.17g\n", pers);
                print_chain(c, m);
                print_schedule("exact_no_del", nd.s);
            }
        }
        if (!fail && ok(&ex) && ok(&nd) && ex.s->time < nd.s->time - 1e-9 * (1 + nd.s->time))
            del_gain++;
        if (fail) {
            fprintf(stderr, "  chain %d: property %d fails (persistent brute force %.17g)\n", it,
                    fail, pers);
            print_chain(c, m);
            print_schedule("exact", ex.s);
            print_schedule("exact_no_del", nd.s);
            if (!opt0.skipped) print_schedule("optimal(slots=0)", opt0.s);
        }
        run_free(&ex);
        run_free(&nd);
        run_free(&opt0);
        remat_chain_free(c);
        if (fail) TEST_FAIL_("property %d failed on chain %d (printed above)", fail, it);
    }
    printf("  %d chains: Del helps on %d; without Del a non-persistent schedule still beats "
           "every persistent one on %d\n", chains, del_gain, nonpersistent_gain);
    ASSERT_TRUE(del_gain > 0);
}

/* Forbidding Del does not make the optimum persistent. Here stage 3 costs
 * nothing, so "Fall 3, Fn 3" frees a[2] (kept by Fall 3) for free, and later
 * "Fn 2" consumes the kept a[1]: 62, against 70 for the best persistent
 * schedule (brute force above; docs/exact.md walks through it). */
static void test_no_del_counterexample(void) {
    static const char *json =
        "{\"format\": \"remat-chain-1\", \"input_bytes\": 1, \"stages\": ["
        "{\"name\": \"s1\", \"fwd_time\": 8, \"bwd_time\": 0, \"out_bytes\": 2, \"saved_bytes\": 5},"
        "{\"name\": \"s2\", \"fwd_time\": 8, \"bwd_time\": 8, \"out_bytes\": 4, \"saved_bytes\": 7},"
        "{\"name\": \"s3\", \"fwd_time\": 0, \"bwd_time\": 3, \"out_bytes\": 4, \"saved_bytes\": 4},"
        "{\"name\": \"loss\", \"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 4, \"saved_bytes\": 6}]}";
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_from_json(json, strlen(json), "<test>", &c, &e), REMAT_OK);
    double pers = persistent_opt(c, 17);
    ASSERT_NEAR(pers, 70, 1e-12);
    run nd = solve(c, REMAT_ALG_EXACT, 17, -1, 1);
    run ex = solve(c, REMAT_ALG_EXACT, 17, -1, 0);
    run opt0 = solve(c, REMAT_ALG_OPTIMAL, 17, 0, 0);
    int good = ok(&nd) && ok(&ex) && test_schedule_ok(c, nd.s, 17) && fabs(nd.s->time - 62) < 1e-12 &&
               !is_persistent(c, nd.s) && ex.s->time <= nd.s->time;
    int opt_good = opt0.skipped || (ok(&opt0) && fabs(opt0.s->time - 70) < 1e-9 &&
                                    is_persistent(c, opt0.s) && test_schedule_ok(c, opt0.s, 17));
    if (!good || !opt_good) {
        print_schedule("exact_no_del", nd.s);
        print_schedule("optimal(slots=0)", opt0.s);
    }
    run_free(&nd);
    run_free(&ex);
    run_free(&opt0);
    remat_chain_free(c);
    ASSERT_TRUE(good);
    ASSERT_TRUE(opt_good);
}

/* ---- Partial saves and fall_overhead (SPEC section 1's optional fields) ---- */

/* c with every stage's options dropped (strip_options) or with fall_overhead
 * written out as fwd_overhead where the stage had none (explicit_fall). */
static remat_chain *variant(const remat_chain *c, int strip_options, int explicit_fall) {
    remat_stage *st = calloc(c->n, sizeof *st);
    if (!st) exit(3);
    memcpy(st, c->stages, c->n * sizeof *st);
    for (size_t i = 0; i < c->n; i++) {
        if (strip_options) st[i].n_options = 0, st[i].options = NULL;
        if (explicit_fall && !st[i].has_fall_overhead)
            st[i].has_fall_overhead = 1, st[i].fall_overhead = st[i].fwd_overhead;
    }
    remat_chain *v = NULL;
    if (remat_chain_create(c->name, c->input_bytes, c->input_grad_bytes, st, c->n, &v, NULL) !=
        REMAT_OK)
        exit(3);
    free(st);
    return v;
}

static remat_status solve_bw(const remat_chain *c, remat_algorithm alg, uint64_t m, double bw,
                             remat_schedule **s, remat_error *e) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = alg;
    o.memory = m;
    o.bandwidth = bw;
    o.threads = 1;
    o.slots = alg == REMAT_ALG_OPTIMAL ? 0 : -1;
    *s = NULL;
    return remat_solve(c, &o, s, e);
}

/* s simulated under bandwidth bw (NULL if the simulator refuses it). */
static remat_sim_result *simulated(const remat_chain *c, const remat_schedule *s, double bw) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    remat_sim_result *r = NULL;
    return remat_simulate(c, s, &so, &r, NULL) == REMAT_OK ? r : NULL;
}

/* Valid within m under bandwidth bw, with the predicted time and peak the
 * simulator's (offload solvers: their time bounds the simulated one). */
static int schedule_checks(const remat_chain *c, const remat_schedule *s, uint64_t m, double bw,
                           int exact_peak) {
    remat_sim_result *r = simulated(c, s, bw);
    if (!r) return 0;
    int good = r->valid && r->peak_bytes <= m;
    if (good && exact_peak)
        good = r->peak_bytes == s->peak_bytes && fabs(r->time - s->time) <= 1e-9 * (1 + r->time);
    if (good && !exact_peak) good = r->time <= s->time + 1e-9 * (1 + s->time);
    if (!good && r->valid)
        fprintf(stderr, "  %s: simulated peak %llu time %.17g, predicted %llu %.17g, limit %llu\n",
                s->algorithm, (unsigned long long)r->peak_bytes, r->time,
                (unsigned long long)s->peak_bytes, s->time, (unsigned long long)m);
    else if (!good)
        fprintf(stderr, "  %s: invalid at op %zu (%s): %s\n", s->algorithm, r->failed_op,
                r->failed_op_text, r->reason);
    remat_sim_result_free(r);
    return good;
}

/* Valid under bandwidth bw with a peak within m (the solvers other than
 * exact predict from the plain Fall, so only the limit is checked). */
static int fits(const remat_chain *c, const remat_schedule *s, uint64_t m, double bw) {
    remat_sim_result *r = simulated(c, s, bw);
    if (!r) return 0;
    int good = r->valid && r->peak_bytes <= m;
    if (!good)
        fprintf(stderr, "  %s: %s, peak %llu, limit %llu\n", s->algorithm,
                r->valid ? "valid" : r->reason, (unsigned long long)r->peak_bytes,
                (unsigned long long)m);
    remat_sim_result_free(r);
    return good;
}

/* fits, and no slower than predicted (the offload solvers' prediction is an
 * upper bound). */
static int fits_in_time(const remat_chain *c, const remat_schedule *s, uint64_t m, double bw) {
    return schedule_checks(c, s, m, bw, 0);
}

/* The offload solvers at limit m and bandwidth bw: each schedule passes ok,
 * each refusal is an infeasible limit (else fail code `bad`); with bare (c
 * without its options), offload-only and opportunist, which ignore options,
 * give the same schedule on both (else bad + 1). Counts the schedules in
 * *solved; returns the first fail code or 0. */
static int offload_solvers(const remat_chain *c, const remat_chain *bare, uint64_t m, double bw,
                           int (*ok)(const remat_chain *, const remat_schedule *, uint64_t, double),
                           int bad, int *solved) {
    static const remat_algorithm off[] = {REMAT_ALG_POFO, REMAT_ALG_OFFLOAD_ONLY,
                                          REMAT_ALG_OPPORTUNIST, REMAT_ALG_AUTOCAPPER};
    int fail = 0;
    for (size_t a = 0; a < sizeof off / sizeof *off && !fail; a++) {
        remat_schedule *s;
        remat_error e;
        remat_status st = solve_bw(c, off[a], m, bw, &s, &e);
        if (st == REMAT_OK && !ok(c, s, m, bw)) fail = bad;
        if (st != REMAT_OK && st != REMAT_E_INFEASIBLE) {
            fprintf(stderr, "  %s: %s\n", remat_algorithm_name(off[a]), e.message);
            fail = bad;
        }
        if (bare && (off[a] == REMAT_ALG_OFFLOAD_ONLY || off[a] == REMAT_ALG_OPPORTUNIST)) {
            remat_schedule *t;
            if (solve_bw(bare, off[a], m, bw, &t, &e) != st || !test_same_ops(s, t))
                fail = bad + 1;
            remat_schedule_free(t);
        }
        *solved += st == REMAT_OK;
        remat_schedule_free(s);
    }
    return fail;
}

/* Every solver on chains with partial saves and fall_overhead: each schedule
 * passes the simulator within the limit with the predicted time and peak;
 * the solvers that ignore options (revolve, sequential, store-all,
 * offload-only, opportunist) give the same schedule as on the chain without
 * them; exact with options is never slower, nor needs more memory,
 * than without; optimal chooses among the options too: its schedule passes
 * the simulator with the predicted time and peak, is never slower than on
 * the chain without options (whose schedules it could still make), and is
 * at least as slow as exact's. */
static void test_options_every_solver(void) {
    test_rng r = {20250704};
    int chains = scale(3000), partial = 0, exact_gain = 0, optimal_gain = 0, offload = 0;
    static const remat_algorithm ignoring[] = {REMAT_ALG_REVOLVE, REMAT_ALG_SEQUENTIAL,
                                               REMAT_ALG_STORE_ALL};
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 9);
        test_option_spec x = {1, (size_t)test_rng_range(&r, 1, 3)};
        remat_chain *c = test_random_chain_with(&r, &sp, &x);
        remat_chain *bare = variant(c, 1, 0);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        int fail = 0;
        for (size_t a = 0; a < sizeof ignoring / sizeof *ignoring && !fail; a++) {
            remat_schedule *s, *t;
            remat_error e, e2;
            remat_status st = solve_bw(c, ignoring[a], m, 0, &s, &e);
            remat_status st2 = solve_bw(bare, ignoring[a], m, 0, &t, &e2);
            if (st != st2 || !test_same_ops(s, t)) fail = 1;
            if (st == REMAT_OK && !schedule_checks(c, s, m, 0, 1)) fail = 2;
            if (st != REMAT_OK && st != REMAT_E_INFEASIBLE) fail = 3;
            if (st == REMAT_E_INFEASIBLE && (e.min_memory != e2.min_memory || e.min_memory <= m))
                fail = 3;
            remat_schedule_free(s);
            remat_schedule_free(t);
        }
        if (!fail && c->n <= 6) {
            remat_schedule *s, *t;
            remat_error e, e2;
            remat_status st = solve_bw(c, REMAT_ALG_EXACT, m, 0, &s, &e);
            remat_status st2 = solve_bw(bare, REMAT_ALG_EXACT, m, 0, &t, &e2);
            if (st == REMAT_OK && !schedule_checks(c, s, m, 0, 1)) fail = 4;
            if (st2 == REMAT_OK && st != REMAT_OK) fail = 5;
            if (st == REMAT_OK && st2 == REMAT_OK) {
                if (!tol_le(s->time, t->time)) fail = 5;
                exact_gain += s->time < t->time - 1e-9 * (1 + t->time);
            }
            if (st == REMAT_E_INFEASIBLE && st2 == REMAT_E_INFEASIBLE &&
                e.min_memory > e2.min_memory)
                fail = 5;
            for (size_t k = 0; st == REMAT_OK && k < s->n_ops; k++) partial += s->ops[k].option;
            remat_schedule_free(s);
            remat_schedule_free(t);
        }
        if (!fail) {
            remat_schedule *s, *t, *x = NULL;
            remat_error e, e2;
            remat_status st = solve_bw(c, REMAT_ALG_OPTIMAL, m, 0, &s, &e);
            remat_status st2 = solve_bw(bare, REMAT_ALG_OPTIMAL, m, 0, &t, &e2);
            if (st == REMAT_OK && !schedule_checks(c, s, m, 0, 1)) fail = 6;
            if (st != REMAT_OK && st != REMAT_E_INFEASIBLE) fail = 6;
            if (st2 == REMAT_OK && st != REMAT_OK) fail = 6;
            if (st == REMAT_OK && st2 == REMAT_OK) {
                if (!tol_le(s->time, t->time)) fail = 6;
                optimal_gain += s->time < t->time - 1e-9 * (1 + t->time);
            }
            if (st == REMAT_OK && c->n <= 6 && solve_bw(c, REMAT_ALG_EXACT, m, 0, &x, &e2) ==
                REMAT_OK && !tol_le(x->time, s->time))
                fail = 6;
            remat_schedule_free(x);
            remat_schedule_free(s);
            remat_schedule_free(t);
        }
        if (!fail && it % 10 == 0) { /* the offload solvers take longer */
            double bw = 1 + (double)test_rng_range(&r, 0, 20);
            fail = offload_solvers(c, bare, m, bw, fits_in_time, 7, &offload);
        }
        if (fail) {
            fprintf(stderr, "  chain %d: options property %d fails\n", it, fail);
            print_chain(c, m);
        }
        remat_chain_free(bare);
        remat_chain_free(c);
        if (fail) TEST_FAIL_("options property %d failed on chain %d (printed above)", fail, it);
    }
    printf("  %d chains: exact gains from partial saves on %d, uses %d option steps; optimal "
           "gains on %d; offload schedules %d\n",
           chains, exact_gain, partial, optimal_gain, offload);
    ASSERT_TRUE(exact_gain > chains / 100);
    ASSERT_TRUE(optimal_gain > chains / 100);
    ASSERT_TRUE(offload > 0);
}

/* alg gives the same schedule (or the same smallest memory) on c and on x,
 * c with fields written out at their defaults; with sim, the simulator's peak
 * and time are the same too. */
static int same_schedule(const remat_chain *c, const remat_chain *x, remat_algorithm alg,
                         uint64_t m, double bw, int sim) {
    remat_schedule *s, *t;
    remat_error e, e2;
    remat_status st = solve_bw(c, alg, m, bw, &s, &e);
    remat_status st2 = solve_bw(x, alg, m, bw, &t, &e2);
    int same = st == st2 && test_same_ops(s, t) &&
               (st != REMAT_E_INFEASIBLE || e.min_memory == e2.min_memory);
    if (same && st == REMAT_OK && sim) {
        remat_sim_options so;
        remat_sim_options_init(&so);
        so.bandwidth = bw;
        remat_sim_result *r1 = NULL, *r2 = NULL;
        same = remat_simulate(c, s, &so, &r1, NULL) == REMAT_OK &&
               remat_simulate(x, t, &so, &r2, NULL) == REMAT_OK &&
               r1->peak_bytes == r2->peak_bytes && r1->time == r2->time;
        remat_sim_result_free(r1);
        remat_sim_result_free(r2);
    }
    remat_schedule_free(s);
    remat_schedule_free(t);
    return same;
}

/* A fall_overhead equal to fwd_overhead, written out, changes nothing: every
 * solver gives the same schedule as on the chain without the field. */
static void test_explicit_fall_overhead_same(void) {
    test_rng r = {99};
    int chains = scale(1500);
    static const remat_algorithm algs[] = {REMAT_ALG_OPTIMAL, REMAT_ALG_REVOLVE,
                                           REMAT_ALG_SEQUENTIAL, REMAT_ALG_STORE_ALL,
                                           REMAT_ALG_EXACT, REMAT_ALG_POFO};
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 8);
        remat_chain *c = test_random_chain(&r, &sp);
        remat_chain *x = variant(c, 0, 1);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        for (size_t a = 0; a < sizeof algs / sizeof *algs; a++) {
            if (algs[a] == REMAT_ALG_EXACT && c->n > 6) continue;
            if (algs[a] == REMAT_ALG_POFO && it % 10) continue;
            int same = same_schedule(c, x, algs[a], m, algs[a] == REMAT_ALG_POFO ? 3 : 0, 0);
            if (!same) {
                print_chain(x, m);
                remat_chain_free(x);
                remat_chain_free(c);
                TEST_FAIL_("chain %d: %s differs with fall_overhead written out", it,
                           remat_algorithm_name(algs[a]));
            }
        }
        remat_chain_free(x);
        remat_chain_free(c);
    }
}

/* ---- The stopped Fall (stop_time, stop_saved_bytes, stop_overhead) ---- */

/* Every solver on thousands of random chains with stop fields, some of them
 * raising the Fall's memory (stop_overhead past fall_overhead): every
 * schedule passes the simulator within its limit; exact's and optimal's
 * predictions are the simulator's (they model the stopped Fall) and exact is
 * never slower than optimal. */
static void test_stops_every_solver(void) {
    test_rng r = {20261127};
    int chains = scale(3000), solved = 0, raised = 0, offload = 0;
    static const remat_algorithm algs[] = {REMAT_ALG_OPTIMAL, REMAT_ALG_REVOLVE,
                                           REMAT_ALG_SEQUENTIAL, REMAT_ALG_STORE_ALL,
                                           REMAT_ALG_EXACT};
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 9);
        test_option_spec x = {1, (size_t)test_rng_range(&r, 1, 2)};
        remat_chain *base = test_random_chain_with(&r, &sp, it % 3 == 0 ? &x : NULL);
        remat_chain *c = test_with_stops(&r, base, it % 4 ? TEST_STOPS_RANDOM : TEST_STOPS_BENIGN,
                                         sp.max_bytes);
        for (size_t i = 0; i + 1 < c->n; i++) {
            const remat_stage *sg = &c->stages[i];
            raised +=
                sg->stop_saved_bytes + sg->stop_overhead > sg->saved_bytes + sg->fall_overhead;
        }
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        int fail = 0;
        double exact_time = -1;
        for (size_t a = 0; a < sizeof algs / sizeof *algs && !fail; a++) {
            if (algs[a] == REMAT_ALG_EXACT && c->n > 6) continue;
            remat_schedule *s;
            remat_error e;
            remat_status st = solve_bw(c, algs[a], m, 0, &s, &e);
            if (st == REMAT_OK && !fits(c, s, m, 0)) fail = 1;
            int exact_model = algs[a] == REMAT_ALG_EXACT || algs[a] == REMAT_ALG_OPTIMAL;
            if (st == REMAT_OK && exact_model && !schedule_checks(c, s, m, 0, 1)) fail = 2;
            if (st != REMAT_OK && (st != REMAT_E_INFEASIBLE || e.min_memory <= m)) {
                fprintf(stderr, "  %s: %s\n", remat_algorithm_name(algs[a]), e.message);
                fail = 3;
            }
            if (st == REMAT_OK && algs[a] == REMAT_ALG_EXACT) exact_time = s->time;
            solved += st == REMAT_OK;
            remat_schedule_free(s);
        }
        if (!fail && exact_time >= 0) { /* exact is the optimum over every schedule */
            remat_schedule *s;
            if (solve_bw(c, REMAT_ALG_OPTIMAL, m, 0, &s, NULL) == REMAT_OK) {
                remat_sim_result *res = NULL;
                ASSERT_STATUS(remat_simulate(c, s, NULL, &res, NULL), REMAT_OK);
                if (!tol_le(exact_time, res->time)) fail = 4;
                remat_sim_result_free(res);
            }
            remat_schedule_free(s);
        }
        if (!fail && it % 10 == 0) {
            double bw = 1 + (double)test_rng_range(&r, 0, 20);
            fail = offload_solvers(c, NULL, m, bw, fits, 5, &offload);
        }
        if (fail) {
            fprintf(stderr, "  chain %d: stop property %d fails\n", it, fail);
            print_chain(c, m);
        }
        remat_chain_free(c);
        remat_chain_free(base);
        if (fail) TEST_FAIL_("stop property %d failed on chain %d (printed above)", fail, it);
    }
    printf("  %d chains: %d schedules, %d stages whose stopped Fall needs more memory, %d "
           "offload schedules\n", chains, solved, raised, offload);
    ASSERT_TRUE(raised > chains / 10);
    ASSERT_TRUE(solved > chains);
    ASSERT_TRUE(offload > 0);
}

/* Stop fields written out at their defaults change nothing: every solver
 * gives the same schedule (or the same smallest memory) as without them. */
static void test_explicit_stops_same(void) {
    test_rng r = {1126};
    int chains = scale(1500);
    static const remat_algorithm algs[] = {
        REMAT_ALG_OPTIMAL, REMAT_ALG_REVOLVE, REMAT_ALG_SEQUENTIAL, REMAT_ALG_STORE_ALL,
        REMAT_ALG_EXACT, REMAT_ALG_POFO, REMAT_ALG_OFFLOAD_ONLY, REMAT_ALG_OPPORTUNIST,
        REMAT_ALG_AUTOCAPPER};
    for (int it = 0; it < chains; it++) {
        test_chain_spec sp = random_spec(&r, 8);
        test_option_spec o = {1, 1};
        remat_chain *c = test_random_chain_with(&r, &sp, it % 2 ? &o : NULL);
        remat_chain *x = test_with_stops(&r, c, TEST_STOPS_DEFAULTS, sp.max_bytes);
        uint64_t peak;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        uint64_t m = random_limit(&r, c, peak);
        for (size_t a = 0; a < sizeof algs / sizeof *algs; a++) {
            int offload = algs[a] >= REMAT_ALG_POFO;
            if (algs[a] == REMAT_ALG_EXACT && c->n > 6) continue;
            if (offload && it % 10) continue;
            int same = same_schedule(c, x, algs[a], m, offload ? 3 : 0, 1);
            if (!same) {
                print_chain(x, m);
                remat_chain_free(x);
                remat_chain_free(c);
                TEST_FAIL_("chain %d: %s differs with the stop fields written out", it,
                           remat_algorithm_name(algs[a]));
            }
        }
        remat_chain_free(x);
        remat_chain_free(c);
    }
}

static void report_skips(void) {
    int any = 0;
    for (int a = 0; a < REMAT_ALG_COUNT_; a++)
        if (missing[a]) {
            printf("  SKIPPED comparisons with %s: not implemented yet\n",
                   remat_algorithm_name((remat_algorithm)a));
            any = 1;
        }
    ASSERT_TRUE(any == 0 || any == 1); /* informational */
}

static const test_case cases[] = {
    {"all_solvers", test_all_solvers},
    {"exact_vs_persistent", test_exact_vs_persistent},
    {"no_del_counterexample", test_no_del_counterexample},
    {"options_every_solver", test_options_every_solver},
    {"explicit_fall_overhead_same", test_explicit_fall_overhead_same},
    {"stops_every_solver", test_stops_every_solver},
    {"explicit_stops_same", test_explicit_stops_same},
    {"report_skips", report_skips},
};
TEST_MAIN(cases)
