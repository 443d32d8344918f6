/* Execution plans: replay the schedule with the simulator's own op rules
 * (remat__sim_apply) and read each op's reads, creations and releases off the
 * state before and after it, so no executor re-implements SPEC section 2.
 * With a host link, the timed simulator runs first and its trace says where
 * each offload is released and each prefetch starts; the replay applies those
 * releases before the steps the simulator made them at. */
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

/* Runs compute or Del op k on `cur` (prev: the state before it) and fills
 * its step's reads, creations and releases. Returns 0 with `why` set when
 * the op is not valid there. */
static int apply_step(const remat_chain *c, remat__sim_state *cur, remat__sim_state *prev,
                      remat_op op, const remat_op *next, remat_exec_step *step,
                      uint64_t *during, double *t, char *why, size_t why_cap) {
    memcpy(prev->val, cur->val, c->n + 1);
    memcpy(prev->opt, cur->opt, c->n + 1);
    memcpy(prev->dheld, cur->dheld, c->n + 1);
    prev->mem = cur->mem;
    if (!remat__sim_apply(c, cur, op, next, during, t, why, why_cap)) return 0;
    step->op = op;
    step->stops = (uint8_t)remat__fall_stops(c, prev, op, next);
    if (op.kind == REMAT_OP_FALL) step->option = op.option;
    /* the abar of a stopped Fall is the full save's, made smaller */
    if (op.kind == REMAT_OP_B)
        step->option = prev->opt[op.index] == REMAT__OPT_STOP ? 0 : prev->opt[op.index];
    list_reads(prev, op, step);
    list_changes(prev, cur, op, step);
    return 1;
}

static uint8_t op_value_kind(remat_op op) {
    return op.value == REMAT_VALUE_ABAR ? REMAT_EXEC_ABAR : REMAT_EXEC_A;
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
                             "schedule op %zu (%s): offload ops need a host link: make the plan "
                             "with a bandwidth > 0 (remat_exec_plan_create_timed)", k, text);
            break;
        }
        remat_exec_step *step = &p->steps[k];
        uint64_t during;
        double t;
        if (!apply_step(c, &cur, &prev, op, remat__next_op(s, k), step, &during, &t, why,
                        sizeof why)) {
            st = remat__fail(err, REMAT_E_INPUT, "schedule op %zu (%s): %s", k, text, why);
            break;
        }
        step->mem_during = during;
        step->mem_after = cur.mem;
        step->start = p->time;
        step->end = p->time + t;
        step->copy_at = k;
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

/* The work arrays of a timed plan. */
typedef struct timed_work {
    remat__timed_op *trace; /* [n_ops] */
    uint8_t *host_opt;      /* [n+1] the option of the abar[i] last offloaded */
    size_t *head;           /* [n_ops + 1]: first Off released before step k */
    size_t *link;           /* [n_ops]: the next Off released before the same step */
    remat_sim_result r;     /* its mem_during / mem_after arrays */
} timed_work;

static void timed_work_free(timed_work *w) {
    free(w->trace);
    free(w->host_opt);
    free(w->head);
    free(w->link);
    free(w->r.mem_during);
    free(w->r.mem_after);
}

#define NO_STEP ((size_t)-1)

/* The timed simulator's run of s, with the Offs listed by release step. */
static remat_status simulate_for_plan(const remat_chain *c, const remat_schedule *s, double bw,
                                      timed_work *w, remat_error *err) {
    size_t n = s->n_ops, cap = n ? n : 1;
    w->trace = remat__calloc(cap, sizeof *w->trace);
    w->host_opt = remat__calloc(c->n + 1, 1);
    w->head = remat__calloc(n + 1, sizeof *w->head);
    w->link = remat__calloc(cap, sizeof *w->link);
    w->r.n_ops = n;
    w->r.mem_during = remat__calloc(cap, sizeof *w->r.mem_during);
    w->r.mem_after = remat__calloc(cap, sizeof *w->r.mem_after);
    REMAT__RETURN_IF(!w->trace || !w->host_opt || !w->head || !w->link || !w->r.mem_during ||
                         !w->r.mem_after,
                     err, REMAT_E_NOMEM, "plan: out of memory for %zu steps", n);
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = bw;
    REMAT__FORWARD(remat__simulate_timed(c, s, &o, &w->r, w->trace, err));
    if (!w->r.valid) {
        if (w->r.failed_op < n)
            return remat__fail(err, REMAT_E_INPUT, "schedule op %zu (%s): %s", w->r.failed_op,
                               w->r.failed_op_text, w->r.reason);
        return remat__fail(err, REMAT_E_INPUT, "schedule: %s", w->r.reason);
    }
    for (size_t k = 0; k <= n; k++) w->head[k] = NO_STEP;
    for (size_t k = 0; k < n; k++)
        if (s->ops[k].kind == REMAT_OP_OFF) {
            size_t at = w->trace[k].at;
            w->link[k] = w->head[at];
            w->head[at] = k;
        }
    return REMAT_OK;
}

