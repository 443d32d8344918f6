/* Benchmark of the optimal solver: time and peak RSS of the full table for
 * random chains of L stages at S slots. Each configuration runs in a fresh
 * child process (this binary re-executed with --one) so its peak RSS is its
 * own. Prints a markdown table.
 *
 *   bench_optimal            L = 100, 200, 339, 1000 at S = 500 and 1000
 *                            (the solve at half the peak is skipped for L = 1000)
 *   bench_optimal --quick    L = 100, 200, 339 at S = 500
 *   bench_optimal --one L S  one configuration (used by the parent)
 *   bench_optimal --pair L S the baseline against the library, one process
 *
 * It then compares, in one process per L, a plain baseline of the same DP
 * (see base_solve; not rotor's code, which bench_rotor.py runs) with
 * remat_solve at about half the store-all peak, checking the curve's steps
 * equal the baseline's table and the solve is never slower, and times the
 * library with 1 thread against all cores.
 * Exits non-zero when the baseline and the library disagree. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remat/remat.h"

#include "bench_chain.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Child: the curve (one table at the store-all peak, i.e. the full table)
 * and one solve at half the store-all peak. Prints "ok curve_s solve_s
 * points rss_kb" or "refused <status> <message>". */
static int run_one(size_t L, int64_t slots) {
    remat_chain *c = random_chain(L, 1000 + L);
    if (!c) return 1;
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.slots = slots;
    remat_error e;
    remat_curve *cv = NULL;
    double t0 = now();
    remat_status st = remat_curve_compute(c, &o, 0, &cv, &e);
    double t1 = now();
    if (st != REMAT_OK) {
        printf("refused %s %s\n", remat_status_name(st), e.message);
        remat_chain_free(c);
        return 0;
    }
    uint64_t peak;
    remat_store_all_cost(c, &peak, NULL, NULL);
    o.memory = peak / 2;
    remat_schedule *s = NULL;
    double t2 = now(), t3 = t2 - 1; /* negative: not measured */
    if (L < 1000) { /* keeps `make bench` short */
        st = remat_solve(c, &o, &s, &e);
        t3 = now();
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (st != REMAT_OK) printf("refused %s %s\n", remat_status_name(st), e.message);
    else printf("ok %.3f %.3f %zu %ld\n", t1 - t0, t3 - t2, cv->n, ru.ru_maxrss);
    remat_curve_free(cv);
    remat_schedule_free(s);
    remat_chain_free(c);
    return 0;
}

static void run_child(const char *self, size_t L, int slots) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --one %zu %d", self, L, slots);
    FILE *p = popen(cmd, "r");
    char line[1024] = "";
    if (!p || !fgets(line, sizeof line, p)) snprintf(line, sizeof line, "failed to run\n");
    if (p) pclose(p);
    line[strcspn(line, "\n")] = '\0';
    double ct, stt;
    size_t pts;
    long rss;
    if (sscanf(line, "ok %lf %lf %zu %ld", &ct, &stt, &pts, &rss) == 4)
        if (stt < 0)
            printf("| %zu | %d | %.3f | - | %zu | %.1f |\n", L, slots, ct, pts, rss / 1024.0);
        else
            printf("| %zu | %d | %.3f | %.3f | %zu | %.1f |\n", L, slots, ct, stt, pts,
                   rss / 1024.0);
    else
        printf("| %zu | %d | - | - | - | %s |\n", L, slots, line);
    fflush(stdout);
}

/* ---- baseline: the same DP written plainly ----
 *
 * Rotor's Theorem 1 with the memory terms of docs/optimal.md, in the same
 * units (sizes rounded up to slots of M/S bytes, budget floor((M-a0)S/M)),
 * coded the way the paper's C code does it: one thread, a double table of
 * n x n x (S+1) entries allocated up front and filled for every budget from
 * 0, the plain loop over s' for every cell, no bounds, no clamping, no SIMD.
 * It is measurement code: the library is timed against it and must agree. */
