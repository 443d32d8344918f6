/* Join solver timings: the Theorem 3 table for every memory from c_min to
 * full storage, then the optimal schedule for each of those memories, each
 * checked by the join simulator. Prints a markdown table.
 * Targets: SNN (30, 30, 30) in <= 2 s, CM (15, 75) in <= 1 s.
 * `--quick` runs smaller cases. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "remat/join.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct bench_case {
    const char *name;
    size_t k;
    uint32_t lengths[4];
    double target_s; /* 0: no target */
} bench_case;

/* Returns 0 when every schedule was valid. */
static int run_case(const bench_case *bc) {
    remat_join_problem p;
    remat_error e;
    if (remat_join_problem_set(&p, bc->k, bc->lengths, 1, 1, 1, 0, &e) != REMAT_OK) {
        fprintf(stderr, "%s: %s\n", bc->name, e.message);
        return 1;
    }
    uint64_t lo = remat_join_min_slots(&p), hi = remat_join_full_slots(&p);
    double t0 = now();
    remat_join_plan *pl = NULL;
    if (remat_join_plan_create(&p, NULL, 0, NULL, &pl, &e) != REMAT_OK) {
        fprintf(stderr, "%s: %s\n", bc->name, e.message);
        return 1;
    }
    double t1 = now();
    size_t ops = 0;
    int bad = 0;
    for (uint64_t c = lo; c <= hi && !bad; c++) {
        remat_join_schedule *s = NULL;
        remat_join_sim_result *r = NULL;
        bad = remat_join_plan_schedule(pl, c, &s, &e) != REMAT_OK ||
              remat_join_simulate(&p, s->ops, s->n_ops, c, &r, &e) != REMAT_OK || !r->valid ||
              r->time != remat_join_plan_makespan(pl, c);
        remat_join_sim_result_free(r);
        if (s) ops += s->n_ops;
        remat_join_schedule_free(s);
    }
    double t2 = now(), span = remat_join_span_star(&p);
    double half = remat_join_plan_makespan(pl, hi / 2 > lo ? hi / 2 : lo);
    remat_join_plan_free(pl);
    char target[48] = "-";
    if (bc->target_s > 0)
        snprintf(target, sizeof target, "<= %.0f s: %s", bc->target_s,
                 t2 - t0 <= bc->target_s ? "met" : "MISSED");
    printf("| %s | %llu..%llu | %.3f | %.3f | %zu | %.3f | %.3f | %s |\n", bc->name,
           (unsigned long long)lo, (unsigned long long)hi, t1 - t0, t2 - t1, ops, t2 - t0,
           half / span, target);
    if (bad) fprintf(stderr, "%s: a schedule failed the simulator\n", bc->name);
    return bad;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    static const bench_case full[] = {
        {"toy (4, 10, 12)", 3, {4, 10, 12}, 0},
        {"CM (15, 75)", 2, {15, 75}, 1},
        {"RNN (90)", 1, {90}, 0},
        {"SNN (30, 30, 30)", 3, {30, 30, 30}, 2},
        {"4 branches (10, 10, 10, 10)", 4, {10, 10, 10, 10}, 0},
    };
    static const bench_case small[] = {
        {"toy (4, 10, 12)", 3, {4, 10, 12}, 0},
        {"CM (5, 25)", 2, {5, 25}, 0},
        {"SNN (10, 10, 10)", 3, {10, 10, 10}, 0},
    };
    const bench_case *cases = quick ? small : full;
    size_t n = quick ? sizeof small / sizeof small[0] : sizeof full / sizeof full[0];
    printf("### remat join: every memory from c_min to full storage (unit costs)\n\n");
    printf("| problem | slots | table (s) | all schedules + simulation (s) | ops | total (s) "
           "| makespan/Span* at half memory | target |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= run_case(&cases[i]);
    return bad;
}
