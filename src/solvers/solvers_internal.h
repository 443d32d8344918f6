/* Private solver entry points. Each lives in the file named after its paper's
 * algorithm; remat_solve() in solve.c dispatches and checks the result. */
#ifndef REMAT_SOLVERS_INTERNAL_H
#define REMAT_SOLVERS_INTERNAL_H

#include "../core/internal.h"

/* Every solver: on success *out is a new schedule with time/peak_bytes
 * predicted; REMAT_E_INFEASIBLE (optionally with err->min_memory) when nothing
 * fits. remat_solve() re-checks every schedule with the simulator. */
typedef remat_status (*remat__solver_fn)(const remat_chain *c, const remat_solve_options *o,
                                         remat_schedule **out, remat_error *err);

remat_status remat__solve_optimal(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
remat_status remat__solve_revolve(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
remat_status remat__solve_sequential(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
remat_status remat__solve_store_all(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
remat_status remat__solve_exact(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
/* pofo.c: REMAT_ALG_POFO and REMAT_ALG_OFFLOAD_ONLY. */
remat_status remat__solve_pofo(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
/* offload_heuristics.c: REMAT_ALG_OPPORTUNIST and REMAT_ALG_AUTOCAPPER. */
remat_status remat__solve_offload_heuristic(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);

/* optimal.c: the whole curve from one table. */
remat_status remat__curve_optimal(const remat_chain *, const remat_solve_options *, size_t max_points,
                                  remat_curve **, remat_error *);
/* optimal.c: the smallest limit at which remat__solve_optimal succeeds, from
 * the min-peak recurrence (no table); remat_min_memory uses it. */
remat_status remat__min_memory_optimal(const remat_chain *, const remat_solve_options *, uint64_t *out,
                                       remat_error *);

/* revolve.c: one core's seconds for a revolve solve under o (at the store-all
 * peak when o->memory is 0, the largest a sweep solves): its O(n^3) bounds
 * and an O(n^2) upper bound on its DP cells (docs/bounded.md). */
double remat__revolve_estimate(const remat_chain *c, const remat_solve_options *o);
/* revolve.c: the smallest limit at which remat__solve_revolve succeeds, from
 * its bounds alone (no table); refused up front above o's time limit. */
remat_status remat__min_memory_revolve(const remat_chain *, const remat_solve_options *,
                                       uint64_t *out, remat_error *);

/* solve.c: the time limit. remat__check_time refuses (REMAT_E_TOO_LARGE,
 * naming `what`, the estimate and `hint`) work estimated above o's limit;
 * remat__parallel_seconds turns one core's seconds into wall seconds on
 * o->threads workers. */
double remat__max_seconds(const remat_solve_options *o);
remat_status remat__check_time(const remat_solve_options *o, double seconds, const char *what,
                               const char *hint, remat_error *err);
double remat__parallel_seconds(const remat_solve_options *o, double one_core_seconds);
/* Reports progress through o->progress, if any (done clamped to [0, 1]). */
void remat__progress(const remat_solve_options *o, double done, const char *what);

/* optimal.c, for tests: the slot of limit mem with `slots` slots (1: exact
 * bytes), and the min-peak needs lo(s, t) in exact bytes, an n x n array
 * (lo(s, t) at [(s-1)n + t-1] for s <= t; free() it). */
uint64_t remat__optimal_slot(uint64_t slots, uint64_t mem);
/* optimal.c, for tests: remat__solve_optimal with the bound pruning on or
 * off (prune); *cells (if not NULL) gets the table cells stored. Before
 * remat_solve's checks. */
remat_status remat__solve_optimal_ex(const remat_chain *c, const remat_solve_options *o, int prune,
                                     size_t *cells, remat_schedule **out, remat_error *err);
remat_status remat__optimal_needs(const remat_chain *c, uint64_t **out, remat_error *err);

/* Convenience for solvers building schedules. */
remat_status remat__push(remat_schedule *s, remat_op_kind kind, uint32_t index, remat_error *err);
remat_status remat__push_value(remat_schedule *s, remat_op_kind kind, remat_value_kind v,
                               uint32_t index, remat_error *err);

/* Fills time and peak_bytes of s from the simulator; REMAT_E_INTERNAL if the
 * schedule is invalid (a solver bug). bandwidth 0 for compute-only schedules. */
remat_status remat__schedule_measure(const remat_chain *c, remat_schedule *s, double bandwidth,
                                     remat_error *err);

#endif
