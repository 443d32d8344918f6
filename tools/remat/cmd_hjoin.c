/* remat join on a "remat-join-2" problem (heterogeneous branches in bytes):
 * the schedule, the curve, the comparison with the same network flattened
 * to one chain, and the join-2 half of `remat simulate`. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

typedef struct hjoin_args {
    int curve, compare;
    const char *format;
    unsigned long long points;
} hjoin_args;

static int hjoin_option(int argc, char **argv, int *i, void *ctx) {
    hjoin_args *a = ctx;
    const char *v = NULL;
    if (strcmp(argv[*i], "--curve") == 0) {
        a->curve = 1;
    } else if (strcmp(argv[*i], "--compare") == 0) {
        a->compare = 1;
    } else if (cli_opt(argc, argv, i, "--format", &v)) {
        if (!v || (strcmp(v, "csv") != 0 && strcmp(v, "json") != 0))
            return cli_usage_error("join: --format must be csv or json");
        a->format = v;
    } else if (cli_opt(argc, argv, i, "--points", &v)) {
        if (!v || !cli_parse_uint(v, 1000000, &a->points) || a->points == 0)
            return cli_usage_error("join: --points: expected an integer in 1..1000000");
    } else {
        return -1;
    }
    return CLI_OK;
}

/* Parses argv (argv[0] is "join"); the problem is `path`. */
static int parse(int argc, char **argv, const char *path, hjoin_args *a, cli_chain_opts *co) {
    memset(co, 0, sizeof *co);
    remat_solve_options_init(&co->solve);
    memset(a, 0, sizeof *a);
    a->format = "csv";
    int seen_path = 0;
    for (int i = 1; i < argc; i++) {
        int rc = hjoin_option(argc, argv, &i, a);
        if (rc < 0) rc = cli_chain_option(argc, argv, &i, co);
        if (rc > 0) return rc;
        if (rc == 0) continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("join: unknown option \"%s\"; run `remat join --help`",
                                   argv[i]);
        if (seen_path || strcmp(argv[i], path) != 0)
            return cli_usage_error("join: one PROBLEM only (got \"%s\" too)", argv[i]);
        seen_path = 1;
    }
    if (co->solve.algorithm != REMAT_ALG_OPTIMAL || co->bandwidth_text || co->solve.segments ||
        co->solve.bucket_bytes || co->solve.exact_no_del || co->solve.offload_values)
        return cli_usage_error("join: %s: only --memory, --slots, --max-work, --max-time, "
                               "--threads and the progress options apply to a remat-join-2 "
                               "problem", path);
    if (!a->curve && !co->have_memory)
        return cli_usage_error("join: %s: a remat-join-2 problem needs --memory M (or --curve)",
                               path);
    return cli_check_output(co->output, path);
}

static void human(uint64_t b, char out[32]) { cli_human_bytes(b, out); }

static int infeasible(const char *path, const remat_error *e, uint64_t memory) {
    char need[32];
    human(e->min_memory, need);
    if (!e->min_memory) return cli_report(REMAT_E_INFEASIBLE, e);
    fprintf(stderr, "remat: %s: join: no schedule fits in %llu bytes; it needs at least %llu "
                    "bytes (%s)\n",
            path, (unsigned long long)memory, (unsigned long long)e->min_memory, need);
    return CLI_INFEASIBLE;
}

static int fail(const char *path, remat_status s, const remat_error *e) {
    const char *msg = e->message[0] ? e->message : remat_status_name(s);
    if (strncmp(msg, path, strlen(path)) == 0) return cli_report(s, e);
    fprintf(stderr, "remat: %s: %s\n", path, msg);
    return cli_exit_code(s);
}

/* A number, or an empty CSV cell / JSON null where there is none. */
static void num(FILE *f, double v, int json) {
    if (isfinite(v)) fprintf(f, "%.15g", v);
    else if (json) fputs("null", f);
}

static int run_schedule(const char *path, const remat_hjoin *j, const cli_chain_opts *co) {
    remat_hjoin_schedule *s = NULL;
    remat_error e;
    remat_status st = remat_hjoin_solve(j, &co->solve, &s, &e);
    if (st == REMAT_E_INFEASIBLE) return infeasible(path, &e, co->solve.memory);
    if (st != REMAT_OK) return fail(path, st, &e);
    char *text = NULL;
    st = remat_hjoin_schedule_to_json(s, &text, &e);
    remat_hjoin_schedule_free(s);
    int rc = st == REMAT_OK ? cli_write_output(co->output, text) : fail(path, st, &e);
    remat_free(text);
    return rc;
}

