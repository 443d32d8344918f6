/* revolve.c's internal entry point with statistics, for its tests and
 * benchmark. Not part of the API. */
#ifndef REMAT_REVOLVE_INTERNAL_H
#define REMAT_REVOLVE_INTERNAL_H

#include "solvers_internal.h"

typedef struct remat__revolve_stats {
    uint64_t bucket_bytes;  /* bucket size used */
    int64_t buckets;        /* budget M in buckets (memory minus the input) */
    int64_t min_buckets;    /* smallest budget the whole chain needs (INT64_MAX/4: none) */
    size_t table_entries;   /* cost entries stored (all rows together) */
    uint64_t cells;         /* (i, j, k, m) candidates evaluated by the DP */
    size_t quad_nodes;      /* subproblems of the plan solved by the quadratic fallback */
    size_t ckpt_nodes;      /* subproblems of the plan split at a checkpoint */
    unsigned threads;       /* worker threads used */
    double dp_cost;         /* C(0, n, M) as the DP computed it (planning times) */
    /* for the calibration of the estimate (bench_revolve --calibrate); the
     * times are CPU seconds of the calling thread (one core's with threads 1) */
    uint64_t bound_actions; /* actions the bounds tried (last bounds run) */
    double bounds_seconds;  /* the solve's bounds run */
    double dp_seconds;      /* the DP fill */
    double estimate_bounds; /* the estimate of the bounds, one core's seconds */
    double estimate_cells;  /* the estimate's upper bound on `cells` */
    double estimate_seconds; /* the whole estimate, one core's seconds */
} remat__revolve_stats;

/* remat__solve_revolve, also filling *stats (may be NULL; zeroed first, then
 * filled as far as the solve gets). On success *out is a new schedule the
 * caller frees with remat_schedule_free(); on failure *out is NULL. */
remat_status remat__revolve_solve_stats(const remat_chain *c, const remat_solve_options *o,
                                        remat_schedule **out, remat__revolve_stats *stats,
                                        remat_error *err);

#endif
