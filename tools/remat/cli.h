/* The remat command line: shared helpers. Each command lives in cmd_<name>.c
 * and uses only the public API. Exit codes: 0 done, 1 infeasible, 2 bad input. */
#ifndef REMAT_CLI_H
#define REMAT_CLI_H

#include <stdarg.h>
#include <stdio.h>

#include "remat/remat.h"

enum { CLI_OK = 0, CLI_INFEASIBLE = 1, CLI_BAD_INPUT = 2 };

/* Prints "remat: <message>" on one line to stderr (escaped: cli_put_escaped)
 * and returns the exit code for s. */
int cli_report(remat_status s, const remat_error *err);
/* Prints "remat: <formatted>" to stderr and returns 2. */
int cli_usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Exit code for a status. */
int cli_exit_code(remat_status s);
/* Prints "remat: <formatted>" on one line to stderr. */
void cli_line(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void cli_vline(const char *fmt, va_list ap);
/* Writes text to f with control characters (C0, DEL, C1) and bytes that are
 * not UTF-8 escaped as \n, \t, \r or \xNN, so that every message stays one
 * line and no raw control sequence reaches a terminal. Every line the CLI
 * prints that holds user text (messages, names) goes through it. */
void cli_put_escaped(FILE *f, const char *text);

/* Writes text to path (atomically: remat_write_file), or stdout when path is
 * NULL. Returns an exit code. */
int cli_write_output(const char *path, const char *text);
/* Refuses (exit 2, reported) an output file that is the input file itself:
 * writing it would destroy what the command reads. */
int cli_check_output(const char *output, const char *input);

/* Option parsing: returns 1 and advances *i when argv[*i] is `name` with a value. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **value);
int cli_is_help(const char *arg);

/* Parses a non-negative finite double; 0 on failure. */
int cli_parse_double(const char *text, double *out);
/* Parses an unsigned integer (decimal) up to max; 0 on failure. */
int cli_parse_uint(const char *text, unsigned long long max, unsigned long long *out);

int cmd_solve(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_curve(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_join(int argc, char **argv);
/* cmd_join.c: checks a join schedule against a join problem (its text, read
 * from problem_path); returns the exit code. */
int cli_simulate_join(const char *problem_path, const char *problem_text, size_t len,
                      const char *schedule_path);
/* cmd_hjoin.c: `remat join` on a remat-join-2 problem (its text, read from
 * path), and `remat simulate` with one. Return the exit code. */
int cli_hjoin(int argc, char **argv, const char *path, const char *text, size_t len);
int cli_simulate_hjoin(const char *problem_path, const char *problem_text, size_t len,
                       const char *schedule_path);

#endif
