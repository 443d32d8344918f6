/* remat_solve(): the table of algorithms, option checks, dispatch, and the
 * simulator check that every returned schedule must pass. Also the generic
 * curve and min-memory search for algorithms without a table of their own. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "solvers_internal.h"

/* One core's seconds for one solve, roughly, from the chain's length and the
 * options; calibrated on the development machine (docs/bounded.md). optimal
 * and revolve check their exact table sizes themselves; this serves the
 * others, which cannot tell before they start, and the sweeps of many
 * solves (curves and smallest-memory searches). */
static double estimate_optimal(const remat_chain *c, const remat_solve_options *o) {
    double n = (double)c->n;
    double slots = o->slots < 0 ? REMAT_DEFAULT_SLOTS : o->slots ? (double)o->slots : 1000;
    /* n^2/2 pairs, n/3 choices each, rows of ~0.7 S slots */
    return n * n / 2 * (n / 3) * 0.7 * slots * 2.5e-10;
}
static double estimate_revolve(const remat_chain *c, const remat_solve_options *o) {
    return remat__revolve_estimate(c, o); /* its bounds and DP, estimated in revolve.c */
}
/* pofo's own DP: fitted on resnet101 (L = 35, 1.25 s) and resnet1001 (L = 338, 70 s) */
static double estimate_pofo_dp(const remat_chain *c, const remat_solve_options *o) {
    double n = (double)c->n;
    double values = o->offload_values ? o->offload_values : REMAT_DEFAULT_OFFLOAD_VALUES;
    return 2.3e-3 * pow(n, 1.77) * pow(values / 50, 1.1);
}
/* offload-only (pofo runs it too): no faster below 50 values, and past ~150
 * stages it grows faster than pofo's fit (random chains, issue 23: 250
 * stages 4 s, 500 stages 50 s, 2000 past 300 s; docs/bounded.md) */
static double estimate_offload_only(const remat_chain *c, const remat_solve_options *o) {
    double n = (double)c->n;
    double values = o->offload_values ? o->offload_values : REMAT_DEFAULT_OFFLOAD_VALUES;
    double vo = values > 50 ? values : 50;
    return 2.3e-3 * pow(n, 1.77) * pow(vo / 50, 1.1) / 10 * (n > 150 ? pow(n / 150, 1.8) : 1);
}
static double estimate_pofo(const remat_chain *c, const remat_solve_options *o) {
    return estimate_pofo_dp(c, o) + estimate_offload_only(c, o) + estimate_optimal(c, o);
}
static double estimate_opportunist(const remat_chain *c, const remat_solve_options *o) {
    (void)o;
    double n = (double)c->n;
    return 1e-5 * n * n;
}
static double estimate_autocapper(const remat_chain *c, const remat_solve_options *o) {
    double n = (double)c->n;
    return 40 * estimate_optimal(c, o) + 1e-5 * n * n;
}
static double estimate_exact(const remat_chain *c, const remat_solve_options *o) {
    (void)c;
    (void)o;
    return 0.1;
}
static double estimate_linear(const remat_chain *c, const remat_solve_options *o) {
    (void)o;
    return 1e-6 * (double)c->n;
}

static remat_status min_memory_exact(const remat_chain *c, const remat_solve_options *o,
                                     uint64_t *out, remat_error *err);

/* Everything the library knows about an algorithm, one row each, in
 * remat_algorithm's order: the dispatcher, the option checks, the errors,
 * the CLI's --help and the Python binding all read it (the last two through
 * the remat_algorithm_* functions). A new solver is a row here and its file
 * (docs/architecture.md). */
typedef struct algorithm {
    const char *name;
    const char *summary; /* one line, for help texts */
    remat__solver_fn solve;
    /* The smallest limit that works; NULL: bisection over solves. */
    remat_status (*min_memory)(const remat_chain *, const remat_solve_options *, uint64_t *,
                               remat_error *);
    /* The time-memory curve; NULL: a sweep of solves. */
    remat_status (*curve)(const remat_chain *, const remat_solve_options *, size_t max_points,
                          remat_curve **, remat_error *);
    double (*estimate)(const remat_chain *, const remat_solve_options *); /* see above */
    /* Moves values to the host: measured with the bandwidth, and its time is
     * estimated before it starts (it cannot tell its own). */
    int is_offload;
    int needs_bandwidth; /* refused without a bandwidth > 0 */
    /* min_memory needs no solve (revolve's bounds): the curve sweep takes it
     * instead of bisecting, and one solve there for its time. */
    int min_memory_cheap;
} algorithm;

