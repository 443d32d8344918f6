/* remat: the chain solvers. One entry point, remat_solve(), picks the
 * algorithm; every schedule it returns passes remat_simulate() with
 * peak_bytes <= the memory limit. */
#ifndef REMAT_SOLVERS_H
#define REMAT_SOLVERS_H

#include "remat/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum remat_algorithm {
    REMAT_ALG_OPTIMAL = 0, /* persistent optimum, rotor Theorem 1 (optimal.c) */
    REMAT_ALG_REVOLVE,     /* AD-model DP with precise costs, thesis ch. 3 (revolve.c) */
    REMAT_ALG_SEQUENTIAL,  /* periodic segments, like checkpoint_sequential (sequential.c) */
    REMAT_ALG_STORE_ALL,   /* plain autograd (store_all.c) */
    REMAT_ALG_EXACT,       /* true optimum over all schedules, small chains (exact.c) */
    REMAT_ALG_POFO,        /* remat + offload DP (pofo_*.c) */
    REMAT_ALG_OFFLOAD_ONLY,
    REMAT_ALG_OPPORTUNIST,
    REMAT_ALG_AUTOCAPPER,
    REMAT_ALG_COUNT_
} remat_algorithm;

/* "optimal", "revolve", "sequential", "store-all", "exact", "pofo",
 * "offload-only", "opportunist", "autocapper"; "?" for a value out of range.
 * A static string: never free it. */
REMAT_API const char *remat_algorithm_name(remat_algorithm a);
/* The algorithm named `name` (as remat_algorithm_name spells it) into *out;
 * REMAT_E_INPUT, listing the names, for any other. */
REMAT_API remat_status remat_algorithm_parse(const char *name, remat_algorithm *out,
                                             remat_error *err);
/* How many algorithms this library has: 0..count-1 are valid values (a
 * binding asks the library it loaded rather than trusting its header). */
REMAT_API size_t remat_algorithm_count(void);
/* One line saying what the algorithm computes, for help texts; "?" for a
 * value out of range. A static string: never free it. */
REMAT_API const char *remat_algorithm_summary(remat_algorithm a);
/* 1 when the algorithm's schedules move values to the host (Off/Pre/Wait):
 * it solves for remat_solve_options.bandwidth and its schedules are measured
 * with it (docs/offload.md); 0 otherwise, and for a value out of range. */
REMAT_API int remat_algorithm_is_offload(remat_algorithm a);

typedef enum remat_revolve_mode {
    REMAT_REVOLVE_PRECISE = 0,      /* per-stage costs and sizes */
    REMAT_REVOLVE_UNIFORM_COST,     /* every stage's times replaced by the chain's mean */
    REMAT_REVOLVE_UNIFORM_MEMORY    /* every stage's sizes replaced by the chain's largest */
} remat_revolve_mode;

#define REMAT_DEFAULT_SLOTS 500
#define REMAT_DEFAULT_OFFLOAD_VALUES 50
/* Default cap on one solver's tables and search state, in bytes. */
#define REMAT_DEFAULT_MAX_WORK_BYTES ((uint64_t)8 << 30)
/* remat_solve_options.threads may ask for at most this many threads. */
#define REMAT_MAX_THREADS 1024u
/* Default cap on the estimated time of one remat_solve or remat_curve_compute
 * call, in seconds: work estimated longer is refused up front. */
#define REMAT_DEFAULT_MAX_SECONDS 60.0

/* Progress of long work: `done` rises from 0 to 1; `what` names the step
 * (e.g. "optimal: table"). Called from the thread that called remat_solve()
 * or remat_curve_compute(), a few dozen times per step at most. */
typedef void (*remat_progress_fn)(void *arg, double done, const char *what);

