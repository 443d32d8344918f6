/* pofo: the candidate plans of one solve and the best of them (pofo_dp.c
 * describes the model). remat__solve_pofo() runs strict plans at the limit
 * and a few units above it, relaxed plans (the DP as if the link were faster,
 * emitted without per-segment Waits and repaired with the simulator, the
 * counterpart of the paper's gradual release and its section 5 conversion)
 * and carry-mode plans (the DP with dF carried), for pofo's space and for
 * offload-only's part of it, plus rotor's optimum; every candidate is checked
 * by the simulator and the fastest is returned. Independent DP runs go to the
 * shared parallel-for, each worker with its own OC; results are merged in job
 * order, so they do not depend on the threads. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../core/parallel.h"
#include "pofo_impl.h"

/* ---- The relaxed candidates (the paper's section 5 conversion) ----
 * The DP is run as if the link were `speedup` times faster, so offloads may
 * overlap several segments, and emitted without the Wait after each
 * segment's forward. repair() then inserts, at the first op whose memory is
 * over the limit, a Wait for the oldest offload still in flight there (the
 * copy that ends first), until the schedule fits. The simulator's time is
 * then the candidate's time. */

static int op_touches(remat_op op, size_t i) {
    if (op.kind <= REMAT_OP_B) return op.index == i || op.index == i + 1;
    return op.index == i;
}

static remat_status insert_op(remat_schedule *s, size_t at, remat_op op, remat_error *err) {
    REMAT__FORWARD(remat_schedule_push(s, op, err));
    memmove(&s->ops[at + 1], &s->ops[at], (s->n_ops - 1 - at) * sizeof *s->ops);
    s->ops[at] = op;
    return REMAT_OK;
}

#define REPAIR_ROUNDS 24

/* REMAT_OK with *sim_time when s now fits; REMAT_E_INFEASIBLE when it cannot. */
static remat_status repair(const remat_chain *c, remat_schedule *s, uint64_t memory, double bw,
                           double *sim_time, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    for (size_t round = 0; round <= s->n_ops; round++) {
        remat_sim_result *r = NULL;
        REMAT__FORWARD(remat_simulate(c, s, &so, &r, err));
        if (!r->valid) {
            remat_sim_result_free(r);
            return REMAT_E_INFEASIBLE;
        }
        size_t k = 0;
        while (k < r->n_ops && r->mem_during[k] <= memory) k++;
        if (k == r->n_ops) {
            *sim_time = r->time;
            s->peak_bytes = r->peak_bytes;
            remat_sim_result_free(r);
            return REMAT_OK;
        }
        remat_sim_result_free(r);
        /* the oldest offload in flight at op k that op k does not use; after
         * REPAIR_ROUNDS rounds the newest (copies run in issue order, so it
         * waits for all of them): each round costs a simulation, and plans
         * for a fast link can hold hundreds of offloads */
        size_t pick = SIZE_MAX;
        int newest = round >= REPAIR_ROUNDS;
        for (size_t h = 0; h < k && (newest || pick == SIZE_MAX); h++) {
            remat_op o = s->ops[h];
            if (o.kind != REMAT_OP_OFF) continue;
            int settled = 0;
            for (size_t g = h + 1; g < k; g++)
                if ((s->ops[g].kind == REMAT_OP_WAIT || s->ops[g].kind == REMAT_OP_PRE) &&
                    s->ops[g].index == o.index && s->ops[g].value == o.value)
                    settled = 1;
            if (settled) continue;
            if (op_touches(s->ops[k], o.index)) {
                if (newest) break; /* waiting past it would end a copy op k reads */
                continue;
            }
            pick = h;
        }
        if (pick == SIZE_MAX) return REMAT_E_INFEASIBLE;
        remat_op w = s->ops[pick];
        w.kind = REMAT_OP_WAIT;
        REMAT__FORWARD(insert_op(s, k, w, err));
    }
    return REMAT_E_INFEASIBLE;
}

