/* optimal's curve: every step of C(1, n, .) from one table. */
#include <string.h>

#include "optimal_internal.h"

/* The table for root budgets budget - root_span .. budget (prepare() must
 * have said the lowest fits). */
static remat_status solve_table(opt_ctx *x, const remat_solve_options *o, uint64_t root_span,
                                remat_error *err) {
    return remat__opt_build_table(x, o, slots_of(o) == 0, root_span, err);
}

/* Keeps first and last, and for evenly spread memories the step in force. */
static size_t thin(remat_curve_point *p, size_t k, size_t want) {
    if (want == 0 || k <= want) return k;
    if (want == 1) {
        p[0] = p[k - 1];
        return 1;
    }
    size_t out = 1, last = 0;
    uint64_t m0 = p[0].memory, m1 = p[k - 1].memory;
    for (size_t j = 1; j + 1 < want; j++) {
        double target = (double)m0 + (double)(m1 - m0) * (double)j / (double)(want - 1);
        size_t i = last;
        while (i + 1 < k - 1 && (double)p[i + 1].memory <= target) i++;
        if (i > last) {
            p[out++] = p[i];
            last = i;
        }
    }
    p[out++] = p[k - 1];
    return out;
}

/* Appends the steps of C(1, n, .) from the table (slot u): budget b is
 * reached from limit a[0] + b*u, whose slot is u or finer, so a solve there
 * does at least as well (powers of two nest). Keeps points whose time
 * strictly falls. */
static void table_points(const opt_ctx *x, uint64_t slots, uint64_t store_peak, int to_peak,
                         remat_curve *cv, float *prev) {
    uint64_t in = byte_a(x->c, 0), u = x->unit;
    /* a limit whose own slot is coarser than the table's is not covered (only
     * when prepare() had to refine the slot at the top) */
    uint64_t last = slots ? unit_top(slots, u) : UINT64_MAX;
    opt_view row = view_of(x, 1, x->n);
    /* past the row the value is its constant tail: one more step at most */
    uint64_t bmax = row.hi < x->budget ? row.hi : x->budget;
    for (uint64_t b = row.lo; b <= bmax; b++) {
        float v = table_at(x, 1, x->n, b);
        if (!(v < *prev)) continue;
        *prev = v;
        uint64_t mem = sat(in + sat(b * u));
        if ((to_peak && mem >= store_peak) || mem > last) break;
        remat_curve_point p = {mem, (double)v / x->scale};
        if (cv->n > 0 && cv->points[cv->n - 1].memory == mem) cv->points[cv->n - 1] = p;
        else cv->points[cv->n++] = p;
    }
}

/* C(1, n, budget) at limit `mem`, the value a solve there finds. */
static remat_status value_at(const remat_chain *c, const remat_solve_options *o, uint64_t mem,
                             double *time, remat_error *err) {
    opt_ctx x;
    int fits = 0;
    remat_status st = remat__opt_prepare(&x, c, o, mem, &fits, err);
    if (st == REMAT_OK && !fits)
        st = remat__fail(err, REMAT_E_INTERNAL, "optimal curve: the smallest limit does not fit");
    if (st == REMAT_OK) st = solve_table(&x, o, 0, err);
    if (st == REMAT_OK) *time = (double)table_at(&x, 1, x.n, x.budget) / x.scale;
    remat__opt_ctx_free(&x);
    return st;
}

/* The curve from the smallest feasible limit (what remat_min_memory says) to
 * the top, from one table at the top's slot (every budget), plus the
 * smallest limit itself when that table cannot reach it (a solve there, at
 * its finer slot). */
remat_status remat__curve_optimal(const remat_chain *c, const remat_solve_options *o,
                                  size_t max_points, remat_curve **out, remat_error *err) {
    uint64_t store_peak;
    double store_time;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, &store_time, err));
    uint64_t top = o->memory ? o->memory : store_peak;
    int to_peak = top >= store_peak;
    uint64_t mm = 0;
    REMAT__FORWARD(remat__min_memory_optimal(c, o, &mm, err));
    if (top < mm) {
        opt_ctx x;
        remat_status st = remat__opt_ctx_init(&x, c, o->max_work_bytes, err);
        if (st == REMAT_OK) st = remat__opt_infeasible(&x, o, store_peak, top, err);
        remat__opt_ctx_free(&x);
        return st;
    }
    remat_curve *cv = calloc(1, sizeof *cv);
    REMAT__RETURN_IF(!cv, err, REMAT_E_NOMEM, "optimal curve: out of memory");
    remat__strlcpy(cv->algorithm, "optimal", sizeof cv->algorithm);
    opt_ctx x;
    int fits = 0;
    remat_status st = REMAT_OK;
    if (mm < store_peak) st = remat__opt_prepare(&x, c, o, top, &fits, err);
    else memset(&x, 0, sizeof x);
    /* points: the smallest limit, every budget of the table, the store-all peak */
    uint64_t budgets = fits ? x.budget + 1 : 0;
    if (st == REMAT_OK && budgets > SIZE_MAX / sizeof *cv->points - 3)
        st = remat__fail(err, REMAT_E_TOO_LARGE, "optimal curve: too many points");
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&cv->points, (size_t)budgets + 3, sizeof *cv->points,
                                o->max_work_bytes, "optimal curve", err);
    if (st == REMAT_OK && fits) st = solve_table(&x, o, x.budget, err);
    float prev = INFINITY;
    if (st == REMAT_OK && mm < store_peak) {
        uint64_t first = fits ? sat(byte_a(c, 0) + sat(view_of(&x, 1, x.n).lo * x.unit)) : top;
        if (mm < first) { /* the table's slot is too coarse to reach mm */
            double t = 0;
            st = value_at(c, o, mm, &t, err);
            if (st == REMAT_OK) cv->points[cv->n++] = (remat_curve_point){mm, t};
            if (st == REMAT_OK && fits) prev = (float)(t * x.scale);
        }
        if (st == REMAT_OK && fits) table_points(&x, slots_of(o), store_peak, to_peak, cv, &prev);
    }
    if (mm < store_peak) remat__opt_ctx_free(&x);
    if (st == REMAT_OK && to_peak && remat__opt_full_is_plain(c)) {
        /* solving at the store-all peak gives store-all */
        if (cv->n > 0 && cv->points[cv->n - 1].time <= store_time * (1 + 1e-6))
            cv->points[cv->n - 1].time = store_time;
        else
            cv->points[cv->n++] = (remat_curve_point){store_peak, store_time};
    }
    if (st == REMAT_OK) cv->n = thin(cv->points, cv->n, max_points);
    if (st != REMAT_OK) {
        remat_curve_free(cv);
        return st;
    }
    *out = cv;
    return REMAT_OK;
}
