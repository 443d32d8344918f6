/* bench_pofo: how long pofo (N = 50 memory values) takes, against the
 * paper's "below 4 minutes in the worst case" and this project's targets
 * (<= 5 s for L ~ 100, <= 60 s for L ~ 340), with the times it reaches next
 * to optimal (rematerialization only) and the offload baselines.
 * Memory: alpha = 0.2 between M_low (optimal's smallest memory) and M_high
 * (store-all peak); link 12 GB/s. Prints a markdown table. `--quick` skips
 * the L ~ 340 chain and the heuristics on long chains; a further argument
 * runs only the chains whose name contains it. Timings are wall
 * clock on a shared machine: treat them as rough. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "remat/remat.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 2021;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A ResNet-like synthetic chain of n stages: times in ms, sizes in bytes. */
static remat_chain *synthetic(size_t n) {
    remat_stage *st = calloc(n, sizeof *st);
    if (!st) exit(1);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        uint64_t mb = 20 + rnd() % 200;
        st[i].fwd_time = 1 + (double)(rnd() % 400) / 100;
        st[i].bwd_time = 2 * st[i].fwd_time;
        st[i].out_bytes = mb << 20;
        st[i].saved_bytes = st[i].out_bytes * (1 + rnd() % 3);
        st[i].grad_bytes = st[i].out_bytes;
        st[i].fwd_overhead = (rnd() % 32) << 20;
        st[i].bwd_overhead = (rnd() % 64) << 20;
    }
    st[n - 1].out_bytes = 4;
    st[n - 1].saved_bytes = 4096;
    remat_chain *c = NULL;
    if (remat_chain_create("synthetic", 48u << 20, 48u << 20, st, n, &c, NULL) != REMAT_OK) exit(1);
    free(st);
    return c;
}

typedef struct run {
    int ok;
    double solve_s, predicted, simulated;
} run;

static run solve(const remat_chain *c, remat_algorithm a, uint64_t m, double bw) {
    run r = {0, 0, 0, 0};
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = a;
    o.memory = m;
    o.bandwidth = bw;
    remat_schedule *s = NULL;
    remat_error e;
    double t0 = now();
    remat_status st = remat_solve(c, &o, &s, &e);
    r.solve_s = now() - t0;
    if (st != REMAT_OK) return r;
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    remat_sim_result *res = NULL;
    if (remat_simulate(c, s, &so, &res, NULL) == REMAT_OK && res->valid) {
        r.ok = 1;
        r.predicted = s->time;
        r.simulated = res->time;
    }
    remat_sim_result_free(res);
    remat_schedule_free(s);
    return r;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const char *only = argc > 1 + quick ? argv[1 + quick] : NULL; /* chains named like this */
    printf("pofo with N = 50, alpha = 0.2, 12 GB/s; times are relative to store-all "
           "(the sequential time).\n\n");
    printf("| chain | L | memory MiB | pofo solve s | optimal | pofo predicted | pofo simulated "
           "| offload-only simulated | autocapper simulated |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    const char *files[] = {"examples/resnet50-b16-500.json", "examples/resnet101-b16-500.json",
                           "examples/inception3-b16-500.json",
                           "examples/densenet121-b16-500.json",
                           "examples/resnet1001-like.json"};
    size_t nf = sizeof files / sizeof *files;
    for (size_t k = 0; k < nf + 1; k++) {
        remat_chain *c = NULL;
        const char *name;
        if (k == 3) {
            c = synthetic(101);
            name = "synthetic-100";
        } else {
            size_t f = k < 3 ? k : k - 1;
            name = files[f];
            if (quick && f == nf - 1) continue;
            if (remat_chain_load(name, &c, NULL) != REMAT_OK) {
                printf("| %s | (not found: run from the repository root) |\n", name);
                continue;
            }
            if (strrchr(name, '/')) name = strrchr(name, '/') + 1;
        }
        if (only && !strstr(name, only)) {
            remat_chain_free(c);
            continue;
        }
        uint64_t high, low;
        double t_all;
        remat_store_all_cost(c, &high, &t_all, NULL);
        remat_solve_options o;
        remat_solve_options_init(&o);
        if (remat_min_memory(c, &o, &low, NULL) != REMAT_OK) low = high / 4;
        uint64_t m = low + (uint64_t)(0.2 * (double)(high - low));
        double bw = 12e6; /* 12 GB/s in bytes per ms */
        int heur = !(quick && c->n > 100);
        run opt = solve(c, REMAT_ALG_OPTIMAL, m, 0);
        run pf = solve(c, REMAT_ALG_POFO, m, bw);
        run oo = solve(c, REMAT_ALG_OFFLOAD_ONLY, m, bw);
        run ac = heur ? solve(c, REMAT_ALG_AUTOCAPPER, m, bw) : (run){0, 0, 0, 0};
        printf("| %s | %zu | %.0f | %.2f | %.4f | %.4f | %.4f |", name, c->n - 1,
               (double)m / (1 << 20), pf.solve_s, opt.ok ? opt.simulated / t_all : NAN,
               pf.ok ? pf.predicted / t_all : NAN, pf.ok ? pf.simulated / t_all : NAN);
        if (oo.ok) printf(" %.4f |", oo.simulated / t_all); else printf(" infeasible |");
        if (!heur) printf(" skipped |\n");
        else if (ac.ok) printf(" %.4f |\n", ac.simulated / t_all);
        else printf(" infeasible |\n");
        fflush(stdout);
        remat_chain_free(c);
    }
    printf("\nTargets: L ~ 100 within 5 s, L ~ 340 within 60 s (the paper: < 4 min worst case).\n");
    return 0;
}
