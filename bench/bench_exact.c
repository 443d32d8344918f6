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

/* c with k partial saves per stage, as the PyTorch front-end would measure
 * them: "matmul outputs" keeps half of what the full save adds to a[i] and
 * recomputes a third of the forward in the backward; "input only" keeps
 * a[i] and recomputes the whole forward. */
static remat_chain *with_options(const remat_chain *c, size_t k) {
    remat_stage st[16];
    remat_stage_option opts[16][2];
    memset(opts, 0, sizeof opts);
    for (size_t i = 0; i < c->n; i++) {
        st[i] = c->stages[i];
        remat_stage_option *o = opts[i];
        snprintf(o[0].name, sizeof o[0].name, "matmul outputs");
        o[0].saved_bytes = st[i].out_bytes + (st[i].saved_bytes - st[i].out_bytes) / 2;
        o[0].bwd_time = st[i].bwd_time + st[i].fwd_time / 3;
        snprintf(o[1].name, sizeof o[1].name, "input only");
        o[1].saved_bytes = st[i].out_bytes;
        o[1].bwd_time = st[i].bwd_time + st[i].fwd_time;
        o[1].bwd_overhead = st[i].fwd_overhead;
        st[i].options = o;
        st[i].n_options = k;
    }
    remat_chain *x = NULL;
    if (remat_chain_create("bench", c->input_bytes, c->input_grad_bytes, st, c->n, &x, NULL) !=
        REMAT_OK)
        exit(1);
    return x;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return v[n / 2];
}

static void options_table(int quick) {
    int reps = quick ? 3 : 9;
    printf("\nPartial saves: exact on the same chains without options, with one (\"matmul "
           "outputs\") and with two (and \"input only\") per stage; the limit 0.3 of the way "
           "from the chain's smallest feasible limit (without options) to its store-all peak. "
           "Median of %d chains: search time (ms); time gained at that limit and smallest "
           "limit lowered, by two options against none.\n\n",
           reps);
    printf("| n | states, 2 options | ms, none | ms, 1 | ms, 2 | time gained | smallest limit "
           "lowered |\n|---|---|---|---|---|---|---|\n");
    for (size_t n = 4; n <= (quick ? 7 : 9); n++) {
        double ms[3][16], gain[16], lower[16];
        for (int r = 0; r < reps; r++) {
            remat_chain *c[3];
            c[0] = random_chain(n);
            c[1] = with_options(c[0], 1);
            c[2] = with_options(c[0], 2);
            uint64_t m = limit_at(c[0], 0.3), need[3] = {0, 0, 0};
            double t[3];
            for (int k = 0; k < 3; k++) {
                t[k] = solve(c[k], REMAT_ALG_EXACT, m, 0, &ms[k][r], NULL);
                ms[k][r] *= 1000;
                solve(c[k], REMAT_ALG_EXACT, c[k]->input_bytes, 0, NULL, &need[k]);
            }
            gain[r] = (t[0] - t[2]) / t[0];
            lower[r] = need[0] ? (double)(need[0] - need[2]) / (double)need[0] : 0;
            for (int k = 0; k < 3; k++) remat_chain_free(c[k]);
        }
        double states = 0, w = 3;
        for (size_t b = 0; b <= n; b++, w *= 5) states += w;
        printf("| %zu | %.0f | %.2f | %.2f | %.2f | %.1f%% | %.1f%% |\n", n, states,
               median(ms[0], reps), median(ms[1], reps), median(ms[2], reps),
               100 * median(gain, reps), 100 * median(lower, reps));
    }
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    timing_table(quick);
    gap_table(quick);
    options_table(quick);
    return 0;
}
