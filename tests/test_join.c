/* Join networks: Opt_0, c_min, Opt_b-multi against a brute-force search over
 * all join schedules, the canonical schedule of the paper's toy example,
 * EQUIV-CHAIN, the formats and the input checks. */
#include <stdlib.h>

#include "remat/join.h"
#include "test.h"
#include "common/testlib.h"

/* remat_join_simulate into a caller's struct, so checks can read r.field. */
static remat_status jsim(const remat_join_problem *p, const remat_join_op *ops, size_t n,
                         uint64_t limit, remat_join_sim_result *r, remat_error *err) {
    remat_join_sim_result *res = NULL;
    remat_status st = remat_join_simulate(p, ops, n, limit, &res, err);
    memset(r, 0, sizeof *r);
    if (res) *r = *res;
    remat_join_sim_result_free(res);
    return st;
}

static remat_join_problem mk(size_t k, const uint32_t *l, double uf, double ub, double ut,
                             uint64_t slots) {
    remat_join_problem p;
    remat_error e;
    if (remat_join_problem_set(&p, k, l, uf, ub, ut, slots, &e) != REMAT_OK) {
        fprintf(stderr, "mk: %s\n", e.message);
        exit(2);
    }
    return p;
}

/* ---- brute force: Dijkstra over every memory state of Table 3 ----
 * A state holds, per branch, how many copies of each x_i (0..2: a third copy is
 * never useful, since a copy is only worth making right before a forward step
 * consumes it) and which xbar it holds. */
typedef struct bf_state {
    uint8_t cnt[3][4];
    int8_t bar[3]; /* -1 none, i = xbar_i held, -2 dropped */
    uint8_t turned;
} bf_state;

typedef struct bf {
    const remat_join_problem *p;
    const unsigned char *keep; /* b of PROB_b-multi, or NULL */
    uint64_t c;
    uint64_t *keys;
    double *dist;
    size_t cap, used;
    struct { double d; uint64_t key; } *heap;
    size_t hn, hcap;
} bf;

static uint64_t bf_encode(const bf *b, const bf_state *s) {
    uint64_t code = s->turned;
    for (size_t j = 0; j < b->p->k; j++) {
        uint32_t l = b->p->lengths[j];
        for (uint32_t i = 0; i <= l; i++) code = code * 3 + s->cnt[j][i];
        code = code * (l + 3) + (uint64_t)(s->bar[j] + 2);
    }
    return code + 1; /* 0 marks an empty hash slot */
}

static void bf_decode(const bf *b, uint64_t code, bf_state *s) {
    memset(s, 0, sizeof *s);
    code -= 1;
    for (size_t jj = b->p->k; jj-- > 0;) {
        uint32_t l = b->p->lengths[jj];
        s->bar[jj] = (int8_t)((int)(code % (l + 3)) - 2);
        code /= l + 3;
        for (uint32_t ii = l + 1; ii-- > 0;) {
            s->cnt[jj][ii] = (uint8_t)(code % 3);
            code /= 3;
        }
    }
    s->turned = (uint8_t)code;
}

static size_t bf_slot(bf *b, uint64_t key) {
    size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (b->cap - 1);
    while (b->keys[h] && b->keys[h] != key) h = (h + 1) & (b->cap - 1);
    return h;
}

static void bf_grow(bf *b) {
    uint64_t *ok = b->keys;
    double *od = b->dist;
    size_t ocap = b->cap;
    b->cap *= 2;
    b->keys = calloc(b->cap, sizeof *b->keys);
    b->dist = calloc(b->cap, sizeof *b->dist);
    if (!b->keys || !b->dist) exit(3);
    for (size_t i = 0; i < ocap; i++)
        if (ok[i]) {
            size_t h = bf_slot(b, ok[i]);
            b->keys[h] = ok[i];
            b->dist[h] = od[i];
        }
    free(ok);
    free(od);
}

static void heap_push(bf *b, double d, uint64_t key) {
    if (b->hn == b->hcap) {
        b->hcap = b->hcap ? b->hcap * 2 : 1024;
        b->heap = realloc(b->heap, b->hcap * sizeof *b->heap);
        if (!b->heap) exit(3);
    }
    size_t i = b->hn++;
    while (i && b->heap[(i - 1) / 2].d > d) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i].d = d;
    b->heap[i].key = key;
}

static void heap_pop(bf *b, double *d, uint64_t *key) {
    *d = b->heap[0].d;
    *key = b->heap[0].key;
    double ld = b->heap[--b->hn].d;
    uint64_t lk = b->heap[b->hn].key;
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= b->hn) break;
        if (c + 1 < b->hn && b->heap[c + 1].d < b->heap[c].d) c++;
        if (b->heap[c].d >= ld) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    b->heap[i].d = ld;
    b->heap[i].key = lk;
}

static void bf_relax(bf *b, const bf_state *s, double d) {
    uint64_t key = bf_encode(b, s);
    if ((b->used + 1) * 2 > b->cap) bf_grow(b);
    size_t h = bf_slot(b, key);
    if (b->keys[h] && b->dist[h] <= d) return;
    if (!b->keys[h]) b->used++;
    b->keys[h] = key;
    b->dist[h] = d;
    heap_push(b, d, key);
}

