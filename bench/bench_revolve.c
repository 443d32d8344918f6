/* bench_revolve: the thesis' precise-cost AD-model solver on DenseNet-121's
 * chain (examples/densenet121-thesis.json), 8 GiB budget, against the bucket
 * size (the thesis' figure 4.2 took 26 minutes at 1 MB buckets) and the
 * uniform-cost / uniform-memory ablations. Prints a markdown table.
 * Usage: bench_revolve [--quick] [CHAIN.json]. Falls back to a random
 * 120-stage chain with realistic sizes when the file cannot be loaded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remat/remat.h"
#include "solvers/revolve_internal.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A DenseNet-like random chain: 120 stages of 20-300 MiB. */
static remat_chain *random_chain(void) {
    enum { N = 120 };
    remat_stage st[N];
    uint64_t s = 12345;
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t mib = 20 + (s >> 33) % 280;
        snprintf(st[i].name, sizeof st[i].name, "layer%zu", i + 1);
        st[i].out_bytes = mib << 20;
        st[i].saved_bytes = 2 * st[i].out_bytes;
        st[i].grad_bytes = st[i].out_bytes;
        st[i].fwd_overhead = (mib / 8) << 20;
        st[i].bwd_overhead = st[i].out_bytes;
        st[i].fwd_time = 1.0 + (double)((s >> 20) % 300) / 100.0;
        st[i].bwd_time = 2 * st[i].fwd_time;
    }
    st[N - 1].out_bytes = st[N - 1].saved_bytes = st[N - 1].grad_bytes = 4;
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("random-densenet-like", (uint64_t)150 << 20, (uint64_t)150 << 20, st, N,
                           &c, &e) != REMAT_OK) {
        fprintf(stderr, "bench_revolve: %s\n", e.message);
        return NULL;
    }
    return c;
}

static void header(void) {
    printf("| memory MiB | mode | bucket MiB | buckets | table Mentries | DP Gcells | solve s | "
           "time | peak MiB | ops | check |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
}

static const char *mode_name(remat_revolve_mode m) {
    return m == REMAT_REVOLVE_PRECISE ? "precise"
           : m == REMAT_REVOLVE_UNIFORM_COST ? "uniform cost" : "uniform memory";
}

static int row(const remat_chain *c, uint64_t memory, uint64_t bucket, remat_revolve_mode mode) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_REVOLVE;
    o.memory = memory;
    o.bucket_bytes = bucket;
    o.revolve_mode = mode;
    remat_schedule *s = NULL;
    remat_error e;
    remat__revolve_stats st;
    double t0 = now();
    remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, &e);
    double dt = now() - t0;
    if (rc != REMAT_OK) {
        printf("| %.0f | %s | %.0f | %lld | - | - | %.2f | - | - | - | %s |\n",
               (double)memory / (1 << 20), mode_name(mode), (double)bucket / (1 << 20),
               (long long)st.buckets, dt, e.message);
        return rc == REMAT_E_INFEASIBLE ? 0 : 1;
    }
    remat_sim_result *r = NULL;
    int ok = remat_simulate(c, s, NULL, &r, &e) == REMAT_OK && r->valid &&
             r->peak_bytes <= memory;
    printf("| %.0f | %s | %.0f | %lld | %.1f | %.2f | %.1f | %.3f | %.1f | %.0f | %s |\n",
           (double)memory / (1 << 20), mode_name(mode),
           (double)bucket / (1 << 20), (long long)st.buckets, (double)st.table_entries / 1e6,
           (double)st.cells / 1e9, dt, ok ? r->time : -1.0, ok ? (double)r->peak_bytes / (1 << 20) : -1.0,
           (double)s->n_ops, ok ? "ok" : "INVALID");
    remat_sim_result_free(r);
    remat_schedule_free(s);
    return !ok;
}

/* ---- baseline: the thesis' DP written plainly ----
 *
 * The same recurrence as src/solvers/revolve.c (docs/revolve.md: actions k,
 * the quadratic fallback when no action fits, the same bucket rounding), coded
 * the way the thesis describes it: one thread, a double table of
 * (n+1) x (n+1) x (M+1) entries allocated up front and filled for every budget
 * from 0, loops i down, j up, m, then k, no bounds, no clamping, no SIMD.
 * Feasibility of a child is "its entry is finite". Measurement code only. */