static const algorithm algorithms[REMAT_ALG_COUNT_] = {
    [REMAT_ALG_OPTIMAL] = {"optimal", "the optimal persistent schedule (rotor, Theorem 1)",
                           remat__solve_optimal, remat__min_memory_optimal, remat__curve_optimal,
                           estimate_optimal, 0, 0, 0},
    [REMAT_ALG_REVOLVE] = {"revolve", "the AD-model DP with precise per-stage costs",
                           remat__solve_revolve, remat__min_memory_revolve, NULL,
                           estimate_revolve, 0, 0, 1},
    [REMAT_ALG_SEQUENTIAL] = {"sequential", "periodic segments, like checkpoint_sequential",
                              remat__solve_sequential, NULL, NULL, estimate_linear, 0, 0, 0},
    [REMAT_ALG_STORE_ALL] = {"store-all", "plain autograd: every activation kept",
                             remat__solve_store_all, NULL, NULL, estimate_linear, 0, 0, 0},
    [REMAT_ALG_EXACT] = {"exact", "the optimum over all schedules, Del included (small chains)",
                         remat__solve_exact, min_memory_exact, NULL, estimate_exact, 0, 0, 0},
    [REMAT_ALG_POFO] = {"pofo", "recomputation and offloading in one DP (pofo paper)",
                        remat__solve_pofo, NULL, NULL, estimate_pofo, 1, 0, 0},
    [REMAT_ALG_OFFLOAD_ONLY] = {"offload-only", "offloading without recomputation (pofo paper)",
                                remat__solve_pofo, NULL, NULL, estimate_offload_only, 1, 1, 0},
    [REMAT_ALG_OPPORTUNIST] = {"opportunist", "offload heuristic that keeps the link busy",
                               remat__solve_offload_heuristic, NULL, NULL, estimate_opportunist,
                               1, 1, 0},
    [REMAT_ALG_AUTOCAPPER] = {"autocapper", "offload heuristic that offloads at optimal's peaks",
                              remat__solve_offload_heuristic, NULL, NULL, estimate_autocapper,
                              1, 1, 0},
};

static const algorithm *algorithm_of(remat_algorithm a) {
    return (unsigned)a < REMAT_ALG_COUNT_ ? &algorithms[a] : NULL;
}

size_t remat_algorithm_count(void) { return REMAT_ALG_COUNT_; }

const char *remat_algorithm_name(remat_algorithm a) {
    return algorithm_of(a) ? algorithm_of(a)->name : "?";
}

const char *remat_algorithm_summary(remat_algorithm a) {
    return algorithm_of(a) ? algorithm_of(a)->summary : "?";
}

int remat_algorithm_is_offload(remat_algorithm a) {
    return algorithm_of(a) ? algorithm_of(a)->is_offload : 0;
}

remat_status remat_algorithm_parse(const char *name, remat_algorithm *out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!name || !out, err, REMAT_E_INPUT, "remat_algorithm_parse: NULL argument");
    char names[REMAT_MESSAGE_MAX] = "";
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        if (strcmp(name, algorithms[a].name) == 0) {
            *out = (remat_algorithm)a;
            return REMAT_OK;
        }
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", a ? ", " : "", algorithms[a].name);
    }
    return remat__fail(err, REMAT_E_INPUT, "algorithm: unknown \"%.40s\" (one of %s)", name,
                       names);
}

