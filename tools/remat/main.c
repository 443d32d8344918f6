/* remat: command-line front end of libremat. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: remat COMMAND [ARGS]\n"
    "\n"
    "Schedules which activations to keep, recompute or offload when training\n"
    "under a memory limit.\n"
    "\n"
    "commands:\n"
    "  solve CHAIN --memory M [--algorithm A] [--slots S] [-o FILE]   write a schedule\n"
    "  simulate CHAIN SCHEDULE [--bandwidth B]                        check a schedule\n"
    "  curve CHAIN [--algorithm A] [--points K] [--format csv|json]   time against memory\n"
    "  info CHAIN                                                     summarise a chain\n"
    "  join PROBLEM [--memory M] [-o FILE] [--curve] [--compare]      solve a join problem\n"
    "  version                                                        print the version\n"
    "\n"
    "Run `remat COMMAND --help` for a command's options.\n"
    "Exit status: 0 done, 1 no schedule fits the memory, 2 bad input or usage.\n";

int cli_exit_code(remat_status s) {
    if (s == REMAT_OK) return CLI_OK;
    if (s == REMAT_E_INFEASIBLE) return CLI_INFEASIBLE;
    return CLI_BAD_INPUT;
}

/* Length of the UTF-8 sequence at p (1..4), or 0 when it is not one. */
static int utf8_len(const unsigned char *p) {
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
          : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    /* the second byte's range excludes overlong forms, surrogates and > U+10FFFF */
    unsigned lo = p[0] == 0xE0 ? 0xA0 : p[0] == 0xF0 ? 0x90 : 0x80;
    unsigned hi = p[0] == 0xED ? 0x9F : p[0] == 0xF4 ? 0x8F : 0xBF;
    if (n && (p[1] < lo || p[1] > hi)) return 0;
    for (int k = 2; k < n; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return n;
}

void cli_put_escaped(FILE *f, const char *text) {
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        int n = utf8_len(p);
        /* C0 and C1 controls and DEL steer terminals: never raw */
        int control = n == 1 ? (*p < 0x20 || *p == 0x7F) : n == 2 && p[0] == 0xC2 && p[1] < 0xA0;
        if (n && !control) {
            fwrite(p, 1, (size_t)n, f);
            p += n;
            continue;
        }
        for (int k = 0; k < (n ? n : 1); k++, p++) {
            if (*p == '\n') fputs("\\n", f);
            else if (*p == '\t') fputs("\\t", f);
            else if (*p == '\r') fputs("\\r", f);
            else fprintf(f, "\\x%02X", (unsigned)*p);
        }
    }
}

void cli_vline(const char *fmt, va_list ap) {
    char line[4096];
    vsnprintf(line, sizeof line, fmt, ap);
    fputs("remat: ", stderr);
    cli_put_escaped(stderr, line);
    fputc('\n', stderr);
}

void cli_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(fmt, ap);
    va_end(ap);
}

int cli_report(remat_status s, const remat_error *err) {
    cli_line("%s", err && err->message[0] ? err->message : remat_status_name(s));
    return cli_exit_code(s);
}

int cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(fmt, ap);
    va_end(ap);
    return CLI_BAD_INPUT;
}

int cli_write_output(const char *path, const char *text) {
    /* what stdio holds goes first, should path be a descriptor (/dev/stdout) */
    if (fflush(stdout) != 0) return cli_usage_error("cannot write to standard output: %s",
                                                    strerror(errno));
    if (!path) {
        fputs(text, stdout);
        return fflush(stdout) == 0 ? CLI_OK
                                   : cli_usage_error("cannot write to standard output: %s",
                                                     strerror(errno));
    }
    remat_error e;
    remat_status s = remat_write_file(path, text, strlen(text), &e);
    return s == REMAT_OK ? CLI_OK : cli_report(s, &e);
}

int cli_check_output(const char *output, const char *input) {
    struct stat a, b;
    if (!output || !input || stat(output, &a) != 0 || stat(input, &b) != 0) return CLI_OK;
    if (S_ISREG(a.st_mode) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return cli_usage_error("-o %s: that is the input file %s; write the output elsewhere",
                               output, input);
    return CLI_OK;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **value) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0') return 0;
    if (*i + 1 >= argc) {
        *value = NULL; /* caller reports the missing value */
        return 1;
    }
    *value = argv[++*i];
    return 1;
}

int cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int cli_parse_double(const char *text, double *out) {
    char *end = NULL;
    if (!text || !*text) return 0;
    double v = strtod(text, &end);
    if (*end || !(v >= 0) || v > 1e300) return 0;
    *out = v;
    return 1;
}

int cli_parse_uint(const char *text, unsigned long long max, unsigned long long *out) {
    char *end = NULL;
    if (!text || *text < '0' || *text > '9') return 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || v > max) return 0;
    *out = v;
    return 1;
}

/* A closed standard output or error gets /dev/null opened read-only in its
 * place: no file the command opens can take its number (an error message
 * must never land in a schedule), and every write to it fails, which
 * finish() reports. */
static void hold_closed_std_fds(void) {
    for (int fd = 1; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
        int k = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (k >= 0 && k != fd) { /* fd 0 may be closed as well: place it */
            if (dup2(k, fd) >= 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
            close(k);
        }
    }
}

/* Output that never arrived is an error, not a success: flushes stdout and
 * turns rc 0 into 2 when anything written there was lost. */
static int finish(int rc) {
    int lost = fflush(stdout) != 0 || ferror(stdout);
    int why = errno;
    if (fclose(stdout) != 0 && !lost) {
        lost = 1;
        why = errno;
    }
    if (lost && rc == CLI_OK)
        return cli_usage_error("cannot write to standard output: %s",
                               why ? strerror(why) : "write error");
    return rc;
}

static int run(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_BAD_INPUT : CLI_OK;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"solve", cmd_solve}, {"simulate", cmd_simulate}, {"curve", cmd_curve},
                {"info", cmd_info},   {"join", cmd_join}};
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("remat %s\n", remat_version_string());
        return CLI_OK;
    }
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (strcmp(argv[1], cmds[k].name) == 0) return cmds[k].fn(argc - 1, argv + 1);
    return cli_usage_error("unknown command \"%s\"; run `remat --help`", argv[1]);
}

int main(int argc, char **argv) {
    hold_closed_std_fds();
    return finish(run(argc, argv));
}