typedef struct rb_dp {
    size_t n;
    int64_t M;
    uint64_t bucket;
    uint64_t *a, *abar, *d, *fo, *bo; /* [n+1] bytes */
    int64_t *ab, *sweep;              /* [n+1] a[k] in buckets, scratch */
    double *fwd, *bwd, *pf;           /* [n+1] */
    double *tab;                      /* [i][j][m] */
} rb_dp;

static int64_t rb_buckets(uint64_t bytes, uint64_t bucket) {
    return (int64_t)(bytes / bucket + (bytes % bucket != 0));
}

static double *rb_at(const rb_dp *b, size_t i, size_t j, int64_t m) {
    return &b->tab[(i * (b->n + 1) + j) * (size_t)(b->M + 1) + (size_t)m];
}

static uint64_t rb_max(uint64_t x, uint64_t y) { return x > y ? x : y; }

/* Bytes beside the held values for the forward of stage l in a sweep from a[i]. */
static uint64_t rb_fwd_step(const rb_dp *b, size_t i, size_t l) {
    return (l == i + 1 ? 0 : b->a[l - 1]) + b->a[l] + b->fo[l];
}

/* "Fall t, B t" with d[t] and h bytes of a[t-1] held. */
static uint64_t rb_back_step(const rb_dp *b, size_t t, uint64_t h) {
    return b->d[t] + h + b->abar[t] + rb_max(b->fo[t], b->d[t - 1] + b->bo[t]);
}

/* The quadratic plan of (i, j): for t = j .. i+1, sweep from a[i] to t-1, Fall t, B t. */
static void rb_quadratic(const rb_dp *b, size_t i, size_t j, int64_t *need, double *time) {
    uint64_t peak = 0;
    double cost = 0;
    for (size_t t = i + 1; t <= j; t++) {
        for (size_t l = i + 1; l < t; l++) peak = rb_max(peak, b->d[t] + rb_fwd_step(b, i, l));
        peak = rb_max(peak, rb_back_step(b, t, t - 1 > i ? b->a[t - 1] : 0));
        cost += (b->pf[t - 1] - b->pf[i]) + b->fwd[t] + b->bwd[t];
    }
    *need = rb_buckets(peak, b->bucket);
    *time = cost;
}

static void rb_free(rb_dp *b) {
    free(b->a); free(b->abar); free(b->d); free(b->fo); free(b->bo);
    free(b->fwd); free(b->bwd); free(b->pf); free(b->tab); free(b->ab); free(b->sweep);
}

