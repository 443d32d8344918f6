/* optimal's parts, private to its files (the model is at the top of
 * optimal.c and in docs/optimal.md):
 *   optimal.c          the solve: remat__solve_optimal and the budget it rebuilds at
 *   optimal_ctx.c      the context: sizes in table units, the needs lo(s, t),
 *                      the smallest memory, the bound tables' scaled sizes
 *   optimal_relax.c    the relax kernels (SSE/AVX) that fill rows
 *   optimal_fill.c     the table: the budgets each row covers, the size and
 *                      time limits, the fill on pipelined workers
 *   optimal_rebuild.c  Algorithm 2: the schedule from the table
 *   optimal_narrow.c   narrowing a large table by bounds
 *   optimal_curve.c    the whole curve from one table
 *   optimal_table.c    one chain's table for the join solver (hjoin.c)
 * The calls go one way: optimal.c -> narrow -> fill -> relax, and each of
 * them -> ctx; curve -> ctx, fill; optimal.c -> rebuild. */
#ifndef REMAT_OPTIMAL_INTERNAL_H
#define REMAT_OPTIMAL_INTERNAL_H

#include <math.h>

#include "optimal_test.h"

/* Sizes are saturated here so sums of a few of them never wrap. */
#define OPT_LIM ((uint64_t)1 << 60)