static remat_status check_options(const remat_solve_options *o, remat_error *err) {
    REMAT__RETURN_IF((unsigned)o->algorithm >= REMAT_ALG_COUNT_, err, REMAT_E_INPUT,
                     "algorithm: unknown value %d", (int)o->algorithm);
    REMAT__RETURN_IF(o->memory >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "memory: %llu is 2^53 or more", (unsigned long long)o->memory);
    REMAT__RETURN_IF(o->slots < -1 || o->slots > 1000000, err, REMAT_E_INPUT,
                     "slots: %lld is not in 0..1000000 (or -1 for the default)",
                     (long long)o->slots);
    REMAT__RETURN_IF(!isfinite(o->bandwidth) || o->bandwidth < 0, err, REMAT_E_INPUT,
                     "bandwidth: must be a finite number >= 0");
    REMAT__RETURN_IF(algorithms[o->algorithm].needs_bandwidth && !(o->bandwidth > 0), err,
                     REMAT_E_INPUT, "bandwidth: %s needs a bandwidth > 0",
                     remat_algorithm_name(o->algorithm));
    REMAT__RETURN_IF(o->bucket_bytes >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "bucket: %llu is 2^53 or more", (unsigned long long)o->bucket_bytes);
    REMAT__RETURN_IF((unsigned)o->revolve_mode > REMAT_REVOLVE_UNIFORM_MEMORY, err, REMAT_E_INPUT,
                     "revolve mode: unknown value %d", (int)o->revolve_mode);
    REMAT__RETURN_IF(o->threads > REMAT_MAX_THREADS, err, REMAT_E_INPUT,
                     "threads: %u is more than %u", o->threads, REMAT_MAX_THREADS);
    REMAT__RETURN_IF(o->exact_no_del != 0 && o->exact_no_del != 1, err, REMAT_E_INPUT,
                     "exact_no_del: %d is not 0 or 1", o->exact_no_del);
    REMAT__RETURN_IF(isnan(o->max_seconds), err, REMAT_E_INPUT, "max_seconds: is NaN");
    return REMAT_OK;
}

/* One core's seconds for one solve of o's algorithm. */
static double solve_estimate(const remat_chain *c, const remat_solve_options *o) {
    return algorithms[o->algorithm].estimate(c, o);
}

/* Solves and checks, without the min-memory search on failure. */
static remat_status solve_checked(const remat_chain *c, const remat_solve_options *o,
                                  remat_schedule **out, remat_error *err) {
    const algorithm *al = &algorithms[o->algorithm];
    remat_schedule *s = NULL;
    if (al->is_offload)
        REMAT__FORWARD(remat__check_time(o, remat__parallel_seconds(o, solve_estimate(c, o)),
                                         al->name, "use fewer offload values (--values)", err));
    REMAT__FORWARD(al->solve(c, o, &s, err));
    double predicted_time = s->time;
    uint64_t predicted_peak = s->peak_bytes;
    s->memory_limit = o->memory;
    remat__strlcpy(s->algorithm, remat_algorithm_name(o->algorithm), sizeof s->algorithm);
    remat_status st = remat__schedule_measure(c, s, al->is_offload ? o->bandwidth : 0, err);
    if (st == REMAT_OK && s->peak_bytes > o->memory)
        st = remat__fail(err, REMAT_E_INTERNAL,
                         "%s produced a schedule with peak %llu bytes above the limit %llu",
                         s->algorithm, (unsigned long long)s->peak_bytes,
                         (unsigned long long)o->memory);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    /* Keep the solver's own predictions: the CLI and tests compare them with the simulator. */
    s->time = predicted_time;
    s->peak_bytes = predicted_peak;
    *out = s;
    return REMAT_OK;
}

/* Solves at m quietly: 1 when it fits (*time its time), 0 when not; *hard
 * keeps any error other than infeasibility. */
static int feasible_at(const remat_chain *c, const remat_solve_options *o, uint64_t m,
                       double *time, remat_status *hard, remat_error *hard_err) {
    remat_solve_options oo = *o;
    oo.memory = m;
    oo.progress = NULL;
    remat_schedule *s = NULL;
    remat_error e;
    remat__clear(&e);
    remat_status st = solve_checked(c, &oo, &s, &e);
    if (st == REMAT_OK && time) *time = s->time;
    remat_schedule_free(s);
    if (st != REMAT_OK && st != REMAT_E_INFEASIBLE) {
        *hard = st;
        if (hard_err) *hard_err = e;
    }
    return st == REMAT_OK;
}

/* The exact search finds the smallest feasible peak itself when a limit is too
 * small: one solve at the smallest limit that could work says it. */
