/* optimal's narrowing of a large table by bounds (docs/optimal.md). */
#include <string.h>

#include "optimal_internal.h"

/* ---- narrowing by bounds (docs/optimal.md) ----
 *
 * Few cells of a solve's table lie on a schedule near the best one. A table
 * OPT_BOUND_K times coarser, with sizes rounded down and budgets up, bounds
 * C from below: Clo(s, t, ceil(m/K)) <= C(s, t, m). Each root budget R gets
 * an upper bound U(R) >= C(1, n, R): guessed from Clo, or from an upper
 * table (sizes up, budget down: its schedules fit the fine table). A pass
 * down the lower table gives O(s, t, M): a lower bound on the time of
 * everything outside (s, t) on any path from a root to it, less that root's
 * U. A fine cell with Clo + O above 0 lies on no schedule within U, so each
 * row stores only its budgets from the first kept one to the last; reads
 * below them are infinite, above them the row's last value (a real
 * schedule, and rows still fall). Where U holds, every cell of a best
 * schedule is kept, so the values along it and the schedule are those of
 * the whole table; the root values tell whether it held. */

static float *orow(const opt_ctx *y, float *O, size_t s, size_t t) {
    return O + (view_of(y, s, t).row - y->tab);
}

/* out[m - d] = min(out[m - d], (c + o[m]) + S(m - w)) for m in [m0, m1), where
 * out covers budgets [olo, ohi) and o starts at budget plo; past ohi, otail
 * takes a bound of them all: the least o there (omin[m - plo], the least of
 * o from m to m1) plus S's last value (S falls with m). */
static void push(const opt_ctx *y, float *out, uint64_t olo, uint64_t ohi, float *otail,
                 uint64_t d, const float *o, const float *omin, uint64_t plo, uint64_t m0,
                 uint64_t m1, float c, const opt_view *S, uint64_t w) {
    m0 = max3(m0, olo + d, S->lo + w);
    uint64_t past = max2(m0, ohi + d);
    if (past < m1) {
        float v = (c + omin[past - plo]) + view_at(S, m1 - 1 - w);
        if (v < *otail) *otail = v;
    }
    if (m1 > ohi + d) m1 = ohi + d;
    while (m0 < m1) {
        int sr = m0 - w < S->hi;
        uint64_t end = sr && S->hi + w < m1 ? S->hi + w : m1;
        y->kern[sr ? 4 : 5](out + (m0 - d - olo), o + (m0 - plo),
                            sr ? S->row + (m0 - w - S->lo) : NULL, 0.0f, S->tail, c,
                            (size_t)(end - m0), -INFINITY);
        m0 = end;
    }
}

/* Pushes O(s, t, .) to the sub-problems (s, t) reads (fill_row's choices).
 * A child read at M - w may be at M - w - 1 in the fine table's terms when
 * the fine size had a remainder, so it gets both; a sibling is bounded at
 * its larger budget. Cells already above thr are dropped first. */
