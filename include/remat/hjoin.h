/* remat: heterogeneous join networks, several chains meeting at the loss
 * (siamese and triplet networks, two-tower and cross-modal models), with the
 * byte-sized chains and memory semantics of SPEC sections 1-2. docs/join.md.
 *
 * k branches (1..REMAT_HJOIN_MAX_BRANCHES). Branch j (numbered from 1) is a
 * chain of n_j stages without its loss: values a[j.0..n_j], abar[j.1..n_j],
 * d[j.0..n_j], as SPEC section 1 defines them for a chain. The turn T is the
 * loss: it reads a[j.n_j] (plain or abar) of every branch and makes every
 * d[j.n_j]. Documents: "remat-join-2" (problem) and "remat-join-schedule-2"
 * (schedule). The homogeneous model of include/remat/join.h ("remat-join-1")
 * is a different model with its own API.
 *
 * Ops: "Fn j.i", "Fck j.i", "Fall j.i", "Fall j.i/k" (partial save k of the
 * stage), "B j.i" (stage i of branch j, SPEC section 2 on that branch) and
 * "T". Memory at the start holds every a[j.0].
 *   T  needs a[j.n_j] or abar[j.n_j] of every branch; while it runs, memory
 *      in use is what is held + turn.saved_bytes + max(turn.fwd_overhead,
 *      sum_j d[j.n_j] + turn.bwd_overhead); afterwards every d[j.n_j] is held
 *      and every plain a[j.n_j] is freed. It runs once; its time is
 *      turn.fwd_time + turn.bwd_time.
 *   B j.n_j needs d[j.n_j], so it runs after T. B j.1 leaves d[j.0], which is
 *   held to the end (the gradient of the branch's input).
 *   A full-save Fall j.i whose very next op is B j.i, and which does not find
 *   abar[j.i] held, is a stopped Fall: the chain's rule on branch j (the
 *   stage's stop_time, stop_saved_bytes, stop_overhead; remat_stage).
 * A schedule is valid when every op finds what it needs, T runs once, and
 * every branch runs B j.n_j .. B j.1 in that order with no forward of stage i
 * after B j.i; for an ordered network, when the branches also run in order
 * (the `ordered` member).
 *
 * Structs are public and read-only for callers: build problems with
 * remat_hjoin_create() or the loaders; every function checks the struct it
 * is given (a hand-built one too). Ownership: every *out pointer a function
 * fills is the caller's: free problems with remat_hjoin_free(), schedules
 * with remat_hjoin_schedule_free(), simulation results with
 * remat_hjoin_sim_result_free(), plans with remat_hjoin_exec_plan_free(),
 * chains with remat_chain_free(), curves with remat_curve_free() and strings
 * with remat_free(). On failure the *out pointer is NULL. */
#ifndef REMAT_HJOIN_H
#define REMAT_HJOIN_H

#include "remat/exec.h"
#include "remat/solvers.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REMAT_HJOIN_MAX_BRANCHES 4u

typedef struct remat_hjoin_branch {
    char name[REMAT_NAME_MAX];
    uint64_t input_bytes;      /* a[j.0] */
    uint64_t input_grad_bytes; /* d[j.0] */
    size_t n;                  /* stages, 1..REMAT_MAX_STAGES - 1 */
    /* stages[i-1] is stage i; every grad_bytes counts (no seed); fall_overhead
     * and options (partial saves) as SPEC section 1 */
    remat_stage *stages;
} remat_hjoin_branch;

typedef struct remat_hjoin {
    char name[REMAT_NAME_MAX];
    char time_unit[32];
    size_t k; /* branches, 1..REMAT_HJOIN_MAX_BRANCHES */
    remat_hjoin_branch branches[REMAT_HJOIN_MAX_BRANCHES];
    /* The loss. Its fields: fwd_time, bwd_time, saved_bytes (what the loss
     * keeps between its forward and backward, >= out_bytes), fwd_overhead,
     * bwd_overhead; out_bytes only bounds saved_bytes; grad_bytes,
     * fall_overhead and options are unused; the stop fields are refused (T
     * has no stopped Fall). */
    remat_stage turn;
    /* Nonzero: the branches run one after another in their order, as the
     * model runs them (a schedule runs every forward of branch j before T
     * ahead of those of branch j+1, and after T every op of branch j+1 ahead
     * of those of branch j). A front-end asks for it when the order of the
     * branches changes results: random numbers drawn in order, gradients of
     * shared parameters summed in order. Set by remat_hjoin_set_ordered()
     * or the document's "ordered". */
    int ordered;
} remat_hjoin;

