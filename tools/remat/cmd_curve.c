/* remat curve CHAIN [--algorithm A] [--points K] [--format csv|json] */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

static const char help[] =
    "usage: remat curve CHAIN [--algorithm A] [--points K] [--format csv|json] [options]\n"
    "\n"
    "Prints the time-memory trade-off: the best time the algorithm reaches for\n"
    "memory limits from the smallest feasible one up to what storing everything\n"
    "needs. For optimal, one table solve gives every point.\n"
    "\n"
    "options:\n"
    "  --points K           at most K points (default: every step for optimal, 50 otherwise;\n"
    "                       other algorithms solve at most 100 points, fewer when the\n"
    "                       solves would pass --max-time or run out of it)\n"
    "  --format F           csv (default) or json\n"
    "  -m, --memory M       top of the curve (default: the store-all peak)\n" CLI_SOLVER_OPTIONS_HELP
    "  -o, --output FILE    write there instead of stdout\n"
    "\n"
    "CSV columns: memory_bytes, memory_mib, time, slowdown (time / store-all time).\n";

static char *curve_csv(const remat_curve *cv, double base) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return NULL;
    fprintf(m, "memory_bytes,memory_mib,time,slowdown\n");
    for (size_t k = 0; k < cv->n; k++)
        fprintf(m, "%llu,%.3f,%.6g,%.4f\n", (unsigned long long)cv->points[k].memory,
                (double)cv->points[k].memory / 1048576.0, cv->points[k].time,
                base > 0 ? cv->points[k].time / base : 1.0);
    return fclose(m) == 0 ? text : (free(text), NULL);
}

static char *curve_json(const remat_curve *cv, const remat_chain *c, double base) {
    cJSON *doc = cJSON_CreateObject(), *pts = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "format", "remat-curve-1");
    cJSON_AddStringToObject(doc, "chain", c->name);
    cJSON_AddStringToObject(doc, "algorithm", cv->algorithm);
    cJSON_AddStringToObject(doc, "time_unit", c->time_unit);
    cJSON_AddNumberToObject(doc, "store_all_time", base);
    for (size_t k = 0; k < cv->n && pts; k++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "memory", (double)cv->points[k].memory);
        cJSON_AddNumberToObject(p, "time", cv->points[k].time);
        cJSON_AddItemToArray(pts, p);
    }
    cJSON_AddItemToObject(doc, "points", pts);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text) return NULL;
    size_t n = strlen(text);
    char *out = realloc(text, n + 2); /* end with a newline */
    if (!out) return text;
    memcpy(out + n, "\n", 2);
    return out;
}

typedef struct curve_args {
    const char *format;
    unsigned long long points;
} curve_args;

static int curve_option(int argc, char **argv, int *i, void *ctx) {
    curve_args *ca = ctx;
    const char *v = NULL;
    if (cli_opt(argc, argv, i, "--points", &v)) {
        if (!v || !cli_parse_uint(v, 1000000, &ca->points) || ca->points == 0)
            return cli_usage_error("--points: expected an integer in 1..1000000");
        return CLI_OK;
    }
    if (cli_opt(argc, argv, i, "--format", &v)) {
        if (!v || (strcmp(v, "csv") && strcmp(v, "json")))
            return cli_usage_error("--format: expected csv or json");
        ca->format = v;
        return CLI_OK;
    }
    return -1;
}

int cmd_curve(int argc, char **argv) {
    cli_chain_opts co;
    curve_args ca = {"csv", 0};
    remat_chain *c = NULL;
    int rc = cli_chain_command(argc, argv, help, curve_option, &ca, &co, &c);
    if (rc || !c) return rc;
    remat_curve *cv = NULL;
    remat_error e;
    double base = 0;
    remat_status st = remat_store_all_cost(c, NULL, &base, &e);
    cli_progress_start(&co.progress, &co.solve);
    if (st == REMAT_OK) st = remat_curve_compute(c, &co.solve, (size_t)ca.points, &cv, &e);
    cli_progress_end(&co.progress);
    if (st == REMAT_E_INFEASIBLE)
        rc = cli_report_infeasible(&e, &co.solve);
    else if (st != REMAT_OK)
        rc = cli_report(st, &e);
    else {
        char *text = strcmp(ca.format, "json") == 0 ? curve_json(cv, c, base) : curve_csv(cv, base);
        rc = text ? cli_write_output(co.output, text) : cli_usage_error("out of memory");
        free(text);
    }
    remat_curve_free(cv);
    remat_chain_free(c);
    return rc;
}
