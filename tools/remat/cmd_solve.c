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
    "A chain's partial saves (stage \"options\") appear in schedules as \"Fall i/k\";\n"
    "exact uses them, the other algorithms save all (docs/formats.md). Every\n"
    "algorithm counts a stage's fall_overhead for its Fall ops. A Fall i followed\n"
    "by B i takes the stage's stop figures (stop_time, stop_saved_bytes,\n"
    "stop_overhead); optimal and exact plan with them, the others bound their\n"
    "memory.\n"
    "\n"
    "Exit status: 0 done, 1 no schedule fits (the message gives the smallest memory\n"
    "that would), 2 bad input or usage.\n";

int cmd_solve(int argc, char **argv) {
    cli_chain_opts co;
    remat_chain *c = NULL;
    int rc = cli_chain_command(argc, argv, help, NULL, NULL, &co, &c);
    if (rc || !c) return rc;
    if (!co.have_memory) {
        remat_chain_free(c);
        return cli_usage_error("solve: missing --memory M");
    }
    remat_schedule *s = NULL;
    remat_error e;
    cli_progress_start(&co.progress, &co.solve);
    remat_status st = remat_solve(c, &co.solve, &s, &e);
    cli_progress_end(&co.progress);
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
