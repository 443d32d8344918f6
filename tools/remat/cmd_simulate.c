/* remat simulate CHAIN SCHEDULE [--bandwidth B]
 * remat simulate PROBLEM JOIN-SCHEDULE (join problems, see cmd_join.c, cmd_hjoin.c) */
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat simulate CHAIN SCHEDULE [--bandwidth B] [--timeline]\n"
    "       remat simulate JOIN-PROBLEM JOIN-SCHEDULE\n"
    "\n"
    "Replays the schedule on the chain by the model's rules and prints\n"
    "{\"valid\": true, \"time\": ..., \"peak_bytes\": ...}, or says which op fails and why\n"
    "(exit 2). With a remat-join-1 or remat-join-2 problem, checks a join schedule\n"
    "instead (remat-join-2: {\"valid\": true, \"time\": ..., \"peak_bytes\": ...}).\n"
    "\n"
    "options:\n"
    "  -b, --bandwidth B    host link for Off/Pre/Wait, bytes per time unit or SIZE/s;\n"
    "                       also prints idle times and the memory/link timeline\n"
    "  --timeline           print the timeline even without offload ops\n";

int cmd_simulate(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL};
    const char *bw_text = NULL;
    int npaths = 0, timeline = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if (cli_opt(argc, argv, &i, "--bandwidth", &v) || cli_opt(argc, argv, &i, "-b", &v)) {
            if (!v) return cli_usage_error("--bandwidth needs a value");
            bw_text = v;
        } else if (strcmp(argv[i], "--timeline") == 0) {
            timeline = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("simulate: unknown option %s; see remat simulate --help", argv[i]);
        } else if (npaths == 2) {
            return cli_usage_error("simulate: expected CHAIN SCHEDULE, got a third file %s", argv[i]);
        } else {
            paths[npaths++] = argv[i];
        }
    }
    if (npaths < 2) return cli_usage_error("simulate: expected CHAIN SCHEDULE; see remat simulate --help");
    /* The first file is read once (it may be a pipe), then parsed as what it is. */
    char *text = NULL;
    size_t len = 0;
    remat_error e;
    remat_status st = remat_read_file(paths[0], &text, &len, &e);
    if (st != REMAT_OK) return cli_report(st, &e);
    remat_chain *c = NULL;
    int rc;
    if (remat_join_is_problem_json(text, len) || remat_hjoin_is_json(text, len)) {
        rc = remat_hjoin_is_json(text, len) ? cli_simulate_hjoin(paths[0], text, len, paths[1])
                                            : cli_simulate_join(paths[0], text, len, paths[1]);
        remat_free(text);
        return rc;
    }
    st = remat_chain_from_json(text, len, paths[0], &c, &e);
    remat_free(text);
    if (st != REMAT_OK) return cli_report(st, &e);
    remat_sim_options so;
    remat_sim_options_init(&so);
    if (bw_text && (rc = cli_parse_bandwidth(bw_text, c, &so.bandwidth)) != 0) {
        remat_chain_free(c);
        return rc;
    }
    so.record_timeline = timeline || bw_text != NULL;
    remat_schedule *s = NULL;
    remat_sim_result *r = NULL;
    st = remat_schedule_load(paths[1], &s, &e);
    if (st == REMAT_OK) st = remat_simulate(c, s, &so, &r, &e);
    if (st != REMAT_OK) {
        rc = cli_report(st, &e);
    } else {
        char *text = NULL;
        st = remat_sim_result_to_json(r, &text, &e);
        if (st != REMAT_OK) rc = cli_report(st, &e);
        else rc = cli_write_output(NULL, text);
        remat_free(text);
        if (rc == CLI_OK && !r->valid)
            rc = cli_usage_error("%s: op %zu (%s): %s", paths[1], r->failed_op, r->failed_op_text,
                                 r->reason);
    }
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
    return rc;
}