static uint64_t bf_held(const bf *b, const bf_state *s) {
    uint64_t n = 0;
    for (size_t j = 0; j < b->p->k; j++) {
        for (uint32_t i = 0; i <= b->p->lengths[j]; i++) n += s->cnt[j][i];
        n += s->bar[j] >= 0;
    }
    return n;
}

static int bf_goal(const bf *b, const bf_state *s) {
    uint64_t kept = 0;
    for (size_t j = 0; j < b->p->k; j++) {
        int keep = b->keep && b->keep[j];
        if (s->bar[j] != (keep ? 0 : -2)) return 0;
        kept += keep;
    }
    return bf_held(b, s) == kept;
}

static void bf_expand(bf *b, const bf_state *s, double d) {
    const remat_join_problem *p = b->p;
    uint64_t held = bf_held(b, s);
    bf_state n;
    if (!s->turned) {
        int ok = 1;
        for (size_t j = 0; j < p->k; j++) ok &= s->cnt[j][p->lengths[j]] >= 1;
        if (ok) {
            n = *s;
            n.turned = 1;
            for (size_t j = 0; j < p->k; j++) {
                n.cnt[j][p->lengths[j]]--;
                n.bar[j] = (int8_t)p->lengths[j];
            }
            bf_relax(b, &n, d + p->turn_time);
        }
    }
    for (size_t j = 0; j < p->k; j++) {
        uint32_t l = p->lengths[j];
        if (s->bar[j] == 0) { /* Db */
            n = *s;
            n.bar[j] = -2;
            bf_relax(b, &n, d);
        }
        for (uint32_t i = 0; i <= l; i++) {
            if (!s->cnt[j][i]) continue;
            n = *s; /* D */
            n.cnt[j][i]--;
            bf_relax(b, &n, d);
            if (s->cnt[j][i] == 1 && held + 1 <= b->c) { /* S */
                n = *s;
                n.cnt[j][i]++;
                bf_relax(b, &n, d);
            }
            if (i < l && s->cnt[j][i + 1] < 2) { /* F */
                n = *s;
                n.cnt[j][i]--;
                n.cnt[j][i + 1]++;
                bf_relax(b, &n, d + p->fwd_time);
            }
            if (i < l && s->bar[j] == (int8_t)(i + 1)) { /* Fb */
                n = *s;
                n.cnt[j][i]--;
                n.bar[j] = (int8_t)i;
                bf_relax(b, &n, d + p->bwd_time);
            }
        }
    }
}

/* The optimal makespan over all schedules with at most c slots; INFINITY if none. */
static double brute_force_b(const remat_join_problem *p, const unsigned char *keep, uint64_t c) {
    bf b = {p, keep, c, NULL, NULL, 1 << 12, 0, NULL, 0, 0};
    b.keys = calloc(b.cap, sizeof *b.keys);
    b.dist = calloc(b.cap, sizeof *b.dist);
    if (!b.keys || !b.dist) exit(3);
    bf_state s;
    memset(&s, 0, sizeof s);
    for (size_t j = 0; j < p->k; j++) {
        s.cnt[j][0] = 1;
        s.bar[j] = -1;
    }
    double best = INFINITY;
    if (p->k <= c) bf_relax(&b, &s, 0);
    while (b.hn) {
        double d;
        uint64_t key;
        heap_pop(&b, &d, &key);
        if (b.dist[bf_slot(&b, key)] < d) continue; /* stale entry */
        bf_decode(&b, key, &s);
        if (bf_goal(&b, &s)) {
            best = d;
            break;
        }
        bf_expand(&b, &s, d);
    }
    free(b.keys);
    free(b.dist);
    free(b.heap);
    return best;
}

static double brute_force(const remat_join_problem *p, uint64_t c) {
    return brute_force_b(p, NULL, c);
}

/* ---- helpers ---- */

/* The solver's schedule for c passes the simulator within c slots, and its
 * makespan equals the DP value. */
static int schedule_matches(const remat_join_problem *p, const remat_join_plan *pl, uint64_t c) {
    remat_join_schedule *s = NULL;
    remat_error e;
    if (remat_join_plan_schedule(pl, c, &s, &e) != REMAT_OK) {
        fprintf(stderr, "  schedule for c=%llu: %s\n", (unsigned long long)c, e.message);
        return 0;
    }
    remat_join_sim_result r;
    int ok = jsim(p, s->ops, s->n_ops, c, &r, &e) == REMAT_OK && r.valid;
    double want = remat_join_plan_makespan(pl, c);
    if (!ok) fprintf(stderr, "  c=%llu: invalid: %s\n", (unsigned long long)c, r.reason);
    else if (fabs(r.time - want) > 1e-9 * (1 + want) || fabs(s->time - want) > 1e-9 * (1 + want))
        ok = 0, fprintf(stderr, "  c=%llu: simulated %g, DP %g\n", (unsigned long long)c, r.time,
                        want);
    else if (r.peak_slots > c || r.peak_slots != s->peak_slots)
        ok = 0, fprintf(stderr, "  c=%llu: peak %llu\n", (unsigned long long)c,
                        (unsigned long long)r.peak_slots);
    remat_join_schedule_free(s);
    return ok;
}