typedef struct remat_solve_options {
    remat_algorithm algorithm;
    uint64_t memory;         /* the limit M in bytes (peak of the schedule, SPEC 2) */
    /* optimal: memory slots S; -1 = REMAT_DEFAULT_SLOTS; 0 = exact bytes. */
    int64_t slots;
    uint32_t segments;       /* sequential: K segments; 0 = the best K that fits */
    uint64_t bucket_bytes;   /* revolve: memory bucket size; 0 = memory / 500 rounded up */
    remat_revolve_mode revolve_mode;
    int exact_no_del;        /* exact: 1 forbids Del (persistent-like search space) */
    double bandwidth;        /* offload solvers: bytes per time unit, each direction */
    uint32_t offload_values; /* pofo: N memory values; 0 = REMAT_DEFAULT_OFFLOAD_VALUES */
    uint64_t max_work_bytes; /* cap on tables/search; 0 = REMAT_DEFAULT_MAX_WORK_BYTES */
    unsigned threads;        /* worker threads, 0..REMAT_MAX_THREADS; 0 = all online cores */
    /* Work estimated (before it starts) to take longer than this many seconds
     * is refused with REMAT_E_TOO_LARGE and the estimate in the message;
     * 0 = REMAT_DEFAULT_MAX_SECONDS, < 0 = no limit. */
    double max_seconds;
    remat_progress_fn progress; /* NULL = silent */
    void *progress_arg;         /* passed to progress */
} remat_solve_options;

/* Fills defaults: algorithm optimal, memory 0, slots -1, everything else 0. */
REMAT_API void remat_solve_options_init(remat_solve_options *o);

/* Solves c under o. On success *out is a new schedule (free with
 * remat_schedule_free()) whose time and peak_bytes are the solver's prediction.
 * REMAT_E_INFEASIBLE when nothing fits: err->min_memory is then the smallest
 * limit in bytes that this algorithm can meet (0 if unknown).
 * REMAT_E_TOO_LARGE, before the work starts, when its tables would pass
 * max_work_bytes or it is estimated to take longer than max_seconds (the
 * message gives the estimate; docs/bounded.md). */
REMAT_API remat_status remat_solve(const remat_chain *c, const remat_solve_options *o,
                                   remat_schedule **out, remat_error *err);

/* The time-memory trade-off from one table solve. */
typedef struct remat_curve_point {
    uint64_t memory; /* a limit in bytes */
    double time;     /* best time the algorithm achieves within it */
} remat_curve_point;

typedef struct remat_curve {
    char algorithm[REMAT_ALGORITHM_MAX];
    size_t n;
    remat_curve_point *points; /* increasing memory, non-increasing time */
} remat_curve;

/* Points from the smallest feasible memory up to the store-all peak (or to
 * o->memory when it is nonzero), memory strictly increasing, time strictly
 * falling. At most max_points points, evenly spread in memory (0 = every
 * distinct step the table resolves; 50 for algorithms without a table, which
 * solve at most 100 points, fewer when the solves would pass half of
 * max_seconds). Free with remat_curve_free(). */
REMAT_API remat_status remat_curve_compute(const remat_chain *c, const remat_solve_options *o,
                                           size_t max_points, remat_curve **out, remat_error *err);
REMAT_API void remat_curve_free(remat_curve *curve);

/* Peak bytes and time of plain autograd (store-all), whatever their size
 * (the peak of a valid chain may pass 2^53 bytes; it is below 2^62). */
REMAT_API remat_status remat_store_all_cost(const remat_chain *c, uint64_t *peak_bytes,
                                            double *time, remat_error *err);

/* Smallest memory limit in bytes for which the algorithm finds a schedule
 * (optimal: from its min-peak recurrence; others: bisection over solves,
 * refused up front like a solve when estimated above max_seconds).
 * REMAT_E_INFEASIBLE when no limit below 2^53 bytes works (a valid chain
 * may need more): err->min_memory is then what would, when known, else 0. */
REMAT_API remat_status remat_min_memory(const remat_chain *c, const remat_solve_options *o,
                                        uint64_t *out, remat_error *err);

#ifdef __cplusplus
}
#endif
#endif
