/* Regression tests for the fuzzing and robustness review (fuzz/): each case
 * pins down one bug that was found, so it stays fixed. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "remat/remat.h"
#include "test.h"
#include "common/testlib.h"

#define BIG (((uint64_t)1 << 53) - 1)

static remat_stage *big_stages(size_t n) {
    remat_stage *st = calloc(n, sizeof *st);
    for (size_t i = 0; st && i < n; i++) {
        st[i].fwd_time = 1;
        st[i].bwd_time = 1;
        st[i].out_bytes = st[i].saved_bytes = st[i].grad_bytes = BIG;
        st[i].fwd_overhead = st[i].bwd_overhead = BIG;
    }
    return st;
}

/* Sizes below 2^53 each could still add up past 2^64 in the simulator's held
 * memory (3 values a stage, 10^5 stages): the validator caps the total. */
static void total_size_overflow_rejected(void) {
    remat_stage *st = big_stages(200);
    ASSERT_TRUE(st != NULL);
    remat_chain *c = NULL;
    remat_error e;
    remat_status s = remat_chain_create("big", BIG, BIG, st, 200, &c, &e);
    free(st);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_TRUE(c == NULL);
    ASSERT_CONTAINS(e.message, "stages: the sizes add up to 2^62");
}

/* The same through the JSON loader, whose message names the source. */
static void total_size_overflow_rejected_json(void) {
    char *text = NULL;
    size_t cap = 300 * 200 + 256, len = 0;
    text = malloc(cap);
    ASSERT_TRUE(text != NULL);
    len += (size_t)snprintf(text + len, cap - len,
                            "{\"format\": \"remat-chain-1\", \"input_bytes\": 1, \"stages\": [");
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "%s{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": %llu, "
                                "\"saved_bytes\": %llu, \"grad_bytes\": %llu}",
                                i ? ", " : "", (unsigned long long)BIG, (unsigned long long)BIG,
                                (unsigned long long)BIG);
    len += (size_t)snprintf(text + len, cap - len, "]}");
    remat_chain *c = NULL;
    remat_error e;
    remat_status s = remat_chain_from_json(text, len, "big.json", &c, &e);
    free(text);
    ASSERT_STATUS(s, REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "big.json: stages: the sizes add up");
}

/* Just under the cap: 100 stages of 4 sizes near 2^53 are accepted and the
 * simulator's sums do not wrap (store-all holds a[0] and every abar). */
static void large_total_simulates_without_wrap(void) {
    remat_stage *st = big_stages(100);
    ASSERT_TRUE(st != NULL);
    remat_chain *c = NULL;
    remat_error e;
    remat_status s = remat_chain_create("big", BIG, BIG, st, 100, &c, &e);
    free(st);
    ASSERT_STATUS(s, REMAT_OK);
    remat_schedule *sc = NULL;
    ASSERT_STATUS(remat_schedule_create("t", &sc, &e), REMAT_OK);
    for (uint32_t i = 1; i <= 100; i++) {
        remat_op op = {REMAT_OP_FALL, 0, i, 0};
        ASSERT_STATUS(remat_schedule_push(sc, op, &e), REMAT_OK);
    }
    for (uint32_t i = 100; i >= 1; i--) {
        remat_op op = {REMAT_OP_B, 0, i, 0};
        ASSERT_STATUS(remat_schedule_push(sc, op, &e), REMAT_OK);
    }
    remat_sim_result *r = NULL;
    ASSERT_STATUS(remat_simulate(c, sc, NULL, &r, &e), REMAT_OK);
    ASSERT_TRUE(r->valid);
    ASSERT_LE_U64(101 * BIG, r->peak_bytes);
    ASSERT_LE_U64(r->peak_bytes, 400 * BIG);
    uint64_t sim_peak = r->peak_bytes;
    remat_sim_result_free(r);
    /* store-all's peak is a cost: given whatever its size (issue 23). No
     * solver can meet a limit below 2^53 here; it must say so, not wrap. */
    uint64_t peak = 0, mm = 1;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, &e), REMAT_OK);
    ASSERT_TRUE(peak > REMAT_MAX_BYTES);
    ASSERT_EQ_U64(peak, sim_peak);
    remat_solve_options o;
    remat_solve_options_init(&o);
    ASSERT_STATUS(remat_min_memory(c, &o, &mm, &e), REMAT_E_INFEASIBLE);
    ASSERT_EQ_U64(mm, 0);
    ASSERT_TRUE(e.min_memory >= REMAT_MAX_BYTES);
    ASSERT_CONTAINS(e.message, "no limit below 2^53 bytes fits");
    o.algorithm = REMAT_ALG_SEQUENTIAL;
    ASSERT_STATUS(remat_min_memory(c, &o, &mm, &e), REMAT_E_INFEASIBLE);
    ASSERT_CONTAINS(e.message, "below 2^53 bytes");
    remat_schedule_free(sc);
    remat_chain_free(c);
}

