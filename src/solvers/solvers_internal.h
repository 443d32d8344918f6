/* Private solver entry points and the helpers they share. Each solver lives
 * in the file named after its paper's algorithm; remat_solve() in solve.c
 * dispatches and checks the result; the helpers are in solver_util.c, so
 * the solvers never call back into the dispatcher. */
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
/* pofo_search.c: REMAT_ALG_POFO and REMAT_ALG_OFFLOAD_ONLY. */
remat_status remat__solve_pofo(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);
/* offload_heuristics.c: REMAT_ALG_OPPORTUNIST and REMAT_ALG_AUTOCAPPER. */
remat_status remat__solve_offload_heuristic(const remat_chain *, const remat_solve_options *, remat_schedule **, remat_error *);

/* optimal_curve.c: the whole curve from one table. */
remat_status remat__curve_optimal(const remat_chain *, const remat_solve_options *, size_t max_points,
                                  remat_curve **, remat_error *);
/* optimal_ctx.c: the smallest limit at which remat__solve_optimal succeeds,
 * from the min-peak recurrence (no table); remat_min_memory uses it.
 * optimal_test.h has the entry points for tests. */
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

/* solver_util.c: the time limit. remat__check_time refuses (REMAT_E_TOO_LARGE,
 * naming `what`, the estimate and `hint`) work estimated above o's limit;
 * remat__parallel_seconds turns one core's seconds into wall seconds on
 * o->threads workers. */
double remat__max_seconds(const remat_solve_options *o);
remat_status remat__check_time(const remat_solve_options *o, double seconds, const char *what,
                               const char *hint, remat_error *err);
double remat__parallel_seconds(const remat_solve_options *o, double one_core_seconds);
/* Reports progress through o->progress, if any (done clamped to [0, 1]). */
void remat__progress(const remat_solve_options *o, double done, const char *what);

/* optimal_ctx.c: the slot of limit mem with `slots` slots (1: exact bytes),
 * the unit optimal's tables count in (tests, the join solver). */
uint64_t remat__optimal_slot(uint64_t slots, uint64_t mem);

/* optimal_table.c, for the join solver (hjoin.c): the table C(s, e, m) of one
 * chain with sizes in slot `unit` (a power of two, rounded up), for every
 * budget m up to `budget` (rows s >= 2 up to budget - a[s-1]). time is
 * INFINITY where nothing fits; need is the smallest budget that fits (s <= e);
 * ops appends the schedule of (s, e, m) to out (plain remat_ops). */
typedef struct remat__chain_table remat__chain_table;
remat_status remat__chain_table_create(const remat_chain *c, uint64_t unit, uint64_t budget,
                                       const remat_solve_options *o, remat__chain_table **out,
                                       remat_error *err);
void remat__chain_table_free(remat__chain_table *t);
double remat__chain_table_time(const remat__chain_table *t, size_t s, size_t e, uint64_t m);
uint64_t remat__chain_table_need(const remat__chain_table *t, size_t s, size_t e);
/* The row of (s, e) for loops over budgets: C(s, e, m) is INFINITY for
 * m < lo, row[m - lo] / scale for m < hi, else tail / scale (the same
 * double remat__chain_table_time gives). */
typedef struct remat__chain_row {
    const float *row;
    uint64_t lo, hi;
    float tail;
    double scale;
} remat__chain_row;
void remat__chain_table_row(const remat__chain_table *t, size_t s, size_t e,
                            remat__chain_row *out);
remat_status remat__chain_table_ops(const remat__chain_table *t, size_t s, size_t e, uint64_t m,
                                    remat_schedule *out, remat_error *err);

/* solver_util.c: convenience for solvers building schedules. */
remat_status remat__push(remat_schedule *s, remat_op_kind kind, uint32_t index, remat_error *err);
remat_status remat__push_value(remat_schedule *s, remat_op_kind kind, remat_value_kind v,
                               uint32_t index, remat_error *err);

/* solver_util.c: fills time and peak_bytes of s from the simulator; REMAT_E_INTERNAL if the
 * schedule is invalid (a solver bug). bandwidth 0 for compute-only schedules. */
remat_status remat__schedule_measure(const remat_chain *c, remat_schedule *s, double bandwidth,
                                     remat_error *err);

#endif
