/* Shared between pofo_search.c and offload_heuristics.c: the pofo dynamic program
 * with its search space restricted by `mode`. */
#ifndef REMAT_POFO_INTERNAL_H
#define REMAT_POFO_INTERNAL_H

#include "solvers_internal.h"

typedef enum remat__pofo_mode {
    REMAT__POFO_FULL = 0,     /* recomputation and offloading */
    REMAT__POFO_OFFLOAD_ONLY, /* Fall everywhere, inputs kept or offloaded */
    REMAT__POFO_REMAT_ONLY    /* no offloading: rotor's persistent space */
} remat__pofo_mode;

/* Solves c within `memory` bytes with `values` memory values (>= 1) and host
 * bandwidth `bw` (> 0 unless mode is REMAT_ONLY). On success *out is a new
 * schedule whose time is the DP's prediction (an upper bound on the simulated
 * time) and whose peak_bytes is left 0; REMAT_E_INFEASIBLE when nothing fits. */
remat_status remat__pofo_plan(const remat_chain *c, uint64_t memory, uint32_t values, double bw,
                              remat__pofo_mode mode, uint64_t max_work_bytes,
                              remat_schedule **out, remat_error *err);

/* remat__solve_pofo() with parts of its search switched off (for tests and
 * measurements): REMAT__POFO_NO_DB_CARRY keeps each prefetch within the
 * backward of the segment right after its own (no dB carried further);
 * REMAT__POFO_NO_CARRY skips the carry-mode (dF) candidates. */
enum { REMAT__POFO_NO_DB_CARRY = 1, REMAT__POFO_NO_CARRY = 2 };
remat_status remat__solve_pofo_flags(const remat_chain *c, const remat_solve_options *o,
                                     unsigned flags, remat_schedule **out, remat_error *err);

#endif
