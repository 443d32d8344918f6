/* The SPEC section 2 op semantics, one op at a time (sim_core.h): the one
 * place the rules live, used by the simulators (simulate.c,
 * simulate_timed.c), the execution plan and the solvers that search over
 * schedules. A file of its own so that the simulators depend on it and not
 * on each other. */
#include <stdio.h>
#include <string.h>

#include "sim_core.h"

remat_status remat__sim_state_init(const remat_chain *c, remat__sim_state *st, remat_error *err) {
    st->val = remat__calloc(c->n + 1, 1);
    st->opt = remat__calloc(c->n + 1, 1);
    st->dheld = remat__calloc(c->n + 1, 1);
    if (!st->val || !st->opt || !st->dheld) {
        remat__sim_state_free(st);
        return remat__fail(err, REMAT_E_NOMEM, "simulate: out of memory");
    }
    st->val[0] = REMAT__HELD_A;
    st->dheld[c->n] = 1;
    st->mem = c->input_bytes;
    st->next_b = (uint32_t)c->n;
    return REMAT_OK;
}

void remat__sim_state_free(remat__sim_state *st) {
    free(st->val);
    free(st->opt);
    free(st->dheld);
    st->val = st->opt = st->dheld = NULL;
}

#define FAIL(...)                                    \
    do {                                             \
        snprintf(reason, reason_cap, __VA_ARGS__);   \
        return 0;                                    \
    } while (0)

uint64_t remat__value_bytes(const remat_chain *c, size_t i, uint8_t kind, uint8_t k) {
    if (kind == REMAT__HELD_A) return remat_chain_a_bytes(c, i);
    if (kind != REMAT__HELD_ABAR || i == 0 || i > c->n) return 0;
    if (k == REMAT__OPT_STOP) return remat__stop_saved(&c->stages[i - 1]);
    return remat__stage_save(&c->stages[i - 1], k).saved_bytes;
}

static uint64_t held_bytes(const remat_chain *c, const remat__sim_state *st, size_t i) {
    return remat__value_bytes(c, i, st->val[i], st->opt[i]);
}

int remat__fall_stops(const remat_chain *c, const remat__sim_state *st, remat_op op,
                      const remat_op *next) {
    return op.kind == REMAT_OP_FALL && op.option == 0 && op.index >= 1 && op.index < c->n &&
           st->val[op.index] != REMAT__HELD_ABAR && next && next->kind == REMAT_OP_B &&
           next->index == op.index;
}

/* The chain validator caps the sum of all sizes below 2^62, so these sums fit.
 * A stopped Fall makes an abar[i] that need not hold a[i] (it may be smaller):
 * nothing reads it as a[i], since the next op, B i, frees it. */
static int apply_forward(const remat_chain *c, remat__sim_state *st, remat_op op, int stops,
                         uint64_t *during, double *time, char *reason, size_t reason_cap) {
    uint32_t i = op.index;
    const remat_stage *sg = &c->stages[i - 1];
    if (i <= c->n && st->next_b < i) FAIL("forward of stage %u after B %u", i, i);
    if (st->val[i - 1] == REMAT__HELD_NONE) FAIL("needs a[%u], which is not held", i - 1);
    if (op.option > sg->n_options)
        FAIL("stage %u has %zu option%s: there is no option %u", i, sg->n_options,
             sg->n_options == 1 ? "" : "s", (unsigned)op.option);
    uint8_t have = st->val[i];
    uint8_t want = op.kind == REMAT_OP_FALL ? REMAT__HELD_ABAR : REMAT__HELD_A;
    uint8_t made = stops ? REMAT__OPT_STOP : op.option;
    uint64_t add = 0;
    if (have < want) add = remat__value_bytes(c, i, want, made);
    uint64_t overhead = stops                       ? remat__stop_overhead(sg)
                        : op.kind == REMAT_OP_FALL ? remat__stage_save(sg, op.option).fall_overhead
                                                   : sg->fwd_overhead;
    *during = st->mem + add + overhead;
    *time = stops ? remat__stop_time(sg) : sg->fwd_time;
    if (have < want) { /* an abar already held keeps its own option */
        st->mem = st->mem - held_bytes(c, st, i) + add;
        st->val[i] = want;
        st->opt[i] = made;
    }
    if (op.kind == REMAT_OP_FN && st->val[i - 1] == REMAT__HELD_A) {
        st->mem -= remat_chain_a_bytes(c, i - 1);
        st->val[i - 1] = REMAT__HELD_NONE;
    }
    return 1;
}