/* A chain whose times add up to infinity is refused at load; one whose
 * total passes the limit is too (a solver's schedule would overflow); a
 * hand-written schedule that recomputes more than any solver would can still
 * overflow: the result JSON must stay JSON. */
static void infinite_time_writes_valid_json(void) {
    remat_stage st[2] = {{.fwd_time = 1e308, .bwd_time = 1e308, .out_bytes = 1, .saved_bytes = 1},
                         {.fwd_time = 1e308, .bwd_time = 1e308, .out_bytes = 1, .saved_bytes = 1}};
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("slow", 1, 1, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "times (fwd_time + bwd_time) add up to inf");
    for (int i = 0; i < 2; i++)
        st[i] = (remat_stage){.fwd_time = 2e307, .out_bytes = 1, .saved_bytes = 1};
    ASSERT_STATUS(remat_chain_create("slow", 1, 1, st, 2, &c, &e), REMAT_OK);
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_schedule_create("t", &s, &e), REMAT_OK);
    const remat_op ops[] = {{REMAT_OP_FALL, 0, 1, 0}, {REMAT_OP_FALL, 0, 1, 0},
                            {REMAT_OP_FALL, 0, 1, 0}, {REMAT_OP_FALL, 0, 1, 0},
                            {REMAT_OP_FALL, 0, 1, 0}, {REMAT_OP_FALL, 0, 1, 0},
                            {REMAT_OP_FALL, 0, 1, 0}, {REMAT_OP_FALL, 0, 1, 0},
                            {REMAT_OP_FALL, 0, 1, 0}, {REMAT_OP_FALL, 0, 2, 0},
                            {REMAT_OP_B, 0, 2, 0},    {REMAT_OP_B, 0, 1, 0}};
    for (size_t k = 0; k < 12; k++) ASSERT_STATUS(remat_schedule_push(s, ops[k], &e), REMAT_OK);
    for (int timeline = 0; timeline < 2; timeline++) {
        remat_sim_options o;
        remat_sim_options_init(&o);
        o.record_timeline = timeline;
        o.bandwidth = timeline ? 1e-300 : 0;
        remat_sim_result *r = NULL;
        ASSERT_STATUS(remat_simulate(c, s, &o, &r, &e), REMAT_OK);
        ASSERT_TRUE(r->valid);
        ASSERT_TRUE(isinf(r->time));
        char *json = NULL;
        ASSERT_STATUS(remat_sim_result_to_json(r, &json, &e), REMAT_OK);
        cJSON *doc = cJSON_Parse(json);
        ASSERT_TRUE(doc != NULL);
        ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(doc, "time")));
        cJSON_Delete(doc);
        remat_free(json);
        remat_sim_result_free(r);
    }
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Public entry points reject NULL arguments with REMAT_E_INPUT. */
static void null_arguments(void) {
    remat_error e;
    remat_op op;
    remat_algorithm a;
    char *json = NULL;
    uint64_t m;
    ASSERT_STATUS(remat_op_parse(NULL, &op, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "remat_op_parse");
    ASSERT_STATUS(remat_op_parse("Fn 1", NULL, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_schedule_push(NULL, op, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_algorithm_parse(NULL, &a, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_algorithm_parse("optimal", NULL, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_sim_result_to_json(NULL, &json, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_store_all_cost(NULL, &m, NULL, &e), REMAT_E_INPUT);
    remat_solve_options o;
    remat_solve_options_init(&o);
    ASSERT_STATUS(remat_min_memory(NULL, &o, &m, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "remat_min_memory");
    /* Helpers without a status answer instead of crashing. */
    remat_solve_options_init(NULL);
    remat_sim_options_init(NULL);
    remat_join_options_init(NULL);
    remat_op_format(op, NULL);
    remat_exec_ref_format((remat_exec_ref){0, 0}, NULL);
    ASSERT_EQ_U64(remat_chain_a_bytes(NULL, 0), 0);
    ASSERT_EQ_U64(remat_chain_abar_bytes(NULL, 1), 0);
    ASSERT_EQ_U64(remat_chain_d_bytes(NULL, 0), 0);
    ASSERT_STATUS(remat_read_file("x", NULL, NULL, &e), REMAT_E_INPUT);
    ASSERT_EQ_U64(remat_sizeof(NULL), 0);
}

/* Every infeasible answer names the memory that would do, for every algorithm,
 * a limit below the input included (the Python binding used to work it out
 * itself for exact). */
static void infeasible_always_names_the_minimum(void) {
    remat_stage st[3] = {{.fwd_time = 1, .bwd_time = 2, .out_bytes = 10, .saved_bytes = 30},
                         {.fwd_time = 2, .bwd_time = 2, .out_bytes = 20, .saved_bytes = 40},
                         {.fwd_time = 1, .bwd_time = 1, .out_bytes = 4, .saved_bytes = 4}};
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("three", 8, 8, st, 3, &c, &e), REMAT_OK);
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = (remat_algorithm)a;
        o.bandwidth = 1;
        o.threads = 1;
        for (uint64_t m = 0; m < 16; m += 7) { /* 0, 7: below the input; 14: above it */
            o.memory = m;
            remat_schedule *s = NULL;
            remat_status r = remat_solve(c, &o, &s, &e);
            if (r == REMAT_OK) {
                remat_schedule_free(s);
                continue;
            }
            ASSERT_STATUS(r, REMAT_E_INFEASIBLE);
            if (e.min_memory <= m)
                TEST_FAIL_("%s at %llu: min_memory %llu", remat_algorithm_name(o.algorithm),
                           (unsigned long long)m, (unsigned long long)e.min_memory);
            o.memory = e.min_memory;
            ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
            remat_schedule_free(s);
            o.memory = m;
        }
    }
    remat_chain_free(c);
}

/* Structs the caller built or changed are checked before they are read. */
static void hand_made_structs_are_checked(void) {
    remat_stage st[2] = {{.fwd_time = 1, .bwd_time = 1, .out_bytes = 4, .saved_bytes = 8},
                         {.fwd_time = 1, .bwd_time = 1, .out_bytes = 1, .saved_bytes = 1}};
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("c", 4, 4, st, 2, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(remat_chain_a_bytes(c, 1), 4);
    ASSERT_EQ_U64(remat_chain_a_bytes(c, 3), 0); /* past n */
    ASSERT_EQ_U64(remat_chain_abar_bytes(c, 99), 0);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = 1000;
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
    remat_sim_result *r = NULL;
    char *json = NULL;
    uint64_t m;
    size_t n = c->n;
    c->n = 0;
    remat_schedule *none = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &none, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_store_all_cost(c, &m, NULL, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_chain_to_json(c, &json, &e), REMAT_E_INPUT);
    c->n = n;
    c->stages[0].fwd_time = NAN;
    ASSERT_STATUS(remat_min_memory(c, &o, &m, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "remat_min_memory: stages[0].fwd_time");
    c->stages[0].fwd_time = 1;
    memset(c->name, 'x', sizeof c->name); /* no terminating NUL */
    ASSERT_STATUS(remat_chain_to_json(c, &json, &e), REMAT_E_INPUT);
    c->name[0] = '\0';
    size_t k = s->n_ops;
    remat_op *ops = s->ops;
    s->ops = NULL;
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_schedule_to_json(s, &json, &e), REMAT_E_INPUT);
    remat_exec_plan *pl = NULL;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &pl, &e), REMAT_E_INPUT);
    s->ops = ops;
    s->n_ops = s->cap + 1;
    ASSERT_STATUS(remat_schedule_push(s, ops[0], &e), REMAT_E_INPUT);
    s->n_ops = k;
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_OK);
    ASSERT_TRUE(r->valid);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* remat_min_memory doubled its upper bound from the store-all peak, which
 * stays 0 for a chain of empty values: it must still end, for every algorithm
 * (pofo aside: see the fuzz report). */
static void min_memory_of_empty_chain_ends(void) {
    remat_stage st[3] = {{.fwd_time = 1, .bwd_time = 1}, {.fwd_time = 0, .bwd_time = 2},
                         {.fwd_time = 1, .bwd_time = 0}};
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("empty", 0, 0, st, 3, &c, &e), REMAT_OK);
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        if (a == REMAT_ALG_POFO) continue;
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = (remat_algorithm)a;
        o.threads = 1;
        o.bandwidth = 1;
        uint64_t m = 12345;
        remat_status s = remat_min_memory(c, &o, &m, &e);
        ASSERT_TRUE(s == REMAT_OK || s == REMAT_E_INFEASIBLE);
        if (s == REMAT_OK) {
            ASSERT_EQ_U64(m, 0);
            o.memory = m;
            remat_schedule *sc = NULL;
            ASSERT_STATUS(remat_solve(c, &o, &sc, &e), REMAT_OK);
            ASSERT_TRUE(test_schedule_ok(c, sc, m));
            remat_schedule_free(sc);
        }
    }
    remat_chain_free(c);
}

/* pofo once hung (minutes) on a 5-stage chain with a forward time of 1e300
 * (fuzz/repro/pofo_hang_1e300.json): its repair loop simulated once per Wait.
 * Every limit must now finish, and every schedule simulate within it. */
static void pofo_extreme_times_finish(void) {
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_load("fuzz/repro/pofo_hang_1e300.json", &c, &e), REMAT_OK);
    const uint64_t limits[] = {0, 2025, 2100, 2500, 4000};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = REMAT_ALG_POFO;
        o.bandwidth = 1;
        o.memory = limits[k];
        remat_schedule *s = NULL;
        remat_status st = remat_solve(c, &o, &s, &e);
        if (k == 0) {
            ASSERT_STATUS(st, REMAT_E_INFEASIBLE);
            ASSERT_EQ_U64(e.min_memory, 2025);
        } else {
            ASSERT_STATUS(st, REMAT_OK);
            ASSERT_TRUE(s->n_ops > 0);
        }
        remat_schedule_free(s);
    }
    remat_chain_free(c);
}