/* Fills the table for c at `memory` with `bucket`-byte buckets; 0 on success. */
static int rb_solve(const remat_chain *c, uint64_t memory, uint64_t bucket, rb_dp *b) {
    size_t n = c->n, n1 = n + 1;
    memset(b, 0, sizeof *b);
    b->n = n;
    b->bucket = bucket;
    b->M = (int64_t)((memory - remat_chain_a_bytes(c, 0)) / bucket);
    uint64_t **u[5] = {&b->a, &b->abar, &b->d, &b->fo, &b->bo};
    for (int k = 0; k < 5; k++) *u[k] = calloc(n1, sizeof(uint64_t));
    double **v[3] = {&b->fwd, &b->bwd, &b->pf};
    for (int k = 0; k < 3; k++) *v[k] = calloc(n1, sizeof(double));
    b->ab = calloc(n1, sizeof(int64_t));
    b->sweep = calloc(n1, sizeof(int64_t));
    b->tab = malloc(n1 * n1 * (size_t)(b->M + 1) * sizeof(double));
    if (!b->a || !b->abar || !b->d || !b->fo || !b->bo || !b->fwd || !b->bwd || !b->pf ||
        !b->tab || !b->ab || !b->sweep)
        return 1;
    for (size_t l = 0; l <= n; l++) {
        b->a[l] = remat_chain_a_bytes(c, l);
        b->ab[l] = rb_buckets(b->a[l], bucket);
        b->d[l] = remat_chain_d_bytes(c, l);
        if (l == 0) continue;
        const remat_stage *st = &c->stages[l - 1];
        b->abar[l] = st->saved_bytes;
        b->fo[l] = st->fwd_overhead;
        b->bo[l] = st->bwd_overhead;
        b->fwd[l] = st->fwd_time;
        b->bwd[l] = st->bwd_time;
        b->pf[l] = b->pf[l - 1] + b->fwd[l];
    }
    for (size_t i = n; i-- > 0;)
        for (size_t j = i + 1; j <= n; j++) {
            int64_t qneed;
            double qtime;
            rb_quadratic(b, i, j, &qneed, &qtime);
            uint64_t fmax = 0; /* the sweep's need up to each k, in buckets */
            for (size_t k = i + 1; k < j; k++) {
                fmax = rb_max(fmax, rb_fwd_step(b, i, k));
                b->sweep[k] = rb_buckets(b->d[j] + fmax, bucket);
            }
            for (int64_t m = 0; m <= b->M; m++) {
                double best = INFINITY;
                for (size_t k = i + 1; k < j; k++) {
                    int64_t ab = b->ab[k];
                    if (m < b->sweep[k] || m < ab) continue;
                    double cost = ((b->pf[k] - b->pf[i]) + *rb_at(b, k, j, m - ab)) +
                                  *rb_at(b, i, k, m);
                    if (cost < best) best = cost;
                }
                if (best == INFINITY && m >= qneed) best = qtime; /* no action fits */
                *rb_at(b, i, j, m) = best;
            }
        }
    return 0;
}

/* The library (all cores) against the baseline, in this process. */
static int baseline_row(const remat_chain *c, uint64_t memory, uint64_t bucket) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_REVOLVE;
    o.memory = memory;
    o.bucket_bytes = bucket;
    remat_schedule *s = NULL;
    remat__revolve_stats st;
    remat_error e;
    double t0 = now();
    remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, &e);
    double t1 = now();
    remat_schedule_free(s);
    if (rc != REMAT_OK) {
        printf("| %.0f | %.0f | - | - | - | - | %s |\n", (double)memory / (1 << 20),
               (double)bucket / (1 << 20), e.message);
        return 1;
    }
    rb_dp b;
    double t2 = now();
    int bad = rb_solve(c, memory, bucket, &b);
    double t3 = now();
    double want = bad ? NAN : *rb_at(&b, 0, c->n, b.M);
    double mib = (double)(c->n + 1) * (double)(c->n + 1) * (double)(b.M + 1) * 8 / (1 << 20);
    rb_free(&b);
    int ok = !bad && fabs(want - st.dp_cost) <= 1e-9 * fabs(want);
    printf("| %.0f | %.0f | %lld | %.2f | %.0f | %.3f | %.0f | %s |\n",
           (double)memory / (1 << 20), (double)bucket / (1 << 20), (long long)st.buckets, t3 - t2,
           mib, t1 - t0, (t3 - t2) / (t1 - t0), ok ? "ok" : "MISMATCH");
    if (!ok)
        fprintf(stderr, "bench_revolve: *** baseline %.9g, library %.9g ***\n", want, st.dp_cost);
    fflush(stdout);
    return !ok;
}

/* The library with 1 thread against all cores, best of `reps`; the DP's cost
 * must not change. */
static int threads_row(const remat_chain *c, uint64_t memory, uint64_t bucket, int reps) {
    double best[2] = {INFINITY, INFINITY}, cost[2] = {0, 0};
    unsigned used = 0;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            o.algorithm = REMAT_ALG_REVOLVE;
            o.memory = memory;
            o.bucket_bytes = bucket;
            o.threads = k == 0 ? 1 : 0;
            remat_schedule *s = NULL;
            remat__revolve_stats st;
            double t0 = now();
            remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, NULL);
            double dt = now() - t0;
            remat_schedule_free(s);
            if (rc != REMAT_OK) return 1;
            if (dt < best[k]) best[k] = dt;
            cost[k] = st.dp_cost;
            if (k == 1) used = st.threads;
        }
    int same = cost[0] == cost[1];
    printf("| %.0f | %.0f | %.3f | %.3f (%u) | %.2f | %s |\n", (double)memory / (1 << 20),
           (double)bucket / (1 << 20), best[0], best[1], used, best[0] / best[1],
           same ? "same" : "DIFFERENT");
    fflush(stdout);
    return !same;
}

