/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_join(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("join: not implemented yet");
}