static remat_status min_memory_exact(const remat_chain *c, const remat_solve_options *o,
                                     uint64_t *out, remat_error *err) {
    remat_solve_options oo = *o;
    oo.memory = c->input_bytes; /* nothing fits below the input */
    remat_schedule *s = NULL;
    remat_status st = solve_checked(c, &oo, &s, err);
    remat_schedule_free(s);
    if (st == REMAT_OK) {
        *out = c->input_bytes;
        remat__clear(err);
        return REMAT_OK;
    }
    if (st == REMAT_E_INFEASIBLE && err->min_memory) {
        *out = err->min_memory;
        remat__clear(err);
        return REMAT_OK;
    }
    return st;
}

/* The smallest limit at which the algorithm finds a schedule, to within
 * `tol` bytes (the result always works), by bisection over solves: *time is
 * the time there. Refused up front when the solves are estimated to take
 * longer than o allows. */
static remat_status min_memory_search(const remat_chain *c, const remat_solve_options *o,
                                      uint64_t tol, uint64_t *out, double *time,
                                      remat_error *err) {
    const algorithm *al = &algorithms[o->algorithm];
    if (al->min_memory_cheap) { /* no solves to bisect; one for the time */
        REMAT__FORWARD(al->min_memory(c, o, out, err));
        remat_status hard = REMAT_OK;
        if (!time || feasible_at(c, o, *out, time, &hard, err)) return REMAT_OK;
        return hard != REMAT_OK ? hard
                                : remat__fail(err, REMAT_E_INTERNAL,
                                              "%s: no schedule at its smallest memory %llu",
                                              al->name, (unsigned long long)*out);
    }
    uint64_t hi, top = REMAT_MAX_BYTES - 1; /* no limit above it is accepted */
    REMAT__FORWARD(remat_store_all_cost(c, &hi, NULL, err));
    if (hi > top) hi = top;
    uint64_t lo = c->input_bytes; /* nothing fits below the input itself */
    if (lo > 0) lo--;
    double steps = 2 + log2((double)(hi > lo ? hi - lo : 1) / (double)(tol ? tol : 1));
    REMAT__FORWARD(remat__check_time(o, remat__parallel_seconds(o, steps * solve_estimate(c, o)),
                                     "the smallest-memory search",
                                     "give --memory, or use fewer offload values", err));
    remat_status hard = REMAT_OK;
    double t = 0;
    /* Discretized solvers may need a little more than the store-all peak. */
    while (!feasible_at(c, o, hi, &t, &hard, err)) {
        if (hard != REMAT_OK) return hard;
        REMAT__RETURN_IF(hi == top, err, REMAT_E_INFEASIBLE,
                         "%s finds no schedule at any memory below 2^53 bytes",
                         remat_algorithm_name(o->algorithm));
        hi = hi > top / 2 ? top : hi ? hi * 2 : 1; /* a zero store-all peak must still grow */
    }
    /* invariant: lo infeasible (or below any need), hi feasible with time t */
    for (double k = 0; hi - lo > (tol ? tol : 1); k++) {
        remat__progress(o, k / steps, "smallest memory");
        uint64_t mid = lo + (hi - lo) / 2;
        double tm = 0;
        if (feasible_at(c, o, mid, &tm, &hard, err)) {
            hi = mid;
            t = tm;
        } else {
            if (hard != REMAT_OK) return hard;
            lo = mid;
        }
    }
    *out = hi;
    if (time) *time = t;
    return REMAT_OK;
}

remat_status remat_min_memory(const remat_chain *c, const remat_solve_options *o, uint64_t *out,
                              remat_error *err) {
    remat_error local;
    if (!err) err = &local;
    remat__clear(err);
    REMAT__RETURN_IF(!c || !o || !out, err, REMAT_E_INPUT, "remat_min_memory: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_min_memory", err));
    REMAT__FORWARD(check_options(o, err));
    remat_status st = algorithms[o->algorithm].min_memory
                          ? algorithms[o->algorithm].min_memory(c, o, out, err)
                          : min_memory_search(c, o, 1, out, NULL, err);
    /* A valid chain may need more than any limit remat accepts. */
    if (st == REMAT_OK && *out >= REMAT_MAX_BYTES) {
        uint64_t need = *out;
        *out = 0;
        st = remat__fail(err, REMAT_E_INFEASIBLE,
                         "%s: no limit below 2^53 bytes fits; it needs %llu bytes",
                         remat_algorithm_name(o->algorithm), (unsigned long long)need);
        err->min_memory = need;
    }
    return st;
}

