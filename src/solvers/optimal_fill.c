/* optimal's table: the budgets each row (s, t) is read at, the size and
 * time limits, and the fill, blocks of columns on pipelined workers. */
#include <stdatomic.h>

#include "../core/parallel.h"
#include "optimal_internal.h"

/* Fills the row of (s, t), t > s, from rows of shorter sub-chains. */
static void fill_row(const opt_ctx *x, size_t s, size_t t) {
    const opt_view *me = &x->vw[IDX(x, s, t)];
    uint64_t lo = me->lo, hi = me->hi;
    if (hi <= lo) return;
    float *row = (float *)me->row; /* this worker's own row */
    for (size_t i = 0; i < hi - lo; i++) row[i] = INFINITY;
    /* Fall s with each save j; (s+1, t) with abar[s] held outside its budget; B s. */
    opt_view A = view_of(x, s + 1, t);
    for (size_t j = 0; j < nsaves(x, s); j++) {
        uint64_t ab = x->sab[sv(x, s, j)], m0 = max3(lo, need_fall(x, s, t, j), A.lo + ab);
        if (m0 < hi) remat__opt_relax(x, row, lo, m0, hi, fall_cost(x, s, j), &A, ab, &opt_zero,
                                      -INFINITY);
    }
    /* Fck s, Fn s+1..s'-1; (s', t) with a[s'-1] held outside; then (s, s'-1). */
    uint64_t run = run_first(x, s);
    for (size_t sp = s + 1; sp <= t; sp++) {
        run = run_next(x, s, sp, run);
        uint64_t need = need_fck(x, t, run);
        if (need >= hi) break; /* the need only rises with s' */
        A = x->vwt[IDX(x, t, sp)];
        opt_view B = x->vw[IDX(x, s, sp - 1)];
        uint64_t m0 = max3(max2(lo, need), A.lo + x->a[sp - 1], B.lo);
        if (m0 >= hi) continue;
        float c = (float)(x->pf[sp - 1] - x->pf[s - 1]);
        /* Rows and candidates fall with m, so this candidate is never below its
         * value at hi-1: it cannot help where the row is already that low. */
        float floor_v = (c + view_at(&A, hi - 1 - x->a[sp - 1])) + view_at(&B, hi - 1);
        remat__opt_relax(x, row, lo, m0, hi, c, &A, x->a[sp - 1], &B, floor_v);
    }
    if (me->cut) { /* readers come after this row's gate */
        x->vw[IDX(x, s, t)].tail = row[hi - lo - 1];
        x->vw[IDX(x, t, s)].tail = row[hi - lo - 1];
    }
}
/* The row of the diagonal (s, s) when its saves differ: C(s, s, m), the
 * least time of a save whose Fall s / B s fit m, from the least need on up
 * to the plain save's (past it the tail: the plain time). */
static void diag_row(const opt_ctx *x, size_t s) {
    const opt_view *me = &x->vw[IDX(x, s, s)];
    float *row = (float *)me->row;
    for (uint64_t m = me->lo; m < me->hi; m++) {
        float best = INFINITY;
        for (size_t j = 0; j < nsaves(x, s); j++) {
            float v = diag_cost(x, s, j);
            if (need_fall(x, s, s, j) <= m && v < best) best = v;
        }
        row[m - me->lo] = best;
    }
}

/* ---- the fill: blocks of columns on pipelined workers ---- */

/* Column t (rows s = t-1 down to 1) reads the rows below it in the same
 * column and row s of earlier columns. A work item is a block of
 * OPT_BLOCK columns filled row by row, so row s of those columns and the
 * rows they read stay in cache; row s of block b waits until block b-1 has
 * done row s, a staggered pipeline (the results do not depend on it). */
#define OPT_BLOCK 8

typedef struct opt_fill {
    const opt_ctx *x;
    remat__gates *rows_done;        /* block b: rows finished, from its top row down */
    const uint64_t *block_work;     /* each block's weight, for progress */
    atomic_uint_fast64_t *work_done;
    double total_work;
    const remat_solve_options *o;
} opt_fill;

static size_t block_first(size_t b) { return 2 + b * OPT_BLOCK; }
static size_t block_last(const opt_ctx *x, size_t b) {
    size_t t = block_first(b) + OPT_BLOCK - 1;
    return t < x->n ? t : x->n;
}
static size_t block_count(const opt_ctx *x) { return x->n < 2 ? 0 : (x->n - 2) / OPT_BLOCK + 1; }

static void fill_block(const void *arg, size_t b, unsigned worker) {
    const opt_fill *f = arg;
    const opt_ctx *x = f->x;
    size_t t1 = block_first(b), t2 = block_last(x, b);
    for (size_t s = t2 - 1; s >= 1; s--) {
        if (b > 0 && s + 2 <= t1) remat__gate_wait(f->rows_done, b - 1, t1 - 1 - s);
        for (size_t t = t1 > s + 1 ? t1 : s + 1; t <= t2; t++) fill_row(x, s, t);
        remat__gate_raise(f->rows_done, b, t2 - s);
    }
    uint64_t done = atomic_fetch_add(f->work_done, f->block_work[b]) + f->block_work[b];
    if (worker == 0) remat__progress(f->o, (double)done / f->total_work, x->label);
}