/* ---- calibration of the estimate (docs/bounded.md) ---- */

/* CPU seconds of this process: one core's seconds with one thread, however
 * loaded the machine is. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A CNN-like random chain of n stages (sizes 1-100 MB), seeded. */
static remat_chain *cal_chain(size_t n, uint64_t seed) {
    remat_stage *st = calloc(n, sizeof *st);
    if (!st) return NULL;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(seed >> 11) / 9007199254740992.0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double v = (double)(seed >> 11) / 9007199254740992.0;
        st[i].out_bytes = (uint64_t)(1e6 + 99e6 * u);
        st[i].saved_bytes = st[i].out_bytes + (uint64_t)(2 * st[i].out_bytes * v);
        st[i].grad_bytes = st[i].out_bytes;
        st[i].fwd_overhead = (uint64_t)(1e7 * v);
        st[i].bwd_overhead = (uint64_t)(2e7 * u);
        st[i].fwd_time = 0.1 + 5 * u;
        st[i].bwd_time = st[i].fwd_time * (1 + 2 * v);
    }
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("calibration", 50000000, 50000000, st, n, &c, &e) != REMAT_OK)
        fprintf(stderr, "bench_revolve: %s\n", e.message);
    free(st);
    return c;
}

/* One thread, CPU seconds (one core's seconds): the measured bounds and DP
 * against the estimate's constants and its bound on the cells. */