remat_status remat_solve(const remat_chain *c, const remat_solve_options *o, remat_schedule **out,
                         remat_error *err) {
    remat_error local;
    if (!err) err = &local; /* solvers may report min_memory through it */
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!c || !o || !out, err, REMAT_E_INPUT, "remat_solve: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_solve", err));
    REMAT__FORWARD(check_options(o, err));
    remat_status st;
    if (o->memory < c->input_bytes) /* nothing fits; still say what would */
        st = remat__fail(err, REMAT_E_INFEASIBLE, "memory: limit %llu is below the input size %llu",
                         (unsigned long long)o->memory, (unsigned long long)c->input_bytes);
    else
        st = solve_checked(c, o, out, err);
    /* Every infeasible answer says what memory would do (0 only when even the
     * search for it fails), so front-ends need no policy of their own. */
    if (st == REMAT_E_INFEASIBLE && err->min_memory == 0) {
        remat_error e2;
        uint64_t m = 0;
        char keep[REMAT_MESSAGE_MAX];
        remat__strlcpy(keep, err->message, sizeof keep);
        remat_status ms = remat_min_memory(c, o, &m, &e2);
        if (ms == REMAT_OK) err->min_memory = m;
        if (ms == REMAT_E_INFEASIBLE) err->min_memory = e2.min_memory; /* 2^53 or more */
        remat__strlcpy(err->message, keep, sizeof err->message);
        err->status = REMAT_E_INFEASIBLE;
    }
    return st;
}

/* Generic curve: the smallest memory (to within a small share of the range),
 * then one solve per point up to the top: at most REMAT_SWEEP_MAX_POINTS
 * points, fewer when the solves are estimated to take longer than half of
 * o's time limit, never the same memory twice. The points are solved coarse
 * to fine (the ends, then midpoints), and the sweep stops early when its own
 * wall time nears the limit (a loaded machine), so it stays spread over the
 * range. */
#define REMAT_SWEEP_MAX_POINTS 100

static double wall_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Indices 0..k-1 coarse to fine: both ends, then the midpoints of the gaps
 * in breadth-first order. */
static void coarse_to_fine(size_t *order, size_t k) {
    size_t n = 0, head = 0;
    order[n++] = 0;
    if (k > 1) order[n++] = k - 1;
    /* the gaps to split, as pairs (a, b), kept in `order`'s tail */
    size_t *gaps = order + k; /* room for 2k entries */
    size_t ng = 0;
    if (k > 2) {
        gaps[ng++] = 0;
        gaps[ng++] = k - 1;
    }
    while (head < ng) {
        size_t a = gaps[head++], b = gaps[head++], mid = a + (b - a) / 2;
        order[n++] = mid;
        if (mid - a > 1) {
            gaps[ng++] = a;
            gaps[ng++] = mid;
        }
        if (b - mid > 1) {
            gaps[ng++] = mid;
            gaps[ng++] = b;
        }
    }
}

