/* remat info CHAIN: length, store-all peak and time, smallest feasible memory. */
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat info CHAIN [--algorithm A] [--slots S]\n"
    "\n"
    "Summarises a chain: its length, the peak memory and time of storing\n"
    "everything (plain autograd), and the smallest memory limit for which the\n"
    "algorithm (default optimal) finds a schedule. Stages with a fall_overhead of\n"
    "their own or with partial saves (\"options\", written \"Fall i/k\" in schedules)\n"
    "are listed with them.\n";

/* The stages whose Fall has an overhead of its own or that have partial
 * saves (SPEC section 1's optional fields), one line each, with their options. */
static void print_optional_fields(const remat_chain *c) {
    size_t falls = 0, staged = 0, options = 0;
    for (size_t i = 0; i < c->n; i++) {
        falls += c->stages[i].has_fall_overhead != 0;
        staged += c->stages[i].n_options != 0;
        options += c->stages[i].n_options;
    }
    if (!falls && !staged) return;
    printf("fall overheads:      %zu stage%s set their own\n", falls, falls == 1 ? "" : "s");
    printf("partial saves:       %zu option%s on %zu stage%s\n", options, options == 1 ? "" : "s",
           staged, staged == 1 ? "" : "s");
    for (size_t i = 0; i < c->n; i++) {
        const remat_stage *s = &c->stages[i];
        if (!s->has_fall_overhead && !s->n_options) continue;
        char h[32];
        cli_human_bytes(s->saved_bytes, h);
        printf("  stage %zu%s%s%s: saves %s, backward %.6g", i + 1, s->name[0] ? " (" : "",
               s->name, s->name[0] ? ")" : "", h, s->bwd_time);
        if (s->has_fall_overhead) {
            cli_human_bytes(s->fall_overhead, h);
            printf(", Fall overhead %s", h);
        }
        printf("\n");
        for (size_t k = 0; k < s->n_options; k++) {
            const remat_stage_option *o = &s->options[k];
            char ov[32];
            cli_human_bytes(o->saved_bytes, h);
            cli_human_bytes(o->fall_overhead, ov);
            printf("    Fall %zu/%zu%s%s%s: saves %s, backward %.6g, Fall overhead %s", i + 1, k + 1,
                   o->name[0] ? " (" : "", o->name, o->name[0] ? ")" : "", h, o->bwd_time, ov);
            cli_human_bytes(o->bwd_overhead, ov);
            printf(", backward overhead %s\n", ov);
        }
    }
}

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
    print_optional_fields(c);
    remat_chain_free(c);
    return CLI_OK;
}
