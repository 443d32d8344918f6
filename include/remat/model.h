/* remat: the chain model (SPEC section 1) and its JSON form "remat-chain-1".
 *
 * A chain has n = L + 1 stages numbered 1..n; stage n is the loss. The struct is
 * public and read-only for callers: build chains with remat_chain_create() or
 * the loaders, which validate everything, and release them with
 * remat_chain_free(). */
#ifndef REMAT_MODEL_H
#define REMAT_MODEL_H

#include "remat/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes and times must be finite, >= 0, and sizes < 2^53 (SPEC section 3);
 * n times the sum of all fwd_time and bwd_time must not pass half the largest
 * double, so that no schedule's time overflows (docs/formats.md). */
#define REMAT_MAX_BYTES ((uint64_t)1 << 53)
/* A chain may have at most this many stages (loss included). */
#define REMAT_MAX_STAGES 100000u
#define REMAT_NAME_MAX 256

/* A stage may list at most this many partial saves (options 1..8). */
#define REMAT_MAX_OPTIONS 8u
#define REMAT_OPTION_NAME_MAX 64

/* A partial save (SPEC section 1): another way for Fall i to keep less.
 * "Fall i/k" makes abar[i] of option k's saved_bytes; the B i that consumes
 * it recomputes what the option did not keep, so it takes the option's
 * bwd_time and bwd_overhead. */
typedef struct remat_stage_option {
    char name[REMAT_OPTION_NAME_MAX]; /* a label, may be empty */
    uint64_t saved_bytes;   /* size of the abar[i] it makes (>= the stage's out_bytes) */
    uint64_t fall_overhead; /* temporary bytes while Fall i/k runs */
    double bwd_time;        /* time of the B i that consumes it, recomputation included */
    uint64_t bwd_overhead;  /* temporary bytes while that B runs */
} remat_stage_option;

typedef struct remat_stage {
    char name[REMAT_NAME_MAX];
    double fwd_time;        /* u_f */
    double bwd_time;        /* u_b */
    uint64_t out_bytes;     /* size of a[i] */
    uint64_t saved_bytes;   /* size of abar[i] (>= out_bytes) */
    uint64_t grad_bytes;    /* size of d[i]; the loss' d[n] is the seed and counts 0 */
    uint64_t fwd_overhead;  /* temporary bytes while Fn i or Fck i runs (and Fall i by default) */
    uint64_t bwd_overhead;  /* temporary bytes while B runs */
    /* Temporary bytes while Fall i runs, when has_fall_overhead is nonzero.
     * When it is 0 (a zeroed stage, a document without the field), Fall i
     * takes fwd_overhead, as before the field existed: remat_chain_create()
     * and the loaders then set fall_overhead = fwd_overhead in the chain. */
    uint64_t fall_overhead;
    int has_fall_overhead;
    /* Partial saves: option k (1..n_options) is options[k-1]; the stage's own
     * saved_bytes, bwd_time and overheads are option 0, the full save. In
     * what remat_chain_create() is given, options is the caller's (read
     * only); in a chain it is the chain's own copy, freed with it. */
    size_t n_options; /* 0..REMAT_MAX_OPTIONS */
    remat_stage_option *options;
    /* The stopped Fall (SPEC section 1, docs/formats.md): a full-save Fall i
     * (option 0) whose very next op is B i, and which does not find abar[i]
     * held, runs only up to the stage's last saved tensor: it takes
     * stop_time (<= fwd_time), makes an abar[i] of stop_saved_bytes (<=
     * saved_bytes; it may be below out_bytes: a[i] is not made) and needs
     * stop_overhead temporary bytes; the B i after it frees that abar[i] as
     * usual. Each counts when its has_ flag is nonzero; otherwise
     * remat_chain_create() and the loaders set the default (fwd_time,
     * saved_bytes, fall_overhead), which behaves exactly as a plain Fall.
     * The loss stage has no stopped Fall: the fields are refused there. */
    double stop_time;
    int has_stop_time;
    uint64_t stop_saved_bytes;
    int has_stop_saved_bytes;
    uint64_t stop_overhead;
    int has_stop_overhead;
} remat_stage;

typedef struct remat_chain {
    char name[REMAT_NAME_MAX];
    char time_unit[32];
    uint64_t input_bytes;      /* size of a[0] */
    uint64_t input_grad_bytes; /* size of d[0] */
    size_t n;                  /* number of stages, loss included (n >= 1) */
    remat_stage *stages;       /* stages[i-1] is stage i */
} remat_chain;

/* Byte sizes by value index, valid for i in 0..n; 0 for a NULL chain or i > n.
 * remat_chain_abar_bytes is the full save's (option 0). */
REMAT_API uint64_t remat_chain_a_bytes(const remat_chain *c, size_t i);    /* a[i]; a[0] = input */
REMAT_API uint64_t remat_chain_abar_bytes(const remat_chain *c, size_t i); /* abar[i], i >= 1 */
REMAT_API uint64_t remat_chain_d_bytes(const remat_chain *c, size_t i);    /* d[i]; d[n] = 0 */

/* Builds a validated deep copy of n stages, their options included (the
 * caller keeps its own arrays). grad_bytes of stage i < n is taken as given
 * (pass out_bytes for the default); the loss stage's grad_bytes is ignored
 * (the seed has size 0); a stage with has_fall_overhead == 0 gets
 * fall_overhead = fwd_overhead, and likewise each stop_ field whose has_
 * flag is 0 gets its default (after fall_overhead's). Names (the chain's, NULL for "", each
 * stage's and option's) must be valid UTF-8 and NUL-terminated within their
 * fields: a longer one is refused, never cut short. The times must not add
 * up past the limit of docs/formats.md. On success *out owns a new chain:
 * free it with remat_chain_free(). On failure *out is NULL. */
REMAT_API remat_status remat_chain_create(const char *name, uint64_t input_bytes,
                                          uint64_t input_grad_bytes, const remat_stage *stages,
                                          size_t n, remat_chain **out, remat_error *err);

/* Parses a "remat-chain-1" document. `source` names it in messages (a path or
 * "<string>"). *out owns a new chain on success, NULL on failure:
 * REMAT_E_INPUT for a bad document (docs/formats.md), REMAT_E_NOMEM when
 * memory runs out while parsing, REMAT_E_IO when the file cannot be read. */
REMAT_API remat_status remat_chain_from_json(const char *text, size_t len, const char *source,
                                             remat_chain **out, remat_error *err);
REMAT_API remat_status remat_chain_load(const char *path, remat_chain **out, remat_error *err);

/* Writes the chain as a "remat-chain-1" document into a new NUL-terminated
 * string; free it with remat_free(). */
REMAT_API remat_status remat_chain_to_json(const remat_chain *c, char **out, remat_error *err);
REMAT_API remat_status remat_chain_save(const remat_chain *c, const char *path, remat_error *err);

REMAT_API void remat_chain_free(remat_chain *c);

/* Parses a size such as "123", "4GiB", "1.5G", "300MB" (K/M/G = 2^10.., KB/MB/GB =
 * 10^3.., KiB/MiB/GiB = 2^10..). Rejects negatives, garbage and values >= 2^53. */
REMAT_API remat_status remat_parse_size(const char *text, uint64_t *out, remat_error *err);

#ifdef __cplusplus
}
#endif
#endif
