/* Options shared by solve, curve and info. */
#ifndef REMAT_CLI_COMMON_H
#define REMAT_CLI_COMMON_H

#include "cli.h"

/* The progress line (cli_progress.c): mode 1 --progress, -1 --quiet, 0 on a
 * terminal for steps that take more than about 2 s. */
typedef struct cli_progress {
    int mode, tty, shown, last_pct;
    double start, last_print;
    char last_what[64];
} cli_progress;

typedef struct cli_chain_opts {
    remat_solve_options solve;
    cli_progress progress;
    int have_memory;
    int have_bandwidth;
    const char *bandwidth_text;
    const char *output;
} cli_chain_opts;

/* Consumes argv[*i] if it is a chain option: returns 0 (ok), 2 (bad value, reported)
 * or -1 (not a chain option). */
int cli_chain_option(int argc, char **argv, int *i, cli_chain_opts *co);
/* A command's own option parser: like cli_chain_option, -1 when not its option. */
typedef int (*cli_extra_opt)(int argc, char **argv, int *i, void *ctx);
/* Parses "remat CMD CHAIN [options]" (argv[0] is CMD): --help, the chain options
 * and `extra` (may be NULL); then loads the chain. Returns an exit code; on 0
 * *chain is the loaded chain (free it), or NULL when --help was printed. */
int cli_chain_command(int argc, char **argv, const char *help, cli_extra_opt extra, void *ctx,
                      cli_chain_opts *co, remat_chain **chain);
/* The algorithms with a line each, from the library (after a command's help). */
void cli_print_algorithms(FILE *f);
/* Parses what needs the chain ("--bandwidth SIZE/s" uses its time unit). */
int cli_chain_opts_finish(cli_chain_opts *co, const remat_chain *c);
int cli_parse_bandwidth(const char *text, const remat_chain *c, double *out);
int cli_load_chain(const char *path, remat_chain **out);
/* Reports an infeasible solve with the smallest memory that would work; returns 1. */
int cli_report_infeasible(const remat_error *e, const remat_solve_options *o);
void cli_human_bytes(uint64_t b, char out[32]);
/* Points o's progress callback at p (p->mode set by the options); end()
 * closes the line with a newline if one was printed. */
void cli_progress_start(cli_progress *p, remat_solve_options *o);
void cli_progress_end(cli_progress *p);

#define CLI_SOLVER_OPTIONS_HELP                                                              \
    "  -a, --algorithm A    one of the algorithms listed below (default optimal)\n"        \
    "  --slots S            optimal: at least S memory slots (default 500; the slot is\n"  \
    "                       the largest power of two <= M/S); 0 = exact bytes\n"           \
    "  --segments K         sequential: K segments (default: the best K that fits)\n"       \
    "  --bucket SIZE        revolve: memory bucket size (default memory/500)\n"             \
    "  --revolve-mode MODE  revolve: precise (default), uniform-cost, uniform-memory\n"     \
    "  --no-del             exact: forbid Del (search persistent-like schedules)\n"         \
    "  -b, --bandwidth B    host link, bytes per time unit or SIZE/s (e.g. 12GB/s);\n"      \
    "                       for the offload algorithms (marked below), which need it;\n" \
    "                       pofo takes 0: no link, which gives optimal's schedule\n"      \
    "  --values N           pofo: memory values of the DP (default 50)\n"                   \
    "  --threads T          worker threads, 0..1024 (default 0: all cores); at most 64\n"  \
    "                       run, and estimates count no more than the cores\n"            \
    "  --max-work SIZE      cap on solver tables (default 8GiB); an optimal solve over\n"   \
    "                       it narrows its table by bounds (same schedule, slower)\n"      \
    "  --max-time SECONDS   refuse work estimated to take longer (default 60; 0 = no\n"    \
    "                       limit); the refusal gives the estimate\n"                      \
    "  --progress           show the progress line on stderr even when it is not a\n"      \
    "                       terminal (by default: on a terminal, for steps over ~2 s)\n"   \
    "  --quiet              no progress line\n"

#endif