static void outside_row(const opt_ctx *y, const opt_ctx *x, size_t s, size_t t, float thr,
                        float *O, float *ot, float *omin) {
    const uint64_t K = OPT_BOUND_K;
    opt_view P = view_of(y, s, t);
    float *po = orow(y, O, s, t);
    /* past the row (C is the plain time there) a best schedule only Falls,
     * with the plain saves */
    if (ot[IDX(y, s, t)] + tmin_f(y, s, t) > thr) ot[IDX(y, s, t)] = INFINITY;
    if (s + 1 < t) {
        float v = ot[IDX(y, s, t)] + fall_cost(y, s, y->pl[s]);
        if (v < ot[IDX(y, s + 1, t)]) ot[IDX(y, s + 1, t)] = v;
    }
    uint64_t a0 = P.hi, a1 = P.lo;
    for (uint64_t m = P.lo; m < P.hi; m++) {
        if (!(po[m - P.lo] + P.row[m - P.lo] <= thr)) {
            po[m - P.lo] = INFINITY;
            continue;
        }
        if (a0 == P.hi) a0 = m;
        a1 = m + 1;
    }
    if (a0 >= a1) return;
    float low = INFINITY;
    for (uint64_t m = a1; m-- > a0;) { /* suffix minima of O from a0 */
        if (po[m - P.lo] < low) low = po[m - P.lo];
        omin[m - a0] = low;
    }
    omin -= a0 - P.lo; /* omin[m - P.lo] for m in [a0, a1) */
    for (size_t j = 0; s + 1 < t && j < nsaves(y, s); j++) { /* Fall s with save j */
        opt_view A = view_of(y, s + 1, t);
        float *ao = orow(y, O, s + 1, t), cf = fall_cost(y, s, j);
        uint64_t m0 = max2(a0, need_fall(y, s, t, j)), ab = y->sab[sv(y, s, j)];
        float *at = &ot[IDX(y, s + 1, t)];
        push(y, ao, A.lo, A.hi, at, ab, po, omin, P.lo, m0, a1, cf, &opt_zero, 0);
        if (x->sab[sv(x, s, j)] % K)
            push(y, ao, A.lo, A.hi, at, ab + 1, po, omin, P.lo, m0, a1, cf, &opt_zero, 0);
    }
    uint64_t run = run_first(y, s);
    for (size_t sp = s + 1; sp <= t; sp++) { /* Fck s, Fn s+1..sp-1 */
        run = run_next(y, s, sp, run);
        uint64_t need = need_fck(y, t, run), w = y->a[sp - 1], m0 = max3(a0, need, w);
        if (need >= a1) break; /* run only rises */
        if (m0 >= a1) continue;
        float c = (float)(y->pf[sp - 1] - y->pf[s - 1]);
        opt_view A = view_of(y, sp, t), B = view_of(y, s, sp - 1);
        if (sp < t) {
            float *ao = orow(y, O, sp, t), *at = &ot[IDX(y, sp, t)];
            push(y, ao, A.lo, A.hi, at, w, po, omin, P.lo, m0, a1, c, &B, 0);
            if (x->a[sp - 1] % K)
                push(y, ao, A.lo, A.hi, at, w + 1, po, omin, P.lo, m0, a1, c, &B, 0);
        }
        if (sp - 1 > s)
            push(y, orow(y, O, s, sp - 1), B.lo, B.hi, &ot[IDX(y, s, sp - 1)], 0, po, omin,
                 P.lo, m0, a1, c, &A, w);
    }
}

/* O over the lower table, from the fine roots [base, x->budget] down; a
 * root starts at minus its upper bound u[R - base]. */
static remat_status outside_pass(const opt_ctx *y, const opt_ctx *x,
                                 const remat_solve_options *o, uint64_t base, const float *u,
                                 float thr, float **out, float **tail, remat_error *err) {
    const uint64_t K = OPT_BOUND_K;
    size_t n = y->n;
    float *O;
    REMAT__RETURN_IF(y->cells > SIZE_MAX - n * n, err, REMAT_E_TOO_LARGE,
                     "optimal: the bounds are too large for this machine");
    REMAT__FORWARD(remat__alloc_table((void **)&O, y->cells + n * n, sizeof *O, work_cap(o),
                                      "optimal bounds", err));
    float *ot = O + y->cells;
    for (size_t i = 0; i < y->cells + n * n; i++) O[i] = INFINITY;
    opt_view R = view_of(y, 1, n);
    float *ro = orow(y, O, 1, n);
    for (uint64_t r = base; r <= x->budget; r++) {
        uint64_t M = ceil_div(r, K);
        float *at = M < R.lo ? NULL : M < R.hi ? &ro[M - R.lo] : &ot[IDX(y, 1, n)];
        if (at && -u[r - base] < *at) *at = -u[r - base];
    }
    size_t longest = 1;
    for (size_t s = 1; s < n; s++)
        for (size_t t = s + 1; t <= n; t++) {
            opt_view v = view_of(y, s, t);
            if (v.hi - v.lo > longest) longest = (size_t)(v.hi - v.lo);
        }
    float *omin = remat__calloc(longest, sizeof *omin);
    if (!omin) {
        free(O);
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    }
    for (size_t s = 1; s < n; s++)
        for (size_t t = n; t > s; t--) outside_row(y, x, s, t, thr, O, ot, omin);
    free(omin);
    *out = O;
    *tail = ot;
    return REMAT_OK;
}

