/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_join(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("join: not implemented yet");
}

int cli_simulate_join(const char *problem_path, const char *schedule_path) {
    (void)schedule_path;
    return cli_usage_error("%s: join simulation not implemented yet", problem_path);
}
