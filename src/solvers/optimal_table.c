/* One chain's optimal table for the join solver (hjoin.c): C(s, e, m) for
 * every budget up to a top one, its needs, and the ops of any (s, e, m). */
#include "optimal_internal.h"

struct remat__chain_table {
    opt_ctx x;
};

remat_status remat__chain_table_create(const remat_chain *c, uint64_t unit, uint64_t budget,
                                       const remat_solve_options *o, remat__chain_table **out,
                                       remat_error *err) {
    *out = NULL;
    remat__chain_table *t = calloc(1, sizeof *t);
    REMAT__RETURN_IF(!t, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat_status st = remat__opt_ctx_init(&t->x, c, o->max_work_bytes, err);
    if (st == REMAT_OK) st = remat__opt_ctx_at(&t->x, unit, budget, err);
    if (st == REMAT_OK) st = remat__opt_build_table(&t->x, o, slots_of(o) == 0, budget, err);
    if (st != REMAT_OK) {
        remat__chain_table_free(t);
        return st;
    }
    *out = t;
    return REMAT_OK;
}

void remat__chain_table_free(remat__chain_table *t) {
    if (!t) return;
    remat__opt_ctx_free(&t->x);
    free(t);
}

double remat__chain_table_time(const remat__chain_table *t, size_t s, size_t e, uint64_t m) {
    return (double)table_at(&t->x, s, e, m) / t->x.scale;
}

void remat__chain_table_row(const remat__chain_table *t, size_t s, size_t e,
                            remat__chain_row *out) {
    opt_view v = view_of(&t->x, s, e);
    *out = (remat__chain_row){v.row, v.lo, v.hi, v.tail, t->x.scale};
}

uint64_t remat__chain_table_need(const remat__chain_table *t, size_t s, size_t e) {
    return t->x.lo[IDX(&t->x, s, e)];
}

remat_status remat__chain_table_ops(const remat__chain_table *t, size_t s, size_t e, uint64_t m,
                                    remat_schedule *out, remat_error *err) {
    opt_rebuild r = {&t->x, out, 0, 0, NULL, 0, 0};
    return remat__opt_rebuild(&r, s, e, m, err);
}
