/* Execution plans of join schedules: the simulator's own op rules
 * (remat__hjoin_apply) replay each op, and its reads, creations and releases
 * are read off the branch state before and after it, as plan.c does for a
 * chain, with the branch in every value. */
#include <stdio.h>
#include <string.h>

#include "../core/hjoin_internal.h"
#include "remat/exec.h"

static void add_ref(remat_hjoin_exec_ref *refs, size_t *n, uint8_t kind, size_t branch,
                    uint32_t index) {
    if (*n >= REMAT_HJOIN_EXEC_MAX_REFS) return; /* cannot happen: at most 4 per list */
    refs[*n] = (remat_hjoin_exec_ref){kind, (uint8_t)branch, index};
    (*n)++;
}

static uint8_t held_kind(uint8_t held) {
    return held == REMAT__HELD_ABAR ? REMAT_EXEC_ABAR : REMAT_EXEC_A;
}

/* What a branch op reads and changes, from its branch's states before and after. */
static void branch_refs(const remat__sim_state *before, const remat__sim_state *after,
                        remat_hjoin_op op, remat_hjoin_exec_step *st) {
    uint32_t i = op.index;
    size_t b = op.branch;
    if (op.kind == REMAT_HJOIN_OP_B) {
        add_ref(st->reads, &st->n_reads, REMAT_EXEC_D, b, i);
        add_ref(st->reads, &st->n_reads, REMAT_EXEC_ABAR, b, i);
    }
    add_ref(st->reads, &st->n_reads, held_kind(before->val[i - 1]), b, i - 1);
    for (uint32_t x = i - 1; x <= i; x++) {
        uint8_t was = before->val[x], now = after->val[x];
        if (was != now && was != REMAT__HELD_NONE)
            add_ref(st->frees, &st->n_frees, held_kind(was), b, x);
        if (was != now && now != REMAT__HELD_NONE)
            add_ref(st->creates, &st->n_creates, held_kind(now), b, x);
    }
    for (uint32_t x = i - 1; x <= i; x++) {
        uint8_t was = before->dheld[x], now = after->dheld[x];
        if (was && !now) add_ref(st->frees, &st->n_frees, REMAT_EXEC_D, b, x);
        if (!was && now) add_ref(st->creates, &st->n_creates, REMAT_EXEC_D, b, x);
    }
}

static void turn_refs(const remat__hjoin_net *net, const remat__hjoin_state *before,
                      remat_hjoin_exec_step *st) {
    for (size_t b = 0; b < net->k; b++) {
        uint32_t n = net->n[b];
        uint8_t held = before->b[b].val[n];
        add_ref(st->reads, &st->n_reads, held_kind(held), b + 1, n);
        add_ref(st->creates, &st->n_creates, REMAT_EXEC_D, b + 1, n);
        if (held == REMAT__HELD_A) add_ref(st->frees, &st->n_frees, REMAT_EXEC_A, b + 1, n);
    }
}

static remat_status build(const remat__hjoin_net *net, const remat_hjoin_schedule *s,
                          remat_hjoin_exec_plan *p, remat__hjoin_state *cur,
                          remat__hjoin_state *prev, remat_error *err) {
    char why[256], text[REMAT_HJOIN_OP_TEXT_MAX];
    p->peak_bytes = cur->mem;
    p->turn = s->n_ops;
    for (size_t k = 0; k < s->n_ops; k++) {
        remat_hjoin_op op = s->ops[k];
        remat_hjoin_exec_step *step = &p->steps[k];
        uint64_t during;
        double t;
        remat__hjoin_state_copy(net, prev, cur);
        const remat_hjoin_op *next = remat__hjoin_next_op(s, k);
        if (!remat__hjoin_apply(net, cur, op, next, &during, &t, why, sizeof why)) {
            remat_hjoin_op_format(op, text);
            return remat__fail(err, REMAT_E_INPUT, "join schedule op %zu (%s): %s", k, text, why);
        }
        step->op = op;
        if (op.kind == REMAT_HJOIN_OP_T) {
            turn_refs(net, prev, step);
            p->turn = k;
        } else {
            size_t b = op.branch - 1u;
            branch_refs(&prev->b[b], &cur->b[b], op, step);
            step->stops = (uint8_t)remat__hjoin_fall_stops(net, prev, op, next);
            /* B recomputes with the option its abar was made with (a stopped
             * Fall's abar is the full save's, made smaller) */
            uint8_t made = prev->b[b].opt[op.index];
            step->option = op.kind != REMAT_HJOIN_OP_B ? op.option
                           : made == REMAT__OPT_STOP   ? 0
                                                       : made;
        }
        step->mem_during = during;
        step->mem_after = cur->mem;
        step->start = p->time;
        step->end = p->time + t;
        if (during > p->peak_bytes) p->peak_bytes = during;
        p->time += t;
    }
    REMAT__RETURN_IF(!remat__hjoin_done(net, cur, why, sizeof why), err, REMAT_E_INPUT,
                     "join schedule: %s", why);
    return REMAT_OK;
}

remat_status remat_hjoin_exec_plan_create(const remat_hjoin *j, const remat_hjoin_schedule *s,
                                          remat_hjoin_exec_plan **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_exec_plan_create: NULL argument");
    REMAT__FORWARD(remat__hjoin_schedule_validate(s, "remat_hjoin_exec_plan_create", err));
    remat__hjoin_net net;
    remat__hjoin_state cur, prev;
    memset(&cur, 0, sizeof cur);
    memset(&prev, 0, sizeof prev);
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_exec_plan_create", err);
    if (st == REMAT_OK) st = remat__hjoin_state_init(&net, &cur, err);
    if (st == REMAT_OK) st = remat__hjoin_state_init(&net, &prev, err);
    remat_hjoin_exec_plan *p = st == REMAT_OK ? calloc(1, sizeof *p) : NULL;
    if (p) {
        p->n_steps = s->n_ops;
        p->steps = remat__calloc(s->n_ops ? s->n_ops : 1, sizeof *p->steps);
    }
    if (st == REMAT_OK && (!p || !p->steps))
        st = remat__fail(err, REMAT_E_NOMEM, "join plan: out of memory for %zu steps", s->n_ops);
    if (st == REMAT_OK) st = build(&net, s, p, &cur, &prev, err);
    remat__hjoin_state_free(&cur);
    remat__hjoin_state_free(&prev);
    remat__hjoin_net_free(&net);
    if (st != REMAT_OK) {
        remat_hjoin_exec_plan_free(p);
        return st;
    }
    *out = p;
    return REMAT_OK;
}

void remat_hjoin_exec_plan_free(remat_hjoin_exec_plan *p) {
    if (!p) return;
    free(p->steps);
    free(p);
}
