/* remat: execution plans. A plan turns a (chain, schedule) pair into what each
 * op reads, creates and frees (a[i], abar[i], d[i]), derived from the same
 * SPEC section 2 semantics as the simulator. Every executor (the PyTorch one in
 * python/remat/torch/, later native engines) follows the plan instead of
 * re-deriving the op rules, so they are defined once, in C.
 *
 * Offloading (Off/Pre/Wait, SPEC section 2) needs a host link: a plan made by
 * remat_exec_plan_create_timed() replays the timed simulator and says, for
 * each Off, before which step the device copy is released (the copy has ended
 * and the last step reading the value has run), and for each Pre, before which
 * step the prefetch starts and takes its memory. An executor that releases and
 * starts copies at those steps (waiting for a copy that is not over yet) never
 * holds more, op by op, than the simulator predicts, whatever the real speed
 * of the link; only its time depends on it. */
#ifndef REMAT_EXEC_H
#define REMAT_EXEC_H

#include "remat/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum remat_exec_value_kind {
    REMAT_EXEC_A = 0,    /* a[i] */
    REMAT_EXEC_ABAR = 1, /* abar[i] (holds a[i] too) */
    REMAT_EXEC_D = 2     /* d[i] */
} remat_exec_value_kind;

typedef struct remat_exec_ref {
    uint8_t kind;   /* remat_exec_value_kind */
    uint32_t index; /* 0..n */
} remat_exec_ref;

/* At most: B reads d[i], abar[i], a[i-1]; B frees d[i], abar[i], a[i-1]. */
#define REMAT_EXEC_MAX_REFS 4

/* One op of the schedule, resolved against the memory state before it. */
typedef struct remat_exec_step {
    remat_op op;
    /* Values the op reads. For a forward, reads[0] is its input in the form
     * held (a[i-1] or abar[i-1]); for B: d[i], abar[i], then the input. */
    size_t n_reads;
    remat_exec_ref reads[REMAT_EXEC_MAX_REFS];
    /* Values that exist after the op and not before. A forward whose result
     * is already held (e.g. Fck i while abar[i] is held) creates nothing and
     * need not compute at all. Fall i over a held a[i] creates abar[i] and
     * frees a[i] (an upgrade). */
    size_t n_creates;
    remat_exec_ref creates[REMAT_EXEC_MAX_REFS];
    /* Values released once the op has run. */
    size_t n_frees;
    remat_exec_ref frees[REMAT_EXEC_MAX_REFS];
    uint64_t mem_during; /* bytes in use while it runs (overhead included) */
    uint64_t mem_after;  /* bytes held after it */
    /* When it runs, in the chain's time unit: compute ops from start to end;
     * for Off and Pre, the copy on its lane; Del and Wait: the compute clock. */
    double start, end;
    /* Off X: the step before which X's device copy is released (n_steps: after
     * the last step). Pre X: the step before which the prefetch starts and takes
     * X's memory, the first step that starts at or after the simulated copy's
     * start (n_steps: it is never needed). Every other op: its own index.
     * Releasing and taking memory there, an executor holds at the start of
     * every compute step a subset of what the simulator holds at that time, so
     * never more than the step's mem_during.
     * Off X lists X in reads (it reads X while copying); Pre X lists X in
     * creates (X is held from then on, usable once its copy ends: a step that
     * reads X waits for it); Wait X waits for the latest copy of X, which for an
     * offload is X's release (the Off's copy_at is then this step). */
    size_t copy_at;
    /* The partial save (SPEC section 2): for Fall, the option it saves with
     * (op.option); for B, the option of the abar[i] it consumes, whose
     * backward recomputes what that option did not keep; 0 for other ops. */
    uint8_t option;
    /* 1 for a stopped Fall (docs/formats.md: a full-save Fall i followed by
     * B i): it need only run stage i up to its last saved tensor, makes the
     * smaller abar[i] of stop_saved_bytes (without a[i]) and takes stop_time;
     * 0 for every other step. */
    uint8_t stops;
} remat_exec_step;

typedef struct remat_exec_plan {
    size_t n_steps;
    remat_exec_step *steps; /* [n_steps], one per op of the schedule */
    size_t first_backward;  /* index of the first B (the B n); ops before it
                               can run in the training step's forward pass */
    uint64_t peak_bytes;    /* as remat_simulate() reports */
    double time;
    double bandwidth;       /* the host link it was made for (0: none) */
} remat_exec_plan;

/* Builds the plan of schedule s on chain c, without a host link. The schedule
 * must be valid for c (REMAT_E_INPUT otherwise, naming the failing op and
 * why); offload ops (Off/Pre/Wait) need remat_exec_plan_create_timed()
 * (REMAT_E_INPUT here). On success *out is a new plan: free it with
 * remat_exec_plan_free(). On failure *out is NULL. */
REMAT_API remat_status remat_exec_plan_create(const remat_chain *c, const remat_schedule *s,
                                              remat_exec_plan **out, remat_error *err);

/* The same for a host link of `bandwidth` bytes per time unit in each
 * direction (finite, >= 0; 0: no link, as remat_exec_plan_create()). The
 * schedule must be valid under the timed simulator (remat_simulate() with
 * this bandwidth); mem_during, mem_after, peak_bytes and time are its
 * figures, start/end its times and copy_at its releases and prefetch starts.
 * Ownership as remat_exec_plan_create(). */
REMAT_API remat_status remat_exec_plan_create_timed(const remat_chain *c, const remat_schedule *s,
                                                    double bandwidth, remat_exec_plan **out,
                                                    remat_error *err);

/* Frees a plan; NULL is allowed. */
REMAT_API void remat_exec_plan_free(remat_exec_plan *p);

/* Text of a value, e.g. "abar[3]", "d[0]". Writes at most 24 bytes. */
REMAT_API void remat_exec_ref_format(remat_exec_ref r, char out[24]);

#ifdef __cplusplus
}
#endif
#endif