static inline uint64_t sat(uint64_t x) { return x > OPT_LIM ? OPT_LIM : x; }
static inline uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t min2(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t max3(uint64_t a, uint64_t b, uint64_t c) { return max2(max2(a, b), c); }
static inline uint64_t ceil_div(uint64_t a, uint64_t k) { return a / k + (a % k != 0); }

typedef size_t (*opt_kernel)(float *, const float *, const float *, float, float, float, size_t,
                             float);

/* Sizes in table units (bytes, or slots rounded up) and per-pair bounds. */
typedef struct opt_ctx {
    const remat_chain *c;
    size_t n;
    uint64_t *a, *ab, *d, *of, *ob; /* [n+1], index = stage or value; ab, ob: the plain save's */
    uint64_t *fnp;                  /* [n+1] a[j-1] + a[j] + of[j]: an Fn j's need */
    /* The saves Fall s may make (SPEC section 1): j = 0, the stage's own
     * fields, and its partial saves j = 1..n_options. Save j of stage s is
     * entry sv0[s] + j of the per-save arrays: sab (abar[s]), sof (Fall's
     * overhead), sob (B's overhead), in units, and sub (B's time, scaled).
     * pl[s] is the plain save, the one with the least B time (the lowest j on
     * a tie: 0 when the stage has no options); abx[s] the largest abar[s]. */
    size_t *sv0;                    /* [n+2] */
    uint64_t *sab, *sof, *sob;      /* [sv0[n+1]] */
    double *sub;                    /* [sv0[n+1]] */
    uint8_t *pl;                    /* [n+1] */
    uint64_t *abx;                  /* [n+1] */
    /* The base case (s, s), "Fall s; B s": with save 0 its Fall stops
     * (docs/formats.md) when dstop[s] (s < n, a stage whose stop figures
     * differ), making dsab[s] with overhead dsof[s] (units) in time dc[s]
     * (scaled, with B's). dpl[s] is the diagonal's fastest save (pl[s] but
     * for a faster stop), dgain[s] what it saves on the plain save's time:
     * every pair (s', s) ends with that base case once it stores all. */
    uint8_t *dstop, *dpl;           /* [n+1] */
    uint64_t *dsab, *dsof;          /* [n+1] */
    double *dc, *dgain;             /* [n+1] */
    int plain_all_full;             /* every pl[s] is 0: store-all is the plain schedule */
    const struct opt_ctx *held_in; /* a lower bound table's fine table, whose needs its
                                    * choices check and whose held sizes and budget its
                                    * query ranges use (NULL: not a bound table) */
    uint64_t unit;                  /* bytes per unit: 1, or the slot (a power of two) */
    uint64_t budget;                /* inside budget at the top (units) */
    /* Pairs s <= t use one triangle of an n x n array and the transposed
     * copies (t, s) the other, so each pair of names shares one array. */
    uint64_t *lo, *lot;             /* [n*n] the need lo(s, t), and at (t, s) */
    uint64_t *g, *off;              /* [n*n] store-all need, and at (t, s) the row offset */
    float *tab;
    size_t cells;      /* floats in tab */
    const char *label; /* for progress: the table, or a bound table */
    double *pf, *pfb; /* [n+1] prefix sums of fwd and fwd+bwd times (plain saves), scaled */
    float *dtab;      /* the diagonal rows (stages whose saves differ), see diag_row */
    double scale;     /* times * scale keep float tables well inside range */
    struct opt_view *vw, *vwt; /* [n*n] rows as views, by (s,t) and at (t,s) */
    opt_kernel kern[6]; /* relax loops: [row,row], [row,const], [const,row], [const,const];
                         * then the bounds pass's [row,row], [row,const] */
} opt_ctx;

#define IDX(x, s, t) (((s) - 1) * (x)->n + ((t) - 1))

/* The number of saves of stage s, and the index of its save j. */
static inline size_t nsaves(const opt_ctx *x, size_t s) { return x->sv0[s + 1] - x->sv0[s]; }
static inline size_t sv(const opt_ctx *x, size_t s, size_t j) { return x->sv0[s] + j; }

/* The Fall s / B s needs with d[t] held when Fall s makes save j: m_all(s, t)
 * of the paper, derived. */
static inline uint64_t m_all_j(const opt_ctx *x, size_t s, size_t t, size_t j) {
    size_t i = sv(x, s, j);
    uint64_t ab = x->sab[i], of = x->sof[i];
    if (s == t && j == 0 && x->dstop[s]) ab = x->dsab[s], of = x->dsof[s]; /* it stops */
    return max2(sat(x->d[t] + ab + of), sat(ab + x->d[s] + x->d[s - 1] + x->sob[i]));
}

/* The time of Fall s with save j and of the B s that consumes it, as a
 * table float: the plain save's from the prefix sums (as tmin_f adds them),
 * another's from its own B time. */
static inline float fall_cost(const opt_ctx *x, size_t s, size_t j) {
    if (j == x->pl[s]) return (float)(x->pfb[s] - x->pfb[s - 1]);
    return (float)((x->pf[s] - x->pf[s - 1]) + x->sub[sv(x, s, j)]);
}

/* The time of the base case (s, s) with save j: Fall s stops with save 0. */
static inline float diag_cost(const opt_ctx *x, size_t s, size_t j) {
    return j == 0 && x->dstop[s] ? (float)x->dc[s] : fall_cost(x, s, j);
}

static inline uint64_t byte_a(const remat_chain *c, size_t i) { return remat_chain_a_bytes(c, i); }

static inline uint64_t slots_of(const remat_solve_options *o) {
    return o->slots < 0 ? REMAT_DEFAULT_SLOTS : (uint64_t)o->slots;
}

/* Slots are powers of two: a finer slot divides a coarser one, so whatever
 * fits at a coarser slot also fits at a finer one, with the same or a larger
 * budget (docs/optimal.md). The slot for limit mem is the largest power of
 * two not above mem/S, so a table has between S and 2S slots: `--slots S`
 * promises at least S. unit_step(u) is the smallest limit whose slot is 2u. */
static inline uint64_t unit_step(uint64_t slots, uint64_t u) {
    return u > UINT64_MAX / 2 / slots ? UINT64_MAX : 2 * slots * u;
}

static inline uint64_t unit_of(uint64_t slots, uint64_t mem) {
    uint64_t u = 1;
    while (u < OPT_LIM && mem >= unit_step(slots, u)) u *= 2;
    return u;
}

/* The smallest and the largest limit whose slot is u (0 for u = 1). */
static inline uint64_t unit_floor(uint64_t slots, uint64_t u) {
    return u > 1 ? unit_step(slots, u / 2) : 0;
}
static inline uint64_t unit_top(uint64_t slots, uint64_t u) { return unit_step(slots, u) - 1; }

/* ---- table rows ---- */

/* The time of storing all of s..t: plain saves, t's the diagonal's best. */
static inline float tmin_f(const opt_ctx *x, size_t s, size_t t) {
    return (float)(x->pfb[t] - x->pfb[s - 1] - x->dgain[t]);
}

/* C(s, t, .) as a row: k < lo is infinite, lo <= k < hi reads row, else tail.
 * A row cut short by the bounds (cut) gets its last value as its tail once
 * filled: a schedule that fits a budget fits any larger one. */
typedef struct opt_view {
    const float *row;
    uint64_t lo, hi;
    float tail;
    int cut;
} opt_view;

static const opt_view opt_zero = {NULL, 0, 0, 0.0f, 0};

static inline opt_view view_of(const opt_ctx *x, size_t s, size_t t) {
    return x->vw[IDX(x, s, t)];
}

static inline float view_at(const opt_view *v, uint64_t k) {
    if (k < v->lo) return INFINITY;
    return k < v->hi ? v->row[k - v->lo] : v->tail;
}

/* C(s, t, m) for any pair, including the diagonal (which has no row). */
static inline float table_at(const opt_ctx *x, size_t s, size_t t, uint64_t m) {
    opt_view v = view_of(x, s, t);
    return view_at(&v, m);
}

/* One past the largest budget at which rows (s, .) are read: every path to
 * them holds their input a[s-1] outside (s >= 2). */
static inline uint64_t row_top(const opt_ctx *x, size_t s) {
    if (s < 2) return x->budget + 1;
    return x->budget >= x->a[s - 1] ? x->budget - x->a[s - 1] + 1 : 0;
}

/* A bound table's unit is this many of its fine table's (see "narrowing by
 * bounds" in optimal_narrow.c). */
#define OPT_BOUND_K ((uint64_t)8)

/* The needs a choice checks. A lower bound table (held_in) checks the fine
 * table's, rounded up to its units, which every fine schedule passes: much
 * tighter than its own rounded-down sizes. need_fall(): Fall s with save j
 * of (s, t) (need_plain: the plain save's, need_least: the least of any
 * save's); run is the Fck need less d[t], as fill_row builds it, in the
 * fine units. */
static inline uint64_t need_fall(const opt_ctx *x, size_t s, size_t t, size_t j) {
    const opt_ctx *f = x->held_in;
    return f ? ceil_div(m_all_j(f, s, t, j), OPT_BOUND_K) : m_all_j(x, s, t, j);
}
static inline uint64_t need_plain(const opt_ctx *x, size_t s, size_t t) {
    return need_fall(x, s, t, x->pl[s]);
}
static inline uint64_t need_least(const opt_ctx *x, size_t s, size_t t) {
    uint64_t m = need_fall(x, s, t, 0);
    for (size_t j = 1; j < nsaves(x, s); j++) m = min2(m, need_fall(x, s, t, j));
    return m;
}
static inline uint64_t need_fck(const opt_ctx *x, size_t t, uint64_t run) {
    const opt_ctx *f = x->held_in;
    return f ? ceil_div(sat(f->d[t] + run), OPT_BOUND_K) : x->d[t] + run;
}
/* The run of Fck s, Fn s+1..sp-1 (without d[t]) in the units needs use. */
static inline uint64_t run_first(const opt_ctx *x, size_t s) {
    const opt_ctx *f = x->held_in ? x->held_in : x;
    return sat(f->a[s] + f->of[s]);
}
static inline uint64_t run_next(const opt_ctx *x, size_t s, size_t sp, uint64_t run) {
    const opt_ctx *f = x->held_in ? x->held_in : x;
    return sp > s + 1 && f->fnp[sp - 1] > run ? f->fnp[sp - 1] : run;
}

static inline uint64_t work_cap(const remat_solve_options *o) {
    return o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
}

/* ---- optimal_ctx.c ---- */

/* Whether every stage's full save has the least B time of its saves (then
 * storing everything is the fastest schedule, as without options). */
int remat__opt_full_is_plain(const remat_chain *c);

remat_status remat__opt_ctx_init(opt_ctx *x, const remat_chain *c, uint64_t max_work,
                                 remat_error *err);
void remat__opt_ctx_free(opt_ctx *x);
/* Sizes in slot `unit` (a power of two) and the needs lo, at inside budget
 * `budget`: the context of a table every budget up to `budget` reads. */
remat_status remat__opt_ctx_at(opt_ctx *x, uint64_t unit, uint64_t budget, remat_error *err);
/* Sets up units and bounds at memory `mem`; *fits says whether lo(1,n) fits. */
remat_status remat__opt_prepare(opt_ctx *x, const remat_chain *c, const remat_solve_options *o,
                                uint64_t mem, int *fits, remat_error *err);
/* REMAT_E_INFEASIBLE at `limit`, with the smallest limit that works. */
remat_status remat__opt_infeasible(opt_ctx *x, const remat_solve_options *o, uint64_t store_peak,
                                   uint64_t limit, remat_error *err);
/* y: x's sizes in units OPT_BOUND_K times larger, rounded up (up) or down,
 * at `budget`, with its needs lo. */
remat_status remat__opt_ctx_scaled(opt_ctx *y, const opt_ctx *x, int up, uint64_t budget,
                                   const remat_solve_options *o, remat_error *err);

/* ---- optimal_relax.c ---- */

/* The relax loops this processor runs best, into k[6] (opt_ctx.kern). */
void remat__opt_pick_kernels(opt_kernel *k);
/* row[m - rlo] = min(row, (c + A(m - w)) + B(m)) for m in [m0, m1), until
 * the row is at most stop. */
void remat__opt_relax(const opt_ctx *x, float *row, uint64_t rlo, uint64_t m0, uint64_t m1,
                      float c, const opt_view *A, uint64_t w, const opt_view *B, float stop);

/* ---- optimal_fill.c ---- */

/* The budgets each row is read at, from the root's span of budgets down. */
remat_status remat__opt_query_ranges(opt_ctx *x, uint64_t root_span, remat_error *err);
/* g(s, t) and the budgets each row covers (remat__opt_query_ranges). */
remat_status remat__opt_layout_rows(opt_ctx *x, const remat_solve_options *o,
                                    uint64_t root_span, remat_error *err);
/* Row offsets from the views' ranges, the cells and the work they take
 * (block_work may be NULL). */
remat_status remat__opt_plan_rows(opt_ctx *x, uint64_t *block_work, size_t *cells,
                                  double *work_out, remat_error *err);
/* REMAT_E_TOO_LARGE when `cells` floats pass o's work limit (err may be NULL). */
remat_status remat__opt_size_limit(const remat_solve_options *o, int exact, size_t cells,
                                   remat_error *err);
/* REMAT_E_TOO_LARGE when `work` is estimated past o's time limit. */
remat_status remat__opt_time_limit(const remat_solve_options *o, double work, remat_error *err);
void remat__opt_free_table(opt_ctx *x);
/* Allocates the rows the views describe and fills them. */
remat_status remat__opt_fill_rows(opt_ctx *x, const remat_solve_options *o, remat_error *err);
/* Lays the rows out, checks the limits, allocates and fills the table. */
remat_status remat__opt_build_table(opt_ctx *x, const remat_solve_options *o, int exact,
                                    uint64_t root_span, remat_error *err);

/* ---- optimal_rebuild.c ---- */

enum { TASK_SOLVE = 0, TASK_B = 1 };
typedef struct opt_task {
    int kind;
    uint32_t s, t;
    uint64_t m;    /* budget (units) */
    uint64_t base; /* bytes held outside the sub-chain's budget, its input included */
    uint32_t save; /* TASK_B: the save j its abar[s] was made with */
} opt_task;

typedef struct opt_rebuild {
    const opt_ctx *x;
    remat_schedule *sch; /* NULL: only follow the choices */
    double time;
    uint64_t peak;
    opt_task *stack;
    size_t top, cap;
} opt_rebuild;

/* Algorithm 2 for stages s0..t0 (the whole chain: 1, n) from budget m, with
 * a[s0-1] held: r->sch (if any) gets the ops, r->time and r->peak the time
 * and the exact peak in bytes. */
remat_status remat__opt_rebuild(opt_rebuild *r, size_t s0, size_t t0, uint64_t m,
                                remat_error *err);
/* Time and exact peak of the schedule the table gives at budget b. */
remat_status remat__opt_follow(const opt_ctx *x, uint64_t b, double *time, uint64_t *peak,
                               remat_error *err);

/* ---- optimal_narrow.c ---- */

/* The table of a solve for root budgets [base, x->budget], narrowed by
 * bounds as `prune` says (remat__opt_prune); *cells (if not NULL) gets the
 * cells stored. */
remat_status remat__opt_solve_rows(opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                   int prune, size_t *cells, remat_error *err);

#endif
