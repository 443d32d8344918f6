/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_solve(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("solve: not implemented yet");
}
