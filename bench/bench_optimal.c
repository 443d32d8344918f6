/* Benchmark of the optimal solver: time and peak RSS of the full table for
 * random chains of L stages at S slots. Each configuration runs in a fresh
 * child process (this binary re-executed with --one) so its peak RSS is its
 * own. Prints a markdown table.
 *
 *   bench_optimal            L = 100, 200, 339, 1000 at S = 500 and 1000
 *                            (the solve at half the peak is skipped for L = 1000)
 *   bench_optimal --quick    L = 100, 200, 339 at S = 500
 *   bench_optimal --one L S  one configuration (used by the parent) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "remat/remat.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* A chain of L stages plus a loss, sizes of a few MB to 100 MB like a CNN. */
static remat_chain *random_chain(size_t L, uint64_t seed) {
    size_t n = L + 1;
    remat_stage *st = calloc(n, sizeof *st);
    if (!st) return NULL;
    for (size_t i = 0; i < n; i++) {
        remat_stage *s = &st[i];
        snprintf(s->name, sizeof s->name, "layer%zu", i + 1);
        s->fwd_time = 0.1 + 5 * unit(&seed);
        s->bwd_time = s->fwd_time * (1 + 2 * unit(&seed));
        s->out_bytes = (uint64_t)(1e6 + 99e6 * unit(&seed));
        s->saved_bytes = s->out_bytes + (uint64_t)(2 * s->out_bytes * unit(&seed));
        s->grad_bytes = s->out_bytes;
        s->fwd_overhead = (uint64_t)(1e7 * unit(&seed));
        s->bwd_overhead = (uint64_t)(2e7 * unit(&seed));
    }
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("bench", 50000000, 50000000, st, n, &c, &e) != REMAT_OK)
        fprintf(stderr, "bench_optimal: %s\n", e.message);
    free(st);
    return c;
}

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

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--one") == 0)
        return run_one((size_t)strtoul(argv[2], NULL, 10), strtoll(argv[3], NULL, 10));
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
    return 0;
}