/* Is some fine cell of row (s, t) at lower-table budget M kept? Past the
 * row, C is the plain time and O the row's tail bound. */
static int kept_at(const opt_view *Y, const float *yo, float otail, uint64_t M, float thr) {
    if (M < Y->lo) return 0;
    if (M >= Y->hi) return Y->tail + otail <= thr;
    return Y->row[M - Y->lo] + yo[M - Y->lo] <= thr;
}

/* Narrows each fine row to its kept budgets (see above). */
static void keep_rows(opt_ctx *x, const opt_ctx *y, float *O, const float *ot, float thr) {
    const uint64_t K = OPT_BOUND_K;
    size_t n = x->n;
    for (size_t s = 1; s <= n; s++)
        for (size_t t = s + 1; t <= n; t++) {
            opt_view *v = &x->vw[IDX(x, s, t)];
            opt_view Y = view_of(y, s, t);
            const float *yo = orow(y, O, s, t);
            float otail = ot[IDX(y, s, t)];
            uint64_t top = row_top(x, s), first = UINT64_MAX, last = 0;
            int tail = 0; /* a budget past the row, where C is the plain time, kept */
            for (uint64_t M = ceil_div(v->hi, K); v->hi < top && M <= ceil_div(top - 1, K); M++)
                if ((tail = kept_at(&Y, yo, otail, M, thr))) break;
            for (uint64_t M = ceil_div(v->lo, K); v->lo < v->hi && M <= ceil_div(v->hi - 1, K);
                 M++) {
                if (!kept_at(&Y, yo, otail, M, thr)) continue;
                uint64_t m0 = M ? max2(v->lo, K * (M - 1) + 1) : v->lo;
                if (first == UINT64_MAX) first = m0;
                last = K * M < v->hi - 1 ? K * M : v->hi - 1;
            }
            if (first == UINT64_MAX) { /* nothing stored; the tail if that was kept */
                v->lo = v->hi;
                if (!tail) v->tail = INFINITY;
                continue;
            }
            v->lo = first;
            if (!tail && last + 1 < v->hi) {
                v->hi = last + 1;
                v->cut = 1;
            }
        }
}

/* Does the lower table bound anything at the root, budget M? Not when its
 * all-Fall plan fits: then it puts every root at the plain time. O(n). */
static int lower_informative(const opt_ctx *y, uint64_t M) {
    for (size_t s = 1; s <= y->n; s++) {
        if (M < need_plain(y, s, y->n)) return 1;
        if (s < y->n && M < y->ab[s]) return 1;
        if (s < y->n) M -= y->ab[s];
    }
    return 0;
}

/* u[r - base] for each root r in [base, x->budget]: the upper table's time
 * (*ok = 0 when it has no schedule there). */
static remat_status upper_bounds(const opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                 float *u, int *ok, remat_error *err) {
    const uint64_t K = OPT_BOUND_K, top = x->budget;
    size_t n = x->n;
    opt_ctx z;
    remat_status st = remat__opt_ctx_scaled(&z, x, 1, top / K, o, err);
    *ok = st == REMAT_OK && z.lo[IDX(&z, 1, n)] <= base / K;
    if (*ok) st = remat__opt_layout_rows(&z, o, top / K - base / K, err);
    if (*ok && st == REMAT_OK) st = remat__opt_fill_rows(&z, o, err);
    for (uint64_t r = base; *ok && st == REMAT_OK && r <= top; r++)
        u[r - base] = table_at(&z, 1, n, r / K);
    remat__opt_ctx_free(&z);
    return st;
}

/* The lower table for x's roots, filled (*ok = 0, unfilled, when `need_root`
 * and its all-Fall plan fits the lowest root, the limit's own budget: then
 * it bounds nothing there). */
static remat_status lower_table(const opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                int need_root, opt_ctx *y, int *ok, remat_error *err) {
    const uint64_t K = OPT_BOUND_K, top = x->budget;
    REMAT__FORWARD(remat__opt_ctx_scaled(y, x, 0, ceil_div(top, K), o, err));
    *ok = !need_root || lower_informative(y, ceil_div(base, K));
    if (!*ok) return REMAT_OK;
    REMAT__FORWARD(remat__opt_layout_rows(y, o, top - base, err));
    return remat__opt_fill_rows(y, o, err);
}