static remat_join_plan *plan_of(const remat_join_problem *p) {
    remat_join_plan *pl = NULL;
    remat_error e;
    if (remat_join_plan_create(p, NULL, 0, NULL, &pl, &e) != REMAT_OK) {
        fprintf(stderr, "plan: %s\n", e.message);
        exit(2);
    }
    return pl;
}

/* DP against brute force for every c from below c_min to full storage. */
static int compare_with_brute_force(const remat_join_problem *p) {
    remat_join_plan *pl = plan_of(p);
    uint64_t cmin = remat_join_min_slots(p), full = remat_join_full_slots(p);
    int ok = cmin == remat_join_plan_min_slots(pl);
    for (uint64_t c = cmin > 1 ? cmin - 1 : 1; ok && c <= full; c++) {
        double dp = remat_join_plan_makespan(pl, c), bfv = brute_force(p, c);
        if (!(dp == bfv || fabs(dp - bfv) < 1e-9)) {
            fprintf(stderr, "  k=%zu l=(%u,%u,%u) uf=%g ub=%g ut=%g c=%llu: DP %g, brute %g\n",
                    p->k, p->lengths[0], p->k > 1 ? p->lengths[1] : 0,
                    p->k > 2 ? p->lengths[2] : 0, p->fwd_time, p->bwd_time, p->turn_time,
                    (unsigned long long)c, dp, bfv);
            ok = 0;
        }
        if (ok && c >= cmin) ok = schedule_matches(p, pl, c);
        if (ok && c < cmin && isfinite(dp)) ok = 0;
    }
    remat_join_plan_free(pl);
    return ok;
}

/* ---- cases ---- */

static double opt0(uint32_t l, uint64_t c, double uf, double ub) {
    double v = NAN;
    remat_error e;
    if (remat_join_opt0(l, c, uf, ub, &v, &e) != REMAT_OK) fprintf(stderr, "%s\n", e.message);
    return v;
}

static void test_opt0_boundaries(void) {
    for (uint32_t l = 1; l <= 12; l++) /* Theorem 1, eq. (2) */
        ASSERT_NEAR(opt0(l, 3, 2, 3), l * (l + 1) / 2.0 * 2 + (l + 1) * 3.0, 0);
    for (uint64_t c = 2; c < 6; c++) ASSERT_NEAR(opt0(0, c, 2, 3), 3, 0); /* eq. (1) */
    ASSERT_TRUE(isinf(opt0(0, 1, 1, 1)));
    ASSERT_TRUE(isinf(opt0(1, 2, 1, 1)));
    /* l = 1 with c > 3: one forward, two backward (the recursion needs i = l). */
    ASSERT_NEAR(opt0(1, 4, 2, 3), 2 + 6, 0);
    ASSERT_NEAR(opt0(1, 9, 2, 3), 2 + 6, 0);
    /* Worked by hand, unit costs: Opt_0(2,4) = 5, Opt_0(3,4) = 8, Opt_0(3,5) = 7. */
    ASSERT_NEAR(opt0(2, 4, 1, 1), 5, 0);
    ASSERT_NEAR(opt0(3, 4, 1, 1), 8, 0);
    ASSERT_NEAR(opt0(3, 5, 1, 1), 7, 0);
    for (uint32_t l = 0; l < 20; l++) /* l + 2 slots store everything */
        ASSERT_NEAR(opt0(l, l + 2, 1.5, 2), l * 1.5 + (l + 1) * 2.0, 1e-9);
    for (uint32_t l = 1; l < 25; l++) /* more memory never hurts */
        for (uint64_t c = 3; c < 10; c++) ASSERT_LE_DBL(opt0(l, c + 1, 1, 1), opt0(l, c, 1, 1), 0);
}

static void test_cmin_lemma4(void) {
    uint32_t toy[] = {4, 10, 12}, cm[] = {5, 25}, snn[] = {10, 10, 10}, one[] = {1, 5},
             single[] = {5}, unit[] = {1};
    ASSERT_EQ_U64(remat_join_min_slots(&(remat_join_problem){0}), 0);
    remat_join_problem p = mk(3, toy, 1, 1, 1, 9);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 7);
    ASSERT_EQ_U64(remat_join_full_slots(&p), 29);
    p = mk(2, cm, 1, 1, 1, 0);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 5); /* the paper's CM plots start at 5 */
    ASSERT_EQ_U64(remat_join_full_slots(&p), 32); /* C_CM(5) = 6L + 2 */
    p = mk(3, snn, 1, 1, 1, 0);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 7); /* SNN plots start at 7 */
    ASSERT_EQ_U64(remat_join_full_slots(&p), 33); /* C_SNN(5) = 6L + 3 */
    ASSERT_NEAR(remat_join_span_star(&p), 61, 0); /* Span* = 12L + 1 */
    p = mk(2, one, 1, 1, 1, 0);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 4); /* a length-1 branch frees a slot early */
    p = mk(1, single, 1, 1, 1, 0);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 3);
    p = mk(1, unit, 1, 1, 1, 0);
    ASSERT_EQ_U64(remat_join_min_slots(&p), 2);
}

