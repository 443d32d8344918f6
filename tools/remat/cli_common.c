/* Option handling shared by the chain commands. */
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

void cli_human_bytes(uint64_t b, char out[32]) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, 32, "%llu B", (unsigned long long)b);
    else
        snprintf(out, 32, "%.2f %s", v, units[u]);
}

/* Seconds per time unit of the chain, for bandwidths given per second. */
static double seconds_per_unit(const char *unit) {
    if (strcmp(unit, "s") == 0) return 1;
    if (strcmp(unit, "ms") == 0 || unit[0] == '\0') return 1e-3;
    if (strcmp(unit, "us") == 0) return 1e-6;
    if (strcmp(unit, "ns") == 0) return 1e-9;
    return 0;
}

int cli_parse_bandwidth(const char *text, const remat_chain *c, double *out) {
    size_t n = strlen(text);
    if (n > 2 && strcmp(text + n - 2, "/s") == 0) {
        char buf[64];
        if (n - 2 >= sizeof buf) return cli_usage_error("--bandwidth: \"%s\" is too long", text);
        memcpy(buf, text, n - 2);
        buf[n - 2] = '\0';
        uint64_t per_s;
        remat_error e;
        if (remat_parse_size(buf, &per_s, &e) != REMAT_OK)
            return cli_usage_error("--bandwidth: %s", e.message);
        double spu = seconds_per_unit(c->time_unit);
        if (spu == 0)
            return cli_usage_error("--bandwidth: the chain's time_unit \"%s\" is not s, ms, us or "
                                   "ns; give bytes per time unit instead",
                                   c->time_unit);
        *out = (double)per_s * spu;
        return CLI_OK;
    }
    if (!cli_parse_double(text, out))
        return cli_usage_error("--bandwidth: \"%s\" is not a number >= 0 (bytes per time unit) "
                               "or SIZE/s",
                               text);
    return CLI_OK;
}

int cli_chain_option(int argc, char **argv, int *i, cli_chain_opts *co) {
    const char *v = NULL;
    unsigned long long u;
    remat_error e;
    char *a = argv[*i];
    remat_solve_options *o = &co->solve;
#define NEED(name) \
    if (!v) return cli_usage_error("%s needs a value", name)
    if (cli_opt(argc, argv, i, "--memory", &v) || cli_opt(argc, argv, i, "-m", &v)) {
        NEED("--memory");
        if (remat_parse_size(v, &o->memory, &e) != REMAT_OK)
            return cli_usage_error("--memory: %s", e.message);
        co->have_memory = 1;
    } else if (cli_opt(argc, argv, i, "--algorithm", &v) || cli_opt(argc, argv, i, "-a", &v)) {
        NEED("--algorithm");
        if (remat_algorithm_parse(v, &o->algorithm, &e) != REMAT_OK)
            return cli_usage_error("--%s", e.message);
    } else if (cli_opt(argc, argv, i, "--slots", &v)) {
        NEED("--slots");
        if (!cli_parse_uint(v, 1000000, &u))
            return cli_usage_error("--slots: \"%s\" is not an integer in 0..1000000", v);
        o->slots = (int64_t)u;
    } else if (cli_opt(argc, argv, i, "--segments", &v)) {
        NEED("--segments");
        if (!cli_parse_uint(v, 100000, &u) || u == 0)
            return cli_usage_error("--segments: \"%s\" is not an integer in 1..100000", v);
        o->segments = (uint32_t)u;
    } else if (cli_opt(argc, argv, i, "--bucket", &v)) {
        NEED("--bucket");
        if (remat_parse_size(v, &o->bucket_bytes, &e) != REMAT_OK || o->bucket_bytes == 0)
            return cli_usage_error("--bucket: %s", o->bucket_bytes ? e.message : "must be > 0");
    } else if (cli_opt(argc, argv, i, "--revolve-mode", &v)) {
        NEED("--revolve-mode");
        if (strcmp(v, "precise") == 0) o->revolve_mode = REMAT_REVOLVE_PRECISE;
        else if (strcmp(v, "uniform-cost") == 0) o->revolve_mode = REMAT_REVOLVE_UNIFORM_COST;
        else if (strcmp(v, "uniform-memory") == 0) o->revolve_mode = REMAT_REVOLVE_UNIFORM_MEMORY;
        else return cli_usage_error("--revolve-mode: \"%s\" is not precise, uniform-cost or uniform-memory", v);
    } else if (cli_opt(argc, argv, i, "--bandwidth", &v) || cli_opt(argc, argv, i, "-b", &v)) {
        NEED("--bandwidth");
        co->bandwidth_text = v; /* "SIZE/s" needs the chain's time unit: parsed later */
    } else if (cli_opt(argc, argv, i, "--values", &v)) {
        NEED("--values");
        if (!cli_parse_uint(v, 100000, &u) || u == 0)
            return cli_usage_error("--values: \"%s\" is not an integer in 1..100000", v);
        o->offload_values = (uint32_t)u;
    } else if (strcmp(a, "--no-del") == 0) {
        o->exact_no_del = 1;
    } else if (cli_opt(argc, argv, i, "--threads", &v)) {
        NEED("--threads");
        if (!cli_parse_uint(v, REMAT_MAX_THREADS, &u))
            return cli_usage_error("--threads: \"%s\" is not an integer in 0..%u", v,
                                   REMAT_MAX_THREADS);
        o->threads = (unsigned)u;
    } else if (cli_opt(argc, argv, i, "--max-work", &v)) {
        NEED("--max-work");
        if (remat_parse_size(v, &o->max_work_bytes, &e) != REMAT_OK)
            return cli_usage_error("--max-work: %s", e.message);
    } else if (cli_opt(argc, argv, i, "--max-time", &v)) {
        NEED("--max-time");
        double secs;
        if (!cli_parse_double(v, &secs))
            return cli_usage_error("--max-time: \"%s\" is not a number of seconds >= 0", v);
        o->max_seconds = secs > 0 ? secs : -1; /* 0: no limit */
    } else if (strcmp(a, "--progress") == 0) {
        co->progress.mode = 1;
    } else if (strcmp(a, "--quiet") == 0) {
        co->progress.mode = -1;
    } else if (cli_opt(argc, argv, i, "-o", &v) || cli_opt(argc, argv, i, "--output", &v)) {
        NEED("-o");
        co->output = v;
    } else {
        return -1; /* not a chain option */
    }
#undef NEED
    return CLI_OK;
}