/* Moves each Pre earlier, one op at a time, while the schedule stays valid
 * within `memory` and gets no slower: a prefetch issued earlier overlaps
 * more backward compute. Pres stay after the loss's B and in their order. */
static remat_status shift_pres(const remat_chain *c, remat_schedule *s, uint64_t memory,
                               double bw, double *sim_time, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    size_t floor_at = 0;
    for (size_t k = 0; k < s->n_ops; k++)
        if (s->ops[k].kind == REMAT_OP_B && s->ops[k].index == c->n) floor_at = k + 1;
    for (size_t k = floor_at; k < s->n_ops; k++) {
        if (s->ops[k].kind != REMAT_OP_PRE) continue;
        size_t at = k;
        while (at > floor_at && s->ops[at - 1].kind != REMAT_OP_PRE) {
            remat_op tmp = s->ops[at - 1];
            s->ops[at - 1] = s->ops[at];
            s->ops[at] = tmp;
            remat_sim_result *r = NULL;
            REMAT__FORWARD(remat_simulate(c, s, &so, &r, err));
            int keep = r->valid && r->peak_bytes <= memory && r->time <= *sim_time;
            if (keep) *sim_time = r->time;
            if (keep) s->peak_bytes = r->peak_bytes;
            remat_sim_result_free(r);
            if (!keep) { /* undo and stop */
                s->ops[at] = s->ops[at - 1];
                s->ops[at - 1] = tmp;
                break;
            }
            at--;
        }
        floor_at = at + 1;
    }
    return REMAT_OK;
}

/* Keeps s in *best when it is valid within `memory` and faster; frees it
 * otherwise. REMAT_OK when it fit, REMAT_E_INFEASIBLE when not. */
static remat_status keep_if_better(const remat_chain *c, const remat_solve_options *o,
                                   remat_schedule *s, int simulated_time, remat_schedule **best,
                                   double *best_sim, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = o->bandwidth;
    remat_sim_result *r = NULL;
    remat_status st = remat_simulate(c, s, &so, &r, err);
    if (st == REMAT_OK && !r->valid)
        st = remat__fail(err, REMAT_E_INTERNAL, "pofo produced an invalid schedule: op %zu (%s): %s",
                         r->failed_op, r->failed_op_text, r->reason);
    else if (st == REMAT_OK && r->peak_bytes > o->memory)
        st = REMAT_E_INFEASIBLE;
    double t = st == REMAT_OK ? r->time : 0;
    if (st == REMAT_OK) s->peak_bytes = r->peak_bytes;
    if (st == REMAT_OK && (!*best || t < *best_sim)) {
        if (simulated_time) s->time = t;
        remat_schedule_free(*best);
        *best = s;
        *best_sim = t;
        s = NULL;
    }
    remat_sim_result_free(r);
    remat_schedule_free(s);
    return st;
}

/* Runs the DP with `cap` units and keeps the plan when it fits and is faster. */
static remat_status try_cap(pofo_run *r, const remat_solve_options *o, uint32_t cap,
                            double speedup, remat__pofo_mode mode, int carry_b,
                            remat_schedule **best, double *best_sim, remat_error *err) {
    remat_schedule *s = NULL;
    remat_error e;
    int relaxed = speedup != 0;
    remat_status st = pofo_run_plan(r, cap, o->bandwidth * (relaxed ? speedup : 1), mode, relaxed,
                                    carry_b, &s, &e);
    double t = 0;
    if (st == REMAT_OK && relaxed) st = repair(r->sh->c, s, o->memory, o->bandwidth, &t, &e);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        if (st != REMAT_E_INFEASIBLE && err) *err = e;
        return st;
    }
    return keep_if_better(r->sh->c, o, s, relaxed, best, best_sim, err);
}

/* dB carried across segments multiplies the reachable dB values (sums of
 * inputs instead of one input) and so one DP run's time by ~7-10; the runs
 * are spread over threads (see pipeline()). */

/* A strict run at `cap` + a binary search over the extra units (the DP
 * rounds every held value up, wasting up to about a unit per checkpoint);
 * REMAT_OK unless an error other than infeasibility occurs. */
