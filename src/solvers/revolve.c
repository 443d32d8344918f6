/* revolve: the AD-model checkpointing DP with precise per-stage costs
 * (papers/precise-checkpointing-thesis.md, section 3.1; base DP in 2.5.5).
 *
 * Subproblem (i, j, m): a[i] is held outside the budget, d[j] inside it; the
 * plan ends holding d[i], with a[i] and d[j] freed (B i+1 frees both). An
 * action k (i < k < j) runs "Fck i+1, Fn i+2..k", solves (k, j) with a[k]
 * held outside m - ab[k] buckets, then (i, k) with all m. (i, i+1) is
 * "Fall i+1, B i+1". When no action fits, the quadratic plan recomputes from
 * a[i] once per stage.
 *
 * C(i, j, m) is the least time of a plan whose peak is <= m buckets. What fits
 * at m fits at m + 1, so a row per (i, j) covers [lo, hi] only: lo is the
 * least budget any plan needs (smaller budgets fail), hi the budget where
 * checkpointing every stage fits (nothing is cheaper, C is flat above it).
 * Memory is in buckets: the bytes an op needs beyond the held checkpoints are
 * rounded up as a whole, each checkpoint a[k] on its own, so a plan never
 * exceeds the limit. docs/revolve.md derives it all. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../core/parallel.h"
#include "revolve_internal.h"

#define RV_DEFAULT_BUCKETS 500
#define RV_INF (INT64_MAX / 4) /* "no budget is enough" */
#define RV_CHUNK 2048          /* budgets per DP task */

/* Per-stage values as the DP sees them (the chain's, or uniform ones). */
typedef struct rv_costs {
    size_t n;
    double *fwd, *bwd, *pf;           /* [n+1] by stage; pf[k] = fwd[1] + .. + fwd[k] */
    uint64_t *a, *abar, *d, *fo, *bo; /* [n+1] by value or stage index */
    uint64_t *fa;                     /* [n+1] Fall's overhead (fall_overhead) */
    double *dblock;
    uint64_t *ublock;
} rv_costs;

typedef struct rv_pair {
    int64_t lo, hi;   /* the row holds C(i, j, m) for lo <= m <= hi; empty when lo > hi */
    int64_t quad_b;   /* peak of the quadratic plan, buckets */
    double quad_cost; /* its time */
    size_t off;       /* row start in the pool */
} rv_pair;

typedef struct rv_solver {
    const rv_costs *pc; /* planning values */
    size_t n;
    uint64_t bucket;
    int64_t M;          /* budget in buckets */
    int64_t *ab;        /* [n+1] a[k] in buckets */
    rv_pair *pairs;     /* [n(n+1)/2] */
    double *pool;       /* all rows */
    size_t pool_len;
    uint64_t actions;   /* tried by the last compute_bounds */
} rv_solver;

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Both in 0..RV_INF. */
static int64_t sat_add(int64_t a, int64_t b) { return a >= RV_INF - b ? RV_INF : a + b; }

/* Every byte count here is a sum of a few sizes < 2^53, so it is < 2^57. */
static int64_t to_buckets(uint64_t bytes, uint64_t bucket) {
    uint64_t q = bytes / bucket + (bytes % bucket != 0);
    return q >= (uint64_t)RV_INF ? RV_INF : (int64_t)q;
}

static rv_pair *pair_at(const rv_solver *s, size_t i, size_t j) {
    return &s->pairs[j * (j - 1) / 2 + i];
}

/* ---- planning values ---- */

static void costs_free(rv_costs *m) {
    free(m->dblock);
    free(m->ublock);
    memset(m, 0, sizeof *m);
}

static void costs_uniform_times(rv_costs *m) {
    double f = 0, b = 0;
    for (size_t l = 1; l <= m->n; l++) f += m->fwd[l], b += m->bwd[l];
    f /= (double)m->n;
    b /= (double)m->n;
    for (size_t l = 1; l <= m->n; l++) m->fwd[l] = f, m->bwd[l] = b;
}

/* The largest of each kind; the seed d[n] stays 0 and a[n] is never used. */
static void costs_uniform_sizes(rv_costs *m) {
    uint64_t a = 0, ab = 0, d = 0, fo = 0, bo = 0, fa = 0;
    for (size_t l = 0; l < m->n; l++) a = max_u64(a, m->a[l]), d = max_u64(d, m->d[l]);
    for (size_t l = 1; l <= m->n; l++) {
        ab = max_u64(ab, m->abar[l]);
        fo = max_u64(fo, m->fo[l]);
        bo = max_u64(bo, m->bo[l]);
        fa = max_u64(fa, m->fa[l]);
    }
    for (size_t l = 0; l <= m->n; l++) {
        m->a[l] = a;
        if (l < m->n) m->d[l] = d;
        if (l >= 1) m->abar[l] = ab, m->fo[l] = fo, m->bo[l] = bo, m->fa[l] = fa;
    }
}