typedef struct base_dp {
    size_t n;
    uint64_t budget, slots;
    uint64_t *a, *ab, *d, *of, *ob; /* [n+1] in slots */
    double *uf, *ub;                /* [n+1] */
    double *tab;                    /* [m][s-1][t-1], (S+1) * n * n */
} base_dp;

static uint64_t base_units(uint64_t x, uint64_t slots, uint64_t mem, int up) {
    unsigned __int128 p = (unsigned __int128)x * slots;
    return (uint64_t)(up ? (p + mem - 1) / mem : p / mem);
}

static double *base_at(const base_dp *b, uint64_t m, size_t s, size_t t) {
    return &b->tab[((size_t)m * b->n + (s - 1)) * b->n + (t - 1)];
}

static uint64_t umax(uint64_t x, uint64_t y) { return x > y ? x : y; }

/* One cell C(s, t, m), from cells of shorter sub-chains. */
static double base_cell(const base_dp *b, size_t s, size_t t, uint64_t m) {
    const uint64_t *a = b->a, *ab = b->ab, *d = b->d, *of = b->of, *ob = b->ob;
    uint64_t mall = umax(d[t] + ab[s] + of[s], ab[s] + d[s] + d[s - 1] + ob[s]);
    if (s == t) return m >= mall ? b->uf[s] + b->ub[s] : INFINITY;
    double best = INFINITY;
    if (m >= mall && m >= ab[s]) /* Fall s, (s+1, t), B s */
        best = b->uf[s] + b->ub[s] + *base_at(b, m - ab[s], s + 1, t);
    uint64_t run = a[s] + of[s]; /* largest need of Fck s, Fn s+1..s'-1 */
    double fwd = 0;
    for (size_t sp = s + 1; sp <= t; sp++) {
        fwd += b->uf[sp - 1];
        if (sp > s + 1) run = umax(run, a[sp - 2] + a[sp - 1] + of[sp - 1]);
        if (m < d[t] + run || m < a[sp - 1]) continue;
        double v = fwd + *base_at(b, m - a[sp - 1], sp, t) + *base_at(b, m, s, sp - 1);
        if (v < best) best = v;
    }
    return best;
}

static void base_free(base_dp *b) {
    free(b->a); free(b->ab); free(b->d); free(b->of); free(b->ob);
    free(b->uf); free(b->ub); free(b->tab);
}

/* Fills the whole table for chain c at limit mem with S slots; 0 on success. */
static int base_solve(const remat_chain *c, uint64_t mem, uint64_t slots, base_dp *b) {
    size_t n = c->n, n1 = n + 1;
    memset(b, 0, sizeof *b);
    b->n = n;
    b->slots = slots;
    uint64_t **u[5] = {&b->a, &b->ab, &b->d, &b->of, &b->ob};
    for (int k = 0; k < 5; k++) *u[k] = calloc(n1, sizeof(uint64_t));
    b->uf = calloc(n1, sizeof(double));
    b->ub = calloc(n1, sizeof(double));
    b->tab = malloc((slots + 1) * n * n * sizeof(double));
    if (!b->a || !b->ab || !b->d || !b->of || !b->ob || !b->uf || !b->ub || !b->tab) return 1;
    for (size_t i = 0; i <= n; i++) {
        b->a[i] = base_units(remat_chain_a_bytes(c, i), slots, mem, 1);
        b->d[i] = base_units(remat_chain_d_bytes(c, i), slots, mem, 1);
        if (i == 0) continue;
        const remat_stage *sg = &c->stages[i - 1];
        b->ab[i] = base_units(remat_chain_abar_bytes(c, i), slots, mem, 1);
        b->of[i] = base_units(sg->fwd_overhead, slots, mem, 1);
        b->ob[i] = base_units(sg->bwd_overhead, slots, mem, 1);
        b->uf[i] = sg->fwd_time;
        b->ub[i] = sg->bwd_time;
    }
    b->budget = base_units(mem - remat_chain_a_bytes(c, 0), slots, mem, 0);
    /* rotor's order: budget, then sub-chain length, then start */
    for (uint64_t m = 0; m <= slots; m++)
        for (size_t len = 0; len < n; len++)
            for (size_t s = 1; s + len <= n; s++)
                *base_at(b, m, s, s + len) = base_cell(b, s, s + len, m);
    return 0;
}