static remat_status strict_search(pofo_run *r, const remat_solve_options *o,
                                  remat__pofo_mode mode, uint32_t extra, int d,
                                  remat_schedule **best, double *best_sim, remat_error *err) {
    uint32_t base = r->sh->base_cap;
    remat_status st = try_cap(r, o, base, 0, mode, d, best, best_sim, err);
    if (st == REMAT_E_INFEASIBLE) st = REMAT_OK;
    uint32_t lo = 0, hi = extra + 1; /* extra units: lo fits (or is the base) */
    while (st == REMAT_OK && hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        remat_status s2 = try_cap(r, o, base + mid, 0, mode, d, best, best_sim, err);
        if (s2 == REMAT_OK)
            lo = mid;
        else if (s2 == REMAT_E_INFEASIBLE)
            hi = mid;
        else
            st = s2;
    }
    return st;
}

static const double speedups[] = {1, 1.5, 2, 3, 4};
#define N_SPEEDUPS (sizeof speedups / sizeof *speedups)
#define PIPE_JOBS (2 + 2 * N_SPEEDUPS)
#define PIPE_THREADS 8

/* What a job leaves: its best plan (or none), its simulated time, status. */
typedef struct job_out {
    remat_schedule *s;
    double sim;
    remat_status st;
    remat_error err;
} job_out;

/* Merges the jobs' plans in job order (so the result does not depend on the
 * threads): *mine is the fastest, *st the first error. `by_time`: compare the
 * plans' own times (carry runs) instead of the simulated ones. */
static void merge_jobs(job_out *jobs, size_t n, int by_time, remat_schedule **mine,
                       double *mine_sim, remat_status *st, remat_error *err) {
    for (size_t k = 0; k < n; k++) {
        if (jobs[k].st != REMAT_OK && *st == REMAT_OK) {
            *st = jobs[k].st;
            if (err) *err = jobs[k].err;
        }
        double t = jobs[k].s && by_time ? jobs[k].s->time : jobs[k].sim;
        if (jobs[k].s && (!*mine || t < *mine_sim)) {
            remat_schedule_free(*mine);
            *mine = jobs[k].s;
            *mine_sim = t;
        } else {
            remat_schedule_free(jobs[k].s);
        }
    }
}

/* Merges the jobs (merge_jobs()), moves the winner's prefetches earlier and
 * keeps it in *best if faster; `by_time` as for merge_jobs(), and then its
 * time becomes the simulated one. */
static remat_status keep_best(const pofo_shared *sh, const remat_solve_options *o,
                              job_out *jobs, size_t n, int by_time, remat_schedule **best,
                              double *best_sim, remat_error *err) {
    remat_schedule *mine = NULL;
    double mine_sim = 0;
    remat_status st = REMAT_OK;
    int set_time = by_time;
    merge_jobs(jobs, n, by_time, &mine, &mine_sim, &st, err);
    if (st != REMAT_OK) {
        remat_schedule_free(mine);
        return st;
    }
    if (mine) st = shift_pres(sh->c, mine, o->memory, o->bandwidth, &mine_sim, err);
    if (st == REMAT_OK && mine && set_time) mine->time = mine_sim;
    if (st == REMAT_OK && mine && (!*best || mine_sim < *best_sim)) {
        remat_schedule_free(*best);
        *best = mine;
        *best_sim = mine_sim;
        mine = NULL;
    }
    remat_schedule_free(mine);
    return st;
}

/* Progress over all the DP runs of one solve: jobs finished of `total`,
 * reported by worker 0 (the caller's thread). */
typedef struct pofo_progress {
    const remat_solve_options *o;
    atomic_uint done;
    unsigned total;
} pofo_progress;

static void job_done(pofo_progress *p, unsigned worker) {
    unsigned d = atomic_fetch_add(&p->done, 1) + 1;
    if (worker == 0) remat__progress(p->o, (double)d / p->total, "pofo: DP runs");
}