static remat_status costs_init(rv_costs *m, const remat_chain *c, remat_revolve_mode mode,
                               remat_error *err) {
    size_t n1 = c->n + 1;
    memset(m, 0, sizeof *m);
    m->n = c->n;
    m->dblock = remat__calloc(n1, 3 * sizeof(double));
    m->ublock = remat__calloc(n1, 6 * sizeof(uint64_t));
    if (!m->dblock || !m->ublock) {
        costs_free(m);
        return remat__fail(err, REMAT_E_NOMEM, "revolve: out of memory for stage costs");
    }
    m->fwd = m->dblock, m->bwd = m->fwd + n1, m->pf = m->bwd + n1;
    m->a = m->ublock, m->abar = m->a + n1, m->d = m->abar + n1, m->fo = m->d + n1;
    m->bo = m->fo + n1, m->fa = m->bo + n1;
    for (size_t l = 0; l <= c->n; l++) {
        m->a[l] = remat_chain_a_bytes(c, l);
        m->d[l] = remat_chain_d_bytes(c, l);
        if (l == 0) continue;
        const remat_stage *st = &c->stages[l - 1];
        m->abar[l] = st->saved_bytes;
        m->fo[l] = st->fwd_overhead;
        m->bo[l] = st->bwd_overhead;
        m->fa[l] = remat__fall_overhead_bound(st); /* options are not used: Fall saves all */
        m->fwd[l] = st->fwd_time;
        m->bwd[l] = st->bwd_time;
    }
    if (mode == REMAT_REVOLVE_UNIFORM_COST) costs_uniform_times(m);
    if (mode == REMAT_REVOLVE_UNIFORM_MEMORY) costs_uniform_sizes(m);
    for (size_t l = 1; l <= c->n; l++) m->pf[l] = m->pf[l - 1] + m->fwd[l];
    return REMAT_OK;
}

/* Bytes beside the held values while the forward of stage l runs in a sweep
 * that started from a[i] (whose predecessor a[l-1] it frees, unless l-1 = i). */
static uint64_t fwd_step(const rv_costs *m, size_t i, size_t l) {
    return (l == i + 1 ? 0 : m->a[l - 1]) + m->a[l] + m->fo[l];
}

/* "Fall t, B t" with d[t] and h bytes of a[t-1] held (h = 0: a[t-1] is outside). */
static uint64_t back_step(const rv_costs *m, size_t t, uint64_t h) {
    return m->d[t] + h + m->abar[t] + max_u64(m->fa[t], m->d[t - 1] + m->bo[t]);
}

/* ---- bounds: lo, hi and the quadratic plan of every (i, j) ---- */

/* Least budget at which action k of (i, j) fits; fmax is the sweep's largest
 * fwd_step up to k. */
static int64_t action_need(const rv_solver *s, size_t j, size_t k, uint64_t fmax,
                           const rv_pair *right, const rv_pair *left) {
    if (right->lo >= RV_INF || left->lo >= RV_INF) return RV_INF;
    int64_t need = to_buckets(s->pc->d[j] + fmax, s->bucket);
    need = max_i64(need, sat_add(s->ab[k], right->lo));
    return max_i64(need, left->lo);
}

static void mark_failed(rv_solver *s, size_t i, size_t j_from) {
    for (size_t j = j_from; j <= s->n; j++) {
        rv_pair *p = pair_at(s, i, j);
        p->lo = RV_INF, p->hi = s->M, p->quad_b = RV_INF, p->quad_cost = INFINITY;
    }
}

/* Bottom-up over i (descending) and j (ascending), like the thesis' loops;
 * the quadratic plan's peak and time are carried along j (its Alg. 3.2-3.3). */
static void compute_bounds(rv_solver *s) {
    const rv_costs *m = s->pc;
    s->actions = 0;
    for (size_t i = s->n; i-- > 0;) {
        uint64_t qfwd = 0, qpeak = 0;
        double qcost = 0;
        for (size_t j = i + 1; j <= s->n; j++) {
            /* Every plan of (i, j') with j' >= j runs "Fall j, B j" inside the
             * budget: if that alone does not fit, they all fail. */
            if (to_buckets(back_step(m, j, 0), s->bucket) > s->M) {
                mark_failed(s, i, j);
                break;
            }
            rv_pair *p = pair_at(s, i, j);
            uint64_t h = 0;
            if (j - 1 > i) {
                qfwd = max_u64(qfwd, fwd_step(m, i, j - 1));
                qpeak = max_u64(qpeak, m->d[j] + qfwd);
                h = m->a[j - 1];
            }
            qpeak = max_u64(qpeak, back_step(m, j, h));
            qcost += (m->pf[j - 1] - m->pf[i]) + m->fwd[j] + m->bwd[j];
            p->quad_b = to_buckets(qpeak, s->bucket);
            p->quad_cost = qcost;
            if (j == i + 1) { /* one stage: the quadratic plan is the only plan */
                p->lo = p->quad_b;
                p->hi = min_i64(p->lo, s->M);
                continue;
            }
            int64_t lo = p->quad_b;
            uint64_t fmax = 0;
            s->actions += j - i - 1;
            for (size_t k = i + 1; k < j; k++) {
                fmax = max_u64(fmax, fwd_step(m, i, k));
                lo = min_i64(lo, action_need(s, j, k, fmax, pair_at(s, k, j), pair_at(s, i, k)));
            }
            /* Checkpointing every stage: nothing is cheaper, so C is flat from its peak on. */
            int64_t all = to_buckets(m->d[j] + fwd_step(m, i, i + 1), s->bucket);
            all = max_i64(all, sat_add(s->ab[i + 1], pair_at(s, i + 1, j)->hi));
            all = max_i64(all, pair_at(s, i, i + 1)->hi);
            p->lo = lo;
            p->hi = min_i64(max_i64(all, lo), s->M);
        }
    }
}

/* ---- the estimate, before anything of size n^2 is allocated ---- */

/* One core's seconds per action compute_bounds tries and per DP cell, on a
 * quiet core of the development machine (bench_revolve --calibrate,
 * docs/bounded.md; a loaded one measures up to twice that). */
#define RV_SEC_PER_ACTION 6e-9
#define RV_SEC_PER_CELL 6e-10
/* ... and per action the DP looks at in a chunk of a row: it weighs every k
 * of (i, j) once per chunk, which dominates on short rows. */
#define RV_SEC_PER_DP_ACTION 1e-8

