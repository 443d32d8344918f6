/* remat join: optimal schedules for several chains joined at the loss
 * (papers/join-networks.md), the makespan curve, the EQUIV-CHAIN comparison,
 * and the join half of `remat simulate`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "remat/join.h"

static const char join_usage[] =
    "usage: remat join PROBLEM [--slots N] [-o FILE]\n"
    "       remat join PROBLEM --curve [--compare] [--format csv|json] [-o FILE]\n"
    "       remat join PROBLEM --compare [--slots N] [--format csv|json]\n"
    "       remat join JOIN2 --memory M [--slots S] [-o FILE]\n"
    "       remat join JOIN2 --curve [--compare] [--points K] [--format csv|json] [-o FILE]\n"
    "       remat join JOIN2 --compare --memory M [--format csv|json]\n"
    "\n"
    "PROBLEM is a \"remat-join-1\" document: k branches of given lengths joined at\n"
    "the loss, unit-size values, memory in slots (papers/join-networks.md).\n"
    "JOIN2 is a \"remat-join-2\" document: up to 4 branches, each a chain of stages\n"
    "with sizes in bytes (SPEC section 1), meeting at a turn stage (docs/join.md).\n"
    "\n"
    "remat-join-1:\n"
    "  (default)    write the optimal \"remat-join-schedule-1\" for the memory\n"
    "  --slots N    memory in slots (default: the problem's \"slots\")\n"
    "  --curve      makespan for every memory from c_min to full storage\n"
    "  --compare    also give EQUIV-CHAIN, the steps grouped into one chain\n"
    "  --format F   csv (default) or json, for --curve and --compare\n"
    "  -o FILE      write there instead of stdout\n"
    "\n"
    "remat-join-2:\n"
    "  (default)    write the \"remat-join-schedule-2\" of the join solver for --memory\n"
    "  -m, --memory M  the limit in bytes (K/M/G, KiB/MiB/GiB, KB/MB/GB)\n"
    "  --slots S    at least S memory slots, as optimal (default 500); 0 = exact bytes\n"
    "  --curve      time against memory from the smallest limit to the store-all peak\n"
    "               (CSV memory_bytes,memory_mib,time,slowdown)\n"
    "  --compare    also the same network flattened to one chain (remat_hjoin_flatten:\n"
    "               the branches one after another, each value carrying what the other\n"
    "               branches hold), solved by optimal: a flat_chain column with\n"
    "               --curve, or one row each at --memory\n"
    "  --points K   at most K points of the curve\n"
    "  --format F   csv (default) or json\n"
    "  --max-work SIZE, --max-time SECONDS, --threads T, --progress, --quiet\n"
    "               as for remat solve: the table is sized and its time estimated\n"
    "               before any work, and refused past the limits (exit 2)\n"
    "  -o FILE      write there instead of stdout\n"
    "\n"
    "Exit status: 0 done, 1 the memory is below c_min (remat-join-1) or the smallest\n"
    "limit (remat-join-2; the message gives it), 2 bad input or usage.\n";

typedef struct join_args {
    const char *problem, *out, *format;
    unsigned long long slots;
    int curve, compare;
} join_args;

/* Numbers as a person would write them (74, 1.5). No output ever holds nan
 * or inf: where there is no finite number (EQUIV-CHAIN does not fit, a ratio
 * to a zero makespan), JSON has null and CSV an empty cell. */
static void put_num(char *buf, size_t cap, double v, int json) {
    if (isfinite(v)) snprintf(buf, cap, "%.15g", v);
    else snprintf(buf, cap, "%s", json ? "null" : "");
}

/* eq / opt, with 0 / 0 = 1 (both free); not finite when opt alone is 0. */
static double ratio_of(double eq, double opt) {
    if (opt > 0) return eq / opt;
    return eq == 0 ? 1 : INFINITY;
}

static int parse_args(int argc, char **argv, join_args *a) {
    memset(a, 0, sizeof *a);
    a->format = "csv";
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (cli_is_help(argv[i])) {
            fputs(join_usage, stdout);
            return -1;
        } else if (strcmp(argv[i], "--curve") == 0) {
            a->curve = 1;
        } else if (strcmp(argv[i], "--compare") == 0) {
            a->compare = 1;
        } else if (cli_opt(argc, argv, &i, "-o", &v)) {
            if (!v) return cli_usage_error("join: -o needs a file name");
            a->out = v;
        } else if (cli_opt(argc, argv, &i, "--format", &v)) {
            if (!v || (strcmp(v, "csv") != 0 && strcmp(v, "json") != 0))
                return cli_usage_error("join: --format must be csv or json");
            a->format = v;
        } else if (cli_opt(argc, argv, &i, "--slots", &v)) {
            if (!cli_parse_uint(v, ((unsigned long long)1 << 53) - 1, &a->slots) || !a->slots)
                return cli_usage_error("join: --slots must be a positive integer below 2^53");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("join: unknown option \"%s\"; run `remat join --help`",
                                   argv[i]);
        } else if (!a->problem) {
            a->problem = argv[i];
        } else {
            return cli_usage_error("join: one PROBLEM only (got \"%s\" too)", argv[i]);
        }
    }
    if (!a->problem) return cli_usage_error("join: missing PROBLEM; run `remat join --help`");
    return cli_check_output(a->out, a->problem);
}