/* pipeline()'s jobs: 0, 1 the strict searches without / with dB carried,
 * then the relaxed plans for each speedup, without / with it. */
typedef struct pipe_ctx {
    const remat_solve_options *o;
    remat__pofo_mode mode;
    uint32_t extra;
    int db;
    pofo_run *runs; /* [workers]: C shared, OC each worker's own */
    job_out *out;   /* [PIPE_JOBS]: each written by its job only */
    pofo_progress *progress;
} pipe_ctx;

static void pipe_job(const void *arg, size_t k, unsigned worker) {
    const pipe_ctx *J = arg;
    pofo_run *r = &J->runs[worker];
    job_out *out = &J->out[k];
    int d = k < 2 ? (int)k : (int)((k - 2) & 1);
    if (!d || J->db) {
        if (k < 2)
            out->st = strict_search(r, J->o, J->mode, J->extra, d, &out->s, &out->sim, &out->err);
        else
            out->st = try_cap(r, J->o, r->sh->base_cap, speedups[(k - 2) / 2], J->mode, d,
                              &out->s, &out->sim, &out->err);
        if (out->st == REMAT_E_INFEASIBLE) out->st = REMAT_OK;
    }
    job_done(J->progress, worker);
}

/* One mode's candidates, all checked by the simulator (see the header):
 * strict plans at the limit and with a few extra units, relaxed plans for
 * link speedups 1..4, each with dB carried and not (the peak of a plan at a
 * given cap differs; relaxed plans with dB carried hold prefetched memory
 * longer, which repair() cannot undo). Jobs run on up to o->threads workers,
 * each with its own OC table while they fit in max_work_bytes (worker 0 uses
 * `base`'s). The fastest gets its prefetches moved earlier and is kept in
 * *best if faster. */
static remat_status pipeline(pofo_run *base, const remat_solve_options *o, remat__pofo_mode mode,
                             uint32_t extra, pofo_progress *progress, remat_schedule **best,
                             double *best_sim, remat_error *err) {
    const pofo_shared *sh = base->sh;
    pofo_run runs[PIPE_THREADS];
    job_out out[PIPE_JOBS];
    memset(out, 0, sizeof out);
    unsigned nt = remat__threads(o->threads);
    if (nt > PIPE_THREADS) nt = PIPE_THREADS;
    uint64_t max_work = o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    size_t nc = sh->L * sh->L * sh->W, per = sizeof(double) + sizeof(int32_t);
    uint64_t used = (uint64_t)nc * per + pofo_oc_bytes(sh);
    unsigned workers = 1;
    runs[0] = *base;
    while (workers < nt && used + pofo_oc_bytes(sh) <= max_work &&
           pofo_run_init(&runs[workers], sh, 0, NULL) == REMAT_OK) {
        used += pofo_oc_bytes(sh);
        workers++;
    }
    pipe_ctx J = {o, mode, extra, !(sh->flags & REMAT__POFO_NO_DB_CARRY), runs, out, progress};
    remat__parallel_for(workers, PIPE_JOBS, pipe_job, &J);
    for (unsigned w = 1; w < workers; w++) pofo_run_free(&runs[w]);
    return keep_best(sh, o, out, PIPE_JOBS, 0, best, best_sim, err);
}

/* Carry-mode candidates: the DP with dF carried in carry_levels() levels at
 * CARRY_RUNS caps from the limit to limit + extra, for the real link speed,
 * repaired and kept in *best if faster. The runs are independent: workers
 * share the table C and each has its own sparse OC, all of them within
 * min(max_work_bytes, CARRY_MAX_BYTES); a run that would need more is
 * skipped. */
#define CARRY_RUNS 5
#define CARRY_MAX_BYTES ((uint64_t)256 << 20)

/* dF levels: fewer on long chains, where the DP's time (reachable states x
 * the O(L) segment loop) would pass the time targets. */
static size_t carry_levels(size_t n) { return n <= 80 ? 33 : n <= 160 ? 17 : 9; }