/* One core's seconds of the DP over its rows: a row of len budgets of (i, j)
 * takes (j - i) cells per budget and j - i - 1 actions per chunk. */
static double dp_row_seconds(size_t len, size_t span) {
    double chunks = (double)((len + RV_CHUNK - 1) / RV_CHUNK);
    return (double)len * (double)span * RV_SEC_PER_CELL +
           chunks * (double)(span - 1) * RV_SEC_PER_DP_ACTION;
}

/* Actions compute_bounds tries at most: j - i - 1 for every pair,
 * (n^3 - n) / 6 in all. */
static double bound_actions(size_t n) {
    double x = (double)n;
    return (x * x * x - x) / 6;
}

/* An upper bound on the DP's seconds (dp_row_seconds over its rows) and
 * cells (*cells), in O(n^2) time and O(n) memory (hi[2][n+1]): row (i, j)
 * ends at most at min(M, max(all, quad_b))
 * (quad_b >= lo; `all` as compute_bounds has it, from these upper ends) and
 * starts at least at the need of "Fall t, B t" for every t in (i, j] and at
 * that of the first forward, which every plan of (i, j) runs. */
static double dp_bound(const rv_costs *m, uint64_t bucket, int64_t M, const int64_t *ab,
                       int64_t *hi[2], double *cells) {
    double secs = 0;
    *cells = 0;
    for (size_t i = m->n; i-- > 0;) {
        int64_t *cur = hi[i % 2];
        const int64_t *next = hi[(i + 1) % 2]; /* (i + 1, j) */
        uint64_t qfwd = 0, qpeak = 0;
        int64_t back = 0;
        for (size_t j = i + 1; j <= m->n; j++) {
            back = max_i64(back, to_buckets(back_step(m, j, 0), bucket));
            if (back > M) break; /* (i, j') fails for every j' >= j: empty rows */
            uint64_t h = 0;
            if (j - 1 > i) {
                qfwd = max_u64(qfwd, fwd_step(m, i, j - 1));
                qpeak = max_u64(qpeak, m->d[j] + qfwd);
                h = m->a[j - 1];
            }
            qpeak = max_u64(qpeak, back_step(m, j, h));
            int64_t quad = to_buckets(qpeak, bucket);
            cur[j] = min_i64(quad, M);
            if (j == i + 1) continue;
            int64_t first = to_buckets(m->d[j] + fwd_step(m, i, i + 1), bucket);
            int64_t all = max_i64(max_i64(first, sat_add(ab[i + 1], next[j])), cur[i + 1]);
            int64_t top = min_i64(max_i64(all, quad), M), lo = max_i64(back, first);
            cur[j] = top;
            if (top < lo) continue;
            *cells += (double)(top - lo + 1) * (double)(j - i);
            secs += dp_row_seconds((size_t)(top - lo + 1), j - i);
        }
    }
    return secs;
}

typedef struct rv_estimate {
    double bounds, dp; /* one core's seconds */
    double cells;      /* the DP's cells, at most */
} rv_estimate;

/* The work of one solve at `memory` with `bucket`: the bounds from their
 * action count, the DP from dp_bound (skipped, left 0, when the bounds alone
 * pass `limit` seconds). 0 on success, -1 when out of memory. */
static int estimate_work(const rv_costs *m, uint64_t bucket, uint64_t memory, double limit,
                         rv_estimate *out) {
    out->bounds = bound_actions(m->n) * RV_SEC_PER_ACTION;
    out->dp = out->cells = 0;
    if (out->bounds > limit) return 0;
    size_t n1 = m->n + 1;
    int64_t *ab = remat__calloc(n1, sizeof *ab), *hi = remat__calloc(2 * n1, sizeof *hi);
    if (!ab || !hi) {
        free(ab);
        free(hi);
        return -1;
    }
    for (size_t k = 0; k < n1; k++) ab[k] = to_buckets(m->a[k], bucket);
    int64_t M = memory < m->a[0] ? -1 : (int64_t)((memory - m->a[0]) / bucket);
    int64_t *rows[2] = {hi, hi + n1};
    out->dp = dp_bound(m, bucket, M, ab, rows, &out->cells);
    free(ab);
    free(hi);
    return 0;
}

static uint64_t default_bucket(uint64_t memory);

/* Checks the estimate of one solve against o's limit, before anything is
 * allocated: the bounds run on one core, the DP on o->threads. */
static remat_status check_estimate(const rv_costs *m, uint64_t bucket, const remat_solve_options *o,
                                   rv_estimate *est, remat_error *err) {
    double limit = remat__max_seconds(o);
    rv_estimate w = {0, 0, 0};
    *est = w;
    if (isinf(limit)) return REMAT_OK;
    REMAT__RETURN_IF(estimate_work(m, bucket, o->memory, limit, &w) != 0, err, REMAT_E_NOMEM,
                     "revolve: out of memory for the estimate");
    char hint[160];
    if (w.bounds > limit / 2)
        snprintf(hint, sizeof hint,
                 "its bounds alone take about %.3g s on %zu stages, whatever the buckets: use "
                 "optimal for a chain this long",
                 w.bounds, m->n);
    else
        snprintf(hint, sizeof hint, "use larger buckets (--bucket)");
    *est = w;
    return remat__check_time(o, w.bounds + remat__parallel_seconds(o, w.dp), "revolve", hint, err);
}