/* Builds a validated deep copy (every stage as remat_chain_create checks it,
 * its options copied too; the sum of all sizes below 2^62). name and
 * time_unit may be NULL (""). remat_hjoin_free() frees the stages and their
 * options. */
REMAT_API remat_status remat_hjoin_create(const char *name, const char *time_unit, size_t k,
                                          const remat_hjoin_branch *branches,
                                          const remat_stage *turn, remat_hjoin **out,
                                          remat_error *err);
REMAT_API void remat_hjoin_free(remat_hjoin *j);
/* Sets j->ordered (0 or 1). */
REMAT_API void remat_hjoin_set_ordered(remat_hjoin *j, int ordered);

/* "remat-join-2" I/O (docs/formats.md). `source` names the document in
 * messages, which name the field: "p.json: branches[1].stages[0].fwd_time:
 * negative time -1". */
REMAT_API remat_status remat_hjoin_from_json(const char *text, size_t len, const char *source,
                                             remat_hjoin **out, remat_error *err);
REMAT_API remat_status remat_hjoin_load(const char *path, remat_hjoin **out, remat_error *err);
REMAT_API remat_status remat_hjoin_to_json(const remat_hjoin *j, char **out, remat_error *err);
REMAT_API remat_status remat_hjoin_save(const remat_hjoin *j, const char *path, remat_error *err);
/* 1 when text is a JSON object whose "format" is "remat-join-2". */
REMAT_API int remat_hjoin_is_json(const char *text, size_t len);

/* Branch b (1..k) as a chain of n_b + 1 stages: its stages, then an empty
 * end stage (no time, no bytes) standing for the turn, so that every
 * grad_bytes of the branch counts. The simulator and the solver see each
 * branch this way. */
REMAT_API remat_status remat_hjoin_branch_chain(const remat_hjoin *j, size_t b, remat_chain **out,
                                                remat_error *err);

/* The same network as one chain, the way a chain front-end sees it: the
 * branches run one after another, in order, then the turn as the loss.
 * Every value of the chain carries what the other branches hold across it:
 * a stage of branch b has out_bytes a[b.i] + C, saved_bytes abar[b.i] + C
 * and grad_bytes d[b.i] + G, where C = sum of a[q.n_q] over q < b and of
 * a[q.0] over q > b, and G the same sum of their gradients (a stage's
 * stop_saved_bytes, when set, + C too); the input is
 * every a[q.0]. Times and overheads are the stages' own. A chain schedule
 * that keeps two boundaries holds the carried values twice: the flat model
 * is what a chain solver can see of a join, not what it runs. */
REMAT_API remat_status remat_hjoin_flatten(const remat_hjoin *j, remat_chain **out,
                                           remat_error *err);

/* ---- ops and schedules ---- */

typedef enum remat_hjoin_op_kind {
    REMAT_HJOIN_OP_FN = 0, /* as REMAT_OP_FN .. REMAT_OP_B, on one branch */
    REMAT_HJOIN_OP_FCK,
    REMAT_HJOIN_OP_FALL,
    REMAT_HJOIN_OP_B,
    REMAT_HJOIN_OP_T /* the turn */
} remat_hjoin_op_kind;

/* option: for Fall, the partial save it makes ("Fall j.i/k", SPEC section
 * 2; 0 = the full save); 0 for every other op (B takes the option of the
 * abar it consumes). The last member, so that {kind, branch, index} leaves
 * it 0. */