typedef struct carry_ctx {
    const remat_solve_options *o;
    remat__pofo_mode mode;
    uint32_t extra;
    pofo_run *runs; /* [workers] */
    job_out *out;   /* [CARRY_RUNS] */
    pofo_progress *progress;
} carry_ctx;

static void carry_job(const void *arg, size_t k, unsigned worker) {
    const carry_ctx *J = arg;
    pofo_run *r = &J->runs[worker];
    job_out *out = &J->out[k];
    if (!r->hash) /* no room: skipped, like a run whose states outgrow it */
        out->st = REMAT_E_TOO_LARGE;
    else
        out->st = try_cap(r, J->o, r->sh->base_cap + J->extra * (uint32_t)k / (CARRY_RUNS - 1),
                          1, J->mode, 0, &out->s, &out->sim, &out->err);
    job_done(J->progress, worker);
}

static remat_status carry_pipeline(const pofo_shared *sh, const remat_solve_options *o,
                                   remat__pofo_mode mode, uint32_t extra,
                                   pofo_progress *progress, remat_schedule **best,
                                   double *best_sim, remat_error *err) {
    pofo_run runs[CARRY_RUNS];
    job_out out[CARRY_RUNS];
    memset(out, 0, sizeof out);
    unsigned nt = remat__threads(o->threads);
    if (nt > CARRY_RUNS) nt = CARRY_RUNS;
    if (nt < 1) nt = 1;
    for (unsigned w = 0; w < nt; w++) /* the work limit holds for all workers together */
        pofo_run_init(&runs[w], sh, sh->hmax / nt, NULL);
    carry_ctx J = {o, mode, extra, runs, out, progress};
    remat__parallel_for(nt, CARRY_RUNS, carry_job, &J);
    for (unsigned w = 0; w < nt; w++) pofo_run_free(&runs[w]);
    for (unsigned k = 0; k < CARRY_RUNS; k++)
        if (out[k].st == REMAT_E_TOO_LARGE || out[k].st == REMAT_E_INFEASIBLE) out[k].st = REMAT_OK;
    /* every carry plan is repaired: its time is the simulated one */
    return keep_best(sh, o, out, CARRY_RUNS, 1, best, best_sim, err);
}

/* pofo takes the best of its own pipeline, offload-only's (a part of its
 * space) and rotor's optimum; one table C serves every DP run: the unit stays
 * M/N and only the number of units changes. */
remat_status remat__solve_pofo(const remat_chain *c, const remat_solve_options *o,
                               remat_schedule **out, remat_error *err) {
    return remat__solve_pofo_flags(c, o, 0, out, err);
}

/* The carry-mode candidates of both modes, with their own C (skipped when
 * it does not fit the carry limit). */
static remat_status carry_candidates(const remat_chain *c, const remat_solve_options *o,
                                     remat__pofo_mode mode, uint32_t values, uint32_t extra,
                                     unsigned flags, pofo_progress *progress,
                                     remat_schedule **best, double *best_sim, remat_error *err) {
    uint64_t lim = o->max_work_bytes && o->max_work_bytes < CARRY_MAX_BYTES ? o->max_work_bytes
                                                                            : CARRY_MAX_BYTES;
    pofo_shared sh;
    remat_error e;
    remat_status st = pofo_shared_init(&sh, c, o->memory, values, extra, carry_levels(c->n), lim,
                                       &e);
    if (st == REMAT_E_TOO_LARGE) return REMAT_OK; /* skipped */
    if (st != REMAT_OK) {
        if (err) *err = e;
        return st;
    }
    sh.flags = flags;
    st = carry_pipeline(&sh, o, mode, extra, progress, best, best_sim, err);
    if (st == REMAT_OK && mode == REMAT__POFO_FULL)
        st = carry_pipeline(&sh, o, REMAT__POFO_OFFLOAD_ONLY, extra, progress, best, best_sim,
                            err);
    pofo_shared_free(&sh);
    return st;
}

/* Whether s is valid on c within memory under the simulator: optimal's
 * schedule is kept only then (optimal's own checks say it is; this keeps
 * pofo's answer valid whatever the candidate). */