double remat__revolve_estimate(const remat_chain *c, const remat_solve_options *o) {
    rv_costs m;
    remat_error e;
    if (costs_init(&m, c, o->revolve_mode, &e) != REMAT_OK) return INFINITY;
    uint64_t memory = o->memory;
    if (!memory) remat_store_all_cost(c, &memory, NULL, NULL); /* a sweep's largest */
    if (memory >= REMAT_MAX_BYTES) memory = REMAT_MAX_BYTES - 1;
    uint64_t bucket = o->bucket_bytes ? o->bucket_bytes : default_bucket(memory);
    rv_estimate w = {INFINITY, 0, 0};
    if (estimate_work(&m, bucket, memory, remat__max_seconds(o), &w) != 0) w.bounds = INFINITY;
    costs_free(&m);
    return w.bounds + w.dp;
}

static double row_at(const rv_solver *s, const rv_pair *p, int64_t m) {
    if (m > p->hi) m = p->hi;
    return s->pool[p->off + (size_t)(m - p->lo)];
}

/* ---- the DP kernels: best[t] = min(best[t], (f + r[t]) + l[t]) ---- */

#if defined(__SSE2__)
#define RV_RELAX(name, RARG, LARG, RV, LV, RS, LS)                                      \
    static void name(double *restrict best, size_t cnt, double f, RARG, LARG) {         \
        __m128d vf = _mm_set1_pd(f);                                                    \
        size_t t = 0;                                                                   \
        for (; t + 4 <= cnt; t += 4) {                                                  \
            __m128d c0 = _mm_add_pd(_mm_add_pd(vf, RV(t)), LV(t));                      \
            __m128d c1 = _mm_add_pd(_mm_add_pd(vf, RV(t + 2)), LV(t + 2));              \
            _mm_storeu_pd(best + t, _mm_min_pd(c0, _mm_loadu_pd(best + t)));           \
            _mm_storeu_pd(best + t + 2, _mm_min_pd(c1, _mm_loadu_pd(best + t + 2)));   \
        }                                                                               \
        for (; t < cnt; t++) {                                                          \
            double c = (f + RS(t)) + LS(t);                                             \
            if (c < best[t]) best[t] = c;                                               \
        }                                                                               \
    }
#define RV_VEC(p, t) _mm_loadu_pd((p) + (t))
#else
#define RV_RELAX(name, RARG, LARG, RV, LV, RS, LS)                              \
    static void name(double *restrict best, size_t cnt, double f, RARG, LARG) { \
        for (size_t t = 0; t < cnt; t++) {                                      \
            double c = (f + RS(t)) + LS(t);                                     \
            if (c < best[t]) best[t] = c;                                       \
        }                                                                       \
    }
#endif
#define RV_RV(t) RV_VEC(r, t)
#define RV_LV(t) RV_VEC(l, t)
#define RV_RC(t) _mm_set1_pd(r)
#define RV_LC(t) _mm_set1_pd(l)
#define RV_RS(t) r[t]
#define RV_LS(t) l[t]
#define RV_RCS(t) r
#define RV_LCS(t) l
RV_RELAX(relax_vv, const double *restrict r, const double *restrict l, RV_RV, RV_LV, RV_RS, RV_LS)
RV_RELAX(relax_cv, double r, const double *restrict l, RV_RC, RV_LV, RV_RCS, RV_LS)
RV_RELAX(relax_vc, const double *restrict r, double l, RV_RV, RV_LC, RV_RS, RV_LCS)

static void relax_cc(double *best, size_t cnt, double c) {
    for (size_t t = 0; t < cnt; t++)
        if (c < best[t]) best[t] = c;
}

/* Relaxes best (budgets m0..m1) with action k for budgets st..m1: the right
 * row is read at m - sh and the left at m, each flat past its hi. */
static void relax_action(const rv_solver *s, double *best, int64_t m0, int64_t st, int64_t m1,
                         double f, const rv_pair *r, int64_t sh, const rv_pair *l) {
    const double *R = s->pool + r->off, *L = s->pool + l->off;
    double rc = R[r->hi - r->lo], lc = L[l->hi - l->lo];
    int64_t r_flat = r->hi + sh, l_flat = l->hi; /* flat for m beyond these */
    int64_t m = st, e = min_i64(m1, min_i64(r_flat, l_flat));
    if (m <= e) {
        relax_vv(best + (m - m0), (size_t)(e - m + 1), f, R + (m - sh - r->lo), L + (m - l->lo));
        m = e + 1;
    }
    if (m <= m1 && r_flat < l_flat && m <= l_flat) {
        e = min_i64(m1, l_flat);
        relax_cv(best + (m - m0), (size_t)(e - m + 1), f, rc, L + (m - l->lo));
        m = e + 1;
    } else if (m <= m1 && l_flat < r_flat && m <= r_flat) {
        e = min_i64(m1, r_flat);
        relax_vc(best + (m - m0), (size_t)(e - m + 1), f, R + (m - sh - r->lo), lc);
        m = e + 1;
    }
    if (m <= m1) relax_cc(best + (m - m0), (size_t)(m1 - m + 1), (f + rc) + lc);
}

/* Fills C(i, j, m) for m0 <= m <= m1 (inside the row); returns the candidates tried. */
static uint64_t solve_chunk(const rv_solver *s, size_t i, size_t j, int64_t m0, int64_t m1) {
    const rv_costs *pc = s->pc;
    const rv_pair *p = pair_at(s, i, j);
    double *best = s->pool + p->off + (m0 - p->lo);
    size_t cnt = (size_t)(m1 - m0 + 1);
    uint64_t fmax = 0, cells = 0;
    for (size_t t = 0; t < cnt; t++) best[t] = INFINITY;
    for (size_t k = i + 1; k < j; k++) {
        fmax = max_u64(fmax, fwd_step(pc, i, k));
        const rv_pair *r = pair_at(s, k, j), *l = pair_at(s, i, k);
        int64_t st = max_i64(action_need(s, j, k, fmax, r, l), m0);
        if (st > m1) continue;
        relax_action(s, best, m0, st, m1, pc->pf[k] - pc->pf[i], r, s->ab[k], l);
        cells += (uint64_t)(m1 - st + 1);
    }
    /* Every action failed: fall back to recomputing everything, if it fits. */
    for (int64_t m = max_i64(p->quad_b, m0); m <= m1; m++)
        if (best[m - m0] == INFINITY) best[m - m0] = p->quad_cost;
    return cells;
}