static void test_brute_force_exhaustive(void) {
    /* every length vector with k <= 2 and lengths <= 3, plus k = 3 up to (2, 2, 3) */
    for (uint32_t a = 1; a <= 3; a++) {
        remat_join_problem p = mk(1, (uint32_t[]){a}, 1, 1, 1, 0);
        ASSERT_TRUE(compare_with_brute_force(&p));
        for (uint32_t b = a; b <= 3; b++) {
            p = mk(2, (uint32_t[]){a, b}, 1, 1, 1, 0);
            ASSERT_TRUE(compare_with_brute_force(&p));
        }
    }
    uint32_t triples[][3] = {{1, 1, 1}, {1, 2, 3}, {2, 2, 2}, {1, 1, 3}, {2, 2, 3}, {3, 1, 2}};
    for (size_t t = 0; t < sizeof triples / sizeof triples[0]; t++) {
        remat_join_problem p = mk(3, triples[t], 1, 1, 1, 0);
        ASSERT_TRUE(compare_with_brute_force(&p));
    }
}

static void test_brute_force_random(void) {
    test_rng r = {20240611};
    for (int n = 0; n < 60; n++) {
        size_t k = (size_t)test_rng_range(&r, 1, n % 4 == 3 ? 3 : 2);
        uint32_t l[3];
        for (size_t j = 0; j < k; j++)
            l[j] = (uint32_t)test_rng_range(&r, 1, k == 3 ? 2 + (j == 2) : 3);
        double uf = (double)test_rng_range(&r, 0, 4), ub = (double)test_rng_range(&r, 0, 4),
               ut = (double)test_rng_range(&r, 0, 3);
        if (n % 5 == 0) uf += 0.5; /* non-integer costs too */
        remat_join_problem p = mk(k, l, uf, ub, ut, 0);
        ASSERT_TRUE(compare_with_brute_force(&p));
    }
}

/* Larger problems: every schedule passes the simulator with the DP's makespan;
 * the curve is non-increasing and reaches Span* at full storage. */
static void test_schedules_random(void) {
    test_rng r = {7};
    for (int n = 0; n < 25; n++) {
        size_t k = (size_t)test_rng_range(&r, 1, 4);
        uint32_t l[4];
        for (size_t j = 0; j < k; j++) l[j] = (uint32_t)test_rng_range(&r, 1, k >= 3 ? 6 : 12);
        remat_join_problem p =
            mk(k, l, (double)test_rng_range(&r, 1, 3), (double)test_rng_range(&r, 1, 3), 1, 0);
        remat_join_plan *pl = plan_of(&p);
        uint64_t cmin = remat_join_min_slots(&p), full = remat_join_full_slots(&p);
        ASSERT_TRUE(isinf(remat_join_plan_makespan(pl, cmin - 1)));
        double prev = INFINITY;
        for (uint64_t c = cmin; c <= full + 1; c++) {
            double v = remat_join_plan_makespan(pl, c);
            ASSERT_TRUE(isfinite(v));
            ASSERT_LE_DBL(v, prev, 0);
            ASSERT_LE_DBL(remat_join_span_star(&p), v, 1e-9);
            ASSERT_TRUE(schedule_matches(&p, pl, c));
            prev = v;
        }
        ASSERT_NEAR(prev, remat_join_span_star(&p), 1e-9);
        remat_join_plan_free(pl);
    }
}

/* Opt_b-multi with kept branches (xbar_0 stays in memory) against brute force. */
static void test_opt_b(void) {
    test_rng r = {99};
    for (int n = 0; n < 30; n++) {
        size_t k = (size_t)test_rng_range(&r, 1, n % 3 == 2 ? 3 : 2);
        uint32_t l[3];
        unsigned char b[3];
        for (size_t j = 0; j < k; j++) {
            l[j] = (uint32_t)test_rng_range(&r, 1, k == 3 ? 2 : 3);
            b[j] = (unsigned char)test_rng_range(&r, 0, 1);
        }
        remat_join_problem p = mk(k, l, (double)test_rng_range(&r, 0, 3),
                                  (double)test_rng_range(&r, 0, 3), 1, 0);
        remat_join_plan *pl = NULL;
        ASSERT_STATUS(remat_join_plan_create(&p, b, 0, NULL, &pl, NULL), REMAT_OK);
        uint64_t cmin = remat_join_plan_min_slots(pl);
        for (uint64_t c = cmin - 1; c <= remat_join_full_slots(&p); c++) {
            double dp = remat_join_plan_makespan(pl, c), bfv = brute_force_b(&p, b, c);
            if (!(dp == bfv || fabs(dp - bfv) < 1e-9)) {
                remat_join_plan_free(pl);
                TEST_FAIL_("case %d c=%llu: DP %g, brute force %g", n, (unsigned long long)c, dp,
                           bfv);
            }
        }
        remat_join_schedule *s = NULL;
        ASSERT_STATUS(remat_join_plan_schedule(pl, cmin, &s, NULL),
                      b[0] || (k > 1 && b[1]) || (k > 2 && b[2]) ? REMAT_E_INPUT : REMAT_OK);
        remat_join_schedule_free(s);
        remat_join_plan_free(pl);
    }
    /* The toy's innermost sub-problem: (3, 3, 4), b = (1, 1, 0) needs 7 slots. */
    remat_join_problem p = mk(3, (uint32_t[]){3, 3, 4}, 1, 1, 1, 0);
    remat_join_plan *pl = NULL;
    ASSERT_STATUS(remat_join_plan_create(&p, (unsigned char[]){1, 1, 0}, 0, NULL, &pl, NULL),
                  REMAT_OK);
    ASSERT_EQ_U64(remat_join_plan_min_slots(pl), 7);
    ASSERT_TRUE(isinf(remat_join_plan_makespan(pl, 6)));
    remat_join_plan_free(pl);
}