static int fits(const remat_chain *c, const remat_schedule *s, uint64_t memory) {
    remat_sim_result *r = NULL;
    int ok = remat_simulate(c, s, NULL, &r, NULL) == REMAT_OK && r->valid &&
             r->peak_bytes <= memory;
    remat_sim_result_free(r);
    return ok;
}

remat_status remat__solve_pofo_flags(const remat_chain *c, const remat_solve_options *o,
                                     unsigned flags, remat_schedule **out, remat_error *err) {
    *out = NULL;
    if (o->algorithm == REMAT_ALG_POFO && o->bandwidth == 0)
        return remat__solve_optimal(c, o, out, err); /* no link: rotor's optimum */
    uint32_t values = o->offload_values ? o->offload_values : REMAT_DEFAULT_OFFLOAD_VALUES;
    remat__pofo_mode mode =
        o->algorithm == REMAT_ALG_OFFLOAD_ONLY ? REMAT__POFO_OFFLOAD_ONLY : REMAT__POFO_FULL;
    uint32_t extra = (uint32_t)(c->n + 2 < values / 4u + 1 ? c->n + 2 : values / 4u + 1);
    pofo_shared sh;
    REMAT__FORWARD(pofo_shared_init(&sh, c, o->memory, values, extra, 1, o->max_work_bytes, err));
    sh.flags = flags;
    pofo_run base;
    remat_schedule *best = NULL;
    double best_sim = 0;
    unsigned modes = mode == REMAT__POFO_FULL ? 2 : 1;
    pofo_progress progress = {o, 0, modes * (PIPE_JOBS + (flags & REMAT__POFO_NO_CARRY ? 0 : CARRY_RUNS))};
    atomic_init(&progress.done, 0);
    remat_status st = pofo_run_init(&base, &sh, 0, err);
    if (st == REMAT_OK) st = pipeline(&base, o, mode, extra, &progress, &best, &best_sim, err);
    if (st == REMAT_OK && mode == REMAT__POFO_FULL)
        st = pipeline(&base, o, REMAT__POFO_OFFLOAD_ONLY, extra, &progress, &best, &best_sim,
                      err);
    pofo_run_free(&base);
    pofo_shared_free(&sh);
    if (st == REMAT_OK && !(flags & REMAT__POFO_NO_CARRY)) /* one C for both modes */
        st = carry_candidates(c, o, mode, values, extra, flags, &progress, &best, &best_sim,
                              err);
    if (st != REMAT_OK) {
        remat_schedule_free(best);
        return st;
    }
    if (mode == REMAT__POFO_FULL) {
        /* Rotor's optimum is the no-offload corner of pofo's space, solved
         * with finer memory (500 slots): keep it when the coarse DP loses. */
        remat_solve_options oo = *o;
        oo.algorithm = REMAT_ALG_OPTIMAL;
        oo.progress = NULL;
        remat_schedule *s = NULL;
        remat_error e;
        remat_status s2 = remat__solve_optimal(c, &oo, &s, &e);
        if (s2 == REMAT_OK && fits(c, s, o->memory) && (!best || s->time < best_sim)) {
            remat_schedule_free(best);
            best = s;
            best_sim = s->time;
            s = NULL;
        }
        remat_schedule_free(s);
        if (s2 != REMAT_OK && s2 != REMAT_E_INFEASIBLE) {
            remat_schedule_free(best);
            if (err) *err = e;
            return s2;
        }
    }
    if (!best)
        return remat__fail(err, REMAT_E_INFEASIBLE, "%s: no schedule fits in %llu bytes",
                           o->algorithm == REMAT_ALG_POFO ? "pofo" : "offload-only",
                           (unsigned long long)o->memory);
    remat__progress(o, 1, "pofo: DP runs");
    /* time: the DP's prediction for a strict plan (>= its simulated time), the
     * simulated time for a repaired relaxed one */
    best->memory_limit = o->memory;
    *out = best;
    return REMAT_OK;
}