/* optimal once failed "no choice matches the table" when a partial save's B
 * time (1e300) was far above every stage's own: the table's time scale left
 * it out, so that save's time overflowed to infinity in the float table
 * (fuzz/repro/optimal_option_1e300.json). At 3598 bytes only that save fits. */
static void optimal_scale_counts_partial_saves(void) {
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_load("fuzz/repro/optimal_option_1e300.json", &c, &e), REMAT_OK);
    const int64_t slots[] = {0, -1, 7};
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.memory = 3598;
        o.slots = slots[k];
        remat_schedule *s = NULL;
        ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_OK);
        ASSERT_TRUE(s->time >= 1e300 && s->time < INFINITY);
        ASSERT_TRUE(test_schedule_ok(c, s, o.memory));
        remat_schedule_free(s);
    }
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"optimal_scale_counts_partial_saves", optimal_scale_counts_partial_saves},
    {"pofo_extreme_times_finish", pofo_extreme_times_finish},
    {"total_size_overflow_rejected", total_size_overflow_rejected},
    {"total_size_overflow_rejected_json", total_size_overflow_rejected_json},
    {"large_total_simulates_without_wrap", large_total_simulates_without_wrap},
    {"infinite_time_writes_valid_json", infinite_time_writes_valid_json},
    {"null_arguments", null_arguments},
    {"hand_made_structs_are_checked", hand_made_structs_are_checked},
    {"infeasible_always_names_the_minimum", infeasible_always_names_the_minimum},
    {"min_memory_of_empty_chain_ends", min_memory_of_empty_chain_ends},
};
TEST_MAIN(cases)