static size_t find_op(const remat_join_schedule *s, const char *text, size_t from) {
    char t[REMAT_JOIN_OP_TEXT_MAX];
    for (size_t i = from; i < s->n_ops; i++) {
        remat_join_op_format(s->ops[i], t);
        if (strcmp(t, text) == 0) return i;
    }
    return SIZE_MAX;
}

static double opt_b(const uint32_t *l, const unsigned char *b, uint64_t c) {
    remat_join_problem p = mk(3, l, 1, 1, 1, 0);
    remat_join_plan *pl = NULL;
    if (remat_join_plan_create(&p, b, 0, NULL, &pl, NULL) != REMAT_OK) return NAN;
    double v = remat_join_plan_makespan(pl, c);
    remat_join_plan_free(pl);
    return v;
}

/* Section 4.1: l = (4, 10, 12), c = 9, unit costs. The paper checkpoints x_9 of
 * the 12-branch first (reversed last with Opt_0(8, 9)), then, in (3, 4, 10)
 * with 8 slots and b = (1, 0, 0), x_7 of the 10-branch (Opt_0(6, 7)), leaving
 * (3, 3, 4) with b = (1, 1, 0) at its minimal 7 slots. The sub-problem steps
 * are optimal here too; the top-level choice is not: Eq. 5 finds 74 where
 * that structure costs 75 (the simulator replays the 74). */
static void test_toy_example(void) {
    remat_join_problem p = mk(3, (uint32_t[]){4, 10, 12}, 1, 1, 1, 9);
    remat_join_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_join_solve(&p, 0, NULL, &s, &e), REMAT_OK);
    double o06 = opt0(6, 7, 1, 1), o08 = opt0(8, 9, 1, 1);
    double inner = opt_b((uint32_t[]){3, 3, 4}, (unsigned char[]){1, 1, 0}, 7);
    double mid = opt_b((uint32_t[]){3, 4, 10}, (unsigned char[]){1, 0, 0}, 8);
    ASSERT_NEAR(mid, 7 + inner + o06, 0); /* x_7 on the 10-branch is optimal there */
    ASSERT_TRUE(isinf(opt_b((uint32_t[]){3, 3, 4}, (unsigned char[]){1, 1, 0}, 6)));
    double paper = 9 + mid + o08;
    ASSERT_NEAR(paper, 75, 0);
    ASSERT_NEAR(s->time, 74, 0);
    /* Canonical shape: the forward phase copies x_0 of each branch once, then
     * advances; the turn sees every x_l; after it each branch ends with
     * "Fb j 0" and "Db j", and nothing runs on a branch after its Db. */
    size_t turn = find_op(s, "T", 0);
    ASSERT_TRUE(turn != SIZE_MAX);
    for (uint32_t j = 1; j <= 3; j++) {
        char t[REMAT_JOIN_OP_TEXT_MAX];
        snprintf(t, sizeof t, "S %u 0", (unsigned)j);
        ASSERT_TRUE(find_op(s, t, 0) < turn);
        snprintf(t, sizeof t, "Db %u", (unsigned)j);
        size_t db = find_op(s, t, 0);
        ASSERT_TRUE(db > turn && db != SIZE_MAX);
        for (size_t i = db + 1; i < s->n_ops; i++) ASSERT_TRUE(s->ops[i].branch != j);
    }
    for (size_t i = 0; i < turn; i++) ASSERT_TRUE(s->ops[i].kind != REMAT_JOIN_OP_FB);
    remat_join_sim_result r;
    ASSERT_STATUS(jsim(&p, s->ops, s->n_ops, 9, &r, NULL), REMAT_OK);
    ASSERT_TRUE(r.valid);
    ASSERT_EQ_U64(r.peak_slots, 9);
    ASSERT_NEAR(r.time, 74, 0);
    remat_join_schedule_free(s);
}

