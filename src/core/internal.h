/* remat internal helpers: error reporting, checked arithmetic and allocation.
 * Names here start remat__ and are not part of the API. */
#ifndef REMAT_INTERNAL_H
#define REMAT_INTERNAL_H

#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "remat/remat.h"

#if defined(__GNUC__)
#define REMAT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define REMAT__PRINTF(a, b)
#endif

/* Fills err (if non-NULL) and returns s. */
remat_status remat__fail(remat_error *err, remat_status s, const char *fmt, ...) REMAT__PRINTF(3, 4);

/* One-line error paths, zstd style. */
#define REMAT__RETURN_IF(cond, err, status, ...)                 \
    do {                                                         \
        if (cond) return remat__fail((err), (status), __VA_ARGS__); \
    } while (0)
#define REMAT__FORWARD(expr)             \
    do {                                 \
        remat_status remat__s_ = (expr); \
        if (remat__s_ != REMAT_OK) return remat__s_; \
    } while (0)

/* Clears err to REMAT_OK. */
void remat__clear(remat_error *err);

/* Checked arithmetic: return 0 on overflow, 1 on success. */
static inline int remat__add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a > UINT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}
static inline int remat__mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* calloc of n*size bytes with the product checked; NULL on overflow or OOM. */
void *remat__calloc(size_t n, size_t size);
/* Same, but reports REMAT_E_NOMEM / REMAT_E_TOO_LARGE through err; `what` names the table. */
remat_status remat__alloc_table(void **out, size_t n, size_t size, uint64_t max_bytes,
                                const char *what, remat_error *err);

/* Copies src into a fixed buffer, truncating. */
void remat__strlcpy(char *dst, const char *src, size_t cap);

/* Growable text buffer for the JSON and CSV writers. */
typedef struct remat__buf {
    char *data;
    size_t len, cap;
    int oom;
} remat__buf;
void remat__buf_printf(remat__buf *b, const char *fmt, ...) REMAT__PRINTF(2, 3);
/* Hands the text to *out (caller frees with remat_free) or reports NOMEM. */
remat_status remat__buf_finish(remat__buf *b, char **out, remat_error *err);

/* remat_read_file with its own cap of max bytes (file_io.c). */
remat_status remat__read_file_max(const char *path, size_t max, char **out, size_t *len,
                                  remat_error *err);

/* A chain's times, summed (fwd_time + bwd_time over its stages) and
 * multiplied by its stage count, must stay at or below this: half the
 * largest double (docs/formats.md). */
#define REMAT__MAX_CHAIN_TIME (DBL_MAX / 2)

/* Validates a chain like remat_chain_create (`src`, e.g. a file name, heads
 * the messages) and hands it `stages` (n entries, malloc'd) without a copy:
 * on success the chain owns them, on failure they are freed (chain.c). */
remat_status remat__chain_adopt(const char *src, const char *name, uint64_t input_bytes,
                                uint64_t input_grad_bytes, remat_stage *stages, size_t n,
                                remat_chain **out, remat_error *err);

/* Frees n stages and their option arrays (chain.c). */
void remat__stages_free(remat_stage *stages, size_t n);

/* The temporary bytes of Fall i: fall_overhead when the stage sets it, else
 * fwd_overhead (SPEC section 1's default). */
static inline uint64_t remat__fall_overhead(const remat_stage *s) {
    return s->has_fall_overhead ? s->fall_overhead : s->fwd_overhead;
}

/* What saving stage s with option k costs (k = 0: the full save, the
 * stage's own fields; 1 <= k <= n_options: options[k-1]). A k past
 * n_options reads as 0: callers check k first (the simulator does). */
typedef struct remat__save {
    uint64_t saved_bytes;   /* size of the abar it makes */
    uint64_t fall_overhead; /* temporary bytes of Fall i/k */
    uint64_t bwd_overhead;  /* temporary bytes of the B consuming it */
    double bwd_time;        /* time of that B */
} remat__save;

static inline remat__save remat__stage_save(const remat_stage *s, unsigned k) {
    remat__save v;
    if (k == 0 || k > s->n_options) {
        v.saved_bytes = s->saved_bytes;
        v.fall_overhead = remat__fall_overhead(s);
        v.bwd_overhead = s->bwd_overhead;
        v.bwd_time = s->bwd_time;
    } else {
        const remat_stage_option *o = &s->options[k - 1];
        v.saved_bytes = o->saved_bytes;
        v.fall_overhead = o->fall_overhead;
        v.bwd_overhead = o->bwd_overhead;
        v.bwd_time = o->bwd_time;
    }
    return v;
}

/* The figures of stage s's stopped Fall (remat_stage, docs/formats.md):
 * each field when the stage sets it, else its default. */
static inline double remat__stop_time(const remat_stage *s) {
    return s->has_stop_time ? s->stop_time : s->fwd_time;
}
static inline uint64_t remat__stop_saved(const remat_stage *s) {
    return s->has_stop_saved_bytes ? s->stop_saved_bytes : s->saved_bytes;
}
static inline uint64_t remat__stop_overhead(const remat_stage *s) {
    return s->has_stop_overhead ? s->stop_overhead : remat__fall_overhead(s);
}

/* An overhead for the full-save Fall s that bounds its in-use memory whether
 * it stops or not: a solver that does not model the stopped Fall (its
 * schedules still get it in the simulator when a Fall i is followed by B i)
 * counts this instead of fall_overhead, so it never predicts below the
 * simulator. The stopped Fall adds stop_saved + stop_overhead where the plain
 * one adds saved + fall_overhead (it never runs over a held abar). Equal to
 * fall_overhead when the stop fields take their defaults. */
static inline uint64_t remat__fall_overhead_bound(const remat_stage *s) {
    uint64_t plain = remat__fall_overhead(s);
    uint64_t stop = remat__stop_saved(s) + remat__stop_overhead(s);
    return stop > s->saved_bytes && stop - s->saved_bytes > plain ? stop - s->saved_bytes : plain;
}

/* Whether some stage's stopped Fall differs from its plain Fall (chain.c):
 * without one, the stop fields change nothing. */
int remat__chain_stops_differ(const remat_chain *c);

/* Checks a struct a caller hands in, so that no public function reads out of
 * bounds or past a missing NUL on a struct the caller built or changed:
 * a chain as remat_chain_create would accept it (chain.c); a schedule with
 * its ops present, n_ops <= cap when cap is set, and a NUL-terminated
 * algorithm (schedule.c); a join problem as remat_join_problem_set would
 * accept it (join_model.c). `who` heads the message. */
remat_status remat__chain_validate(const remat_chain *c, const char *who, remat_error *err);
remat_status remat__schedule_validate(const remat_schedule *s, const char *who, remat_error *err);
remat_status remat__join_problem_validate(const void *p, const char *who, remat_error *err);

/* No solver runs more workers than this, whatever it is asked for
 * (remat_solve_options.threads may ask for up to REMAT_MAX_THREADS). */
#define REMAT__MAX_WORKERS 64u
/* Number of worker threads to use for a request of `want` (0 = online
 * cores), at most REMAT__MAX_WORKERS. */
unsigned remat__threads(unsigned want);

/* Offset of the first byte of text that does not start a valid UTF-8
 * sequence (overlong forms, surrogates and code points past U+10FFFF are
 * invalid), or SIZE_MAX when text is valid UTF-8. */
size_t remat__utf8_invalid_at(const char *text);

#endif