int cli_load_chain(const char *path, remat_chain **out) {
    remat_error e;
    remat_status s = remat_chain_load(path, out, &e);
    return s == REMAT_OK ? CLI_OK : cli_report(s, &e);
}

/* One standard line when the minimum is known, so scripts can read it. */
int cli_report_infeasible(const remat_error *e, const remat_solve_options *o) {
    char need[32];
    if (e->min_memory) {
        cli_human_bytes(e->min_memory, need);
        cli_line("%s: no schedule fits in %llu bytes; it needs at least %llu bytes (%s)",
                 remat_algorithm_name(o->algorithm), (unsigned long long)o->memory,
                 (unsigned long long)e->min_memory, need);
    } else {
        cli_line("%s", e->message);
    }
    return CLI_INFEASIBLE;
}

int cli_chain_opts_finish(cli_chain_opts *co, const remat_chain *c) {
    /* pofo runs without a link (it is then optimal), but only when asked:
     * a forgotten --bandwidth must not pass silently */
    if (!co->bandwidth_text && co->solve.algorithm == REMAT_ALG_POFO)
        return cli_usage_error("pofo needs --bandwidth B, the host link (bytes per time unit or "
                               "SIZE/s); --bandwidth 0 means no link, and gives optimal's "
                               "schedule");
    if (!co->bandwidth_text) return CLI_OK;
    co->have_bandwidth = 1;
    return cli_parse_bandwidth(co->bandwidth_text, c, &co->solve.bandwidth);
}

void cli_print_algorithms(FILE *f) {
    fprintf(f, "\nalgorithms (-a):\n");
    for (size_t a = 0; a < remat_algorithm_count(); a++)
        fprintf(f, "  %-13s %s%s\n", remat_algorithm_name((remat_algorithm)a),
                remat_algorithm_summary((remat_algorithm)a),
                remat_algorithm_is_offload((remat_algorithm)a) ? " [offload, -b]" : "");
}

int cli_chain_command(int argc, char **argv, const char *help, cli_extra_opt extra, void *ctx,
                      cli_chain_opts *co, remat_chain **chain) {
    const char *cmd = argv[0], *chain_path = NULL;
    *chain = NULL;
    memset(co, 0, sizeof *co);
    remat_solve_options_init(&co->solve);
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(help, stdout);
            cli_print_algorithms(stdout);
            return CLI_OK;
        }
        int rc = extra ? extra(argc, argv, &i, ctx) : -1;
        if (rc < 0) rc = cli_chain_option(argc, argv, &i, co);
        if (rc > 0) return rc;
        if (rc == 0) continue;
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("%s: unknown option %s; see remat %s --help", cmd, argv[i], cmd);
        if (chain_path)
            return cli_usage_error("%s: one CHAIN only (got %s and %s)", cmd, chain_path, argv[i]);
        chain_path = argv[i];
    }
    if (!chain_path) return cli_usage_error("%s: missing CHAIN; see remat %s --help", cmd, cmd);
    int rc = cli_check_output(co->output, chain_path);
    if (rc != CLI_OK) return rc;
    rc = cli_load_chain(chain_path, chain);
    if (rc == CLI_OK) rc = cli_chain_opts_finish(co, *chain);
    if (rc != CLI_OK) {
        remat_chain_free(*chain);
        *chain = NULL;
    }
    return rc;
}
