/* Execution plans: replay the schedule with the simulator's own op rules
 * (remat__sim_apply) and read each op's reads, creations and releases off the
 * state before and after it, so no executor re-implements SPEC section 2. */
#include <stdio.h>
#include <string.h>

#include "../core/sim_core.h"
#include "remat/exec.h"

static void add_ref(remat_exec_ref *refs, size_t *n, uint8_t kind, uint32_t index) {
    if (*n >= REMAT_EXEC_MAX_REFS) return; /* cannot happen: at most 3 per list */
    refs[*n].kind = kind;
    refs[*n].index = index;
    (*n)++;
}

static uint8_t held_kind(uint8_t held) {
    return held == REMAT__HELD_ABAR ? REMAT_EXEC_ABAR : REMAT_EXEC_A;
}

/* What the op needs, in the state before it (already checked by sim_apply). */
static void list_reads(const remat__sim_state *before, remat_op op, remat_exec_step *st) {
    uint32_t i = op.index;
    switch (op.kind) {
    case REMAT_OP_FN:
    case REMAT_OP_FCK:
    case REMAT_OP_FALL:
        add_ref(st->reads, &st->n_reads, held_kind(before->val[i - 1]), i - 1);
        break;
    case REMAT_OP_B:
        add_ref(st->reads, &st->n_reads, REMAT_EXEC_D, i);
        add_ref(st->reads, &st->n_reads, REMAT_EXEC_ABAR, i);
        add_ref(st->reads, &st->n_reads, held_kind(before->val[i - 1]), i - 1);
        break;
    default: /* Del reads nothing; it only frees */
        break;
    }
}

/* Differences between the two states at the indices an op can touch. */
static void list_changes(const remat__sim_state *before, const remat__sim_state *after,
                         remat_op op, remat_exec_step *st) {
    uint32_t lo = op.index > 0 ? op.index - 1 : 0, hi = op.index;
    for (uint32_t j = lo; j <= hi; j++) {
        uint8_t b = before->val[j], a = after->val[j];
        if (b == a) continue;
        if (b != REMAT__HELD_NONE) add_ref(st->frees, &st->n_frees, held_kind(b), j);
        if (a != REMAT__HELD_NONE) add_ref(st->creates, &st->n_creates, held_kind(a), j);
    }
    for (uint32_t j = lo; j <= hi; j++) {
        uint8_t b = before->dheld[j], a = after->dheld[j];
        if (b && !a) add_ref(st->frees, &st->n_frees, REMAT_EXEC_D, j);
        if (!b && a) add_ref(st->creates, &st->n_creates, REMAT_EXEC_D, j);
    }
}

static remat_status build_steps(const remat_chain *c, const remat_schedule *s,
                                remat_exec_plan *p, remat_error *err) {
    remat__sim_state cur, prev;
    REMAT__FORWARD(remat__sim_state_init(c, &cur, err));
    remat_status st = remat__sim_state_init(c, &prev, err);
    if (st != REMAT_OK) {
        remat__sim_state_free(&cur);
        return st;
    }
    p->peak_bytes = c->input_bytes;
    p->first_backward = s->n_ops;
    char why[256];
    for (size_t k = 0; k < s->n_ops && st == REMAT_OK; k++) {
        remat_op op = s->ops[k];
        char text[REMAT_OP_TEXT_MAX];
        remat_op_format(op, text);
        if (op.kind >= REMAT_OP_OFF) {
            st = remat__fail(err, REMAT_E_INPUT,
                             "schedule op %zu (%s): offload ops are not supported by plans", k, text);
            break;
        }
        memcpy(prev.val, cur.val, c->n + 1);
        memcpy(prev.dheld, cur.dheld, c->n + 1);
        prev.mem = cur.mem;
        uint64_t during;
        double t;
        if (!remat__sim_apply(c, &cur, op, &during, &t, why, sizeof why)) {
            st = remat__fail(err, REMAT_E_INPUT, "schedule op %zu (%s): %s", k, text, why);
            break;
        }
        remat_exec_step *step = &p->steps[k];
        step->op = op;
        list_reads(&prev, op, step);
        list_changes(&prev, &cur, op, step);
        step->mem_during = during;
        step->mem_after = cur.mem;
        if (during > p->peak_bytes) p->peak_bytes = during;
        p->time += t;
        if (op.kind == REMAT_OP_B && p->first_backward == s->n_ops) p->first_backward = k;
    }
    if (st == REMAT_OK && cur.next_b != 0)
        st = remat__fail(err, REMAT_E_INPUT, "schedule: ends before B %u", cur.next_b);
    remat__sim_state_free(&cur);
    remat__sim_state_free(&prev);
    return st;
}

remat_status remat_exec_plan_create(const remat_chain *c, const remat_schedule *s,
                                    remat_exec_plan **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!c || !s || !out, err, REMAT_E_INPUT, "remat_exec_plan_create: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_exec_plan_create", err));
    REMAT__FORWARD(remat__schedule_validate(s, "remat_exec_plan_create", err));
    *out = NULL;
    remat_exec_plan *p = calloc(1, sizeof *p);
    REMAT__RETURN_IF(!p, err, REMAT_E_NOMEM, "plan: out of memory");
    p->n_steps = s->n_ops;
    remat_status st = REMAT_OK;
    if (s->n_ops > 0) {
        p->steps = remat__calloc(s->n_ops, sizeof *p->steps);
        if (!p->steps) st = remat__fail(err, REMAT_E_NOMEM, "plan: out of memory for %zu steps", s->n_ops);
    }
    if (st == REMAT_OK) st = build_steps(c, s, p, err);
    if (st != REMAT_OK) {
        remat_exec_plan_free(p);
        return st;
    }
    *out = p;
    return REMAT_OK;
}

void remat_exec_plan_free(remat_exec_plan *p) {
    if (!p) return;
    free(p->steps);
    free(p);
}

void remat_exec_ref_format(remat_exec_ref r, char out[24]) {
    if (!out) return;
    const char *nm = r.kind == REMAT_EXEC_ABAR ? "abar" : r.kind == REMAT_EXEC_D ? "d" : "a";
    snprintf(out, 24, "%s[%u]", nm, (unsigned)r.index);
}
