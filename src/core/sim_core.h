/* The SPEC section 2 op semantics, one op at a time. Shared by the simulator
 * and by solvers that search over schedules, so the rules live in one place. */
#ifndef REMAT_SIM_CORE_H
#define REMAT_SIM_CORE_H

#include "internal.h"

enum { REMAT__HELD_NONE = 0, REMAT__HELD_A = 1, REMAT__HELD_ABAR = 2 };

typedef struct remat__sim_state {
    uint8_t *val;    /* [n+1] REMAT__HELD_* for a[i]/abar[i] */
    uint8_t *opt;    /* [n+1] the option of the Fall that made abar[i] (SPEC section 2) */
    uint8_t *dheld;  /* [n+1] 1 when d[i] is held */
    uint64_t mem;    /* bytes held */
    uint32_t next_b; /* the B expected next (n..1); 0 when all are done */
} remat__sim_state;

/* Allocates the arrays and sets the start state: a[0] and the seed d[n]. */
remat_status remat__sim_state_init(const remat_chain *c, remat__sim_state *st, remat_error *err);
void remat__sim_state_free(remat__sim_state *st);

/* The option recorded for an abar[i] that a stopped Fall made (its size is
 * stop_saved_bytes; the B consuming it takes the full save's time and
 * overhead). */
#define REMAT__OPT_STOP ((uint8_t)0xFF)

/* Bytes of a[i] (kind REMAT__HELD_A) or abar[i] made with option k
 * (REMAT__HELD_ABAR; k = REMAT__OPT_STOP: by a stopped Fall); 0 for
 * REMAT__HELD_NONE. */
uint64_t remat__value_bytes(const remat_chain *c, size_t i, uint8_t kind, uint8_t k);

/* Whether Fall op, run in state st and followed by *next (NULL: the last op),
 * is a stopped Fall (docs/formats.md): the full save (option 0) of a stage
 * i < n, abar[i] not already held, and next is B i. */
int remat__fall_stops(const remat_chain *c, const remat__sim_state *st, remat_op op,
                      const remat_op *next);

/* Applies one compute or Del op; `next` is the op after it in the schedule
 * (NULL at the end), which decides whether a Fall stops. Returns 1 and sets
 * *during (memory in use while it runs) and *time; or returns 0 with the
 * reason in `reason`. Off/Pre/Wait are not handled here (see the timed
 * simulator). */
int remat__sim_apply(const remat_chain *c, remat__sim_state *st, remat_op op,
                     const remat_op *next, uint64_t *during, double *time, char *reason,
                     size_t reason_cap);

/* The op after op k of s, NULL after the last. */
static inline const remat_op *remat__next_op(const remat_schedule *s, size_t k) {
    return k + 1 < s->n_ops ? &s->ops[k + 1] : NULL;
}

/* Marks r invalid at op k (k == n_ops: the schedule ended early) with why. */
void remat__sim_fail(remat_sim_result *r, const remat_schedule *s, size_t k, const char *why);

/* What the timed simulator decided for one op, for execution plans. */
typedef struct remat__timed_op {
    double start, end; /* compute op: when it runs; Off/Pre: the copy; Wait, Del: the clock */
    /* Off X: the op before which X's device copy was released (n_ops: after the
     * last op). Pre X: the first op that starts at or after the prefetch
     * starts (n_ops: none). Other ops: their own index. */
    size_t at;
} remat__timed_op;

/* The timed simulator (Off/Pre/Wait with a host link), simulate_timed.c.
 * `trace` is NULL or an array of s->n_ops entries that it fills for the ops
 * that ran. */
remat_status remat__simulate_timed(const remat_chain *c, const remat_schedule *s,
                                   const remat_sim_options *opt, remat_sim_result *r,
                                   remat__timed_op *trace, remat_error *err);

#endif
