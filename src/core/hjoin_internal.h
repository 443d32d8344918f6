/* Heterogeneous join networks, inside the library: each branch as a chain,
 * and the simulator's state, which the solver, the plans and the tests'
 * brute force share so that the op rules live in one place (SPEC section 2
 * per branch, remat__sim_apply, plus the turn). */
#ifndef REMAT_HJOIN_INTERNAL_H
#define REMAT_HJOIN_INTERNAL_H

#include "sim_core.h"
#include "remat/hjoin.h"

/* A validated network: branch j (0-based here) as the chain of its stages and
 * an empty end stage (remat_hjoin_branch_chain), and the turn. */
typedef struct remat__hjoin_net {
    size_t k;
    remat_chain *c[REMAT_HJOIN_MAX_BRANCHES];
    uint32_t n[REMAT_HJOIN_MAX_BRANCHES]; /* stages of branch j: c[j]->n - 1 */
    remat_stage turn;
    int ordered; /* the branches run in order (remat_hjoin.ordered) */
} remat__hjoin_net;

/* Checks j the way remat_hjoin_create() does (`who` heads the messages) and
 * builds the branch chains. Free with remat__hjoin_net_free (also after a
 * failure). */
remat_status remat__hjoin_net_init(remat__hjoin_net *net, const remat_hjoin *j, const char *who,
                                   remat_error *err);
void remat__hjoin_net_free(remat__hjoin_net *net);

/* Memory in use while T runs, less what is held: turn.saved_bytes +
 * max(fwd_overhead, sum of d[j.n_j] + bwd_overhead). */
uint64_t remat__hjoin_turn_need(const remat__hjoin_net *net);

/* The state between ops: each branch's chain state and whether T has run. */
typedef struct remat__hjoin_state {
    remat__sim_state b[REMAT_HJOIN_MAX_BRANCHES];
    uint64_t mem; /* bytes held, over all branches */
    int turned;
    uint32_t at; /* ordered networks: the highest branch that ran an op (0-based) */
} remat__hjoin_state;

/* The start: every a[j.0]. Free with remat__hjoin_state_free. */
remat_status remat__hjoin_state_init(const remat__hjoin_net *net, remat__hjoin_state *st,
                                     remat_error *err);
void remat__hjoin_state_free(remat__hjoin_state *st);
/* dst = src, both initialised for net. */
void remat__hjoin_state_copy(const remat__hjoin_net *net, remat__hjoin_state *dst,
                             const remat__hjoin_state *src);
/* Applies one op: 1 with *during and *time set, or 0 with the reason.
 * `next` is the op after it (NULL at the end): a full-save Fall j.i followed
 * by B j.i stops (remat__fall_stops, the chain's rule on branch j). */
int remat__hjoin_apply(const remat__hjoin_net *net, remat__hjoin_state *st, remat_hjoin_op op,
                       const remat_hjoin_op *next, uint64_t *during, double *time, char *reason,
                       size_t cap);
/* Whether op, run in st and followed by *next (NULL: none), is a stopped Fall. */
int remat__hjoin_fall_stops(const remat__hjoin_net *net, const remat__hjoin_state *st,
                            remat_hjoin_op op, const remat_hjoin_op *next);
/* The op after op k of s, NULL after the last. */
static inline const remat_hjoin_op *remat__hjoin_next_op(const remat_hjoin_schedule *s,
                                                         size_t k) {
    return k + 1 < s->n_ops ? &s->ops[k + 1] : NULL;
}
/* 1 when T has run and every branch is back-propagated to d[j.0]. */
int remat__hjoin_done(const remat__hjoin_net *net, const remat__hjoin_state *st, char *reason,
                      size_t cap);

/* Checks a schedule struct a caller hands in (ops present, n_ops <= cap when
 * cap is set, the algorithm terminated). */
remat_status remat__hjoin_schedule_validate(const remat_hjoin_schedule *s, const char *who,
                                            remat_error *err);
/* Appends op to s (growing it). */
remat_status remat__hjoin_push(remat_hjoin_schedule *s, uint8_t kind, size_t branch,
                               uint32_t index, uint8_t option, remat_error *err);

#endif