typedef struct remat_hjoin_op {
    uint8_t kind;   /* remat_hjoin_op_kind */
    uint8_t branch; /* 1..k; 0 for T */
    uint32_t index; /* the stage, 1..n_branch; 0 for T */
    uint8_t option;
} remat_hjoin_op;

#define REMAT_HJOIN_OP_TEXT_MAX 32
/* "Fck 1.3", "Fall 1.2/1", "B 2.5", "T" into out (at most
 * REMAT_HJOIN_OP_TEXT_MAX bytes). Parsing takes an option k in 0..255 on
 * any F or B op ("Fall 1.2/0" is "Fall 1.2"); the simulator judges it. */
REMAT_API void remat_hjoin_op_format(remat_hjoin_op op, char out[REMAT_HJOIN_OP_TEXT_MAX]);
/* Parses op text; the message says what is wrong with it. */
REMAT_API remat_status remat_hjoin_op_parse(const char *text, remat_hjoin_op *out,
                                            remat_error *err);

typedef struct remat_hjoin_schedule {
    char algorithm[REMAT_ALGORITHM_MAX];
    uint64_t memory_limit; /* bytes it was solved for */
    double time;           /* predicted */
    uint64_t peak_bytes;   /* predicted */
    size_t n_ops;
    size_t cap; /* private */
    remat_hjoin_op *ops;
} remat_hjoin_schedule;

/* A new empty schedule; ops are added with remat_hjoin_schedule_push(). */
REMAT_API remat_status remat_hjoin_schedule_create(const char *algorithm,
                                                   remat_hjoin_schedule **out, remat_error *err);
REMAT_API remat_status remat_hjoin_schedule_push(remat_hjoin_schedule *s, remat_hjoin_op op,
                                                 remat_error *err);
REMAT_API void remat_hjoin_schedule_free(remat_hjoin_schedule *s);
/* "remat-join-schedule-2" I/O. Parsing checks syntax only; the simulator
 * checks meaning. */
REMAT_API remat_status remat_hjoin_schedule_to_json(const remat_hjoin_schedule *s, char **out,
                                                    remat_error *err);
REMAT_API remat_status remat_hjoin_schedule_save(const remat_hjoin_schedule *s, const char *path,
                                                 remat_error *err);
REMAT_API remat_status remat_hjoin_schedule_from_json(const char *text, size_t len,
                                                      const char *source,
                                                      remat_hjoin_schedule **out,
                                                      remat_error *err);
REMAT_API remat_status remat_hjoin_schedule_load(const char *path, remat_hjoin_schedule **out,
                                                 remat_error *err);
/* 1 when text is a JSON object whose "format" is "remat-join-schedule-2". */
REMAT_API int remat_hjoin_schedule_is_json(const char *text, size_t len);

/* ---- the simulator ---- */

typedef struct remat_hjoin_sim_result {
    int valid;
    double time;          /* sum of the op times */
    uint64_t peak_bytes;  /* largest memory in use while an op runs (and the inputs) */
    size_t n_ops;
    uint64_t *mem_during; /* [n_ops] memory in use while op k runs (0 past a failure) */
    uint64_t *mem_after;  /* [n_ops] memory held after op k */
    /* When !valid: the first failing op (n_ops when the schedule ends early). */
    size_t failed_op;
    char failed_op_text[REMAT_HJOIN_OP_TEXT_MAX];
    char reason[256];
} remat_hjoin_sim_result;

/* Replays s on j (the rules above). REMAT_OK whenever it ran, valid or not;
 * *out is then a new result. */
REMAT_API remat_status remat_hjoin_simulate(const remat_hjoin *j, const remat_hjoin_schedule *s,
                                            remat_hjoin_sim_result **out, remat_error *err);
REMAT_API void remat_hjoin_sim_result_free(remat_hjoin_sim_result *r);

/* ---- the solver ---- */

/* Peak and time of plain autograd: every Fall of branch 1, then 2, ..., T,
 * then the B of branch k, ..., 1. */
REMAT_API remat_status remat_hjoin_store_all_cost(const remat_hjoin *j, uint64_t *peak_bytes,
                                                  double *time, remat_error *err);

