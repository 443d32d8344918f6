/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_simulate(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("simulate: not implemented yet");
}
