/* The hostile inputs of issue 23, one case per cause, through the C API
 * (the command line's are in tests/cli/test_hostile.sh, the Python
 * binding's in tests/python/test_binding_hostile.py). */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink, mkfifo */
#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "solvers/revolve_internal.h"
#include "test.h"
#include "common/testlib.h"

static char dir[64];

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    dir[0] = '\0';
}

static void make_dir(void) {
    remove_dir();
    snprintf(dir, sizeof dir, "/tmp/remat-test-hostile-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

static char *slurp(const char *path) {
    char *text = NULL;
    if (remat_read_file(path, &text, NULL, NULL) != REMAT_OK) return NULL;
    return text;
}

/* Entries of the test directory whose name holds ".tmp-" (left-over
 * temporary files of the atomic writer). */
static int temp_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

/* ---- cause 1: -o naming a descriptor, a device or a FIFO is written
 * through, never replaced ---- */

static void write_through_descriptors(void) {
    make_dir();
    char f[128], p[64], l[128];
    snprintf(f, sizeof f, "%s/log.txt", dir);
    ASSERT_STATUS(remat_write_file(f, "old\n", 4, NULL), REMAT_OK);
    struct stat before, after;
    ASSERT_TRUE(stat(f, &before) == 0);
    /* as the shell's `>> log.txt` opens it */
    int fd = open(f, O_WRONLY | O_APPEND);
    ASSERT_TRUE(fd >= 0);
    snprintf(p, sizeof p, "/dev/fd/%d", fd);
    ASSERT_STATUS(remat_write_file(p, "one\n", 4, NULL), REMAT_OK);
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ASSERT_STATUS(remat_write_file(p, "two\n", 4, NULL), REMAT_OK);
    snprintf(l, sizeof l, "%s/out", dir); /* a link of the user's to a descriptor */
    snprintf(p, sizeof p, "/dev/fd/%d", fd);
    ASSERT_TRUE(symlink(p, l) == 0);
    ASSERT_STATUS(remat_write_file(l, "three\n", 6, NULL), REMAT_OK);
    char *t = slurp(f);
    ASSERT_TRUE(t && strcmp(t, "old\none\ntwo\nthree\n") == 0); /* appended, nothing lost */
    remat_free(t);
    ASSERT_TRUE(stat(f, &after) == 0);
    ASSERT_EQ_U64(after.st_ino, before.st_ino); /* the same file: not replaced */
    struct stat lb;
    ASSERT_TRUE(lstat(l, &lb) == 0 && S_ISLNK(lb.st_mode));
    ASSERT_EQ_INT(temp_files(), 0);
    /* a closed descriptor is an error, and nothing is created */
    close(fd);
    remat_error e;
    ASSERT_STATUS(remat_write_file(p, "lost\n", 5, &e), REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "is not open");
    ASSERT_STATUS(remat_write_file(l, "lost\n", 5, &e), REMAT_E_IO);
    ASSERT_TRUE(lstat(l, &lb) == 0 && S_ISLNK(lb.st_mode));
    /* a regular file named as such is still replaced atomically */
    ASSERT_STATUS(remat_write_file(f, "new\n", 4, NULL), REMAT_OK);
    ASSERT_TRUE(stat(f, &after) == 0);
    ASSERT_TRUE(after.st_ino != before.st_ino);
    remove_dir();
}

static void write_through_pipes_and_devices(void) {
    make_dir();
    int pfd[2];
    ASSERT_TRUE(pipe(pfd) == 0);
    char p[64], buf[64];
    snprintf(p, sizeof p, "/dev/fd/%d", pfd[1]);
    ASSERT_STATUS(remat_write_file(p, "piped", 5, NULL), REMAT_OK);
    ASSERT_EQ_INT(read(pfd[0], buf, sizeof buf), 5);
    ASSERT_TRUE(memcmp(buf, "piped", 5) == 0);
    close(pfd[0]);
    close(pfd[1]);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ASSERT_TRUE(mkfifo(fifo, 0600) == 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open returns */
    ASSERT_TRUE(rd >= 0);
    ASSERT_STATUS(remat_write_file(fifo, "through", 7, NULL), REMAT_OK);
    ASSERT_EQ_INT(read(rd, buf, sizeof buf), 7);
    close(rd);
    struct stat sb;
    ASSERT_TRUE(stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode)); /* still the FIFO */
    ASSERT_EQ_INT(temp_files(), 0);
    ASSERT_STATUS(remat_write_file("/dev/null", "x", 1, NULL), REMAT_OK);
    remat_error e;
    if (access("/dev/full", W_OK) == 0) {
        ASSERT_STATUS(remat_write_file("/dev/full", "x", 1, &e), REMAT_E_IO);
        ASSERT_CONTAINS(e.message, "/dev/full: cannot write");
    }
    remove_dir();
}

/* ---- cause 3: finite times whose schedules' sums overflow ---- */

static remat_chain *timed_chain(size_t n, double t, remat_error *e, remat_status *st) {
    remat_stage s[8];
    for (size_t i = 0; i < n; i++) s[i] = test_stage(t, t, 10, 20);
    remat_chain *c = NULL;
    *st = remat_chain_create("slow", 10, 10, s, n, &c, e);
    return c;
}

static void overflowing_times_refused(void) {
    remat_error e;
    remat_status st;
    /* every fwd_time 4e307: each is finite, their sum is not once recomputed */
    remat_chain *c = timed_chain(4, 4e307, &e, &st);
    ASSERT_STATUS(st, REMAT_E_INPUT);
    ASSERT_TRUE(c == NULL);
    ASSERT_CONTAINS(e.message, "chain: stages: the times (fwd_time + bwd_time) add up to");
    const char *doc =
        "{\"format\": \"remat-chain-1\", \"input_bytes\": 10, \"stages\": ["
        "{\"fwd_time\": 4e307, \"bwd_time\": 0, \"out_bytes\": 10, \"saved_bytes\": 10},"
        "{\"fwd_time\": 4e307, \"bwd_time\": 0, \"out_bytes\": 10, \"saved_bytes\": 10},"
        "{\"fwd_time\": 4e307, \"bwd_time\": 0, \"out_bytes\": 10, \"saved_bytes\": 10}]}";
    ASSERT_STATUS(remat_chain_from_json(doc, strlen(doc), "big.json", &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "big.json: stages: the times (fwd_time + bwd_time) add up to 1.2e+308");
    /* at the limit: n x total = DBL_MAX / 2 is accepted, and every solver's
     * schedule at the smallest memory has a finite time that can be written */
    const size_t n = 4;
    double t = DBL_MAX / 2 / (double)n / (2.0 * (double)n);
    c = timed_chain(n, t, &e, &st);
    ASSERT_STATUS(st, REMAT_OK);
    remat_chain_free(timed_chain(n, nextafter(t, INFINITY) * 1.0000001, &e, &st));
    ASSERT_STATUS(st, REMAT_E_INPUT);
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = (remat_algorithm)a;
        o.bandwidth = 1;
        uint64_t m = 0;
        ASSERT_STATUS(remat_min_memory(c, &o, &m, &e), REMAT_OK);
        o.memory = m;
        remat_schedule *s = NULL;
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
        ASSERT_TRUE(isfinite(s->time));
        char *json = NULL;
        ASSERT_STATUS(remat_schedule_to_json(s, &json, &e), REMAT_OK);
        remat_free(json);
        remat_schedule_free(s);
    }
    remat_chain_free(c);
}

/* ---- cause 7 and invalid UTF-8: names are refused, never cut short ---- */

static void names_refused_not_cut(void) {
    remat_stage st[2] = {test_stage(1, 1, 1, 1), test_stage(1, 1, 1, 1)};
    remat_chain *c = NULL;
    remat_error e;
    char *big = malloc(10001);
    ASSERT_TRUE(big != NULL);
    memset(big, 'x', 10000);
    big[10000] = '\0';
    ASSERT_STATUS(remat_chain_create(big, 1, 1, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "name: 10000 bytes long, more than the limit of 255");
    big[255] = '\0';
    ASSERT_STATUS(remat_chain_create(big, 1, 1, st, 2, &c, &e), REMAT_OK);
    ASSERT_EQ_INT(strlen(c->name), 255);
    remat_chain_free(c);
    big[255] = 'x';
    big[256] = '\0';
    ASSERT_STATUS(remat_chain_create(big, 1, 1, st, 2, &c, &e), REMAT_E_INPUT);
    remat_schedule *s = NULL;
    big[40] = '\0';
    ASSERT_STATUS(remat_schedule_create(big, &s, &e), REMAT_E_INPUT);
    ASSERT_TRUE(s == NULL);
    ASSERT_CONTAINS(e.message, "algorithm: 40 bytes long");
    free(big);
    memset(st[0].name, 'a', sizeof st[0].name); /* no NUL at all */
    ASSERT_STATUS(remat_chain_create("c", 1, 1, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "stages[0].name: longer than the limit of 255 bytes");
    st[0].name[0] = '\0';
    static const struct {
        const char *text;
        int valid;
    } names[] = {{"caf\xc3\xa9", 1},         {"\xf0\x9f\x98\x80", 1}, {"\xf4\x8f\xbf\xbf", 1},
                 {"x\xff", 0},                {"\xc0\xaf", 0},          {"\xed\xa0\x80", 0},
                 {"\xf4\x90\x80\x80", 0},     {"\xe2\x82", 0},          {"\x80", 0}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        ASSERT_EQ_INT(remat__utf8_invalid_at(names[k].text) == SIZE_MAX, names[k].valid);
        ASSERT_STATUS(remat_chain_create(names[k].text, 1, 1, st, 2, &c, &e),
                      names[k].valid ? REMAT_OK : REMAT_E_INPUT);
        remat_chain_free(c);
        snprintf(st[1].name, sizeof st[1].name, "%s", names[k].text);
        ASSERT_STATUS(remat_chain_create("c", 1, 1, st, 2, &c, &e),
                      names[k].valid ? REMAT_OK : REMAT_E_INPUT);
        if (!names[k].valid) ASSERT_CONTAINS(e.message, "stages[1].name: not valid UTF-8");
        remat_chain_free(c);
        st[1].name[0] = '\0';
    }
    const char *doc = "{\"format\": \"remat-chain-1\", \"name\": \"a\xff\", \"input_bytes\": 1, "
                      "\"stages\": [{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, "
                      "\"saved_bytes\": 1}]}";
    ASSERT_STATUS(remat_chain_from_json(doc, strlen(doc), "u.json", &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "u.json: name: not valid UTF-8 (byte 1 is 0xFF)");
}

/* ---- cause 8: an op kind without a text is refused ---- */

static void push_refuses_unknown_ops(void) {
    remat_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_schedule_create("t", &s, &e), REMAT_OK);
    remat_op bad_kind = {200, 0, 1, 0}, bad_value = {REMAT_OP_DEL, 7, 1, 0};
    ASSERT_STATUS(remat_schedule_push(s, bad_kind, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "op kind 200");
    ASSERT_STATUS(remat_schedule_push(s, bad_value, &e), REMAT_E_INPUT);
    ASSERT_EQ_U64(s->n_ops, 0);
    for (uint8_t k = 0; k <= REMAT_OP_WAIT; k++) {
        remat_op op = {k, k > REMAT_OP_B ? REMAT_VALUE_ABAR : 0, 3, 0};
        ASSERT_STATUS(remat_schedule_push(s, op, &e), REMAT_OK);
    }
    /* what was pushed can be written and read back */
    char *json = NULL;
    ASSERT_STATUS(remat_schedule_to_json(s, &json, &e), REMAT_OK);
    remat_schedule *back = NULL;
    ASSERT_STATUS(remat_schedule_from_json(json, strlen(json), "s", &back, &e), REMAT_OK);
    ASSERT_EQ_U64(back->n_ops, s->n_ops);
    for (size_t k = 0; k < s->n_ops; k++)
        ASSERT_TRUE(back->ops[k].kind == s->ops[k].kind && back->ops[k].value == s->ops[k].value &&
                    back->ops[k].index == s->ops[k].index);
    remat_free(json);
    remat_schedule_free(back);
    remat_schedule_free(s);
}

/* ---- cause 11: remat_join_simulate never reads past the ops a schedule
 * may have ---- */

static void join_simulate_caps_ops(void) {
    remat_join_problem p;
    uint32_t len[1] = {2};
    remat_error e;
    ASSERT_STATUS(remat_join_problem_set(&p, 1, len, 1, 1, 1, 4, &e), REMAT_OK);
    remat_join_op ops[1] = {{REMAT_JOIN_OP_T, 0, 0}};
    remat_join_sim_result *r = NULL;
    /* the array holds one op: a call that read n of them would fault (ASan) */
    ASSERT_STATUS(remat_join_simulate(&p, ops, REMAT_JOIN_MAX_OPS + 1, 0, &r, &e), REMAT_E_INPUT);
    ASSERT_TRUE(r == NULL);
    ASSERT_CONTAINS(e.message, "more than REMAT_JOIN_MAX_OPS");
    ASSERT_STATUS(remat_join_simulate(&p, ops, 1, 0, &r, &e), REMAT_OK);
    ASSERT_TRUE(!r->valid);
    remat_join_sim_result_free(r);
}

/* ---- cause 2: revolve honours the time limit before its O(n^3) bounds ---- */

static remat_chain *long_chain(size_t n) {
    test_rng rng = {(uint64_t)n};
    test_chain_spec spec = {.n = n, .max_bytes = 100000000, .overheads = 1};
    return test_random_chain(&rng, &spec);
}

static void revolve_refuses_long_chains_at_once(void) {
    remat_error e;
    for (int k = 0; k < 2; k++) {
        remat_chain *c = long_chain(k ? 5000 : 2000);
        uint64_t peak = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, &e), REMAT_OK);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_REVOLVE;
        o.memory = peak / 2;
        o.bucket_bytes = 1;
        remat__revolve_stats st;
        remat_schedule *s = NULL;
        ASSERT_STATUS(remat__revolve_solve_stats(c, &o, &s, &st, &e), REMAT_E_TOO_LARGE);
        ASSERT_EQ_U64(st.bound_actions, 0); /* refused before the bounds ran */
        ASSERT_CONTAINS(e.message, "revolve: estimated to take about");
        if (k) ASSERT_CONTAINS(e.message, "its bounds alone take about");
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_TOO_LARGE);
        o.bucket_bytes = 0;
        uint64_t m = 0;
        ASSERT_STATUS(remat_min_memory(c, &o, &m, &e), REMAT_E_TOO_LARGE);
        ASSERT_CONTAINS(e.message, "revolve: the smallest-memory search");
        remat_curve *cv = NULL;
        ASSERT_STATUS(remat_curve_compute(c, &o, 0, &cv, &e), REMAT_E_TOO_LARGE);
        remat_chain_free(c);
    }
}

/* The estimate's cells bound the DP's from above, on any chain, mode and
 * bucket, and the bounds never try more than (n^3 - n) / 6 actions. */
static void revolve_estimate_is_an_upper_bound(void) {
    test_rng rng = {23};
    for (int it = 0; it < 400; it++) {
        test_chain_spec spec = {.n = 1 + test_rng_range(&rng, 0, 24), .max_bytes = 1000,
                                .overheads = (int)test_rng_range(&rng, 0, 1),
                                .grad_sizes = (int)test_rng_range(&rng, 0, 1),
                                .zero_sizes = (int)test_rng_range(&rng, 0, 1)};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t peak = 0;
        remat_store_all_cost(c, &peak, NULL, NULL);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_REVOLVE;
        o.memory = test_rng_range(&rng, c->input_bytes, peak + 10);
        o.bucket_bytes = test_rng_range(&rng, 0, 3) ? 0 : test_rng_range(&rng, 1, 50);
        o.revolve_mode = (remat_revolve_mode)test_rng_range(&rng, 0, 2);
        o.threads = 1;
        o.max_seconds = 1e9; /* a limit, so that the estimate is made */
        remat__revolve_stats st;
        remat_schedule *s = NULL;
        remat_status rc = remat__revolve_solve_stats(c, &o, &s, &st, NULL);
        ASSERT_TRUE(rc == REMAT_OK || rc == REMAT_E_INFEASIBLE);
        ASSERT_TRUE(st.estimate_cells >= (double)st.cells);
        double n = (double)c->n;
        ASSERT_TRUE((double)st.bound_actions <= (n * n * n - n) / 6);
        remat_schedule_free(s);
        remat_chain_free(c);
    }
}

/* The smallest memory from the bounds alone: with a fixed bucket the DP
 * fits there and not a byte below. */
static void revolve_min_memory_from_bounds(void) {
    test_rng rng = {5};
    for (int it = 0; it < 100; it++) {
        test_chain_spec spec = {.n = 1 + test_rng_range(&rng, 0, 12), .max_bytes = 500,
                                .overheads = 1, .grad_sizes = 1};
        remat_chain *c = test_random_chain(&rng, &spec);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_REVOLVE;
        o.bucket_bytes = it % 2 ? 1 + test_rng_range(&rng, 0, 20) : 0;
        uint64_t m = 0;
        remat_error e;
        ASSERT_STATUS(remat_min_memory(c, &o, &m, &e), REMAT_OK);
        o.memory = m;
        remat_schedule *s = NULL;
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
        ASSERT_TRUE(test_schedule_ok(c, s, m));
        remat_schedule_free(s);
        if (o.bucket_bytes && m > c->input_bytes) {
            o.memory = m - 1;
            ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
            ASSERT_EQ_U64(e.min_memory, m);
        }
        remat_chain_free(c);
    }
}

/* ---- the time bound of every solver: with a limit below any estimate,
 * each refuses before its work, or has none worth a limit ---- */

static void every_solver_refuses_past_the_limit(void) {
    remat_chain *c = long_chain(40);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = (remat_algorithm)a;
        o.memory = peak / 2;
        o.bandwidth = 1e4;
        o.max_seconds = 1e-12;
        remat_schedule *s = NULL;
        remat_error e;
        remat_status st = remat_solve(c, &o, &s, &e);
        remat_schedule_free(s);
        /* sequential and store-all take O(n sqrt n) at most: nothing to refuse */
        int bounded = a == REMAT_ALG_SEQUENTIAL || a == REMAT_ALG_STORE_ALL;
        if (bounded) {
            ASSERT_TRUE(st == REMAT_OK || st == REMAT_E_INFEASIBLE);
        } else {
            ASSERT_STATUS(st, REMAT_E_TOO_LARGE);
        }
        /* the smallest memory by a search over solves (or revolve's bounds)
         * is checked like them; optimal's and exact's come from one pass */
        uint64_t m = 0;
        st = remat_min_memory(c, &o, &m, &e);
        if (!bounded && a != REMAT_ALG_EXACT && a != REMAT_ALG_OPTIMAL)
            ASSERT_STATUS(st, REMAT_E_TOO_LARGE);
    }
    remat_chain_free(c);
}

/* ---- threads: up to REMAT_MAX_THREADS asked, at most 64 run ---- */

static void threads_capped(void) {
    ASSERT_EQ_INT(remat__threads(REMAT_MAX_THREADS), REMAT__MAX_WORKERS);
    ASSERT_EQ_INT(remat__threads(3), 3);
    ASSERT_TRUE(remat__threads(0) >= 1 && remat__threads(0) <= REMAT__MAX_WORKERS);
    remat_chain *c = long_chain(30);
    uint64_t peak = 0;
    remat_store_all_cost(c, &peak, NULL, NULL);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = peak / 2;
    o.threads = REMAT_MAX_THREADS;
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
    ASSERT_TRUE(test_schedule_ok(c, s, o.memory));
    remat_schedule_free(s);
    o.threads = REMAT_MAX_THREADS + 1;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_E_INPUT);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"write_through_descriptors", write_through_descriptors},
    {"write_through_pipes_and_devices", write_through_pipes_and_devices},
    {"overflowing_times_refused", overflowing_times_refused},
    {"names_refused_not_cut", names_refused_not_cut},
    {"push_refuses_unknown_ops", push_refuses_unknown_ops},
    {"join_simulate_caps_ops", join_simulate_caps_ops},
    {"revolve_refuses_long_chains_at_once", revolve_refuses_long_chains_at_once},
    {"revolve_estimate_is_an_upper_bound", revolve_estimate_is_an_upper_bound},
    {"revolve_min_memory_from_bounds", revolve_min_memory_from_bounds},
    {"every_solver_refuses_past_the_limit", every_solver_refuses_past_the_limit},
    {"threads_capped", threads_capped},
};
TEST_MAIN(cases)
