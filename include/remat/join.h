/* remat: several chains joined at the loss (siamese and cross-modal networks),
 * the homogeneous model of papers/join-networks.md.
 *
 * k branches of l_1..l_k forward steps meet at one turn (the loss). Every value
 * takes one memory slot; a forward step costs fwd_time (u_f), a backward step
 * bwd_time (u_b) and the turn turn_time (u_t). Documents: "remat-join-1"
 * (problem) and "remat-join-schedule-1" (schedule), SPEC section 3.
 *
 * Ownership: every *out pointer a function fills is owned by the caller; free
 * strings with remat_free(), schedules with remat_join_schedule_free(), curves
 * with remat_join_curve_free() and plans with remat_join_plan_free(). On
 * failure the *out pointer is NULL. */
#ifndef REMAT_JOIN_H
#define REMAT_JOIN_H

#include "remat/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_JOIN_MAX_BRANCHES 16u
#define REMAT_JOIN_MAX_LENGTH 100000u
/* Default cap on the inner steps of one DP fill (about seconds of work). */
#define REMAT_JOIN_DEFAULT_MAX_STEPS ((uint64_t)20000000000)
/* A schedule may have at most this many ops. */
#define REMAT_JOIN_MAX_OPS ((size_t)1 << 24)
#define REMAT_JOIN_ALGORITHM_MAX 32

typedef struct remat_join_problem {
    size_t k;                                  /* branches, 1..REMAT_JOIN_MAX_BRANCHES */
    uint32_t lengths[REMAT_JOIN_MAX_BRANCHES]; /* lengths[j-1]: forward steps of branch j (>= 1) */
    double fwd_time, bwd_time, turn_time;      /* u_f, u_b, u_t: finite, >= 0 */
    uint64_t slots;                            /* memory c in slots; 0 = not given */
} remat_join_problem;

/* Fills *out after checking every field (lengths 1..REMAT_JOIN_MAX_LENGTH,
 * times finite, >= 0 and < 2^53, slots < 2^53). */
REMAT_API remat_status remat_join_problem_set(remat_join_problem *out, size_t k,
                                              const uint32_t *lengths, double fwd_time,
                                              double bwd_time, double turn_time, uint64_t slots,
                                              remat_error *err);
/* Parses a "remat-join-1" document; `source` names it in messages. "slots" is
 * optional (0 when absent). */
REMAT_API remat_status remat_join_problem_from_json(const char *text, size_t len,
                                                    const char *source, remat_join_problem *out,
                                                    remat_error *err);
REMAT_API remat_status remat_join_problem_load(const char *path, remat_join_problem *out,
                                               remat_error *err);
/* 1 when text is a JSON object whose "format" is "remat-join-1". */
REMAT_API int remat_join_is_problem_json(const char *text, size_t len);
REMAT_API remat_status remat_join_problem_to_json(const remat_join_problem *p, char **out,
                                                  remat_error *err);

/* Table 3 of the paper. Branches are numbered from 1. */
typedef enum remat_join_op_kind {
    REMAT_JOIN_OP_F = 0, /* "F j i":  x_i -> x_{i+1} on branch j, in place, u_f */
    REMAT_JOIN_OP_FB,    /* "Fb j i": (xbar_{i+1}, x_i) -> xbar_i, u_b */
    REMAT_JOIN_OP_T,     /* "T":      (x_{l_1}, ..., x_{l_k}) -> (xbar_{l_1}, ...), u_t */
    REMAT_JOIN_OP_S,     /* "S j i":  one more copy of x_i (one more slot) */
    REMAT_JOIN_OP_D,     /* "D j i":  drop one copy of x_i */
    REMAT_JOIN_OP_DB     /* "Db j":   drop xbar_0 of branch j */
} remat_join_op_kind;

typedef struct remat_join_op {
    uint8_t kind;    /* remat_join_op_kind */
    uint32_t branch; /* 1..k; 0 for T */
    uint32_t index;  /* i; 0 for T and Db */
} remat_join_op;

#define REMAT_JOIN_OP_TEXT_MAX 32
/* Op text such as "Fb 2 7" into out (at most REMAT_JOIN_OP_TEXT_MAX bytes). */
REMAT_API void remat_join_op_format(remat_join_op op, char out[REMAT_JOIN_OP_TEXT_MAX]);
/* Parses op text; the message says what is wrong with it. */
REMAT_API remat_status remat_join_op_parse(const char *text, remat_join_op *out, remat_error *err);

typedef struct remat_join_schedule {
    char algorithm[REMAT_JOIN_ALGORITHM_MAX]; /* "join-optimal" or "equiv-chain" */
    uint64_t slots;      /* the memory it was solved for */
    double time;         /* predicted makespan */
    uint64_t peak_slots; /* predicted peak */
    size_t n_ops;
    size_t cap; /* private */
    remat_join_op *ops;
} remat_join_schedule;

REMAT_API void remat_join_schedule_free(remat_join_schedule *s);
/* "remat-join-schedule-1" I/O. Parsing checks syntax only; the simulator
 * checks meaning. */
REMAT_API remat_status remat_join_schedule_to_json(const remat_join_schedule *s, char **out,
                                                   remat_error *err);
REMAT_API remat_status remat_join_schedule_from_json(const char *text, size_t len,
                                                     const char *source, remat_join_schedule **out,
                                                     remat_error *err);
REMAT_API remat_status remat_join_schedule_load(const char *path, remat_join_schedule **out,
                                                remat_error *err);