static int close_enough(double x, double y) {
    return (isinf(x) && isinf(y)) || fabs(x - y) <= 1e-6 * fabs(y);
}

/* Child of --pair: remat_solve at M = S * 2^k <= peak/2 (all cores, then 1
 * thread) and its curve up to M, then the baseline, in this process. Prints "ok base_s base_mib
 * remat_s remat1_s rss_kb", or "MISMATCH ..." and returns 2. */
static int run_pair(size_t L, int64_t slots) {
    remat_chain *c = random_chain(L, 1000 + L);
    if (!c) return 1;
    uint64_t peak;
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.slots = slots;
    /* M = S * 2^k <= peak/2: the slot M/S is a power of two, so the slot
     * sizes M/S and "the least power of two u with M <= S*u" agree */
    uint64_t unit = 1;
    while ((uint64_t)slots * unit * 2 <= peak / 2) unit *= 2;
    o.memory = (uint64_t)slots * unit;
    remat_error e;
    remat_schedule *s = NULL, *s1 = NULL;
    remat_curve *cv = NULL;
    double t0 = now();
    remat_status st = remat_solve(c, &o, &s, &e);
    double t1 = now();
    o.threads = 1;
    if (st == REMAT_OK) st = remat_solve(c, &o, &s1, &e);
    double t2 = now();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* before the baseline's table */
    if (st == REMAT_OK) st = remat_curve_compute(c, &o, 0, &cv, &e);
    if (st != REMAT_OK) {
        printf("refused %s %s\n", remat_status_name(st), e.message);
        remat_schedule_free(s);
        remat_schedule_free(s1);
        remat_chain_free(c);
        return 1;
    }
    base_dp b;
    double t3 = now();
    int bad = base_solve(c, o.memory, (uint64_t)slots, &b);
    double t4 = now();
    int rc = 0;
    if (bad) {
        printf("baseline out of memory\n");
        rc = 1;
    } else {
        double want = *base_at(&b, b.budget, 1, c->n);
        uint64_t in = remat_chain_a_bytes(c, 0);
        char why[256] = "";
        /* a solve may beat its table's value (the headroom above the limit's
         * budget, docs/optimal.md), never lose to it; threads change nothing */
        if (!(s->time <= want * (1 + 1e-6)) || s1->time != s->time)
            snprintf(why, sizeof why, "solve %.9g / %.9g (1 thread), baseline %.9g", s->time,
                     s1->time, want);
        /* the curve's steps at limits above M/2, which are solved in slots of M/S */
        for (size_t k = 0; k < cv->n && !why[0]; k++) {
            if (cv->points[k].memory <= o.memory / 2) continue;
            uint64_t bk = (cv->points[k].memory - in) / unit;
            double v = *base_at(&b, bk, 1, c->n);
            if (!close_enough(cv->points[k].time, v))
                snprintf(why, sizeof why, "curve at %llu slots %.9g, baseline %.9g",
                         (unsigned long long)bk, cv->points[k].time, v);
        }
        if (why[0]) {
            printf("MISMATCH %s\n", why);
            rc = 2;
        } else {
            double mib = (double)(slots + 1) * (double)c->n * (double)c->n * 8 / (1 << 20);
            printf("ok %.3f %.1f %.4f %.4f %ld\n", t4 - t3, mib, t1 - t0, t2 - t1, ru.ru_maxrss);
        }
    }
    base_free(&b);
    remat_curve_free(cv);
    remat_schedule_free(s);
    remat_schedule_free(s1);
    remat_chain_free(c);
    return rc;
}