/* The join solver and optimal on the flat chain at one limit. */
static int run_compare(const char *path, const remat_hjoin *j, const cli_chain_opts *co,
                       const hjoin_args *a) {
    remat_hjoin_schedule *s = NULL;
    remat_schedule *f = NULL;
    remat_chain *flat = NULL;
    remat_error e, fe;
    remat_status st = remat_hjoin_solve(j, &co->solve, &s, &e);
    if (st == REMAT_E_INFEASIBLE) return infeasible(path, &e, co->solve.memory);
    if (st != REMAT_OK) return fail(path, st, &e);
    st = remat_hjoin_flatten(j, &flat, &e);
    remat_status fst = st == REMAT_OK ? remat_solve(flat, &co->solve, &f, &fe) : st;
    int json = strcmp(a->format, "json") == 0;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    double ft = f ? f->time : INFINITY, ratio = f && s->time > 0 ? f->time / s->time : INFINITY;
    if (m && json) {
        fprintf(m, "{\"memory\": %llu,\n \"join-optimal\": {\"time\": ",
                (unsigned long long)co->solve.memory);
        num(m, s->time, 1);
        fprintf(m, ", \"peak_bytes\": %llu},\n \"flat-chain\": ", (unsigned long long)s->peak_bytes);
        if (f) {
            fputs("{\"time\": ", m);
            num(m, ft, 1);
            fprintf(m, ", \"peak_bytes\": %llu}", (unsigned long long)f->peak_bytes);
        } else {
            fputs("null", m);
        }
        fputs(",\n \"ratio\": ", m);
        num(m, ratio, 1);
        fputs("}\n", m);
    } else if (m) {
        fprintf(m, "algorithm,memory,time,peak_bytes,ratio\njoin-optimal,%llu,",
                (unsigned long long)co->solve.memory);
        num(m, s->time, 0);
        fprintf(m, ",%llu,1\nflat-chain,%llu,", (unsigned long long)s->peak_bytes,
                (unsigned long long)co->solve.memory);
        num(m, ft, 0);
        if (f) fprintf(m, ",%llu,", (unsigned long long)f->peak_bytes);
        else fputs(",,", m);
        num(m, ratio, 0);
        fputc('\n', m);
    }
    int rc = m && fclose(m) == 0 ? CLI_OK : cli_usage_error("out of memory");
    if (fst != REMAT_OK)
        fprintf(stderr, "remat: note: the flat chain: %s\n",
                fst == st ? e.message : fe.message);
    if (rc == CLI_OK) rc = cli_write_output(co->output, text);
    free(text);
    remat_hjoin_schedule_free(s);
    remat_schedule_free(f);
    remat_chain_free(flat);
    return rc;
}

/* The flat chain's best time within mem (INFINITY when none). */
static double best_within(const remat_curve *cv, uint64_t mem) {
    double t = INFINITY;
    for (size_t q = 0; cv && q < cv->n; q++)
        if (cv->points[q].memory <= mem && cv->points[q].time < t) t = cv->points[q].time;
    return t;
}

static cJSON *points_json(const remat_curve *cv) {
    cJSON *pts = cJSON_CreateArray();
    for (size_t q = 0; pts && q < cv->n; q++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "memory", (double)cv->points[q].memory);
        cJSON_AddNumberToObject(p, "time", cv->points[q].time);
        cJSON_AddItemToArray(pts, p);
    }
    return pts;
}

/* The curve as JSON ("remat-join-curve-2"), NULL when out of memory. */
static char *curve_json(const remat_hjoin *j, const remat_curve *cv, const remat_curve *fc,
                        double base) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", "remat-join-curve-2");
    cJSON_AddStringToObject(doc, "name", j->name);
    cJSON_AddStringToObject(doc, "time_unit", j->time_unit);
    cJSON_AddNumberToObject(doc, "store_all_time", base);
    cJSON_AddItemToObject(doc, "points", points_json(cv));
    if (fc) cJSON_AddItemToObject(doc, "flat_chain", points_json(fc));
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text) return NULL;
    size_t n = strlen(text);
    char *out = realloc(text, n + 2);
    if (!out) return text;
    memcpy(out + n, "\n", 2);
    return out;
}