/* The fastest persistent nested schedule (docs/join.md) within o->memory
 * bytes. Of o it reads memory, slots (as optimal: -1 = 500, 0 = exact
 * bytes), max_work_bytes, max_seconds, threads and progress; the algorithm
 * is ignored. REMAT_E_INFEASIBLE below the smallest limit (err->min_memory
 * says it); REMAT_E_TOO_LARGE before the work when its tables would pass
 * max_work_bytes or its estimated time max_seconds (docs/bounded.md). The
 * schedule passes remat_hjoin_simulate() with peak_bytes <= o->memory. */
REMAT_API remat_status remat_hjoin_solve(const remat_hjoin *j, const remat_solve_options *o,
                                         remat_hjoin_schedule **out, remat_error *err);
/* The smallest limit at which remat_hjoin_solve() succeeds (no table). */
REMAT_API remat_status remat_hjoin_min_memory(const remat_hjoin *j, const remat_solve_options *o,
                                              uint64_t *out, remat_error *err);
/* Time against memory from the smallest limit to the store-all peak (or to
 * o->memory when nonzero), from one table; as remat_curve_compute() for
 * optimal (max_points 0: every step). The algorithm is "join-optimal". */
REMAT_API remat_status remat_hjoin_curve(const remat_hjoin *j, const remat_solve_options *o,
                                         size_t max_points, remat_curve **out, remat_error *err);

/* ---- execution plans ---- */

typedef struct remat_hjoin_exec_ref {
    uint8_t kind;   /* remat_exec_value_kind: a, abar or d */
    uint8_t branch; /* 1..k */
    uint32_t index; /* 0..n_branch */
} remat_hjoin_exec_ref;

/* At most: B reads d, abar and its input; T reads one value per branch. */
#define REMAT_HJOIN_EXEC_MAX_REFS 4

/* One op, resolved against the memory state before it, as remat_exec_step
 * (include/remat/exec.h) with the branch in every value. T reads the
 * a[j.n_j] or abar[j.n_j] of every branch, creates every d[j.n_j] and frees
 * the plain ones. */
typedef struct remat_hjoin_exec_step {
    remat_hjoin_op op;
    size_t n_reads;
    remat_hjoin_exec_ref reads[REMAT_HJOIN_EXEC_MAX_REFS];
    size_t n_creates;
    remat_hjoin_exec_ref creates[REMAT_HJOIN_EXEC_MAX_REFS];
    size_t n_frees;
    remat_hjoin_exec_ref frees[REMAT_HJOIN_EXEC_MAX_REFS];
    uint64_t mem_during; /* bytes in use while it runs */
    uint64_t mem_after;  /* bytes held after it */
    double start, end;   /* in the problem's time unit */
    /* The partial save: for Fall, the option it makes (op.option); for B,
     * the option of the abar[j.i] it consumes, whose backward recomputes
     * what that option did not keep; 0 for other ops. */
    uint8_t option;
    /* 1 for a stopped Fall (a full-save Fall j.i followed by B j.i,
     * docs/join.md): it runs stage j.i only up to its last saved tensor,
     * makes the smaller abar[j.i] of stop_saved_bytes and takes stop_time;
     * 0 for every other step. */
    uint8_t stops;
} remat_hjoin_exec_step;

typedef struct remat_hjoin_exec_plan {
    size_t n_steps;
    remat_hjoin_exec_step *steps; /* one per op */
    size_t turn;                  /* index of T: the ops before it run in the forward pass */
    uint64_t peak_bytes;
    double time;
} remat_hjoin_exec_plan;

/* The plan of s on j; the schedule must be valid (REMAT_E_INPUT naming the
 * failing op and why otherwise). */
REMAT_API remat_status remat_hjoin_exec_plan_create(const remat_hjoin *j,
                                                    const remat_hjoin_schedule *s,
                                                    remat_hjoin_exec_plan **out,
                                                    remat_error *err);
REMAT_API void remat_hjoin_exec_plan_free(remat_hjoin_exec_plan *p);

#ifdef __cplusplus
}
#endif
#endif