/* Reports a library failure naming the file. */
static int fail(const char *path, remat_status s, const remat_error *e) {
    const char *msg = e->message[0] ? e->message : remat_status_name(s);
    if (strncmp(msg, path, strlen(path)) == 0) return cli_report(s, e);
    cli_line("%s: %s", path, msg);
    return cli_exit_code(s);
}

static int run_curve(const join_args *a, const remat_join_problem *p) {
    remat_join_curve *cv = NULL;
    remat_error e;
    remat_status s = remat_join_curve_compute(p, a->compare, NULL, &cv, &e);
    if (s != REMAT_OK) return fail(a->problem, s, &e);
    int json = strcmp(a->format, "json") == 0;
    size_t cap = 256 + cv->n * 96;
    char *text = malloc(cap), num[40], num2[40];
    if (!text) {
        remat_join_curve_free(cv);
        return cli_usage_error("out of memory");
    }
    size_t len = 0;
    char span[40];
    put_num(span, sizeof span, remat_join_span_star(p), 1);
    if (json)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"format\": \"remat-join-curve-1\", \"span_star\": %s, "
                                "\"points\": [\n",
                                span);
    if (!json) len += (size_t)snprintf(text + len, cap - len, "slots,makespan%s\n",
                                       a->compare ? ",equiv_chain" : "");
    for (size_t i = 0; i < cv->n; i++) {
        const remat_join_curve_point *pt = &cv->points[i];
        put_num(num, sizeof num, pt->makespan, json);
        put_num(num2, sizeof num2, pt->equiv_chain, json);
        if (json) {
            len += (size_t)snprintf(text + len, cap - len,
                                    "  {\"slots\": %llu, \"makespan\": %s%s%s}%s\n",
                                    (unsigned long long)pt->slots, num,
                                    a->compare ? ", \"equiv_chain\": " : "",
                                    a->compare ? num2 : "", i + 1 < cv->n ? "," : "");
        } else {
            len += (size_t)snprintf(text + len, cap - len, "%llu,%s%s%s\n",
                                    (unsigned long long)pt->slots, num, a->compare ? "," : "",
                                    a->compare ? num2 : "");
        }
    }
    if (json) snprintf(text + len, cap - len, "]}\n");
    remat_join_curve_free(cv);
    int rc = cli_write_output(a->out, text);
    free(text);
    return rc;
}

static int run_compare(const join_args *a, const remat_join_problem *p, uint64_t c) {
    remat_join_schedule *opt = NULL, *eq = NULL;
    remat_error e;
    remat_status s = remat_join_solve(p, c, NULL, &opt, &e);
    if (s != REMAT_OK) return fail(a->problem, s, &e);
    s = remat_join_equiv_chain(p, c, NULL, &eq, &e);
    if (s != REMAT_OK && s != REMAT_E_INFEASIBLE) {
        remat_join_schedule_free(opt);
        return fail(a->problem, s, &e);
    }
    int json = strcmp(a->format, "json") == 0;
    char text[1024], m1[40], m2[40], ratio[40], span[40], eqjson[160], pk2[24] = "";
    put_num(m1, sizeof m1, opt->time, json);
    put_num(m2, sizeof m2, eq ? eq->time : INFINITY, json);
    put_num(ratio, sizeof ratio, eq ? ratio_of(eq->time, opt->time) : INFINITY, json);
    put_num(span, sizeof span, remat_join_span_star(p), json);
    unsigned long long cs = (unsigned long long)c, p1 = (unsigned long long)opt->peak_slots;
    snprintf(eqjson, sizeof eqjson, "null");
    if (eq) {
        snprintf(pk2, sizeof pk2, "%llu", (unsigned long long)eq->peak_slots);
        snprintf(eqjson, sizeof eqjson, "{\"makespan\": %s, \"peak_slots\": %s}", m2, pk2);
    }
    if (json)
        snprintf(text, sizeof text,
                 "{\"slots\": %llu, \"span_star\": %s,\n"
                 " \"join-optimal\": {\"makespan\": %s, \"peak_slots\": %llu},\n"
                 " \"equiv-chain\": %s,\n \"ratio\": %s}\n",
                 cs, span, m1, p1, eqjson, ratio);
    else
        snprintf(text, sizeof text,
                 "algorithm,slots,makespan,peak_slots,ratio\n"
                 "join-optimal,%llu,%s,%llu,1\nequiv-chain,%llu,%s,%s,%s\n",
                 cs, m1, p1, cs, m2, pk2, ratio);
    if (!eq) cli_line("note: EQUIV-CHAIN does not fit: %s", e.message);
    remat_join_schedule_free(opt);
    remat_join_schedule_free(eq);
    return cli_write_output(a->out, text);
}