static char *curve_csv(const remat_curve *cv, const remat_curve *fc, double base) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return NULL;
    fprintf(m, "memory_bytes,memory_mib,time,slowdown%s\n", fc ? ",flat_chain" : "");
    for (size_t q = 0; q < cv->n; q++) {
        const remat_curve_point *p = &cv->points[q];
        fprintf(m, "%llu,%.3f,%.6g,%.4f", (unsigned long long)p->memory,
                (double)p->memory / 1048576.0, p->time, base > 0 ? p->time / base : 1.0);
        if (fc) {
            fputc(',', m);
            double t = best_within(fc, p->memory);
            if (isfinite(t)) fprintf(m, "%.6g", t);
        }
        fputc('\n', m);
    }
    return fclose(m) == 0 ? text : (free(text), NULL);
}

static int run_curve(const char *path, const remat_hjoin *j, const cli_chain_opts *co,
                     const hjoin_args *a) {
    remat_curve *cv = NULL, *fc = NULL;
    remat_chain *flat = NULL;
    remat_error e;
    double base = 0;
    remat_status st = remat_hjoin_store_all_cost(j, NULL, &base, &e);
    if (st == REMAT_OK) st = remat_hjoin_curve(j, &co->solve, (size_t)a->points, &cv, &e);
    if (st == REMAT_OK && a->compare) {
        st = remat_hjoin_flatten(j, &flat, &e);
        if (st == REMAT_OK) st = remat_curve_compute(flat, &co->solve, 0, &fc, &e);
    }
    int rc;
    if (st == REMAT_E_INFEASIBLE) {
        rc = infeasible(path, &e, co->solve.memory);
    } else if (st != REMAT_OK) {
        rc = fail(path, st, &e);
    } else {
        char *text = strcmp(a->format, "json") == 0 ? curve_json(j, cv, fc, base)
                                                    : curve_csv(cv, fc, base);
        rc = text ? cli_write_output(co->output, text) : cli_usage_error("out of memory");
        free(text);
    }
    remat_curve_free(cv);
    remat_curve_free(fc);
    remat_chain_free(flat);
    return rc;
}

int cli_hjoin(int argc, char **argv, const char *path, const char *text, size_t len) {
    hjoin_args a;
    cli_chain_opts co;
    int rc = parse(argc, argv, path, &a, &co);
    if (rc) return rc;
    remat_hjoin *j = NULL;
    remat_error e;
    remat_status st = remat_hjoin_from_json(text, len, path, &j, &e);
    if (st != REMAT_OK) return fail(path, st, &e);
    cli_progress_start(&co.progress, &co.solve);
    if (a.curve) rc = run_curve(path, j, &co, &a);
    else if (a.compare) rc = run_compare(path, j, &co, &a);
    else rc = run_schedule(path, j, &co);
    cli_progress_end(&co.progress);
    remat_hjoin_free(j);
    return rc;
}

int cli_simulate_hjoin(const char *problem_path, const char *problem_text, size_t len,
                       const char *schedule_path) {
    remat_hjoin *j = NULL;
    remat_hjoin_schedule *s = NULL;
    remat_hjoin_sim_result *r = NULL;
    remat_error e;
    remat_status st = remat_hjoin_from_json(problem_text, len, problem_path, &j, &e);
    if (st != REMAT_OK) return fail(problem_path, st, &e);
    st = remat_hjoin_schedule_load(schedule_path, &s, &e);
    if (st == REMAT_OK) st = remat_hjoin_simulate(j, s, &r, &e);
    int rc;
    if (st != REMAT_OK) {
        rc = fail(schedule_path, st, &e);
    } else if (r->valid) {
        printf("{\"valid\": true, \"time\": ");
        num(stdout, r->time, 1);
        printf(", \"peak_bytes\": %llu}\n", (unsigned long long)r->peak_bytes);
        rc = fflush(stdout) == 0 ? CLI_OK : CLI_BAD_INPUT;
    } else {
        printf("{\"valid\": false, \"op_index\": %zu, \"op\": \"%s\"}\n", r->failed_op,
               r->failed_op_text);
        fflush(stdout);
        rc = cli_usage_error("%s: op %zu (%s): %s", schedule_path, r->failed_op,
                             r->failed_op_text, r->reason);
    }
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
    return rc;
}
