/* remat solve CHAIN --memory M [options] [-o FILE] */
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat solve CHAIN --memory M [options] [-o FILE]\n"
    "\n"
    "Writes the schedule (remat-schedule-1 JSON) that the algorithm finds for the\n"
    "chain under the memory limit M (bytes, or with K/M/G, KiB/MiB/GiB, KB/MB/GB).\n"
    "\n"
    "options:\n"
    "  -m, --memory M       the memory limit (required)\n" CLI_SOLVER_OPTIONS_HELP
    "  -o, --output FILE    write the schedule there instead of stdout\n"
    "\n"
    "Exit status: 0 done, 1 no schedule fits (the message gives the smallest memory\n"
    "that would), 2 bad input or usage.\n";

int cmd_solve(int argc, char **argv) {
    cli_chain_opts co;
    memset(&co, 0, sizeof co);
    remat_solve_options_init(&co.solve);
    const char *chain_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        }
        int rc = cli_chain_option(argc, argv, &i, &co);
        if (rc > 0) return rc;
        if (rc == 0) continue;
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("solve: unknown option %s; see remat solve --help", argv[i]);
        if (chain_path) return cli_usage_error("solve: one CHAIN only (got %s and %s)", chain_path, argv[i]);
        chain_path = argv[i];
    }
    if (!chain_path) return cli_usage_error("solve: missing CHAIN; see remat solve --help");
    if (!co.have_memory) return cli_usage_error("solve: missing --memory M");
    remat_chain *c = NULL;
    int rc = cli_load_chain(chain_path, &c);
    if (rc) return rc;
    rc = cli_chain_opts_finish(&co, c);
    if (rc) {
        remat_chain_free(c);
        return rc;
    }
    remat_schedule *s = NULL;
    remat_error e;
    remat_status st = remat_solve(c, &co.solve, &s, &e);
    if (st == REMAT_E_INFEASIBLE) rc = cli_report_infeasible(&e, &co.solve);
    else if (st != REMAT_OK) rc = cli_report(st, &e);
    else {
        char *text = NULL;
        st = remat_schedule_to_json(s, &text, &e);
        rc = st == REMAT_OK ? cli_write_output(co.output, text) : cli_report(st, &e);
        remat_free(text);
    }
    remat_schedule_free(s);
    remat_chain_free(c);
    return rc;
}