static int run_pair_child(const char *self, size_t L, int slots) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' --pair %zu %d", self, L, slots);
    FILE *p = popen(cmd, "r");
    char line[1024] = "";
    if (!p || !fgets(line, sizeof line, p)) snprintf(line, sizeof line, "failed to run\n");
    int status = p ? pclose(p) : -1;
    line[strcspn(line, "\n")] = '\0';
    double bs, mib, rs, r1;
    long rss;
    if (sscanf(line, "ok %lf %lf %lf %lf %ld", &bs, &mib, &rs, &r1, &rss) == 5) {
        printf("| %zu | %d | %.2f | %.0f | %.4f | %.4f | %.1f | %.0f | %.0f |\n", L, slots, bs,
               mib, rs, r1, rss / 1024.0, bs / rs, bs / r1);
        fflush(stdout);
        return 0;
    }
    printf("| %zu | %d | - | - | - | - | - | - | %s |\n", L, slots, line);
    fprintf(stderr, "bench_optimal: *** L = %zu, S = %d: %s ***\n", L, slots, line);
    fflush(stdout);
    return status == 0 ? 1 : status;
}

/* remat_curve_compute at the store-all peak, 1 thread against all cores, in
 * this process; best of `reps` runs each. */
static void threads_row(size_t L, int64_t slots, int reps) {
    remat_chain *c = random_chain(L, 1000 + L);
    if (!c) return;
    double best[2] = {INFINITY, INFINITY};
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            o.slots = slots;
            o.threads = k == 0 ? 1 : 0;
            remat_curve *cv = NULL;
            double t0 = now();
            remat_status st = remat_curve_compute(c, &o, 0, &cv, NULL);
            double dt = now() - t0;
            remat_curve_free(cv);
            if (st == REMAT_OK && dt < best[k]) best[k] = dt;
        }
    printf("| %zu | %lld | %.3f | %.3f | %.2f |\n", L, (long long)slots, best[0], best[1],
           best[0] / best[1]);
    fflush(stdout);
    remat_chain_free(c);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--one") == 0)
        return run_one((size_t)strtoul(argv[2], NULL, 10), strtoll(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "--pair") == 0)
        return run_pair((size_t)strtoul(argv[2], NULL, 10), strtoll(argv[3], NULL, 10));
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char self[4000];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) snprintf(self, sizeof self, "%s", argv[0]);
    else self[k] = '\0';
    printf("### optimal: full table (curve at the store-all peak) and one solve at half of it\n\n");
    printf("Random chains (seeded), %ld online cores, every configuration in a fresh process.\n\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("| L | slots | curve (s) | solve at peak/2 (s) | curve points | peak RSS (MiB) |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    fflush(stdout);
    size_t Ls[4] = {100, 200, 339, 1000};
    int Ss[2] = {500, 1000};
    for (int si = 0; si < (quick ? 1 : 2); si++)
        for (int li = 0; li < (quick ? 3 : 4); li++) run_child(self, Ls[li], Ss[si]);

    printf("\n### optimal against a plain baseline of the same DP, solve at M = S * 2^k <= "
           "peak/2\n\n");
    printf("The baseline (in this file) fills a double table of n x n x (S+1) for every "
           "budget with the plain loop over s', one thread, as rotor's C code does. Both run in "
           "one fresh process per row; C(1, n, budget) and the curve's steps above M/2 must "
           "agree to 1e-6. remat RSS is taken before the baseline allocates.\n\n");
    printf("| L | slots | baseline (s) | baseline table (MiB) | remat (s) | remat 1 thread (s) | "
           "remat RSS (MiB) | speedup (x) | speedup 1 thread (x) |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    fflush(stdout);
    int rc = 0;
    size_t Lb[3] = {100, 200, 339};
    for (int li = 0; li < (quick ? 1 : 3); li++) {
        int r = run_pair_child(self, Lb[li], 500);
        if (r) rc = r;
    }
    printf("\n### optimal: 1 thread against all %ld cores (curve at the store-all peak, best of "
           "3, one process)\n\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("| L | slots | 1 thread (s) | all cores (s) | ratio (x) |\n");
    printf("| --- | --- | --- | --- | --- |\n");
    fflush(stdout);
    threads_row(339, 500, 3);
    if (!quick) threads_row(339, 1000, 3);
    if (rc) fprintf(stderr, "bench_optimal: *** the baseline and the library DISAGREE ***\n");
    return rc ? 1 : 0;
}