/* The PROBLEM argument: the first one that is neither an option nor the
 * value of one. */
static const char *problem_arg(int argc, char **argv) {
    static const char *const with_value[] = {"-o", "--output", "--format", "--slots", "--memory",
                                             "-m", "--max-work", "--max-time", "--threads",
                                             "--points"};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' || !argv[i][1]) return argv[i];
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            if (strcmp(argv[i], with_value[k]) == 0) i++;
    }
    return NULL;
}

/* --memory only applies to remat-join-2: a document that is not remat-join-1
 * is then reported as a remat-join-2 one. */
static int has_memory_option(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--memory", 8) == 0 || strcmp(argv[i], "-m") == 0) return 1;
    return 0;
}

int cmd_join(int argc, char **argv) {
    /* The problem is read once (it may be a pipe); its format picks the model. */
    const char *path = problem_arg(argc, argv);
    char *doc = NULL;
    size_t len = 0;
    if (path && remat_read_file(path, &doc, &len, NULL) == REMAT_OK &&
        (remat_hjoin_is_json(doc, len) ||
         (!remat_join_is_problem_json(doc, len) && has_memory_option(argc, argv)))) {
        int rc = cli_hjoin(argc, argv, path, doc, len);
        remat_free(doc);
        return rc;
    }
    join_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        remat_free(doc);
        return rc < 0 ? CLI_OK : rc;
    }
    remat_join_problem p;
    remat_error e;
    remat_status s = doc && strcmp(path, a.problem) == 0
                         ? remat_join_problem_from_json(doc, len, a.problem, &p, &e)
                         : remat_join_problem_load(a.problem, &p, &e);
    remat_free(doc);
    if (s != REMAT_OK) return fail(a.problem, s, &e);
    if (a.curve) return run_curve(&a, &p);
    uint64_t c = a.slots ? a.slots : p.slots;
    if (!c)
        return cli_usage_error("%s: field \"slots\" is missing (or pass --slots N)", a.problem);
    if (a.compare) return run_compare(&a, &p, c);
    remat_join_schedule *sched = NULL;
    s = remat_join_solve(&p, c, NULL, &sched, &e);
    if (s != REMAT_OK) return fail(a.problem, s, &e);
    char *text = NULL;
    s = remat_join_schedule_to_json(sched, &text, &e);
    remat_join_schedule_free(sched);
    if (s != REMAT_OK) return fail(a.problem, s, &e);
    rc = cli_write_output(a.out, text);
    remat_free(text);
    return rc;
}

/* JSON string body with quotes and backslashes escaped. */
static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

int cli_simulate_join(const char *problem_path, const char *problem_text, size_t len,
                      const char *schedule_path) {
    remat_join_problem p;
    remat_join_schedule *s = NULL;
    remat_error e;
    remat_status st = remat_join_problem_from_json(problem_text, len, problem_path, &p, &e);
    if (st != REMAT_OK) return fail(problem_path, st, &e);
    st = remat_join_schedule_load(schedule_path, &s, &e);
    if (st != REMAT_OK) return fail(schedule_path, st, &e);
    remat_join_sim_result *res = NULL;
    st = remat_join_simulate(&p, s->ops, s->n_ops, p.slots, &res, &e);
    remat_join_schedule_free(s);
    if (st != REMAT_OK) return fail(schedule_path, st, &e);
    remat_join_sim_result r = *res;
    remat_join_sim_result_free(res);
    char t[40];
    put_num(t, sizeof t, r.time, 1);
    if (r.valid) {
        printf("{\"valid\": true, \"time\": %s, \"makespan\": %s, \"peak_slots\": %llu}\n", t, t,
               (unsigned long long)r.peak_slots);
        return CLI_OK; /* a lost write is reported on the way out (main.c) */
    }
    printf("{\"valid\": false, \"failed_op\": %zu, \"reason\": \"", r.failed_op);
    put_escaped(stdout, r.reason);
    printf("\", \"time\": %s, \"peak_slots\": %llu}\n", t, (unsigned long long)r.peak_slots);
    fflush(stdout);
    cli_line("%s: invalid schedule: %s", schedule_path, r.reason);
    return CLI_BAD_INPUT;
}
