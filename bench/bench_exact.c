/* bench_exact: how long the exact search takes for n = 4..12 stages, and how
 * much the persistence restriction of optimal costs against the true optimum.
 * Prints markdown tables. `--quick`: fewer chains and n <= 8. Timings are wall
 * clock on whatever else the machine is doing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remat/remat.h"

static uint64_t rng_state = 12345;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t range(uint64_t lo, uint64_t hi) { return lo + rnd() % (hi - lo + 1); }

/* Sizes in [1, 100] (abar up to 3x), times in [0.1, 10], small overheads. */
static remat_chain *random_chain(size_t n) {
    remat_stage st[16];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        st[i].fwd_time = 0.1 + (double)range(0, 990) / 100;
        st[i].bwd_time = 0.1 + (double)range(0, 1990) / 100;
        st[i].out_bytes = range(1, 100);
        st[i].saved_bytes = st[i].out_bytes + range(0, 200);
        st[i].grad_bytes = st[i].out_bytes;
        st[i].fwd_overhead = range(0, 20);
        st[i].bwd_overhead = range(0, 20);
    }
    remat_chain *c = NULL;
    uint64_t in = range(1, 100);
    if (remat_chain_create("bench", in, in, st, n, &c, NULL) != REMAT_OK) exit(1);
    return c;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Solves; returns the time of the schedule or NAN when none, and the wall time. */
static double solve(const remat_chain *c, remat_algorithm alg, uint64_t m, int no_del,
                    double *secs, uint64_t *min_memory) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = alg;
    o.memory = m;
    o.slots = 0;
    o.exact_no_del = no_del;
    remat_schedule *s = NULL;
    remat_error e;
    double t0 = now();
    remat_status st = remat_solve(c, &o, &s, &e);
    if (secs) *secs = now() - t0;
    if (min_memory) *min_memory = st == REMAT_E_INFEASIBLE ? e.min_memory : 0;
    double t = st == REMAT_OK ? s->time : NAN;
    remat_schedule_free(s);
    return t;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Limit a fraction of the way from the exact min memory to the store-all peak. */
static uint64_t limit_at(const remat_chain *c, double frac) {
    uint64_t peak, need = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    solve(c, REMAT_ALG_EXACT, c->input_bytes, 0, NULL, &need);
    if (need == 0) need = c->input_bytes; /* fits even there */
    return need + (uint64_t)((double)(peak - need) * frac);
}

static void timing_table(int quick) {
    size_t max_n = quick ? 8 : 12;
    int reps = quick ? 3 : 5;
    printf("Exact search time (median of %d random chains, ms), by stages n and memory limit\n"
           "(fraction of the way from the smallest feasible limit to the store-all peak):\n\n",
           reps);
    printf("| n | states | limit 0.1 | limit 0.5 | limit 0.9 |\n|---|---|---|---|---|\n");
    static const double fracs[] = {0.1, 0.5, 0.9};
    for (size_t n = 4; n <= max_n; n++) {
        double states = (pow(3, (double)n + 2) - 3) / 2;
        printf("| %zu | %.0f |", n, states);
        for (size_t f = 0; f < 3; f++) {
            double ms[16];
            for (int r = 0; r < reps; r++) {
                remat_chain *c = random_chain(n);
                solve(c, REMAT_ALG_EXACT, limit_at(c, fracs[f]), 0, &ms[r], NULL);
                ms[r] *= 1000;
                remat_chain_free(c);
            }
            qsort(ms, (size_t)reps, sizeof *ms, cmp_dbl);
            printf(" %.2f |", ms[reps / 2]);
        }
        printf("\n");
    }
}

static void gap_table(int quick) {
    int chains = quick ? 20 : 100;
    printf("\nThe cost of persistence: optimal (exact bytes) against exact, over %d random "
           "chains per n, limits uniform between the smallest feasible and the store-all "
           "peak. Gap = (optimal - exact) / exact; no-Del gap = (optimal - exact without Del) / "
           "exact without Del; \"only exact fits\": the limit is below what any persistent "
           "schedule needs.\n\n",
           chains);
    printf("| n | mean gap | max gap | chains with a gap | no-Del gap (mean) | only exact fits | "
           "optimal errors |\n|---|---|---|---|---|---|---|\n");
    for (size_t n = 3; n <= (quick ? 6 : 8); n++) {
        double sum = 0, mx = 0, sum_nd = 0;
        int with_gap = 0, counted = 0, opt_infeasible = 0, opt_error = 0, unavailable = 0;
        for (int k = 0; k < chains; k++) {
            remat_chain *c = random_chain(n);
            uint64_t m = limit_at(c, (double)range(0, 1000) / 1000);
            double ex = solve(c, REMAT_ALG_EXACT, m, 0, NULL, NULL);
            double nd = solve(c, REMAT_ALG_EXACT, m, 1, NULL, NULL);
            remat_solve_options o;
            remat_solve_options_init(&o);
            o.algorithm = REMAT_ALG_OPTIMAL;
            o.memory = m;
            o.slots = 0;
            remat_schedule *s = NULL;
            remat_error e;
            remat_status st = remat_solve(c, &o, &s, &e);
            if (st == REMAT_E_INPUT && strstr(e.message, "not implemented")) unavailable = 1;
            if (st == REMAT_OK && !isnan(ex)) {
                double g = (s->time - ex) / ex;
                sum += g;
                if (g > mx) mx = g;
                with_gap += g > 1e-9;
                if (!isnan(nd)) sum_nd += (s->time - nd) / nd;
                counted++;
            } else if (!isnan(ex)) {
                if (st == REMAT_E_INFEASIBLE) opt_infeasible++;
                else if (!unavailable) opt_error++;
            }
            remat_schedule_free(s);
            remat_chain_free(c);
        }
        if (unavailable) {
            printf("| %zu | (optimal not available) | | | | | |\n", n);
            continue;
        }
        printf("| %zu | %.3f%% | %.2f%% | %d / %d | %.3f%% | %d | %d |\n", n,
               counted ? 100 * sum / counted : 0, 100 * mx, with_gap, counted,
               counted ? 100 * sum_nd / counted : 0, opt_infeasible, opt_error);
    }
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    timing_table(quick);
    gap_table(quick);
    return 0;
}
