/* remat info CHAIN: length, store-all peak and time, smallest feasible memory. */
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat info CHAIN [--algorithm A] [--slots S]\n"
    "\n"
    "Summarises a chain: its length, the peak memory and time of storing\n"
    "everything (plain autograd), and the smallest memory limit for which the\n"
    "algorithm (default optimal) finds a schedule.\n";

int cmd_info(int argc, char **argv) {
    cli_chain_opts co;
    remat_chain *c = NULL;
    int rc = cli_chain_command(argc, argv, help, NULL, NULL, &co, &c);
    if (rc || !c) return rc;
    uint64_t peak = 0, minmem = 0, acts = c->input_bytes;
    double time = 0;
    remat_error e;
    remat_status st = remat_store_all_cost(c, &peak, &time, &e);
    cli_progress_start(&co.progress, &co.solve);
    if (st == REMAT_OK) st = remat_min_memory(c, &co.solve, &minmem, &e);
    cli_progress_end(&co.progress);
    if (st != REMAT_OK) {
        remat_chain_free(c);
        return cli_report(st, &e);
    }
    for (size_t i = 0; i < c->n; i++) acts += c->stages[i].saved_bytes;
    char h1[32], h2[32], h3[32];
    cli_human_bytes(peak, h1);
    cli_human_bytes(minmem, h2);
    cli_human_bytes(acts, h3);
    printf("chain:               %s\n", c->name[0] ? c->name : "(unnamed)");
    printf("stages:              %zu (L = %zu plus the loss)\n", c->n, c->n - 1);
    printf("time unit:           %s\n", c->time_unit[0] ? c->time_unit : "(unspecified)");
    printf("saved activations:   %llu bytes (%s)\n", (unsigned long long)acts, h3);
    printf("store-all peak:      %llu bytes (%s)\n", (unsigned long long)peak, h1);
    printf("store-all time:      %.6g\n", time);
    printf("smallest memory:     %llu bytes (%s) with %s\n", (unsigned long long)minmem, h2,
           remat_algorithm_name(co.solve.algorithm));
    remat_chain_free(c);
    return CLI_OK;
}
