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

typedef struct remat_stage {
    char name[REMAT_NAME_MAX];
    double fwd_time;        /* u_f */
    double bwd_time;        /* u_b */
    uint64_t out_bytes;     /* size of a[i] */
    uint64_t saved_bytes;   /* size of abar[i] (>= out_bytes) */
    uint64_t grad_bytes;    /* size of d[i]; the loss' d[n] is the seed and counts 0 */
    uint64_t fwd_overhead;  /* temporary bytes while a forward of this stage runs */
    uint64_t bwd_overhead;  /* temporary bytes while B runs */
} remat_stage;

typedef struct remat_chain {
    char name[REMAT_NAME_MAX];
    char time_unit[32];
    uint64_t input_bytes;      /* size of a[0] */
    uint64_t input_grad_bytes; /* size of d[0] */
    size_t n;                  /* number of stages, loss included (n >= 1) */
    remat_stage *stages;       /* stages[i-1] is stage i */
} remat_chain;

/* Byte sizes by value index, valid for i in 0..n; 0 for a NULL chain or i > n. */
REMAT_API uint64_t remat_chain_a_bytes(const remat_chain *c, size_t i);    /* a[i]; a[0] = input */
REMAT_API uint64_t remat_chain_abar_bytes(const remat_chain *c, size_t i); /* abar[i], i >= 1 */
REMAT_API uint64_t remat_chain_d_bytes(const remat_chain *c, size_t i);    /* d[i]; d[n] = 0 */

/* Builds a validated deep copy of n stages. grad_bytes of stage i < n is taken
 * as given (pass out_bytes for the default); the loss stage's grad_bytes is
 * ignored (the seed has size 0). Names (the chain's, NULL for "", and each
 * stage's) must be valid UTF-8 and NUL-terminated within REMAT_NAME_MAX
 * bytes: a longer one is refused, never cut short. The times must not add up
 * past the limit of docs/formats.md. On success *out owns a new chain: free
 * it with remat_chain_free(). On failure *out is NULL. */
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