/* ---- running the DP: tasks ordered by length, workers wait per length ---- */

typedef struct rv_task {
    uint32_t i, j;
    int64_t m0, m1;
} rv_task;

typedef struct rv_run {
    const rv_solver *s;
    const rv_task *tasks;
    const size_t *group_end;      /* [n+1]: tasks of length <= l end at group_end[l] */
    remat__gates *done;           /* one counter: tasks finished */
    atomic_uint_fast64_t *cells;  /* DP cells, summed over the workers */
} rv_run;

static void run_task(const void *arg, size_t t, unsigned worker) {
    const rv_run *run = arg;
    (void)worker;
    const rv_task *tk = &run->tasks[t];
    size_t len = tk->j - tk->i;
    remat__gate_wait(run->done, 0, run->group_end[len - 1]); /* shorter subproblems first */
    uint64_t cells = solve_chunk(run->s, tk->i, tk->j, tk->m0, tk->m1);
    atomic_fetch_add(run->cells, cells);
    remat__gate_add(run->done, 0, 1);
}

static size_t row_len(const rv_pair *p) { return p->lo > p->hi ? 0 : (size_t)(p->hi - p->lo + 1); }

/* Refuses, before the table is laid out, a DP estimated to take longer than
 * o allows, from the exact rows: (i, j) tries j - i - 1 actions at each of
 * its budgets. */
static remat_status check_time(const rv_solver *s, const remat_solve_options *o,
                               remat_error *err) {
    double secs = 0;
    for (size_t j = 2; j <= s->n; j++)
        for (size_t i = 0; i + 1 < j; i++) {
            size_t len = row_len(pair_at(s, i, j));
            if (len) secs += dp_row_seconds(len, j - i);
        }
    return remat__check_time(o, remat__parallel_seconds(o, secs), "revolve",
                             "use larger buckets (--bucket)", err);
}

/* Lays the rows out in the pool; fails when they exceed *budget bytes. */
static remat_status layout_rows(rv_solver *s, uint64_t *budget, remat_error *err) {
    size_t total = 0;
    for (size_t j = 1; j <= s->n; j++)
        for (size_t i = 0; i < j; i++) {
            rv_pair *p = pair_at(s, i, j);
            p->off = total;
            REMAT__RETURN_IF(!remat__add_u64(total, row_len(p), &total) || total > SIZE_MAX / 8,
                             err, REMAT_E_TOO_LARGE, "revolve: cost table size overflows");
        }
    s->pool_len = total;
    void *mem;
    REMAT__FORWARD(remat__alloc_table(&mem, total, sizeof(double), *budget, "revolve cost table",
                                      err));
    s->pool = mem;
    *budget -= (uint64_t)total * sizeof(double);
    for (size_t i = 0; i < s->n; i++) { /* one stage: "Fall, B" */
        rv_pair *p = pair_at(s, i, i + 1);
        if (row_len(p)) s->pool[p->off] = s->pc->fwd[i + 1] + s->pc->bwd[i + 1];
    }
    return REMAT_OK;
}

static void solve_pair(const rv_solver *s, size_t i, size_t j, uint64_t *cells) {
    const rv_pair *p = pair_at(s, i, j);
    for (int64_t m0 = p->lo; m0 <= p->hi; m0 += RV_CHUNK)
        *cells += solve_chunk(s, i, j, m0, min_i64(p->hi, m0 + RV_CHUNK - 1));
}

/* One thread: the thesis' order (i down, j up), which keeps the rows (i, k)
 * in cache while j moves. */
static void run_sequential(const rv_solver *s, uint64_t *cells) {
    for (size_t i = s->n; i-- > 0;)
        for (size_t j = i + 2; j <= s->n; j++) solve_pair(s, i, j, cells);
}

/* Several threads: subproblems of one length are independent, so tasks (a
 * pair and a chunk of budgets) go by increasing length. */
static remat_status run_dp(rv_solver *s, unsigned threads, uint64_t budget, uint64_t *cells,
                           unsigned *used, remat_error *err) {
    size_t ntasks = 0, n = s->n;
    *cells = 0;
    *used = 1;
    if (threads <= 1 || n < 3) {
        run_sequential(s, cells);
        return REMAT_OK;
    }
    for (size_t j = 2; j <= n; j++)
        for (size_t i = 0; i + 1 < j; i++) {
            size_t len = row_len(pair_at(s, i, j));
            ntasks += (len + RV_CHUNK - 1) / RV_CHUNK;
        }
    void *m1, *m2;
    REMAT__FORWARD(remat__alloc_table(&m1, ntasks, sizeof(rv_task), budget, "revolve task list",
                                      err));
    remat_status st = remat__alloc_table(&m2, n + 1, sizeof(size_t), REMAT_MAX_BYTES,
                                         "revolve task groups", err);
    if (st != REMAT_OK) {
        free(m1);
        return st;
    }
    rv_task *tasks = m1;
    size_t *group_end = m2;
    size_t t = 0;
    for (size_t len = 2; len <= n; len++) {
        for (size_t i = 0; i + len <= n; i++) {
            const rv_pair *p = pair_at(s, i, i + len);
            for (int64_t m0 = p->lo; m0 <= p->hi; m0 += RV_CHUNK)
                tasks[t++] = (rv_task){(uint32_t)i, (uint32_t)(i + len), m0,
                                       min_i64(p->hi, m0 + RV_CHUNK - 1)};
        }
        group_end[len] = t;
    }
    group_end[0] = group_end[1] = 0;
    atomic_uint_fast64_t total;
    atomic_init(&total, 0);
    rv_run run = {s, tasks, group_end, remat__gates_new(1), &total};
    if (!run.done) {
        free(tasks);
        free(group_end);
        return remat__fail(err, REMAT_E_NOMEM, "revolve: out of memory");
    }
    /* Items go out in task order, so a task only waits for earlier ones. */
    *used = remat__parallel_for(threads, ntasks, run_task, &run);
    remat__gates_free(run.done);
    *cells = atomic_load(&total);
    free(tasks);
    free(group_end);
    return REMAT_OK;
}