/* Step k of a timed plan: the releases the simulator made before it, then the op. */
static remat_status timed_step(const remat_chain *c, const remat_schedule *s, timed_work *w,
                               size_t k, remat__sim_state *cur, remat__sim_state *prev,
                               remat_exec_step *step, remat_error *err) {
    for (size_t j = w->head[k]; j != NO_STEP; j = w->link[j])
        cur->val[s->ops[j].index] = REMAT__HELD_NONE;
    remat_op op = s->ops[k];
    step->op = op;
    if (op.kind == REMAT_OP_OFF) {
        add_ref(step->reads, &step->n_reads, op_value_kind(op), op.index);
        w->host_opt[op.index] = cur->opt[op.index]; /* a recomputation may change cur's */
    } else if (op.kind == REMAT_OP_PRE) {
        add_ref(step->creates, &step->n_creates, op_value_kind(op), op.index);
        cur->val[op.index] = op.value == REMAT_VALUE_ABAR ? REMAT__HELD_ABAR : REMAT__HELD_A;
        cur->opt[op.index] = w->host_opt[op.index];
    } else if (op.kind != REMAT_OP_WAIT) {
        uint64_t during;
        double t;
        char why[256];
        if (!apply_step(c, cur, prev, op, remat__next_op(s, k), step, &during, &t, why,
                        sizeof why)) {
            char text[REMAT_OP_TEXT_MAX];
            remat_op_format(op, text);
            return remat__fail(err, REMAT_E_INTERNAL,
                               "plan: op %zu (%s) passed the timed simulator but not its "
                               "replay: %s", k, text, why);
        }
    }
    step->mem_during = w->r.mem_during[k];
    step->mem_after = w->r.mem_after[k];
    step->start = w->trace[k].start;
    step->end = w->trace[k].end;
    step->copy_at = w->trace[k].at;
    return REMAT_OK;
}

static remat_status build_timed(const remat_chain *c, const remat_schedule *s, double bw,
                                remat_exec_plan *p, remat_error *err) {
    timed_work w;
    memset(&w, 0, sizeof w);
    remat__sim_state cur = {0}, prev = {0};
    remat_status st = simulate_for_plan(c, s, bw, &w, err);
    if (st == REMAT_OK) st = remat__sim_state_init(c, &cur, err);
    if (st == REMAT_OK) st = remat__sim_state_init(c, &prev, err);
    p->first_backward = s->n_ops;
    for (size_t k = 0; k < s->n_ops && st == REMAT_OK; k++) {
        st = timed_step(c, s, &w, k, &cur, &prev, &p->steps[k], err);
        if (s->ops[k].kind == REMAT_OP_B && p->first_backward == s->n_ops) p->first_backward = k;
    }
    p->peak_bytes = w.r.peak_bytes;
    p->time = w.r.time;
    p->bandwidth = bw;
    remat__sim_state_free(&cur);
    remat__sim_state_free(&prev);
    timed_work_free(&w);
    return st;
}

static remat_status plan_create(const remat_chain *c, const remat_schedule *s, double bw,
                                remat_exec_plan **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!c || !s || !out, err, REMAT_E_INPUT, "remat_exec_plan_create: NULL argument");
    REMAT__RETURN_IF(!(bw >= 0) || bw > 1e300, err, REMAT_E_INPUT,
                     "remat_exec_plan_create_timed: bandwidth must be a finite number >= 0");
    REMAT__FORWARD(remat__chain_validate(c, "remat_exec_plan_create", err));
    REMAT__FORWARD(remat__schedule_validate(s, "remat_exec_plan_create", err));
    remat_exec_plan *p = calloc(1, sizeof *p);
    REMAT__RETURN_IF(!p, err, REMAT_E_NOMEM, "plan: out of memory");
    p->n_steps = s->n_ops;
    remat_status st = REMAT_OK;
    if (s->n_ops > 0) {
        p->steps = remat__calloc(s->n_ops, sizeof *p->steps);
        if (!p->steps) st = remat__fail(err, REMAT_E_NOMEM, "plan: out of memory for %zu steps", s->n_ops);
    }
    if (st == REMAT_OK) st = bw > 0 ? build_timed(c, s, bw, p, err) : build_steps(c, s, p, err);
    if (st != REMAT_OK) {
        remat_exec_plan_free(p);
        return st;
    }
    *out = p;
    return REMAT_OK;
}

remat_status remat_exec_plan_create(const remat_chain *c, const remat_schedule *s,
                                    remat_exec_plan **out, remat_error *err) {
    return plan_create(c, s, 0, out, err);
}

remat_status remat_exec_plan_create_timed(const remat_chain *c, const remat_schedule *s,
                                          double bandwidth, remat_exec_plan **out,
                                          remat_error *err) {
    return plan_create(c, s, bandwidth, out, err);
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
