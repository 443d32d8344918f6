/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_curve(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("curve: not implemented yet");
}
