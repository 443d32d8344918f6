/* remat: schedules, a compact array of ops (SPEC section 2), and their JSON
 * form "remat-schedule-1". */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include "remat/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum remat_op_kind {
    REMAT_OP_FN = 0, /* "Fn i"   forward, keep nothing */
    REMAT_OP_FCK,    /* "Fck i"  forward, keep input */
    REMAT_OP_FALL,   /* "Fall i" forward, save all */
    REMAT_OP_B,      /* "B i"    backward */
    REMAT_OP_DEL,    /* "Del X" */
    REMAT_OP_OFF,    /* "Off X"  start copy to host */
    REMAT_OP_PRE,    /* "Pre X"  start copy back */
    REMAT_OP_WAIT    /* "Wait X" wait for X's copy to end */
} remat_op_kind;

typedef enum remat_value_kind {
    REMAT_VALUE_A = 0,   /* a[i] */
    REMAT_VALUE_ABAR = 1 /* abar[i] */
} remat_value_kind;

/* For F* and B: index is the stage (1..n) and value is unused (0).
 * For Del/Off/Pre/Wait: value and index name the value X (a[index] or abar[index]).
 * option: for Fall, the partial save it makes ("Fall i/k", SPEC section 2;
 * 0 = the full save, "Fall i"); 0 for every other op (B takes the option of
 * the abar[i] it consumes). It is the last member so that initializers
 * {kind, value, index} leave it 0. */
typedef struct remat_op {
    uint8_t kind;  /* remat_op_kind */
    uint8_t value; /* remat_value_kind */
    uint32_t index;
    uint8_t option;
} remat_op;

#define REMAT_OP_TEXT_MAX 32
#define REMAT_ALGORITHM_MAX 32

typedef struct remat_schedule {
    char algorithm[REMAT_ALGORITHM_MAX];
    uint64_t memory_limit; /* bytes the schedule was solved for */
    double time;           /* predicted by the solver */
    uint64_t peak_bytes;   /* predicted by the solver */
    size_t n_ops;
    size_t cap;     /* private */
    remat_op *ops;  /* [n_ops] */
} remat_schedule;

/* New empty schedule; free with remat_schedule_free(). An algorithm name of
 * REMAT_ALGORITHM_MAX bytes or more is refused (REMAT_E_INPUT), never cut. */
REMAT_API remat_status remat_schedule_create(const char *algorithm, remat_schedule **out,
                                             remat_error *err);
/* Appends op. REMAT_E_INPUT for a kind that is not a remat_op_kind or a value
 * that is not a remat_value_kind (such an op has no text, so no document
 * could hold it); whether the op makes sense for a chain is the simulator's
 * to judge. */
REMAT_API remat_status remat_schedule_push(remat_schedule *s, remat_op op, remat_error *err);
REMAT_API void remat_schedule_free(remat_schedule *s);

/* Op text, e.g. "Fck 3", "Fall 3/2", "Del abar[2]". Writes at most
 * REMAT_OP_TEXT_MAX bytes. An F or B op with a nonzero option is written
 * with "/k" whatever its kind, so that the simulator's message shows it. */
REMAT_API void remat_op_format(remat_op op, char out[REMAT_OP_TEXT_MAX]);
/* Parses op text; on failure the message says what is wrong (not where).
 * "Fall i/k" takes an option k in 0..255 ("Fall i/0" is "Fall i"); whether
 * the chain has option k is the simulator's to judge. */
REMAT_API remat_status remat_op_parse(const char *text, remat_op *out, remat_error *err);

/* JSON I/O. *out strings are freed with remat_free(); *out schedules with
 * remat_schedule_free(). Parsing checks syntax only; remat_simulate() checks
 * that the ops make sense for a chain. */
REMAT_API remat_status remat_schedule_to_json(const remat_schedule *s, char **out,
                                              remat_error *err);
REMAT_API remat_status remat_schedule_save(const remat_schedule *s, const char *path,
                                           remat_error *err);
REMAT_API remat_status remat_schedule_from_json(const char *text, size_t len, const char *source,
                                                remat_schedule **out, remat_error *err);
REMAT_API remat_status remat_schedule_load(const char *path, remat_schedule **out,
                                           remat_error *err);

#ifdef __cplusplus
}
#endif
#endif
