/* PLACEHOLDER: replaced by the real command. */
#include "cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc; (void)argv;
    return cli_usage_error("info: not implemented yet");
}
