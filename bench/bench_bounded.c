/* Bounded time (docs/bounded.md): the targets of issue 13, timed through the
 * public API on this machine and printed as a markdown table.
 *
 *   bench_bounded           all rows
 *   bench_bounded --quick   skips the curves of pofo and offload-only
 *   bench_bounded --solves  the solves of every algorithm (below) only
 *
 * - the smallest memory (remat info) of a random 5000-stage chain: <= 2 s;
 * - a solve of a random 2000-stage chain at S = 500, half its peak: <= 30 s,
 *   or a refusal in <= 1 s;
 * - a solve by every algorithm (revolve also with 1-byte buckets) of random
 *   2000- and 5000-stage chains at half their peak: <= 60 s, or a refusal
 *   in <= 1 s (issue 23);
 * - the curve of every algorithm on examples/resnet101-b16-500.json, with the
 *   default points and with 1000000 points: <= 60 s (or a refusal). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "remat/remat.h"

#include "bench_chain.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static const char *verdict(remat_status st, double secs, double limit, double refuse_limit) {
    if (st == REMAT_OK) return secs <= limit ? "met" : "MISSED";
    if (st == REMAT_E_TOO_LARGE) return secs <= refuse_limit ? "met (refused)" : "MISSED (slow refusal)";
    if (st == REMAT_E_INFEASIBLE) return secs <= refuse_limit ? "met (infeasible)" : "MISSED (slow answer)";
    return "error";
}

/* One solve in a child process, stopped after `cap` seconds so that a
 * solver that overruns its limit cannot hold the benchmark: the status and
 * message come back through a pipe; -1 when it was stopped. */
typedef struct capped {
    int status;
    double secs;
    char message[REMAT_MESSAGE_MAX];
} capped;

static void solve_capped(const remat_chain *c, const remat_solve_options *o, double cap,
                         capped *out) {
    int fd[2];
    memset(out, 0, sizeof *out);
    out->status = -1;
    fflush(stdout);
    double t0 = now();
    if (pipe(fd) != 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        remat_schedule *s = NULL;
        remat_error e;
        capped r = {(int)remat_solve(c, o, &s, &e), 0, ""};
        if (r.status != REMAT_OK) snprintf(r.message, sizeof r.message, "%s", e.message);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    struct timespec tick = {0, 20000000};
    while (pid > 0 && waitpid(pid, NULL, WNOHANG) == 0 && now() - t0 < cap) nanosleep(&tick, NULL);
    out->secs = now() - t0;
    if (pid > 0 && kill(pid, 0) == 0 && now() - t0 >= cap) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    } else if (read(fd[0], out, sizeof *out) == (ssize_t)sizeof *out) {
        out->secs = now() - t0;
    } else {
        out->status = -1;
    }
    close(fd[0]);
}

/* Every algorithm on one long random chain at half its peak, default
 * options (a 12 GB/s link for the offload ones); revolve also with 1-byte
 * buckets, the issue-23 case that once ran for minutes. A solve still
 * running after `cap` seconds is stopped and reported as missed. */
static void every_algorithm(size_t L, double cap) {
    remat_chain *c = random_chain(L, 7 * L);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    for (int a = 0; a <= REMAT_ALG_COUNT_; a++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = a < REMAT_ALG_COUNT_ ? (remat_algorithm)a : REMAT_ALG_REVOLVE;
        if (a == REMAT_ALG_COUNT_) o.bucket_bytes = 1;
        o.memory = peak / 2;
        o.bandwidth = 12e9 * 1e-3; /* 12 GB/s in bytes per ms */
        capped r;
        solve_capped(c, &o, cap, &r);
        const char *v = r.status < 0 ? "MISSED (stopped)"
                                     : verdict((remat_status)r.status, r.secs, 60, 1);
        printf("| solve %s%s, random %zu stages, half the peak | %s | %.2f | <= 60 s or "
               "answered in <= 1 s | %s |\n",
               remat_algorithm_name(o.algorithm), o.bucket_bytes ? " --bucket 1" : "", L + 1,
               r.status < 0 ? "still running" : remat_status_name((remat_status)r.status),
               r.secs, v);
        if (r.status > 0) printf("|   (%.200s) | | | | |\n", r.message);
        if (r.status < 0) printf("|   (stopped after %.0f s) | | | | |\n", cap);
        fflush(stdout);
    }
    remat_chain_free(c);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int solves_only = argc > 1 && strcmp(argv[1], "--solves") == 0;
    FILE *la = fopen("/proc/loadavg", "r");
    char load[64] = "?";
    if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = '\0';
    if (la) fclose(la);
    printf("Load average before: %s\n\n", load);
    printf("| what | status | seconds | target | verdict |\n| --- | --- | --- | --- | --- |\n");
    if (solves_only) {
        every_algorithm(1999, 300);
        every_algorithm(4999, 300);
        la = fopen("/proc/loadavg", "r");
        if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = '\0';
        if (la) fclose(la);
        printf("\nLoad average after: %s\n", load);
        return 0;
    }

    remat_chain *c = random_chain(4999, 5000);
    remat_solve_options o;
    remat_solve_options_init(&o);
    uint64_t mm = 0;
    remat_error e;
    double t0 = now();
    remat_status st = remat_min_memory(c, &o, &mm, &e);
    double t = now() - t0;
    printf("| smallest memory (remat info), random 5000 stages | %s | %.2f | <= 2 s | %s |\n",
           remat_status_name(st), t, verdict(st, t, 2, 2));
    remat_chain_free(c);

    c = random_chain(1999, 2000);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    o.memory = peak / 2;
    remat_schedule *s = NULL;
    t0 = now();
    st = remat_solve(c, &o, &s, &e);
    t = now() - t0;
    printf("| solve, random 2000 stages, S = 500, half the peak | %s | %.2f | <= 30 s or refused in <= 1 s | %s |\n",
           remat_status_name(st), t, verdict(st, t, 30, 1));
    if (st == REMAT_E_TOO_LARGE) printf("|   (%s) | | | | |\n", e.message);
    remat_schedule_free(s);
    remat_chain_free(c);

    every_algorithm(1999, 300);
    every_algorithm(4999, 300);

    c = NULL;
    if (remat_chain_load("examples/resnet101-b16-500.json", &c, &e) != REMAT_OK) {
        fprintf(stderr, "bench_bounded: %s\n", e.message);
        return 1;
    }
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        if (quick && (a == REMAT_ALG_POFO || a == REMAT_ALG_OFFLOAD_ONLY)) continue;
        size_t points[2] = {0, 1000000};
        for (int k = 0; k < 2; k++) {
            remat_solve_options_init(&o);
            o.algorithm = (remat_algorithm)a;
            o.bandwidth = 12e9 * 1e-3; /* 12 GB/s in bytes per ms */
            remat_curve *cv = NULL;
            t0 = now();
            st = remat_curve_compute(c, &o, points[k], &cv, &e);
            t = now() - t0;
            printf("| curve %s, resnet101-b16-500, points %s | %s | %.2f | <= 60 s | %s |\n",
                   remat_algorithm_name(o.algorithm), k ? "1000000" : "default",
                   st == REMAT_OK ? "ok" : remat_status_name(st), t, verdict(st, t, 60, 60));
            if (st == REMAT_OK) printf("|   (%zu points) | | | | |\n", cv->n);
            remat_curve_free(cv);
        }
    }
    remat_chain_free(c);
    la = fopen("/proc/loadavg", "r");
    if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = '\0';
    if (la) fclose(la);
    printf("\nLoad average after: %s\n", load);
    return 0;
}
