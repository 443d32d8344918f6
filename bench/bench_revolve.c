/* bench_revolve: the thesis' precise-cost AD-model solver on DenseNet-121's
 * chain (examples/densenet121-thesis.json), 8 GiB budget, against the bucket
 * size (the thesis' figure 4.2 took 26 minutes at 1 MB buckets) and the
 * uniform-cost / uniform-memory ablations. Prints a markdown table.
 * Usage: bench_revolve [--quick] [CHAIN.json]. Falls back to a random
 * 120-stage chain with realistic sizes when the file cannot be loaded. */
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

int main(int argc, char **argv) {
    int quick = 0;
    const char *path = "examples/densenet121-thesis.json";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0)
            quick = 1;
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
    printf("\nbuckets: the budget beside the input; table: cost entries stored; DP cells: "
           "(i, j, k, m) candidates. time: the schedule's simulated time (store-all: %.1f). "
           "Threads: all online cores; solve s is wall-clock on a shared machine.\n", store_time);
    remat_chain_free(c);
    return bad;
}
