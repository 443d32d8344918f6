/* optimal: rotor's optimal persistent schedule (Theorem 1, Algorithms 1-2),
 * with the memory terms re-derived from SPEC section 2 (docs/optimal.md).
 *
 * C(s, t, m) is the best time to turn d[t] into d[s-1] for stages s..t when
 * a[s-1] (plain or abar) is held outside the budget m and d[t] inside it.
 * The table stores, for each pair (s, t), only the budgets between the
 * sub-chain's smallest need lo(s,t) and its store-all need g(s,t): below lo
 * it is infinite, from g on it is the plain forward+backward time. A solve
 * keeps only the budgets at which some path from C(1, n, M) reads the row,
 * and a large one only those that can lie on a best schedule (the bounds).
 * Rows are float, filled by blocks of columns on pipelined workers; the
 * schedule is rebuilt from the table and its time and peak recomputed
 * exactly.
 *
 * This file is the solve; the other parts are listed in optimal_internal.h. */
#include <string.h>

#include "optimal_internal.h"

/* Rounding every size up to whole slots leaves the schedule at the limit's
 * budget under the limit in bytes, by about the rounding's share of the
 * sizes. So the table also covers budgets that much above it (headroom()),
 * and the largest budget whose schedule still fits the limit in bytes (exact
 * peak, by bisection) is taken; the limit's own budget always fits, so this
 * never does worse. */
static uint64_t headroom(const opt_ctx *x, uint64_t base) {
    if (x->unit <= 1) return 0;
    long double bytes = 0, rounded = 0;
    for (size_t i = 1; i <= x->n; i++) {
        bytes += (long double)remat_chain_a_bytes(x->c, i) + remat_chain_abar_bytes(x->c, i);
        rounded += ((long double)x->a[i] + x->ab[i]) * x->unit;
    }
    if (!(bytes > 0) || rounded <= bytes) return 0;
    long double extra = (long double)base * (rounded / bytes - 1);
    return extra > base / 2 ? base / 2 : (uint64_t)extra;
}

static remat_status pick_budget(const opt_ctx *x, uint64_t base, uint64_t mem, uint64_t *out,
                                remat_error *err) {
    double t;
    uint64_t peak, lo = base, hi = x->budget + 1; /* lo fits; hi is past the table */
    *out = base;
    if (x->budget == base) return REMAT_OK;
    REMAT__FORWARD(remat__opt_follow(x, x->budget, &t, &peak, err));
    if (peak <= mem) {
        *out = x->budget;
        return REMAT_OK;
    }
    hi = x->budget;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        REMAT__FORWARD(remat__opt_follow(x, mid, &t, &peak, err));
        if (peak <= mem) lo = mid;
        else hi = mid;
    }
    *out = lo;
    return REMAT_OK;
}

/* The solve, with the narrowing `prune` (remat__opt_prune): the library's
 * entry point always passes REMAT__OPT_PRUNE_AUTO, tests any. */
static remat_status solve_optimal(const remat_chain *c, const remat_solve_options *o, int prune,
                                  size_t *cells, remat_schedule **out, remat_error *err) {
    uint64_t store_peak;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, NULL, err));
    /* Storing everything needs one forward and one backward per stage: optimal,
     * unless a partial save's backward is faster than the full save's. */
    if (o->memory >= store_peak && remat__opt_full_is_plain(c))
        return remat__solve_store_all(c, o, out, err);
    opt_ctx x;
    int fits = 0;
    remat_status st = remat__opt_prepare(&x, c, o, o->memory, &fits, err);
    if (st == REMAT_OK && !fits) st = remat__opt_infeasible(&x, o, store_peak, o->memory, err);
    uint64_t base = x.budget, b = base;
    if (st == REMAT_OK) x.budget = base + headroom(&x, base);
    if (st == REMAT_OK) st = remat__opt_solve_rows(&x, o, base, prune, cells, err);
    if (st == REMAT_OK) st = pick_budget(&x, base, o->memory, &b, err);
    remat_schedule *s = NULL;
    if (st == REMAT_OK) st = remat_schedule_create("optimal", &s, err);
    if (st == REMAT_OK) {
        opt_rebuild r = {&x, s, 0, 0, NULL, 0, 0};
        st = remat__opt_rebuild(&r, 1, x.n, b, err);
        s->time = r.time;
        s->peak_bytes = r.peak;
    }
    remat__opt_ctx_free(&x);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat__solve_optimal(const remat_chain *c, const remat_solve_options *o,
                                  remat_schedule **out, remat_error *err) {
    return solve_optimal(c, o, REMAT__OPT_PRUNE_AUTO, NULL, out, err);
}

remat_status remat__solve_optimal_ex(const remat_chain *c, const remat_solve_options *o,
                                     int prune, size_t *cells, remat_schedule **out,
                                     remat_error *err) {
    return solve_optimal(c, o, prune, cells, out, err);
}
