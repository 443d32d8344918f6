/* pofo: a solved OC table turned into ops (pofo_dp.c describes the model).
 * The next state of every choice comes from pofo_next_state(), the same
 * function the DP uses. */
#include <math.h>

#include "pofo_impl.h"

static remat_status op(pofo_run *r, remat_op_kind k, size_t i, remat_error *err) {
    return remat__push(r->s, k, (uint32_t)i, err);
}
static remat_status vop(pofo_run *r, remat_op_kind k, int x, size_t i, remat_error *err) {
    return remat__push_value(r->s, k, x ? REMAT_VALUE_ABAR : REMAT_VALUE_A, (uint32_t)i, err);
}

/* The persistent rematerialization of stages i..j in m units (table C). */
static remat_status emit_c(pofo_run *r, size_t i, size_t j, size_t m, remat_error *err) {
    const pofo_shared *P = r->sh;
    int32_t ch = P->cchoice[pofo_cidx(P, i, j, m)];
    REMAT__RETURN_IF(ch < 0, err, REMAT_E_INTERNAL, "pofo: broken rematerialization table");
    if (ch == 0) {
        REMAT__FORWARD(op(r, REMAT_OP_FALL, i, err));
        if (i < j) REMAT__FORWARD(emit_c(r, i + 1, j, m - pofo_units(P, pofo_abar(P, i)), err));
        return op(r, REMAT_OP_B, i, err);
    }
    size_t k = i + (size_t)ch - 1;
    REMAT__FORWARD(op(r, REMAT_OP_FCK, i, err));
    for (size_t h = i + 1; h <= k; h++) REMAT__FORWARD(op(r, REMAT_OP_FN, h, err));
    REMAT__FORWARD(emit_c(r, k + 1, j, m - pofo_units(P, pofo_a(P, k)), err));
    return emit_c(r, i, k, m, err);
}

/* Waits for every offload issued so far (copies run in issue order). */
static remat_status wait_all(pofo_run *r, remat_error *err) {
    return r->has_last ? vop(r, REMAT_OP_WAIT, r->last_x, r->last_i, err) : REMAT_OK;
}

/* The offloaded inputs a segment's backward prefetches (its dB), the one
 * needed first at the head: a list through the emission's call stack. */
typedef struct pending {
    int x;
    size_t idx;
    const struct pending *next;
} pending;

static remat_status pre_all(pofo_run *r, const pending *pl, remat_error *err) {
    for (; pl; pl = pl->next) REMAT__FORWARD(vop(r, REMAT_OP_PRE, pl->x, pl->idx, err));
    return REMAT_OK;
}

/* Segment s.i and everything after it; pl lists the values in s.b (their
 * units add up to s.b). */
static remat_status emit_oc(pofo_run *r, oc_state s, const pending *pl, remat_error *err) {
    const pofo_shared *P = r->sh;
    int32_t packed = pofo_oc_choice(r, s);
    REMAT__RETURN_IF(packed < 0, err, REMAT_E_INTERNAL, "pofo: broken table at stage %zu", s.i);
    if (s.i == P->n) {
        if (pofo_carry(P)) REMAT__FORWARD(wait_all(r, err));
        REMAT__FORWARD(op(r, REMAT_OP_FALL, s.i, err));
        REMAT__FORWARD(pre_all(r, pl, err));
        return op(r, REMAT_OP_B, s.i, err);
    }
    pofo_choice ch = pofo_choice_unpack(packed);
    size_t j = s.i + ch.len;
    double span = 0; /* the segment's forward time, summed as the DP did */
    for (size_t h = s.i; h <= j; h++) span += P->c->stages[h - 1].fwd_time;
    oc_state next;
    REMAT__RETURN_IF(!pofo_next_state(r, s, ch, span, &next), err, REMAT_E_INTERNAL,
                     "pofo: broken choice at stage %zu", s.i);
    pending mine = {s.x, s.i - 1, ch.push ? pl : NULL};
    const pending *child = ch.off ? &mine : ch.push ? pl : NULL;
    if (ch.drain) REMAT__FORWARD(wait_all(r, err));
    if (ch.off) {
        REMAT__FORWARD(vop(r, REMAT_OP_OFF, s.x, s.i - 1, err));
        r->has_last = 1;
        r->last_x = s.x;
        r->last_i = s.i - 1;
    }
    REMAT__FORWARD(op(r, ch.fck ? REMAT_OP_FCK : REMAT_OP_FALL, s.i, err));
    for (size_t h = s.i + 1; ch.fck && h <= j; h++) REMAT__FORWARD(op(r, REMAT_OP_FN, h, err));
    if (ch.off && !r->relaxed) REMAT__FORWARD(vop(r, REMAT_OP_WAIT, s.x, s.i - 1, err));
    REMAT__FORWARD(emit_oc(r, next, child, err));
    if (ch.off) REMAT__FORWARD(vop(r, REMAT_OP_WAIT, s.x, s.i - 1, err));
    if (!ch.push) REMAT__FORWARD(pre_all(r, pl, err));
    if (!ch.fck) return op(r, REMAT_OP_B, s.i, err);
    uint64_t ui = pofo_units(P, pofo_input_bytes(P, s.i, s.x));
    return emit_c(r, s.i, j, r->cap - s.a - ui - s.b, err);
}

remat_status pofo_run_plan(pofo_run *r, uint32_t cap, double bw, remat__pofo_mode mode,
                           int relaxed, int carry_b, remat_schedule **out, remat_error *err) {
    *out = NULL;
    REMAT__RETURN_IF(!(bw >= 0) || !isfinite(bw), err, REMAT_E_INPUT,
                     "bandwidth: must be a finite number >= 0");
    pofo_run_reset(r, cap, bw, mode, relaxed, carry_b);
    oc_state start = {1, 0, 0, 0, 0};
    double t = pofo_oc_value(r, start);
    REMAT__RETURN_IF(r->hfull, err, REMAT_E_TOO_LARGE,
                     "pofo: carry-mode states need more than max_work_bytes");
    REMAT__RETURN_IF(!(t < INFINITY), err, REMAT_E_INFEASIBLE,
                     "pofo: no schedule fits in %llu bytes with %u memory values",
                     (unsigned long long)(r->sh->q * cap), cap);
    REMAT__FORWARD(remat_schedule_create("pofo", &r->s, err));
    remat_status st = emit_oc(r, start, NULL, err);
    if (st != REMAT_OK) {
        remat_schedule_free(r->s);
        r->s = NULL;
        return st;
    }
    r->s->time = t;
    *out = r->s;
    r->s = NULL;
    return REMAT_OK;
}

remat_status remat__pofo_plan(const remat_chain *c, uint64_t memory, uint32_t values, double bw,
                              remat__pofo_mode mode, uint64_t max_work_bytes,
                              remat_schedule **out, remat_error *err) {
    *out = NULL;
    pofo_shared P;
    REMAT__FORWARD(pofo_shared_init(&P, c, memory, values, 0, 1, max_work_bytes, err));
    pofo_run r;
    remat_status st = pofo_run_init(&r, &P, 0, err);
    if (st == REMAT_OK) st = pofo_run_plan(&r, P.base_cap, bw, mode, 0, 1, out, err);
    if (st == REMAT_OK) (*out)->memory_limit = memory;
    pofo_run_free(&r);
    pofo_shared_free(&P);
    return st;
}
