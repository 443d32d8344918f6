/* remat: the simulator. It replays a schedule on a chain under SPEC section 2
 * and is the single authority on validity, time and peak memory. Every solver's
 * output is checked against it in the tests. */
#ifndef REMAT_SIMULATE_H
#define REMAT_SIMULATE_H

#include "remat/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remat_sim_options {
    /* Host link bandwidth in bytes per time unit, each direction. 0 means no
     * link: a schedule with Off/Pre/Wait is then invalid. Must be finite, >= 0. */
    double bandwidth;
    /* When nonzero, record a timeline (compute ops and copies with start/end
     * times, memory over time), which remat_sim_result_to_json() writes. */
    int record_timeline;
} remat_sim_options;

/* One event of the timed simulation. */
typedef struct remat_sim_event {
    size_t op;        /* index of the op in the schedule */
    int lane;         /* 0 compute, 1 device-to-host link, 2 host-to-device link */
    double start, end;
} remat_sim_event;

/* Memory in use from time `time` on (timed simulation). */
typedef struct remat_sim_mem_point {
    double time;
    uint64_t bytes;
} remat_sim_mem_point;

typedef struct remat_sim_result {
    int valid;           /* 1 when every op found what it needs and the B order holds */
    double time;         /* total time (the makespan with offloading) */
    uint64_t peak_bytes; /* largest memory in use while any op runs (and a[0]) */
    size_t n_ops;
    uint64_t *mem_during; /* [n_ops] memory in use while op k runs (overhead included) */
    uint64_t *mem_after;  /* [n_ops] memory held after op k */
    /* When !valid: the first failing op (index, text) and why. For a schedule
     * that ends early (missing B ops), failed_op == n_ops. */
    size_t failed_op;
    char failed_op_text[REMAT_OP_TEXT_MAX];
    char reason[256];
    /* Timed simulation (bandwidth > 0): idle time of compute and of each link
     * between time 0 and the end of the schedule. Zero otherwise. */
    double compute_idle;
    double d2h_idle;
    double h2d_idle;
    /* Timeline, when requested: events and memory steps. */
    size_t n_events;
    remat_sim_event *events;
    size_t n_mem_points;
    remat_sim_mem_point *mem_points;
} remat_sim_result;

REMAT_API void remat_sim_options_init(remat_sim_options *o);

/* Replays `s` on `c`. Returns REMAT_OK whenever the simulation ran, valid or
 * not; *out is then a new result, freed with remat_sim_result_free(). Other
 * statuses mean bad arguments (e.g. bandwidth < 0) or no memory; *out is NULL.
 * `opt` may be NULL for defaults. */
REMAT_API remat_status remat_simulate(const remat_chain *c, const remat_schedule *s,
                                      const remat_sim_options *opt, remat_sim_result **out,
                                      remat_error *err);
REMAT_API void remat_sim_result_free(remat_sim_result *r);

/* JSON summary: {"valid": true, "time": ..., "peak_bytes": ...} or
 * {"valid": false, "op_index": k, "op": "...", "reason": "..."}; with a
 * timeline, also "compute_idle", "d2h_idle", "h2d_idle", "events", "memory".
 * Free *out with remat_free(). */
REMAT_API remat_status remat_sim_result_to_json(const remat_sim_result *r, char **out,
                                                remat_error *err);

#ifdef __cplusplus
}
#endif
#endif
