/* store-all: plain autograd. Fall 1..n, then B n..1. */
#include "solvers_internal.h"

remat_status remat__solve_store_all(const remat_chain *c, const remat_solve_options *o,
                                    remat_schedule **out, remat_error *err) {
    remat_schedule *s = NULL;
    REMAT__FORWARD(remat_schedule_create("store-all", &s, err));
    remat_status st = REMAT_OK;
    for (size_t i = 1; i <= c->n && st == REMAT_OK; i++)
        st = remat__push(s, REMAT_OP_FALL, (uint32_t)i, err);
    for (size_t i = c->n; i >= 1 && st == REMAT_OK; i--)
        st = remat__push(s, REMAT_OP_B, (uint32_t)i, err);
    if (st == REMAT_OK) st = remat__schedule_measure(c, s, 0, err);
    if (st == REMAT_OK && s->peak_bytes > o->memory) {
        if (err) err->min_memory = s->peak_bytes;
        st = remat__fail(err, REMAT_E_INFEASIBLE,
                         "store-all needs %llu bytes, more than the limit of %llu",
                         (unsigned long long)s->peak_bytes, (unsigned long long)o->memory);
    }
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_store_all_cost(const remat_chain *c, uint64_t *peak_bytes, double *time,
                                  remat_error *err) {
    remat__clear(err);
    REMAT__FORWARD(remat__chain_validate(c, "remat_store_all_cost", err));
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = UINT64_MAX; /* a cost, not a solve: no limit (the peak is < 2^62) */
    remat_schedule *s = NULL;
    REMAT__FORWARD(remat__solve_store_all(c, &o, &s, err));
    if (peak_bytes) *peak_bytes = s->peak_bytes;
    if (time) *time = s->time;
    remat_schedule_free(s);
    return REMAT_OK;
}