/* ---- the plan: choose actions again from the table and emit ops ---- */

/* The first action whose cost equals the table's C(i, j, m), computed exactly
 * as the DP did (same sums, same order); 0 for the quadratic plan. */
static int choose_action(const rv_solver *s, size_t i, size_t j, int64_t m, size_t *k_out) {
    const rv_pair *p = pair_at(s, i, j);
    double target = row_at(s, p, m);
    uint64_t fmax = 0;
    if (m > p->hi) m = p->hi;
    for (size_t k = i + 1; k < j; k++) {
        fmax = max_u64(fmax, fwd_step(s->pc, i, k));
        const rv_pair *r = pair_at(s, k, j), *l = pair_at(s, i, k);
        if (action_need(s, j, k, fmax, r, l) > m) continue;
        double c = ((s->pc->pf[k] - s->pc->pf[i]) + row_at(s, r, m - s->ab[k])) + row_at(s, l, m);
        if (c == target) {
            *k_out = k;
            return 1;
        }
    }
    *k_out = 0;
    return m >= p->quad_b && target == p->quad_cost;
}

typedef struct rv_emit {
    const rv_costs *real; /* the chain's own values, for the prediction */
    remat_schedule *out;
    uint64_t peak;
    double time;
    remat_error *err;
} rv_emit;