static remat_status curve_by_sweep(const remat_chain *c, const remat_solve_options *o,
                                   size_t max_points, remat_curve **out, remat_error *err) {
    double start = wall_seconds();
    uint64_t lo, top;
    double lo_time = 0;
    REMAT__FORWARD(remat_store_all_cost(c, &top, NULL, err));
    if (o->memory) top = o->memory;
    size_t k_max = max_points ? max_points : 50;
    if (k_max > REMAT_SWEEP_MAX_POINTS) k_max = REMAT_SWEEP_MAX_POINTS;
    uint64_t span = top > c->input_bytes ? top - c->input_bytes : 1;
    uint64_t tol = span / (4 * (uint64_t)k_max) + 1;
    double one = remat__parallel_seconds(o, solve_estimate(c, o));
    double search = (2 + log2((double)span / (double)tol)) * one;
    /* as many points as fit in half the time limit: a loaded machine may be
     * twice as slow as the estimates */
    double limit = remat__max_seconds(o), room = limit / 2 - search;
    if (one > 0 && room < (double)k_max * one)
        k_max = room >= 2 * one ? (size_t)(room / one) : 2;
    REMAT__FORWARD(remat__check_time(o, search + (double)k_max * one,
                                     "the curve's solves", "give fewer --points", err));
    REMAT__FORWARD(min_memory_search(c, o, tol, &lo, &lo_time, err));
    if (top < lo) top = lo;
    remat_curve *cv = calloc(1, sizeof *cv);
    uint64_t *mem = remat__calloc(k_max, sizeof *mem);
    double *tm = remat__calloc(k_max, sizeof *tm);
    size_t *order = remat__calloc(3 * k_max, sizeof *order);
    if (cv) cv->points = remat__calloc(k_max, sizeof *cv->points);
    remat_status st = REMAT_OK;
    if (!cv || !cv->points || !mem || !tm || !order)
        st = remat__fail(err, REMAT_E_NOMEM, "curve: out of memory");
    if (st == REMAT_OK) {
        remat__strlcpy(cv->algorithm, remat_algorithm_name(o->algorithm), sizeof cv->algorithm);
        for (size_t k = 0; k < k_max; k++) {
            mem[k] = k_max == 1 ? top
                                : lo + (uint64_t)((double)(top - lo) * (double)k /
                                                  (double)(k_max - 1));
            tm[k] = NAN; /* not solved, or nothing fits */
        }
        mem[k_max - 1] = top;
        coarse_to_fine(order, k_max);
    }
    size_t solved = 0;
    for (size_t q = 0; st == REMAT_OK && q < k_max; q++) {
        size_t k = order[q];
        if (k > 0 && mem[k] == mem[k - 1]) continue; /* the same memory again */
        double elapsed = wall_seconds() - start;
        if (solved >= 2 && elapsed + elapsed / (double)(solved + 1) > 0.9 * limit) break;
        remat__progress(o, (double)q / (double)k_max, "curve");
        if (mem[k] == lo) { /* solved by the search */
            tm[k] = lo_time;
            continue;
        }
        remat_solve_options oo = *o;
        oo.memory = mem[k];
        oo.progress = NULL;
        remat_schedule *s = NULL;
        remat_status s2 = solve_checked(c, &oo, &s, err);
        solved++;
        if (s2 == REMAT_OK) tm[k] = s->time;
        else if (s2 != REMAT_E_INFEASIBLE) st = s2; /* infeasible: non-monotone heuristics */
        remat_schedule_free(s);
    }
    for (size_t k = 0; st == REMAT_OK && k < k_max; k++) {
        if (isnan(tm[k]) || (k > 0 && mem[k] == mem[k - 1])) continue;
        if (cv->n > 0 && cv->points[cv->n - 1].time <= tm[k]) continue;
        cv->points[cv->n].memory = mem[k];
        cv->points[cv->n].time = tm[k];
        cv->n++;
    }
    free(mem);
    free(tm);
    free(order);
    if (st != REMAT_OK) {
        remat_curve_free(cv);
        return st;
    }
    remat__progress(o, 1, "curve");
    remat__clear(err);
    *out = cv;
    return REMAT_OK;
}

/* Times that overflow (recomputing stages whose times are near DBL_MAX) say
 * nothing and could not be written: such points are left out. */
static void drop_infinite_points(remat_curve *cv) {
    size_t n = 0;
    for (size_t k = 0; k < cv->n; k++)
        if (isfinite(cv->points[k].time)) cv->points[n++] = cv->points[k];
    cv->n = n;
}

remat_status remat_curve_compute(const remat_chain *c, const remat_solve_options *o,
                                 size_t max_points, remat_curve **out, remat_error *err) {
    remat_error local;
    if (!err) err = &local;
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!c || !o || !out, err, REMAT_E_INPUT, "remat_curve_compute: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_curve_compute", err));
    REMAT__FORWARD(check_options(o, err));
    if (algorithms[o->algorithm].curve)
        REMAT__FORWARD(algorithms[o->algorithm].curve(c, o, max_points, out, err));
    else
        REMAT__FORWARD(curve_by_sweep(c, o, max_points, out, err));
    drop_infinite_points(*out);
    return REMAT_OK;
}