/* Narrows x's rows to the cells within the upper bounds u of the roots
 * [base, x->budget] (*ok = 0, rows untouched, when a root has none). */
static remat_status narrow_rows(opt_ctx *x, const opt_ctx *y, const remat_solve_options *o,
                                uint64_t base, const float *u, int *ok, remat_error *err) {
    size_t n = x->n;
    float most = 0;
    *ok = 1;
    for (uint64_t r = base; *ok && r <= x->budget; r++) {
        if (!(u[r - base] < INFINITY)) *ok = 0;
        else if (u[r - base] > most) most = u[r - base];
    }
    if (!*ok) return REMAT_OK;
    /* float sums along a path differ from the bounds' by rounding only */
    float thr = most * (float)(n + 8) * 0x1p-22f, *O = NULL, *ot = NULL;
    REMAT__FORWARD(outside_pass(y, x, o, base, u, thr, &O, &ot, err));
    keep_rows(x, y, O, ot, thr);
    free(O);
    return REMAT_OK;
}

/* Whole tables from this many cells on are narrowed by default, with upper
 * bounds guessed from the lower table, when it bounds the recomputation at
 * the limit's budget to at least 1/OPT_NARROW_SHARE of the plain time: then
 * narrowing takes less time than it saves (measured on resnet1001-like and
 * a random chain, L = 339). A guess is the lower bound and 1/32 more. */
#define OPT_NARROW_CELLS ((size_t)1 << 23)
#define OPT_NARROW_SHARE 16

/* Guessed upper bounds from the lower table (*ok = 0 when too weak). */
static void guess_bounds(const opt_ctx *x, const opt_ctx *y, uint64_t base, float *u, int *ok) {
    const uint64_t K = OPT_BOUND_K;
    float tm = tmin_f(y, 1, y->n);
    *ok = table_at(y, 1, y->n, ceil_div(base, K)) - tm >= tm / OPT_NARROW_SHARE;
    for (uint64_t r = base; *ok && r <= x->budget; r++) {
        float lb = table_at(y, 1, y->n, ceil_div(r, K));
        u[r - base] = lb + lb * 0x1p-5f;
    }
}

/* Did every root come within its upper bound? Else u takes the narrowed
 * table's root values, which are real schedules' times and so upper bounds,
 * as is any smaller root's (a schedule fits any larger budget). */
static int roots_within(const opt_ctx *x, uint64_t base, float *u) {
    int within = 1;
    for (uint64_t r = base; r <= x->budget; r++) {
        float v = table_at(x, 1, x->n, r);
        if (!(v <= u[r - base])) within = 0;
    }
    float least = INFINITY;
    for (uint64_t r = base; !within && r <= x->budget; r++) {
        float v = table_at(x, 1, x->n, r);
        if (v < least) least = v;
        u[r - base] = least;
    }
    return within;
}

/* Where a solve's narrowing stands. The bound helpers above answer through
 * their int *ok with NARROW_NONE (0: no bounds, or none that bound anything)
 * or NARROW_BOUNDED (1). */
enum {
    NARROW_WHOLE = -1,  /* the whole table, chosen up front */
    NARROW_NONE = 0,    /* bounds still to find, or none found: the whole table */
    NARROW_BOUNDED = 1, /* bounds in hand: narrow by them */
    NARROW_DONE = 2     /* a narrowed table held every root */
};

/* The table of a solve for root budgets [base, x->budget], narrowed as
 * prune (remat__opt_prune, optimal_test.h) says: never; by default a table
 * over the work limit with both bound tables, and one of OPT_NARROW_CELLS or
 * more with a guess from the lower one when it bounds enough; always, with
 * a guess or with both tables (tests). A guess that misses a root is
 * followed by a second narrowing, bounded by what the first one found; if
 * that misses too (not expected), the whole table is filled. *cells (if not
 * NULL) gets the cells stored. */
