/* remat info CHAIN: length, store-all peak and time, smallest feasible memory. */
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat info CHAIN [--algorithm A] [--slots S] [options]\n"
    "\n"
    "Summarises a chain: its length, the peak memory and time of storing\n"
    "everything (plain autograd), and the smallest memory limit for which the\n"
    "algorithm (default optimal) finds a schedule. Stages with a fall_overhead of\n"
    "their own, with partial saves (\"options\", written \"Fall i/k\" in schedules)\n"
    "or with stopped-Fall fields (stop_time, stop_saved_bytes, stop_overhead: a\n"
    "Fall i followed by B i) are listed with them.\n"
    "\n"
    "Any valid chain is summarised (exit 0). When no limit remat accepts\n"
    "(below 2^53 bytes) is enough, or the search for the smallest memory is\n"
    "refused (--max-time, --max-work), its line says so instead.\n";

/* " (name)", escaped, when there is a name. */
static void put_name(const char *name) {
    if (!name[0]) return;
    fputs(" (", stdout);
    cli_put_escaped(stdout, name);
    fputc(')', stdout);
}

/* The stages whose Fall has an overhead of its own or that have partial
 * saves (SPEC section 1's optional fields), one line each, with their options. */
static void print_optional_fields(const remat_chain *c) {
    size_t falls = 0, staged = 0, options = 0, stops = 0;
    for (size_t i = 0; i < c->n; i++) {
        const remat_stage *s = &c->stages[i];
        falls += s->has_fall_overhead != 0;
        staged += s->n_options != 0;
        options += s->n_options;
        stops += s->has_stop_time || s->has_stop_saved_bytes || s->has_stop_overhead;
    }
    if (!falls && !staged && !stops) return;
    printf("fall overheads:      %zu stage%s set their own\n", falls, falls == 1 ? "" : "s");
    printf("partial saves:       %zu option%s on %zu stage%s\n", options, options == 1 ? "" : "s",
           staged, staged == 1 ? "" : "s");
    if (stops)
        printf("stopped Falls:       %zu stage%s set their own figures\n", stops,
               stops == 1 ? "" : "s");
    for (size_t i = 0; i < c->n; i++) {
        const remat_stage *s = &c->stages[i];
        int stop = s->has_stop_time || s->has_stop_saved_bytes || s->has_stop_overhead;
        if (!s->has_fall_overhead && !s->n_options && !stop) continue;
        char h[32];
        cli_human_bytes(s->saved_bytes, h);
        printf("  stage %zu", i + 1);
        put_name(s->name);
        printf(": saves %s, backward %.6g", h, s->bwd_time);
        if (s->has_fall_overhead) {
            cli_human_bytes(s->fall_overhead, h);
            printf(", Fall overhead %s", h);
        }
        if (stop) {
            char ov[32];
            cli_human_bytes(s->stop_saved_bytes, h);
            cli_human_bytes(s->stop_overhead, ov);
            printf(", stopped Fall %.6g saving %s, overhead %s", s->stop_time, h, ov);
        }
        printf("\n");
        for (size_t k = 0; k < s->n_options; k++) {
            const remat_stage_option *o = &s->options[k];
            char ov[32];
            cli_human_bytes(o->saved_bytes, h);
            cli_human_bytes(o->fall_overhead, ov);
            printf("    Fall %zu/%zu", i + 1, k + 1);
            put_name(o->name);
            printf(": saves %s, backward %.6g, Fall overhead %s", h, o->bwd_time, ov);
            cli_human_bytes(o->bwd_overhead, ov);
            printf(", backward overhead %s\n", ov);
        }
    }
}

/* "name" with control characters and non-UTF-8 bytes escaped. */
static void put_field(const char *label, const char *text, const char *none) {
    fputs(label, stdout);
    cli_put_escaped(stdout, text[0] ? text : none);
    fputc('\n', stdout);
}

/* The smallest-memory line for the outcome st of remat_min_memory. */
static void put_min_memory(remat_status st, uint64_t minmem, const remat_error *e,
                           const char *alg) {
    char h[32];
    if (st == REMAT_OK) {
        cli_human_bytes(minmem, h);
        printf("smallest memory:     %llu bytes (%s) with %s\n", (unsigned long long)minmem, h,
               alg);
    } else if (st == REMAT_E_INFEASIBLE && e->min_memory) {
        cli_human_bytes(e->min_memory, h);
        printf("smallest memory:     none below 2^53 bytes with %s (it needs %llu bytes, %s)\n",
               alg, (unsigned long long)e->min_memory, h);
    } else if (st == REMAT_E_INFEASIBLE) {
        printf("smallest memory:     none below 2^53 bytes with %s\n", alg);
    } else { /* REMAT_E_TOO_LARGE: the chain is fine, the search too long */
        fputs("smallest memory:     not computed: ", stdout);
        cli_put_escaped(stdout, e->message);
        fputc('\n', stdout);
    }
}

int cmd_info(int argc, char **argv) {
    cli_chain_opts co;
    remat_chain *c = NULL;
    int rc = cli_chain_command(argc, argv, help, NULL, NULL, &co, &c);
    if (rc || !c) return rc;
    uint64_t peak = 0, minmem = 0, acts = c->input_bytes;
    double time = 0;
    remat_error e, me = {0};
    remat_status st = remat_store_all_cost(c, &peak, &time, &e), mst = REMAT_OK;
    if (st == REMAT_OK) {
        cli_progress_start(&co.progress, &co.solve);
        mst = remat_min_memory(c, &co.solve, &minmem, &me);
        cli_progress_end(&co.progress);
    }
    /* a valid chain is always summarised; bad options are still errors */
    if (st == REMAT_OK && mst != REMAT_OK && mst != REMAT_E_INFEASIBLE &&
        mst != REMAT_E_TOO_LARGE) {
        st = mst;
        e = me;
    }
    if (st != REMAT_OK) {
        remat_chain_free(c);
        return cli_report(st, &e);
    }
    for (size_t i = 0; i < c->n; i++) acts += c->stages[i].saved_bytes;
    char h1[32], h3[32];
    cli_human_bytes(peak, h1);
    cli_human_bytes(acts, h3);
    put_field("chain:               ", c->name, "(unnamed)");
    printf("stages:              %zu (L = %zu plus the loss)\n", c->n, c->n - 1);
    put_field("time unit:           ", c->time_unit, "(unspecified)");
    printf("saved activations:   %llu bytes (%s)\n", (unsigned long long)acts, h3);
    printf("store-all peak:      %llu bytes (%s)\n", (unsigned long long)peak, h1);
    printf("store-all time:      %.6g\n", time);
    put_min_memory(mst, minmem, &me, remat_algorithm_name(co.solve.algorithm));
    print_optional_fields(c);
    remat_chain_free(c);
    return CLI_OK;
}