static int apply_backward(const remat_chain *c, remat__sim_state *st, remat_op op,
                          uint64_t *during, double *time, char *reason, size_t reason_cap) {
    uint32_t i = op.index;
    const remat_stage *sg = &c->stages[i - 1];
    if (st->next_b == 0) FAIL("every B has already run");
    if (i != st->next_b) FAIL("B %u out of order: B %u must run first", i, st->next_b);
    if (!st->dheld[i]) FAIL("needs d[%u], which is not held", i);
    if (st->val[i] != REMAT__HELD_ABAR) FAIL("needs abar[%u], which is not held", i);
    if (st->val[i - 1] == REMAT__HELD_NONE) FAIL("needs a[%u], which is not held", i - 1);
    remat__save sv = remat__stage_save(sg, st->opt[i]);
    uint64_t dout = remat_chain_d_bytes(c, i - 1);
    *during = st->mem + dout + sv.bwd_overhead;
    *time = sv.bwd_time;
    st->mem += dout;
    st->dheld[i - 1] = 1;
    st->mem -= remat_chain_d_bytes(c, i);
    st->dheld[i] = 0;
    st->mem -= held_bytes(c, st, i);
    st->val[i] = REMAT__HELD_NONE;
    if (st->val[i - 1] == REMAT__HELD_A) {
        st->mem -= remat_chain_a_bytes(c, i - 1);
        st->val[i - 1] = REMAT__HELD_NONE;
    }
    st->next_b = i - 1;
    return 1;
}

int remat__sim_apply(const remat_chain *c, remat__sim_state *st, remat_op op,
                     const remat_op *next, uint64_t *during, double *time, char *reason,
                     size_t reason_cap) {
    *during = st->mem;
    *time = 0;
    if (op.option && op.kind != REMAT_OP_FALL) /* B takes the option of the abar it consumes */
        FAIL("only Fall takes an option");
    switch (op.kind) {
    case REMAT_OP_FN:
    case REMAT_OP_FCK:
    case REMAT_OP_FALL:
    case REMAT_OP_B:
        if (op.index < 1 || op.index > c->n) FAIL("stage %u is not in 1..%zu", op.index, c->n);
        if (op.kind == REMAT_OP_B) return apply_backward(c, st, op, during, time, reason, reason_cap);
        return apply_forward(c, st, op, remat__fall_stops(c, st, op, next), during, time,
                             reason, reason_cap);
    case REMAT_OP_DEL: {
        uint8_t want = op.value == REMAT_VALUE_ABAR ? REMAT__HELD_ABAR : REMAT__HELD_A;
        const char *nm = want == REMAT__HELD_ABAR ? "abar" : "a";
        if (op.index > c->n || (want == REMAT__HELD_ABAR && op.index == 0))
            FAIL("%s[%u] is not a value of this chain", nm, op.index);
        if (st->val[op.index] != want) FAIL("%s[%u] is not held", nm, op.index);
        st->mem -= held_bytes(c, st, op.index);
        st->val[op.index] = REMAT__HELD_NONE;
        return 1;
    }
    default:
        FAIL("offload ops need a host link: simulate with a bandwidth");
    }
}
#undef FAIL

void remat__sim_fail(remat_sim_result *r, const remat_schedule *s, size_t k, const char *why) {
    r->valid = 0;
    r->failed_op = k;
    if (k < s->n_ops)
        remat_op_format(s->ops[k], r->failed_op_text);
    else
        remat__strlcpy(r->failed_op_text, "(end)", sizeof r->failed_op_text);
    remat__strlcpy(r->reason, why, sizeof r->reason);
}