static int calibrate(void) {
    printf("## revolve: calibration of the estimate (one thread, CPU seconds)\n\n");
    printf("| stages | memory | bucket | actions M | bounds s | ns / action | cells G | "
           "DP s | ns / cell | estimated cells / cells | estimate s | measured s |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    static const size_t sizes[] = {100, 200, 400, 0};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        /* the last: the thesis' DenseNet, long rows at its 8 GiB */
        remat_chain *c = NULL;
        if (sizes[k])
            c = cal_chain(sizes[k], 7 + k);
        else if (remat_chain_load("examples/densenet121-thesis.json", &c, NULL) != REMAT_OK)
            break;
        uint64_t peak = 0;
        if (!c || remat_store_all_cost(c, &peak, NULL, NULL) != REMAT_OK) return 1;
        for (int v = 0; v < 3; v++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            o.algorithm = REMAT_ALG_REVOLVE;
            o.threads = 1;
            o.max_seconds = 1e9; /* a limit, so that the estimate is made */
            o.memory = v == 2 ? peak / 5 : peak / 2;
            o.bucket_bytes = v == 1 ? o.memory / 2000 : 0;
            if (!sizes[k]) { /* bench_revolve's main rows: 8 GiB, 1 and 5 MiB buckets */
                o.memory = (uint64_t)8 << 30;
                o.bucket_bytes = (uint64_t)(v == 0 ? 1 : v == 1 ? 5 : 25) << 20;
            }
            remat__revolve_stats st;
            remat_schedule *s = NULL;
            remat_error e;
            double t0 = cpu_now();
            remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, &e);
            double dt = cpu_now() - t0;
            remat_schedule_free(s);
            if (rc != REMAT_OK) {
                printf("| %zu | %s | - | - | - | - | - | - | - | - | - | %s |\n", c->n,
                       v == 2 ? "peak/5" : "peak/2", e.message);
                continue;
            }
            const char *mem = !sizes[k] ? "8 GiB" : v == 2 ? "peak/5" : "peak/2";
            char bk[32];
            snprintf(bk, sizeof bk, "%s", v == 1 ? "memory/2000" : "default");
            if (!sizes[k]) snprintf(bk, sizeof bk, "%llu MiB", (unsigned long long)(o.bucket_bytes >> 20));
            printf("| %zu | %s | %s | %.1f | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f | %.2f | "
                   "%.2f |\n",
                   c->n, mem, bk, (double)st.bound_actions / 1e6, st.bounds_seconds,
                   1e9 * st.bounds_seconds / (double)st.bound_actions, (double)st.cells / 1e9,
                   st.dp_seconds, st.cells ? 1e9 * st.dp_seconds / (double)st.cells : 0.0,
                   st.cells ? st.estimate_cells / (double)st.cells : 0.0, st.estimate_seconds, dt);
            fflush(stdout);
        }
        remat_chain_free(c);
    }
    return 0;
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *path = "examples/densenet121-thesis.json";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[a], "--calibrate") == 0)
            return calibrate();
        else
            path = argv[a];
    }
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_load(path, &c, &e) != REMAT_OK) {
        fprintf(stderr, "bench_revolve: %s; using a random 120-stage chain\n", e.message);
        c = random_chain();
        if (!c) return 1;
    }
    uint64_t memory = (uint64_t)8 << 30, store_peak = 0;
    double store_time = 0;
    if (remat_store_all_cost(c, &store_peak, &store_time, &e) != REMAT_OK) return 1;
    printf("## revolve (thesis ch. 3): %s, %zu stages, memory %.0f MiB "
           "(store-all needs %.0f MiB, time %.1f)\n\n",
           c->name, c->n, (double)memory / (1 << 20), (double)store_peak / (1 << 20), store_time);
    header();
    static const unsigned full[] = {1, 2, 5, 10, 25}, fast[] = {5, 25};
    const unsigned *bs = quick ? fast : full;
    size_t nb = quick ? sizeof fast / sizeof *fast : sizeof full / sizeof *full;
    int bad = 0;
    for (size_t k = 0; k < nb; k++)
        bad |= row(c, memory, (uint64_t)bs[k] << 20, REMAT_REVOLVE_PRECISE);
    uint64_t ab = (uint64_t)(quick ? 5 : 1) << 20;
    bad |= row(c, memory, ab, REMAT_REVOLVE_UNIFORM_COST);
    bad |= row(c, memory, ab, REMAT_REVOLVE_UNIFORM_MEMORY);
    printf("\n### The thesis' ablation where memory is tight (3 GiB)\n\n");
    header();
    for (int mode = 0; mode <= 2; mode++)
        bad |= row(c, (uint64_t)3 << 30, ab, (remat_revolve_mode)mode);
    printf("\n### The trade-off at 1 MiB buckets (precise)\n\n");
    header();
    static const unsigned gib4[] = {6, 8, 12, 16, 24}; /* quarter GiB */
    for (size_t k = quick ? 3 : 0; k < sizeof gib4 / sizeof *gib4; k++)
        bad |= row(c, (uint64_t)gib4[k] << 28, (uint64_t)1 << 20, REMAT_REVOLVE_PRECISE);
    printf("\n### 1 thread against all cores (precise, best of 2, one process)\n\n");
    printf("| memory MiB | bucket MiB | 1 thread s | all cores s (threads) | ratio x | DP cost |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    bad |= threads_row(c, memory, (uint64_t)(quick ? 5 : 1) << 20, 2);
    printf("\n### Against a plain baseline of the same DP (precise, one process)\n\n");
    printf("The baseline (in this file) fills a double table of (n+1) x (n+1) x (M+1) for "
           "every budget, one thread, no bounds or vectors. C(0, n, M) must agree to 1e-9.\n\n");
    printf("| memory MiB | bucket MiB | buckets | baseline s | baseline table MiB | remat s | "
           "speedup x | check |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    bad |= baseline_row(c, memory, (uint64_t)(quick ? 25 : 10) << 20);
    bad |= baseline_row(c, (uint64_t)3 << 30, (uint64_t)(quick ? 25 : 10) << 20);
    printf("\nbuckets: the budget beside the input; table: cost entries stored; DP cells: "
           "(i, j, k, m) candidates. time: the schedule's simulated time (store-all: %.1f). "
           "Threads: all online cores; solve s is wall-clock on a shared machine.\n", store_time);
    remat_chain_free(c);
    return bad;
}