remat_status remat__opt_solve_rows(opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                   int prune, size_t *cells, remat_error *err) {
    int exact = slots_of(o) == 0;
    size_t n = x->n, whole, roots = (size_t)(x->budget - base + 1);
    double work;
    REMAT__FORWARD(remat__opt_layout_rows(x, o, x->budget - base, err));
    REMAT__FORWARD(remat__opt_plan_rows(x, NULL, &whole, &work, err));
    REMAT__FORWARD(remat__opt_time_limit(o, work, err));
    remat_status big = remat__opt_size_limit(o, exact, whole, err);
    if (big != REMAT_OK && (prune == REMAT__OPT_PRUNE_NEVER || n < 3)) return big;
    int guess = big == REMAT_OK && prune != REMAT__OPT_PRUNE_BOTH, ok = NARROW_NONE, tries = 0;
    if (big == REMAT_OK && (prune == REMAT__OPT_PRUNE_NEVER || n < 3 ||
                            (prune == REMAT__OPT_PRUNE_AUTO && whole < OPT_NARROW_CELLS)))
        ok = NARROW_WHOLE;
    float *u = NULL;
    remat_status st = REMAT_OK;
    if (ok == NARROW_NONE) {
        u = remat__calloc(roots, sizeof *u);
        if (!u) st = remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
        if (st == REMAT_OK && !guess) st = upper_bounds(x, o, base, u, &ok, err);
        if (guess) ok = NARROW_BOUNDED;
    }
    /* Up to two narrowings. A guess keeps the lower table for the second; the
     * upper bounds free it before the fill, where memory is short. */
    opt_ctx y;
    memset(&y, 0, sizeof y);
    if (st == REMAT_OK && ok == NARROW_BOUNDED) st = lower_table(x, o, base, guess, &y, &ok, err);
    if (st == REMAT_OK && ok == NARROW_BOUNDED && guess) guess_bounds(x, &y, base, u, &ok);
    while (st == REMAT_OK && ok == NARROW_BOUNDED && tries++ < 2) {
        remat__opt_free_table(x); /* a first narrowing's, read by roots_within */
        if (!y.tab) st = lower_table(x, o, base, 0, &y, &ok, err);
        if (st == REMAT_OK && ok == NARROW_BOUNDED) st = narrow_rows(x, &y, o, base, u, &ok, err);
        if (!guess || tries == 2) remat__opt_ctx_free(&y);
        if (st != REMAT_OK || ok != NARROW_BOUNDED) break;
        size_t kept;
        double kwork;
        st = remat__opt_plan_rows(x, NULL, &kept, &kwork, err);
        if (st == REMAT_OK && big != REMAT_OK &&
            remat__opt_size_limit(o, exact, kept, NULL) != REMAT_OK)
            st = remat__fail(err, REMAT_E_TOO_LARGE,
                             "optimal: the table would need %llu bytes, more than the work limit "
                             "of %llu bytes, and %llu even narrowed by the bounds; use fewer "
                             "slots (--slots) or a larger work limit",
                             (unsigned long long)whole * sizeof(float),
                             (unsigned long long)work_cap(o),
                             (unsigned long long)kept * sizeof(float));
        if (st == REMAT_OK) st = remat__opt_fill_rows(x, o, err);
        if (st == REMAT_OK && roots_within(x, base, u)) ok = NARROW_DONE;
        else if (st == REMAT_OK) /* the whole rows again */
            st = remat__opt_query_ranges(x, x->budget - base, err);
    }
    remat__opt_ctx_free(&y);
    if (st == REMAT_OK && ok != NARROW_DONE) { /* the whole table; lo is no longer read */
        free(x->lo);
        x->lo = x->lot = NULL;
        if (big != REMAT_OK)
            st = remat__fail(err, REMAT_E_TOO_LARGE,
                             "optimal: the table would need %llu bytes, more than the work limit "
                             "of %llu bytes, and the bounds did not narrow it; use fewer slots "
                             "(--slots) or a larger work limit",
                             (unsigned long long)whole * sizeof(float),
                             (unsigned long long)work_cap(o));
        else
            st = remat__opt_fill_rows(x, o, err);
    }
    if (cells) *cells = x->cells;
    free(u);
    return st;
}
