/* pofo's parts, private to pofo_dp.c (the tables C and OC and the one
 * transition), pofo_emit.c (schedules from the tables) and pofo_search.c
 * (the candidate plans, repair, threads). The model is described at the top
 * of pofo_dp.c and in docs/offload.md. */
#ifndef REMAT_POFO_IMPL_H
#define REMAT_POFO_IMPL_H

#include "pofo_internal.h"

/* What every DP run of one solve shares, read-only once built: the sizes in
 * bytes and units, and the rematerialization table C. */
typedef struct pofo_shared {
    const remat_chain *c;
    size_t n, L;       /* stages with the loss; L = n - 1 */
    uint64_t q;        /* bytes per unit: memory / values */
    size_t W;          /* budgets C covers: 0 .. W-1 units */
    uint32_t base_cap; /* units within the limit itself */
    uint64_t *sizes;   /* [5][n+1]: a, abar, d, units of a, units of abar */
    double *ctab;      /* C[i][j][m], i, j in 1..L */
    int32_t *cchoice;  /* 0 Fall, k >= 1: Fck then Fn up to i + k - 1, -1 none */
    size_t FK;         /* dF levels; 1 = no carry mode */
    uint64_t fq;       /* bytes per dF level */
    uint64_t hmax;     /* bytes a carry run's sparse OC may grow to, all runs together */
    unsigned flags;    /* REMAT__POFO_NO_* */
} pofo_shared;

/* One choice at an OC state, stored packed in an int32 (choice_pack()). */
typedef struct pofo_choice {
    unsigned char fck;   /* 1: Fck i, Fn up to j (else Fall i) */
    unsigned char off;   /* 1: the segment's input is offloaded */
    unsigned char drain; /* 1: carry mode, wait for the link to drain first */
    unsigned char push;  /* 1: dB carried into the next segment */
    uint32_t len;        /* j - i */
} pofo_choice;

/* A state of OC: segment i with input x (0: a[i-1], 1: abar[i-1]), a units
 * held by earlier kept inputs, b units of prefetches this segment's backward
 * issues, f dF levels still to offload (carry mode; 0 otherwise). */
typedef struct oc_state {
    size_t i;
    int x;
    size_t a, b, f;
} oc_state;

typedef struct oc_entry oc_entry;

/* One DP run: its parameters, its own OC storage and its emission state. */
typedef struct pofo_run {
    const pofo_shared *sh;
    uint32_t cap;          /* units available (<= base_cap + extra) */
    double bw;
    remat__pofo_mode mode;
    int relaxed;           /* emit no Wait after a segment's forward (see repair()) */
    int carry_b;           /* dB may be carried into the next segment */
    double *otab;          /* dense OC (FK == 1): OC[i][x][A][B] */
    int32_t *ochoice;      /* packed choices, -1 none, OC_TODO not yet solved */
    oc_entry *hash;        /* sparse OC (carry mode): reachable states only */
    size_t hcap, hcount;
    uint64_t hmax;         /* bytes this run's hash may grow to */
    int hfull;             /* it could not grow: the run is given up */
    remat_schedule *s;     /* emission */
    int has_last, last_x;  /* the last offload issued, for Waits */
    size_t last_i;
} pofo_run;

/* Sizes (bytes; units rounded up) and the index of C, inline: the DP's
 * inner loops use them. */
static inline uint64_t pofo_a(const pofo_shared *P, size_t i) { return P->sizes[i]; }
static inline uint64_t pofo_abar(const pofo_shared *P, size_t i) {
    return P->sizes[(P->n + 1) + i];
}
static inline uint64_t pofo_units(const pofo_shared *P, uint64_t bytes) {
    return bytes / P->q + (bytes % P->q != 0);
}
static inline uint64_t pofo_input_bytes(const pofo_shared *P, size_t i, int x) {
    return x ? pofo_abar(P, i - 1) : pofo_a(P, i - 1);
}
static inline size_t pofo_cidx(const pofo_shared *P, size_t i, size_t j, size_t m) {
    return ((i - 1) * P->L + (j - 1)) * P->W + m;
}
static inline int pofo_carry(const pofo_shared *P) { return P->FK > 1; }

/* pofo_dp.c */
int32_t pofo_choice_pack(pofo_choice ch);
pofo_choice pofo_choice_unpack(int32_t v);

/* Sets up P for `memory` with `values` units (C covering `extra` more) and
 * `fk` dF levels, and fills C, which depends on the memory only. */
remat_status pofo_shared_init(pofo_shared *P, const remat_chain *c, uint64_t memory,
                              uint32_t values, uint32_t extra, size_t fk, uint64_t max_work,
                              remat_error *err);
void pofo_shared_free(pofo_shared *P);
/* Bytes of one run's dense OC table (0 in carry mode). */
uint64_t pofo_oc_bytes(const pofo_shared *P);
/* A run's own OC storage (dense, or a sparse table growing up to hmax bytes). */
remat_status pofo_run_init(pofo_run *r, const pofo_shared *P, uint64_t hmax, remat_error *err);
void pofo_run_free(pofo_run *r);
/* Clears OC for a new run with these parameters. */
void pofo_run_reset(pofo_run *r, uint32_t cap, double bw, remat__pofo_mode mode, int relaxed,
                    int carry_b);
/* OC at state s, solved top-down on demand; its choice (-1: none). */
double pofo_oc_value(pofo_run *r, oc_state s);
int32_t pofo_oc_choice(const pofo_run *r, oc_state s);

/* The state after choice ch at s, and the time before the next segment
 * (`span`: the segment's forward time); 0 when the choice leads nowhere. */
int pofo_next_state(const pofo_run *r, oc_state s, pofo_choice ch, double span, oc_state *next);

/* pofo_emit.c: one DP run at `cap` units and its schedule (time: the DP's). */
remat_status pofo_run_plan(pofo_run *r, uint32_t cap, double bw, remat__pofo_mode mode,
                           int relaxed, int carry_b, remat_schedule **out, remat_error *err);

#endif
