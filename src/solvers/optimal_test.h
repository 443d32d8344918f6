/* optimal's entry points for tests and measurements, not for the library,
 * which calls remat__solve_optimal, remat__curve_optimal and
 * remat__min_memory_optimal (solvers_internal.h). */
#ifndef REMAT_OPTIMAL_TEST_H
#define REMAT_OPTIMAL_TEST_H

#include "solvers_internal.h"

/* Whether a solve narrows its table by bounds (docs/optimal.md). */
typedef enum remat__opt_prune {
    REMAT__OPT_PRUNE_NEVER = 0, /* the whole table */
    /* The solver's own choice: a table over the work limit with both bound
     * tables, a large one (OPT_NARROW_CELLS) with upper bounds guessed from
     * the lower table when it bounds enough, else the whole table. */
    REMAT__OPT_PRUNE_AUTO = 1,
    REMAT__OPT_PRUNE_GUESS = 2, /* always, with the guess */
    REMAT__OPT_PRUNE_BOTH = 3   /* always, with both bound tables */
} remat__opt_prune;

/* remat__solve_optimal with the narrowing `prune` (a remat__opt_prune);
 * *cells (if not NULL) gets the table cells stored. Before remat_solve's
 * checks. */
remat_status remat__solve_optimal_ex(const remat_chain *c, const remat_solve_options *o, int prune,
                                     size_t *cells, remat_schedule **out, remat_error *err);

/* The min-peak needs lo(s, t) in exact bytes, an n x n array (lo(s, t) at
 * [(s-1)n + t-1] for s <= t; free() it). */
remat_status remat__optimal_needs(const remat_chain *c, uint64_t **out, remat_error *err);

#endif