/* The simulator: replays ops from the initial memory {x_0 of every branch}.
 * Valid when every op finds its inputs, the turn runs once, every branch ends
 * with its xbar_0 computed and memory ends empty, and (when limit > 0) the
 * slots in use never exceed limit. */
typedef struct remat_join_sim_result {
    int valid;
    double time;          /* n_F u_f + n_Fb u_b + n_T u_t over the ops replayed */
    uint64_t peak_slots;  /* largest number of values held (k at the start) */
    size_t failed_op;     /* index of the first failing op, or n when the end state is wrong */
    char reason[256];     /* why it is invalid; "" when valid */
} remat_join_sim_result;

/* Returns REMAT_OK when it could replay (valid or not: see (*out)->valid);
 * *out is then a new result, freed with remat_join_sim_result_free(), as
 * remat_simulate() does. REMAT_E_INPUT for bad arguments (n above
 * REMAT_JOIN_MAX_OPS included), REMAT_E_NOMEM; *out is NULL then. */
REMAT_API remat_status remat_join_simulate(const remat_join_problem *p, const remat_join_op *ops,
                                           size_t n, uint64_t limit, remat_join_sim_result **out,
                                           remat_error *err);
/* Frees a result; NULL is allowed. */
REMAT_API void remat_join_sim_result_free(remat_join_sim_result *r);

/* Solver limits. */
typedef struct remat_join_options {
    uint64_t max_work_bytes; /* cap on the DP tables; 0 = REMAT_DEFAULT_MAX_WORK_BYTES (8 GiB) */
    uint64_t max_steps;      /* cap on DP inner steps; 0 = REMAT_JOIN_DEFAULT_MAX_STEPS */
} remat_join_options;
REMAT_API void remat_join_options_init(remat_join_options *o);

/* These three answer 0 (NAN for the span) when p is NULL or not a problem
 * remat_join_problem_set would accept. */
/* c_min of Lemma 4 for the whole problem (b = 0): the fewest slots that work. */
REMAT_API uint64_t remat_join_min_slots(const remat_join_problem *p);
/* Slots that store every activation: sum of (l_j + 1). More never helps. */
REMAT_API uint64_t remat_join_full_slots(const remat_join_problem *p);
/* The makespan with every activation stored: sum l_j (u_f + u_b) + u_t, a lower bound. */
REMAT_API double remat_join_span_star(const remat_join_problem *p);

/* Opt_0(l, c) of Theorem 1: reverse a chain of l forward steps from {x_0, xbar_{l+1}}
 * to {xbar_0} with c slots. *out is INFINITY when c is too small. */
REMAT_API remat_status remat_join_opt0(uint32_t l, uint64_t c, double fwd_time, double bwd_time,
                                       double *out, remat_error *err);

/* A plan holds the Theorem 3 tables for one problem up to max_slots (0 = full
 * storage) and answers makespan and schedule queries for any c. keep: the b
 * vector of PROB_b-multi (k bytes, 0 or 1), or NULL for all zeros. */
typedef struct remat_join_plan remat_join_plan;
REMAT_API remat_status remat_join_plan_create(const remat_join_problem *p,
                                              const unsigned char *keep, uint64_t max_slots,
                                              const remat_join_options *o, remat_join_plan **out,
                                              remat_error *err);
/* Opt_b-multi(l, c, b); INFINITY when c is below c_min. c above the plan's
 * max_slots is answered as if it were max_slots. */
REMAT_API double remat_join_plan_makespan(const remat_join_plan *plan, uint64_t c);
/* c_min of Lemma 4 for the plan's (l, b). */
REMAT_API uint64_t remat_join_plan_min_slots(const remat_join_plan *plan);
/* The canonical optimal schedule for c slots. REMAT_E_INFEASIBLE below c_min
 * (err->min_memory = c_min); REMAT_E_TOO_LARGE past REMAT_JOIN_MAX_OPS ops. */
REMAT_API remat_status remat_join_plan_schedule(const remat_join_plan *plan, uint64_t c,
                                                remat_join_schedule **out, remat_error *err);
REMAT_API void remat_join_plan_free(remat_join_plan *plan);

/* One-shot: the optimal schedule for `slots` (0 = p->slots). */
REMAT_API remat_status remat_join_solve(const remat_join_problem *p, uint64_t slots,
                                        const remat_join_options *o, remat_join_schedule **out,
                                        remat_error *err);

/* EQUIV-CHAIN (section 6): steps at equal distance from the turn grouped into
 * one step of a single chain (k slots per checkpoint, floor(c / k) chain slots)
 * reversed optimally, then played back on the join. The schedule's time is its
 * real makespan on the join. REMAT_E_INFEASIBLE when floor(c / k) is too small
 * (err->min_memory says what would do). */
REMAT_API remat_status remat_join_equiv_chain(const remat_join_problem *p, uint64_t slots,
                                              const remat_join_options *o,
                                              remat_join_schedule **out, remat_error *err);

/* Makespan against slots, from c_min to full storage. */
typedef struct remat_join_curve_point {
    uint64_t slots;
    double makespan;       /* optimal (Theorem 3) */
    double equiv_chain;    /* EQUIV-CHAIN's makespan, INFINITY where it does not fit;
                              NAN unless asked for */
} remat_join_curve_point;
typedef struct remat_join_curve {
    size_t n;
    remat_join_curve_point *points;
} remat_join_curve;
REMAT_API remat_status remat_join_curve_compute(const remat_join_problem *p, int with_equiv_chain,
                                                const remat_join_options *o, remat_join_curve **out,
                                                remat_error *err);
REMAT_API void remat_join_curve_free(remat_join_curve *c);

#ifdef __cplusplus
}
#endif
#endif