static void test_infeasible_and_too_large(void) {
    remat_join_problem p = mk(3, (uint32_t[]){4, 10, 12}, 1, 1, 1, 6);
    remat_join_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_join_solve(&p, 0, NULL, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(s == NULL);
    ASSERT_EQ_U64(e.min_memory, 7);
    ASSERT_CONTAINS(e.message, "needs at least 7 slots (c_min)");
    p = mk(3, (uint32_t[]){100000, 100000, 100000}, 1, 1, 1, 50);
    ASSERT_STATUS(remat_join_solve(&p, 0, NULL, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "too large");
    remat_join_plan *pl = NULL;
    remat_join_options o;
    remat_join_options_init(&o);
    o.max_work_bytes = 1000;
    p = mk(2, (uint32_t[]){30, 30}, 1, 1, 1, 0);
    ASSERT_STATUS(remat_join_plan_create(&p, NULL, 0, &o, &pl, &e), REMAT_E_TOO_LARGE);
    ASSERT_TRUE(pl == NULL);
    o.max_work_bytes = 0;
    o.max_steps = 1000;
    ASSERT_STATUS(remat_join_plan_create(&p, NULL, 0, &o, &pl, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "steps");
    p.slots = 0;
    ASSERT_STATUS(remat_join_solve(&p, 0, NULL, &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "slots");
}

static void test_equiv_chain(void) {
    /* Balanced SNN: EQUIV-CHAIN is the grouped single chain's optimum times k. */
    for (uint32_t L = 1; L <= 6; L++) {
        remat_join_problem p = mk(3, (uint32_t[]){2 * L, 2 * L, 2 * L}, 1, 1, 1, 0);
        remat_join_problem q = mk(1, (uint32_t[]){2 * L}, 3, 3, 1, 0);
        remat_join_plan *pl = plan_of(&p), *ql = plan_of(&q);
        for (uint64_t c = 9; c <= 15; c += 3) {
            remat_join_schedule *s = NULL;
            remat_error e;
            ASSERT_STATUS(remat_join_equiv_chain(&p, c, NULL, &s, &e), REMAT_OK);
            ASSERT_NEAR(s->time, remat_join_plan_makespan(ql, c / 3), 1e-9);
            ASSERT_LE_DBL(remat_join_plan_makespan(pl, c), s->time, 1e-9);
            remat_join_sim_result r;
            ASSERT_STATUS(jsim(&p, s->ops, s->n_ops, c, &r, NULL), REMAT_OK);
            ASSERT_TRUE(r.valid);
            ASSERT_EQ_U64(r.peak_slots, s->peak_slots);
            ASSERT_LE_U64(r.peak_slots, c);
            remat_join_schedule_free(s);
        }
        remat_join_plan_free(pl);
        remat_join_plan_free(ql);
    }
    /* Unbalanced: still valid, never better than the optimum; 8 slots < 3 x 3. */
    remat_join_problem p = mk(3, (uint32_t[]){4, 10, 12}, 1, 1, 1, 9);
    remat_join_curve *cv = NULL;
    ASSERT_STATUS(remat_join_curve_compute(&p, 1, NULL, &cv, NULL), REMAT_OK);
    ASSERT_EQ_U64(cv->points[0].slots, 7);
    ASSERT_EQ_U64(cv->points[cv->n - 1].slots, 29);
    ASSERT_TRUE(isinf(cv->points[1].equiv_chain)); /* 8 slots */
    for (size_t i = 2; i < cv->n; i++) {
        ASSERT_TRUE(isfinite(cv->points[i].equiv_chain));
        ASSERT_LE_DBL(cv->points[i].makespan, cv->points[i].equiv_chain, 1e-9);
    }
    remat_join_curve_free(cv);
    remat_join_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_join_equiv_chain(&p, 8, NULL, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(e.min_memory, 9);
}

static void test_simulator_reports(void) {
    remat_join_problem p = mk(2, (uint32_t[]){2, 1}, 1, 2, 3, 0);
    const char *good[] = {"S 1 0", "F 1 0", "F 1 1", "S 2 0", "F 2 0", "T", "Fb 2 0", "Db 2",
                          "S 1 0", "F 1 0", "Fb 1 1", "Fb 1 0", "Db 1"};
    remat_join_op ops[16];
    size_t n = sizeof good / sizeof good[0];
    for (size_t i = 0; i < n; i++)
        ASSERT_STATUS(remat_join_op_parse(good[i], &ops[i], NULL), REMAT_OK);
    remat_join_sim_result r;
    ASSERT_STATUS(jsim(&p, ops, n, 0, &r, NULL), REMAT_OK);
    ASSERT_TRUE(r.valid);
    ASSERT_NEAR(r.time, 4 * 1 + 3 * 2 + 3, 0);
    ASSERT_EQ_U64(r.peak_slots, 4);
    ASSERT_STATUS(jsim(&p, ops, n, 3, &r, NULL), REMAT_OK);
    ASSERT_TRUE(!r.valid);
    ASSERT_EQ_U64(r.failed_op, 3);
    ASSERT_CONTAINS(r.reason, "\"S 2 0\"");
    ASSERT_CONTAINS(r.reason, "more than the 3 available");
    /* Drop the re-copy of x_0: the recomputation eats it and Fb 1 0 lacks x_0. */
    remat_join_op bad[16];
    memcpy(bad, ops, 8 * sizeof *ops);
    memcpy(bad + 8, ops + 9, 4 * sizeof *ops);
    ASSERT_STATUS(jsim(&p, bad, n - 1, 0, &r, NULL), REMAT_OK);
    ASSERT_TRUE(!r.valid);
    ASSERT_EQ_U64(r.failed_op, 10);
    ASSERT_CONTAINS(r.reason, "needs x_0 of branch 1");
    /* Leave out the last Db: the end state is wrong. */
    ASSERT_STATUS(jsim(&p, ops, n - 1, 0, &r, NULL), REMAT_OK);
    ASSERT_TRUE(!r.valid);
    ASSERT_CONTAINS(r.reason, "Db 1");
    /* Two turns; a branch that does not exist. */
    remat_join_op two[] = {{REMAT_JOIN_OP_S, 1, 0}, {REMAT_JOIN_OP_F, 1, 0},
                           {REMAT_JOIN_OP_F, 1, 1}, {REMAT_JOIN_OP_S, 2, 0},
                           {REMAT_JOIN_OP_F, 2, 0}, {REMAT_JOIN_OP_T, 0, 0},
                           {REMAT_JOIN_OP_T, 0, 0}};
    ASSERT_STATUS(jsim(&p, two, 7, 0, &r, NULL), REMAT_OK);
    ASSERT_CONTAINS(r.reason, "already");
    remat_join_op far = {REMAT_JOIN_OP_S, 5, 0};
    ASSERT_STATUS(jsim(&p, &far, 1, 0, &r, NULL), REMAT_OK);
    ASSERT_CONTAINS(r.reason, "branch 5 does not exist");
    remat_join_op past = {REMAT_JOIN_OP_F, 2, 1};
    ASSERT_STATUS(jsim(&p, &past, 1, 0, &r, NULL), REMAT_OK);
    ASSERT_CONTAINS(r.reason, "out of range");
}

static void test_op_text(void) {
    const char *ok[] = {"F 1 0", "Fb 3 12", "T", "S 2 4", "D 1 1", "Db 2"};
    for (size_t i = 0; i < 6; i++) {
        remat_join_op op;
        char t[REMAT_JOIN_OP_TEXT_MAX];
        ASSERT_STATUS(remat_join_op_parse(ok[i], &op, NULL), REMAT_OK);
        remat_join_op_format(op, t);
        ASSERT_TRUE(strcmp(t, ok[i]) == 0);
    }
    const char *bad[] = {"", "X 1 1", "F 0 1", "F 1", "F 1 2 3", "T 1", "Db", "Fb 1 -1",
                         "F  1 1", "S 1 99999999999", "Db 1 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        remat_join_op op;
        ASSERT_STATUS(remat_join_op_parse(bad[i], &op, NULL), REMAT_E_INPUT);
    }
}

static void test_json_round_trip(void) {
    remat_join_problem p = mk(3, (uint32_t[]){4, 10, 12}, 1, 2.5, 0, 9), q;
    char *text = NULL;
    ASSERT_STATUS(remat_join_problem_to_json(&p, &text, NULL), REMAT_OK);
    ASSERT_TRUE(remat_join_is_problem_json(text, strlen(text)));
    ASSERT_STATUS(remat_join_problem_from_json(text, strlen(text), "t", &q, NULL), REMAT_OK);
    remat_free(text);
    ASSERT_TRUE(memcmp(&p, &q, sizeof p) == 0);
    remat_join_schedule *s = NULL, *s2 = NULL;
    ASSERT_STATUS(remat_join_solve(&p, 0, NULL, &s, NULL), REMAT_OK);
    ASSERT_STATUS(remat_join_schedule_to_json(s, &text, NULL), REMAT_OK);
    ASSERT_TRUE(!remat_join_is_problem_json(text, strlen(text)));
    ASSERT_STATUS(remat_join_schedule_from_json(text, strlen(text), "s", &s2, NULL), REMAT_OK);
    remat_free(text);
    ASSERT_EQ_U64(s2->n_ops, s->n_ops);
    for (size_t i = 0; i < s->n_ops; i++)
        ASSERT_TRUE(s->ops[i].kind == s2->ops[i].kind && s->ops[i].branch == s2->ops[i].branch &&
                    s->ops[i].index == s2->ops[i].index);
    ASSERT_NEAR(s2->time, s->time, 0);
    ASSERT_EQ_U64(s2->peak_slots, s->peak_slots);
    ASSERT_TRUE(strcmp(s2->algorithm, "join-optimal") == 0);
    remat_join_schedule_free(s);
    remat_join_schedule_free(s2);
}

static void test_bad_inputs(void) {
    static const struct {
        const char *doc, *needle;
    } cases[] = {
        {"{\"format\":\"remat-join-1\",\"branches\":[4,0],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"branches[1]\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[-3],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"branches[0]\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"branches\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[2],\"fwd_time\":1,\"turn_time\":1}",
         "\"bwd_time\" is missing"},
        {"{\"format\":\"remat-join-1\",\"branches\":[1e30],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"branches[0]\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[2.5],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "integer"},
        {"{\"format\":\"remat-join-1\",\"branches\":[2],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1,\"slots\":7.5}", "\"slots\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[2],\"fwd_time\":-1,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"fwd_time\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[2],\"fwd_time\":1e300,\"bwd_time\":1,"
         "\"turn_time\":1}", "\"fwd_time\""},
        {"{\"format\":\"remat-join-1\",\"branches\":[2],\"fwd_time\":\"1\",\"bwd_time\":1,"
         "\"turn_time\":1}", "\"fwd_time\""},
        {"{\"format\":\"remat-chain-1\",\"branches\":[2],\"fwd_time\":1,\"bwd_time\":1,"
         "\"turn_time\":1}", "format: \"remat-chain-1\" is not \"remat-join-1\""},
        {"{\"branches\":[2],\"fwd_time\":1,\"bwd_time\":1,\"turn_time\":1}",
         "format: missing required field"},
        {"[1, 2]", "object"},
        {"{\"format\":\"remat-join-1\",", "JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remat_join_problem p;
        remat_error e;
        ASSERT_STATUS(remat_join_problem_from_json(cases[i].doc, strlen(cases[i].doc), "f.json",
                                                   &p, &e),
                      REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, "f.json");
        ASSERT_CONTAINS(e.message, cases[i].needle);
    }
    remat_join_problem p;
    ASSERT_STATUS(remat_join_problem_set(&p, 0, NULL, 1, 1, 1, 0, NULL), REMAT_E_INPUT);
    ASSERT_STATUS(remat_join_problem_set(&p, 17, (uint32_t[17]){0}, 1, 1, 1, 0, NULL),
                 REMAT_E_INPUT);
    ASSERT_STATUS(remat_join_problem_set(&p, 1, (uint32_t[]){3}, NAN, 1, 1, 0, NULL),
                 REMAT_E_INPUT);
    const char *sched = "{\"format\":\"remat-join-schedule-1\",\"ops\":[\"S 1 0\",\"Q\"]}";
    remat_join_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_join_schedule_from_json(sched, strlen(sched), "s.json", &s, &e),
                  REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "ops[1]");
    ASSERT_TRUE(s == NULL);
}

/* Helpers on NULL or out-of-range structs answer, never read out of bounds. */
static void test_helpers_check_their_arguments(void) {
    ASSERT_TRUE(isnan(remat_join_span_star(NULL)));
    ASSERT_EQ_U64(remat_join_full_slots(NULL), 0);
    ASSERT_EQ_U64(remat_join_min_slots(NULL), 0);
    remat_join_problem p = mk(2, (uint32_t[]){3, 4}, 1, 2, 3, 0);
    ASSERT_NEAR(remat_join_span_star(&p), 7 * 3 + 3, 0);
    p.k = 40; /* past REMAT_JOIN_MAX_BRANCHES */
    ASSERT_EQ_U64(remat_join_full_slots(&p), 0);
    ASSERT_TRUE(isnan(remat_join_span_star(&p)));
    ASSERT_EQ_U64(remat_join_min_slots(&p), 0);
    remat_join_sim_result *r = NULL;
    remat_error e;
    ASSERT_STATUS(remat_join_simulate(&p, NULL, 0, 0, &r, &e), REMAT_E_INPUT);
    ASSERT_TRUE(r == NULL);
    char *json = NULL;
    ASSERT_STATUS(remat_join_problem_to_json(&p, &json, &e), REMAT_E_INPUT);
    remat_join_schedule *s = NULL;
    ASSERT_STATUS(remat_join_solve(&p, 9, NULL, &s, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_join_equiv_chain(&p, 9, NULL, &s, &e), REMAT_E_INPUT);
    remat_join_curve *cv = NULL;
    ASSERT_STATUS(remat_join_curve_compute(&p, 1, NULL, &cv, &e), REMAT_E_INPUT);
    p = mk(1, (uint32_t[]){3}, 1, 1, 1, 0);
    p.fwd_time = NAN; /* a hand-made struct: never written as nan */
    ASSERT_STATUS(remat_join_problem_to_json(&p, &json, &e), REMAT_E_INPUT);
    ASSERT_TRUE(json == NULL);
    remat_join_op_format((remat_join_op){REMAT_JOIN_OP_T, 0, 0}, NULL);
    /* *out is NULL after any failure, a NULL argument included (fuzz_api found
     * a double free through a stale *out). */
    s = (remat_join_schedule *)&p;
    ASSERT_STATUS(remat_join_plan_schedule(NULL, 9, &s, &e), REMAT_E_INPUT);
    ASSERT_TRUE(s == NULL);
    s = (remat_join_schedule *)&p;
    ASSERT_STATUS(remat_join_solve(NULL, 9, NULL, &s, &e), REMAT_E_INPUT);
    ASSERT_TRUE(s == NULL);
    /* A schedule's algorithm is escaped, its time never inf. */
    remat_join_schedule hand = {.algorithm = "a \"quoted\" name", .time = INFINITY};
    ASSERT_STATUS(remat_join_schedule_to_json(&hand, &json, &e), REMAT_OK);
    ASSERT_CONTAINS(json, "\"time\": null");
    ASSERT_CONTAINS(json, "a \\\"quoted\\\" name");
    remat_free(json);
    hand.n_ops = 3; /* ops missing */
    ASSERT_STATUS(remat_join_schedule_to_json(&hand, &json, &e), REMAT_E_INPUT);
}

static const test_case cases[] = {
    {"helpers_check_their_arguments", test_helpers_check_their_arguments},
    {"opt0_boundaries", test_opt0_boundaries},
    {"cmin_lemma4", test_cmin_lemma4},
    {"brute_force_exhaustive", test_brute_force_exhaustive},
    {"brute_force_random", test_brute_force_random},
    {"schedules_random", test_schedules_random},
    {"opt_b", test_opt_b},
    {"toy_example", test_toy_example},
    {"infeasible_and_too_large", test_infeasible_and_too_large},
    {"equiv_chain", test_equiv_chain},
    {"simulator_reports", test_simulator_reports},
    {"op_text", test_op_text},
    {"json_round_trip", test_json_round_trip},
    {"bad_inputs", test_bad_inputs},
};
TEST_MAIN(cases)