static uint64_t sat_add_u64(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static remat_status emit(rv_emit *e, remat_op_kind kind, size_t stage, uint64_t during) {
    e->peak = max_u64(e->peak, during);
    e->time += kind == REMAT_OP_B ? e->real->bwd[stage] : e->real->fwd[stage];
    return remat__push(e->out, kind, (uint32_t)stage, e->err);
}

/* Fck i+1, Fn i+2..k while d[j] and `outside` are held. */
static remat_status emit_sweep(rv_emit *e, size_t i, size_t j, size_t k, uint64_t outside) {
    const rv_costs *m = e->real;
    for (size_t l = i + 1; l <= k; l++)
        REMAT__FORWARD(emit(e, l == i + 1 ? REMAT_OP_FCK : REMAT_OP_FN, l,
                            sat_add_u64(outside, m->d[j] + fwd_step(m, i, l))));
    return REMAT_OK;
}

/* Fall t, B t with a[t-1] held outside (h = 0) or inside (h bytes). */
static remat_status emit_back(rv_emit *e, size_t t, uint64_t h, uint64_t outside) {
    const rv_costs *m = e->real;
    uint64_t base = sat_add_u64(outside, m->d[t] + h + m->abar[t]);
    REMAT__FORWARD(emit(e, REMAT_OP_FALL, t, sat_add_u64(base, m->fa[t])));
    return emit(e, REMAT_OP_B, t, sat_add_u64(base, m->d[t - 1] + m->bo[t]));
}

static remat_status emit_quadratic(rv_emit *e, size_t i, size_t j, uint64_t outside) {
    for (size_t t = j; t > i; t--) {
        REMAT__FORWARD(emit_sweep(e, i, t, t - 1, outside));
        REMAT__FORWARD(emit_back(e, t, t - 1 > i ? e->real->a[t - 1] : 0, outside));
    }
    return REMAT_OK;
}

typedef struct rv_frame {
    size_t i, j;
    int64_t m;
    uint64_t outside; /* bytes held by callers, a[i] included */
} rv_frame;

/* Walks the plan with an explicit stack (right part first, then left). */
static remat_status emit_plan(const rv_solver *s, rv_emit *e, remat__revolve_stats *stats) {
    void *mem;
    size_t top = 0, cap = s->n + 2;
    REMAT__FORWARD(remat__alloc_table(&mem, cap, sizeof(rv_frame), REMAT_MAX_BYTES,
                                      "revolve plan stack", e->err));
    rv_frame *stack = mem;
    remat_status st = REMAT_OK;
    stack[top++] = (rv_frame){0, s->n, s->M, e->real->a[0]};
    while (top > 0 && st == REMAT_OK) {
        rv_frame f = stack[--top];
        size_t k;
        if (f.j == f.i + 1) {
            st = emit_back(e, f.j, 0, f.outside);
        } else if (!choose_action(s, f.i, f.j, f.m, &k)) {
            st = remat__fail(e->err, REMAT_E_INTERNAL,
                             "revolve: no action of (%zu, %zu) reproduces the table", f.i, f.j);
        } else if (k == 0) {
            stats->quad_nodes++;
            st = emit_quadratic(e, f.i, f.j, f.outside);
        } else if (top + 2 > cap) {
            st = remat__fail(e->err, REMAT_E_INTERNAL, "revolve: plan stack overflow");
        } else {
            stats->ckpt_nodes++;
            int64_t m = min_i64(f.m, pair_at(s, f.i, f.j)->hi);
            st = emit_sweep(e, f.i, f.j, k, f.outside);
            stack[top++] = (rv_frame){f.i, k, m, f.outside};
            stack[top++] = (rv_frame){k, f.j, m - s->ab[k], sat_add_u64(f.outside, e->real->a[k])};
        }
    }
    free(stack);
    return st;
}

/* ---- entry points ---- */

/* CPU seconds of the calling thread: with one thread, one core's seconds
 * whatever else the machine runs (the calibration's unit). */
static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t default_bucket(uint64_t memory) {
    uint64_t b = memory / RV_DEFAULT_BUCKETS + (memory % RV_DEFAULT_BUCKETS != 0);
    return b ? b : 1; /* memory 0: only an all-zero chain fits */
}

/* Sets bucket, budget and bounds for `memory`; 1 when the whole chain fits. */
static int bounds_fit(rv_solver *s, uint64_t bucket, uint64_t memory) {
    uint64_t a0 = s->pc->a[0];
    s->bucket = bucket;
    s->M = memory < a0 ? -1 : (int64_t)((memory - a0) / bucket);
    for (size_t k = 0; k <= s->n; k++) s->ab[k] = to_buckets(s->pc->a[k], bucket);
    compute_bounds(s);
    return pair_at(s, 0, s->n)->lo <= s->M;
}

/* The least memory that works, from the bounds alone (no table). With a fixed
 * bucket it is exact; with the default one, which grows with the memory,
 * feasibility need not be monotone and a bisection finds a boundary. 0 when
 * nothing below 2^53 bytes works. */
static uint64_t least_memory(rv_solver *s, uint64_t fixed_bucket, uint64_t memory) {
    uint64_t a0 = s->pc->a[0];
    if (fixed_bucket) {
        s->bucket = fixed_bucket;
        s->M = RV_INF - 1;
        for (size_t k = 0; k <= s->n; k++) s->ab[k] = to_buckets(s->pc->a[k], fixed_bucket);
        compute_bounds(s);
        int64_t lo = pair_at(s, 0, s->n)->lo;
        if (lo >= RV_INF || (uint64_t)lo > (REMAT_MAX_BYTES - 1 - a0) / fixed_bucket) return 0;
        return a0 + (uint64_t)lo * fixed_bucket;
    }
    uint64_t bad = memory, good = memory < a0 ? a0 : memory;
    while (!bounds_fit(s, default_bucket(good), good)) {
        if (good >= REMAT_MAX_BYTES / 2) return 0;
        bad = good;
        good = good ? 2 * good : 1;
    }
    while (good - bad > 1) {
        uint64_t mid = bad + (good - bad) / 2;
        if (bounds_fit(s, default_bucket(mid), mid))
            good = mid;
        else
            bad = mid;
    }
    return good;
}

/* One core's seconds of least_memory from `memory` up: one bounds run with a
 * fixed bucket; with the default one, the doublings up to about the store-all
 * peak and a bisection over about as many bits. */
static double least_memory_seconds(const remat_chain *c, uint64_t fixed_bucket, uint64_t memory) {
    double runs = 1;
    if (!fixed_bucket) {
        uint64_t peak = 0, from = memory > c->input_bytes ? memory : c->input_bytes;
        remat_store_all_cost(c, &peak, NULL, NULL);
        double bits = log2((double)peak + 2);
        runs = 2 + bits + (peak > from ? log2((double)peak / (double)(from ? from : 1)) : 0);
    }
    return runs * bound_actions(c->n) * RV_SEC_PER_ACTION;
}

static remat_status infeasible(rv_solver *s, const remat_chain *c, const remat_solve_options *o,
                               remat_error *err) {
    int64_t M = s->M;
    uint64_t bucket = s->bucket;
    /* the smallest memory only when its search fits the time limit: else
     * unknown (0), and remat_solve's own search says why */
    double search = least_memory_seconds(c, o->bucket_bytes, o->memory);
    uint64_t need = search <= remat__max_seconds(o) ? least_memory(s, o->bucket_bytes, o->memory)
                                                    : 0;
    /* M < 0: the (possibly uniform-size) input alone exceeds the limit */
    remat_status st = remat__fail(err, REMAT_E_INFEASIBLE,
                                  "revolve: no AD-model schedule fits in %llu bytes "
                                  "(%lld buckets of %llu bytes beside the input)",
                                  (unsigned long long)o->memory, (long long)(M > 0 ? M : 0),
                                  (unsigned long long)bucket);
    if (err) err->min_memory = need;
    return st;
}

/* The pair table and checkpoint sizes of s, within o's work cap. */
static remat_status alloc_pairs(rv_solver *s, const remat_solve_options *o, uint64_t *budget,
                                remat_error *err) {
    size_t n = s->n, npairs;
    REMAT__RETURN_IF(n > UINT32_MAX - 2 || !remat__mul_size(n, n + 1, &npairs), err,
                     REMAT_E_TOO_LARGE, "revolve: %zu stages is too many", n);
    npairs /= 2;
    void *mem;
    *budget = o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    REMAT__FORWARD(remat__alloc_table(&mem, npairs, sizeof(rv_pair), *budget,
                                      "revolve subproblem table", err));
    s->pairs = mem;
    *budget -= (uint64_t)npairs * sizeof(rv_pair);
    REMAT__FORWARD(remat__alloc_table(&mem, n + 1, sizeof(int64_t), *budget,
                                      "revolve checkpoint sizes", err));
    s->ab = mem;
    *budget -= (uint64_t)(n + 1) * sizeof(int64_t);
    return REMAT_OK;
}

static remat_status solve_with(rv_solver *s, const remat_chain *c, const rv_costs *real,
                               const remat_solve_options *o, remat_schedule **out,
                               remat__revolve_stats *stats, remat_error *err) {
    size_t n = c->n;
    uint64_t budget, bucket = o->bucket_bytes ? o->bucket_bytes : default_bucket(o->memory);
    /* the bounds take O(n^3) and the pairs O(n^2): estimated first */
    rv_estimate est;
    REMAT__FORWARD(check_estimate(s->pc, bucket, o, &est, err));
    stats->estimate_bounds = est.bounds;
    stats->estimate_cells = est.cells;
    stats->estimate_seconds = est.bounds + est.dp;
    REMAT__FORWARD(alloc_pairs(s, o, &budget, err));
    double t0 = cpu_seconds();
    int fits = bounds_fit(s, bucket, o->memory);
    stats->bounds_seconds = cpu_seconds() - t0;
    stats->bound_actions = s->actions;
    const rv_pair *top = pair_at(s, 0, n);
    stats->bucket_bytes = bucket;
    stats->buckets = s->M;
    stats->min_buckets = top->lo;
    if (!fits) return infeasible(s, c, o, err);
    REMAT__FORWARD(check_time(s, o, err));
    REMAT__FORWARD(layout_rows(s, &budget, err));
    stats->table_entries = s->pool_len;
    t0 = cpu_seconds();
    REMAT__FORWARD(run_dp(s, remat__threads(o->threads), budget, &stats->cells, &stats->threads,
                          err));
    stats->dp_seconds = cpu_seconds() - t0;
    stats->dp_cost = row_at(s, top, s->M);

    remat_schedule *sch = NULL;
    REMAT__FORWARD(remat_schedule_create("revolve", &sch, err));
    rv_emit e = {.real = real, .out = sch, .peak = real->a[0], .time = 0, .err = err};
    remat_status st = emit_plan(s, &e, stats);
    /* In precise mode the table's cost is the prediction; it must match the plan's. */
    if (st == REMAT_OK && o->revolve_mode != REMAT_REVOLVE_UNIFORM_COST &&
        !(fabs(stats->dp_cost - e.time) <= 1e-9 * (1 + fabs(e.time))))
        st = remat__fail(err, REMAT_E_INTERNAL, "revolve: table cost %.17g but plan cost %.17g",
                         stats->dp_cost, e.time);
    if (st != REMAT_OK) {
        remat_schedule_free(sch);
        return st;
    }
    sch->memory_limit = o->memory;
    sch->time = o->revolve_mode == REMAT_REVOLVE_UNIFORM_COST ? e.time : stats->dp_cost;
    sch->peak_bytes = e.peak;
    *out = sch;
    return REMAT_OK;
}

remat_status remat__revolve_solve_stats(const remat_chain *c, const remat_solve_options *o,
                                        remat_schedule **out, remat__revolve_stats *stats,
                                        remat_error *err) {
    remat__revolve_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    REMAT__RETURN_IF(!c || !o || !out, err, REMAT_E_INPUT, "revolve: NULL argument");
    *out = NULL;
    REMAT__RETURN_IF((unsigned)o->revolve_mode > REMAT_REVOLVE_UNIFORM_MEMORY, err, REMAT_E_INPUT,
                     "revolve mode: unknown value %d", (int)o->revolve_mode);
    REMAT__RETURN_IF(o->memory >= REMAT_MAX_BYTES || o->bucket_bytes >= REMAT_MAX_BYTES, err,
                     REMAT_E_INPUT, "revolve: memory and bucket must be below 2^53 bytes");
    rv_costs real, plan;
    REMAT__FORWARD(costs_init(&real, c, REMAT_REVOLVE_PRECISE, err));
    const rv_costs *pc = &real;
    if (o->revolve_mode != REMAT_REVOLVE_PRECISE) {
        remat_status st = costs_init(&plan, c, o->revolve_mode, err);
        if (st != REMAT_OK) {
            costs_free(&real);
            return st;
        }
        pc = &plan;
    }
    rv_solver s = {.pc = pc, .n = c->n, .bucket = 1};
    remat_status st = solve_with(&s, c, &real, o, out, stats, err);
    free(s.pairs);
    free(s.ab);
    free(s.pool);
    costs_free(&real);
    if (pc != &real) costs_free(&plan);
    return st;
}

remat_status remat__solve_revolve(const remat_chain *c, const remat_solve_options *o,
                                  remat_schedule **out, remat_error *err) {
    return remat__revolve_solve_stats(c, o, out, NULL, err);
}

remat_status remat__min_memory_revolve(const remat_chain *c, const remat_solve_options *o,
                                       uint64_t *out, remat_error *err) {
    double secs = least_memory_seconds(c, o->bucket_bytes, 0);
    REMAT__FORWARD(remat__check_time(o, secs, "revolve: the smallest-memory search",
                                     "give --bucket (one bounds run instead of a bisection), or "
                                     "use optimal for a chain this long",
                                     err));
    rv_costs plan;
    REMAT__FORWARD(costs_init(&plan, c, o->revolve_mode, err));
    rv_solver s = {.pc = &plan, .n = c->n, .bucket = 1};
    uint64_t budget;
    remat_status st = alloc_pairs(&s, o, &budget, err);
    uint64_t need = st == REMAT_OK ? least_memory(&s, o->bucket_bytes, 0) : 0;
    free(s.pairs);
    free(s.ab);
    costs_free(&plan);
    REMAT__FORWARD(st);
    REMAT__RETURN_IF(need == 0, err, REMAT_E_INFEASIBLE,
                     "revolve finds no schedule at any memory below 2^53 bytes");
    *out = need;
    return REMAT_OK;
}