static remat_status fill_table(const opt_ctx *x, const remat_solve_options *o, size_t cells,
                               const uint64_t *block_work, double total_work, remat_error *err) {
    unsigned threads = remat__threads(o->threads);
    if (x->n < 8 || cells < ((size_t)1 << 16)) threads = 1; /* not worth the threads */
    atomic_uint_fast64_t done;
    atomic_init(&done, 0);
    opt_fill f = {x, remat__gates_new(block_count(x)), block_work, &done,
                  total_work > 0 ? total_work : 1, o};
    REMAT__RETURN_IF(!f.rows_done, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat__parallel_for(threads, block_count(x), fill_block, &f);
    remat__progress(o, 1, x->label);
    remat__gates_free(f.rows_done);
    return REMAT_OK;
}

/* The budgets at which row (s, t) is read: from the top budget less the
 * most that any path from the root holds outside (s, t), up to the top
 * budget less its input a[s-1] (rows s >= 2), within [lo, g). held(1, n) =
 * root_span: the root is read at budgets from budget - root_span up (0 for a
 * plain solve, the whole budget for a curve). held(s, t) is the max over the
 * sub-problems that read (s, t): (s, t') for t' > t at the same budget,
 * (s0, t) for s0 < s after Fck s0 with s' = s (a[s-1] more), and (s-1, t)
 * after Fall s-1 (abar[s-1] more). */
remat_status remat__opt_query_ranges(opt_ctx *x, uint64_t root_span, remat_error *err) {
    /* held is counted in the units of hx, at hx's budget, and divided by hk */
    const opt_ctx *hx = x->held_in ? x->held_in : x;
    uint64_t hk = x->held_in ? OPT_BOUND_K : 1, hbud = hx->budget;
    size_t n = x->n;
    uint64_t *ha = remat__calloc(n + 1, sizeof *ha), *hp = remat__calloc(n + 1, sizeof *hp);
    if (!ha || !hp) {
        free(ha);
        free(hp);
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    }
    /* ha[t]: max held(s0, t) over s0 < s; hp[t]: held(s-1, t) */
    const uint64_t *sa = hx->a, *sab = hx->abx; /* the most any save of Fall s-1 holds */
    for (size_t s = 1; s <= n; s++) {
        uint64_t hb = s == 1 ? root_span : 0, top = row_top(x, s);
        for (size_t t = n; t >= s; t--) {
            uint64_t h = hb;
            if (s >= 2) h = max3(h, sat(ha[t] + sa[s - 1]), sat(hp[t] + sab[s - 1]));
            hb = h; /* (s, t-1) is read by (s, t) at the same budget */
            size_t id = IDX(x, s, t);
            opt_view *v = &x->vw[id];
            v->lo = t == s ? max2(x->lo[id], need_least(x, s, s))
                           : max2(x->lo[id], hbud > h ? (hbud - h) / hk : 0);
            /* the diagonal has a row only when its saves (or the stop) differ */
            int drow = nsaves(x, s) > 1 || x->dstop[s];
            v->hi = (t > s || drow) && x->g[id] < top ? x->g[id] : top;
            if (t == s && !drow) v->hi = v->lo;
            if (x->held_in && t > s) { /* what the fine row maps to, and up to g */
                const opt_view *f = &hx->vw[id];
                uint64_t fh = f->hi > f->lo ? ceil_div(f->hi - 1, hk) + 1 : 0;
                v->hi = min2(top, max2(fh, x->g[id]));
            }
            if (v->hi < v->lo) v->hi = v->lo;
            v->tail = tmin_f(x, s, t);
            v->cut = 0;
            hp[t] = h;
            if (h > ha[t]) ha[t] = h;
        }
    }
    free(ha);
    free(hp);
    return REMAT_OK;
}

/* Seconds per unit of work() on one core, measured on the development
 * machine (docs/optimal.md), and what a second core adds. */
#define OPT_SEC_PER_WORK 2.5e-10

/* g(s, t) and the budgets each row covers (query_ranges). */
remat_status remat__opt_layout_rows(opt_ctx *x, const remat_solve_options *o, uint64_t root_span,
                                    remat_error *err) {
    size_t n = x->n, nn = n * n;
    uint64_t cap = work_cap(o);
    REMAT__FORWARD(remat__alloc_table((void **)&x->vw, nn, sizeof(opt_view), cap, "optimal rows",
                                      err));
    x->vwt = x->vw;
    REMAT__FORWARD(remat__alloc_table((void **)&x->g, nn, 8, cap, "optimal per-pair bounds", err));
    x->off = x->g;
    /* g(s, t): the need of Fall s..t, B t..s with the plain saves (t's: the
     * diagonal's fastest); from it on C is that time, tmin_f */
    for (size_t s = n; s >= 1; s--) {
        x->g[IDX(x, s, s)] = need_fall(x, s, s, x->dpl[s]);
        for (size_t t = s + 1; t <= n; t++)
            x->g[IDX(x, s, t)] = max2(need_plain(x, s, t), sat(x->ab[s] + x->g[IDX(x, s + 1, t)]));
    }
    return remat__opt_query_ranges(x, root_span, err);
}

/* Row offsets from the views' ranges, the cells and the work they take
 * (block_work may be NULL). */
remat_status remat__opt_plan_rows(opt_ctx *x, uint64_t *block_work, size_t *cells, double *work_out,
                                  remat_error *err) {
    size_t n = x->n, total = 0;
    double work = 0; /* candidate cells: sum over pairs of (t - s) x row length */
    for (size_t t = 2; t <= n; t++)
        for (size_t s = 1; s < t; s++) {
            const opt_view *v = &x->vw[IDX(x, s, t)];
            size_t len = (size_t)(v->hi - v->lo);
            x->off[IDX(x, t, s)] = total;
            REMAT__RETURN_IF(len > SIZE_MAX - total, err, REMAT_E_TOO_LARGE,
                             "optimal: the table is too large for this machine");
            total += len;
            work += (double)len * (double)(t - s);
            if (block_work) block_work[(t - 2) / OPT_BLOCK] += (uint64_t)len * (t - s);
        }
    *cells = total;
    *work_out = work;
    return REMAT_OK;
}

remat_status remat__opt_size_limit(const remat_solve_options *o, int exact, size_t cells,
                                   remat_error *err) {
    uint64_t cap = work_cap(o);
    if (cells <= cap / sizeof(float)) return REMAT_OK;
    return remat__fail(err, REMAT_E_TOO_LARGE,
                       "optimal: the table would need %llu bytes, more than the work limit of "
                       "%llu bytes; %s",
                       (unsigned long long)cells * sizeof(float), (unsigned long long)cap,
                       exact ? "exact-bytes mode (slots 0) suits small memories only: use "
                               "--slots N (e.g. 500)"
                             : "use fewer slots (--slots) or a larger work limit");
}

remat_status remat__opt_time_limit(const remat_solve_options *o, double work, remat_error *err) {
    return remat__check_time(o, remat__parallel_seconds(o, work * OPT_SEC_PER_WORK), "optimal",
                             "use fewer slots (--slots)", err);
}

void remat__opt_free_table(opt_ctx *x) {
    free(x->tab);
    free(x->dtab);
    x->tab = x->dtab = NULL;
    x->cells = 0;
}

/* Allocates and fills the diagonal rows (they read nothing). */
static remat_status diag_rows(opt_ctx *x, const remat_solve_options *o, remat_error *err) {
    size_t total = 0;
    for (size_t s = 1; s <= x->n; s++) {
        const opt_view *v = &x->vw[IDX(x, s, s)];
        total += (size_t)(v->hi - v->lo);
    }
    if (total == 0) return REMAT_OK;
    REMAT__FORWARD(remat__alloc_table((void **)&x->dtab, total, sizeof(float), work_cap(o),
                                      "optimal diagonal rows", err));
    total = 0;
    for (size_t s = 1; s <= x->n; s++) {
        opt_view *v = &x->vw[IDX(x, s, s)];
        if (v->hi == v->lo) continue;
        v->row = x->dtab + total;
        total += (size_t)(v->hi - v->lo);
        diag_row(x, s);
    }
    return REMAT_OK;
}

/* Allocates the rows the views describe and fills them. */
remat_status remat__opt_fill_rows(opt_ctx *x, const remat_solve_options *o, remat_error *err) {
    size_t n = x->n, nb = block_count(x), total = 0;
    double work = 0;
    remat__opt_free_table(x);
    uint64_t *block_work = remat__calloc(nb ? nb : 1, sizeof *block_work);
    REMAT__RETURN_IF(!block_work, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat_status st = remat__opt_plan_rows(x, block_work, &total, &work, err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&x->tab, total ? total : 1, sizeof(float), work_cap(o),
                                "optimal table", err);
    x->cells = total;
    if (st == REMAT_OK) st = diag_rows(x, o, err);
    if (st == REMAT_OK) {
        for (size_t s = 1; s <= n; s++)
            for (size_t t = s; t <= n; t++) {
                opt_view *v = &x->vw[IDX(x, s, t)];
                if (t > s) v->row = x->tab + x->off[IDX(x, t, s)];
                x->vwt[IDX(x, t, s)] = *v;
            }
        remat__opt_pick_kernels(x->kern);
        st = fill_table(x, o, total, block_work, work, err);
    }
    free(block_work);
    return st;
}

/* Lays the rows out, checks the work against the limits, allocates and
 * fills the table. */
remat_status remat__opt_build_table(opt_ctx *x, const remat_solve_options *o, int exact,
                                    uint64_t root_span, remat_error *err) {
    size_t cells;
    double work;
    REMAT__FORWARD(remat__opt_layout_rows(x, o, root_span, err));
    REMAT__FORWARD(remat__opt_plan_rows(x, NULL, &cells, &work, err));
    REMAT__FORWARD(remat__opt_size_limit(o, exact, cells, err));
    REMAT__FORWARD(remat__opt_time_limit(o, work, err));
    return remat__opt_fill_rows(x, o, err);
}
