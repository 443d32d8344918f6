/* Core API: chain creation, op text, solve options, dispatch and store-all. */
#include <stdlib.h>
#include <string.h>

#include "common/testlib.h"
#include "test.h"

static void chain_create_validates(void) {
    remat_stage st[2] = {test_stage(1, 2, 10, 20), test_stage(1, 1, 1, 1)};
    remat_chain *c = (remat_chain *)1;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 0, &c, &e), REMAT_E_INPUT);
    ASSERT_TRUE(c == NULL);
    ASSERT_CONTAINS(e.message, "stages");
    st[0].saved_bytes = 5; /* below out_bytes */
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "stages[0].saved_bytes");
    st[0].saved_bytes = 20;
    st[1].bwd_time = NAN;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "stages[1].bwd_time");
    st[1].bwd_time = -1;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_E_INPUT);
    st[1].bwd_time = 1;
    st[1].fwd_overhead = REMAT_MAX_BYTES;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "stages[1].fwd_overhead");
    st[1].fwd_overhead = 0;
    ASSERT_STATUS(remat_chain_create("x", REMAT_MAX_BYTES, 5, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "input_bytes");
    ASSERT_STATUS(remat_chain_create("x", 5, 7, st, 2, &c, &e), REMAT_OK);
    /* accessors: a[0] is the input, d[0] its gradient, the seed d[n] counts 0 */
    ASSERT_EQ_U64(remat_chain_a_bytes(c, 0), 5);
    ASSERT_EQ_U64(remat_chain_d_bytes(c, 0), 7);
    ASSERT_EQ_U64(remat_chain_a_bytes(c, 1), 10);
    ASSERT_EQ_U64(remat_chain_abar_bytes(c, 1), 20);
    ASSERT_EQ_U64(remat_chain_d_bytes(c, 2), 0);
    remat_chain_free(c);
}

/* The optional fields: options are deep-copied (the caller keeps its own
 * array), fall_overhead defaults to fwd_overhead, and each bad option field
 * is named. */
/* remat_chain_create refuses st (two stages) with a message that names msg,
 * and leaves no chain. */
static void create_refused(const remat_stage *st, const char *msg) {
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, msg);
    ASSERT_TRUE(c == NULL);
}
#define ASSERT_REFUSED(st, msg)                \
    do {                                       \
        create_refused(st, msg);               \
        if (test_failed_) return;              \
    } while (0)

static void chain_create_options(void) {
    remat_stage_option o[2] = {{"half", 15, 2, 3, 4}, {"input", 10, 0, 5, 6}};
    remat_stage st[2] = {test_stage_full(1, 2, 10, 20, 10, 7, 0), test_stage(1, 1, 1, 1)};
    st[0].options = o;
    st[0].n_options = 2;
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_OK);
    ASSERT_TRUE(c->stages[0].options != o);
    o[0].saved_bytes = 99;
    ASSERT_EQ_U64(c->stages[0].options[0].saved_bytes, 15);
    ASSERT_TRUE(strcmp(c->stages[0].options[1].name, "input") == 0);
    ASSERT_EQ_INT(c->stages[0].has_fall_overhead, 0);
    ASSERT_EQ_U64(c->stages[0].fall_overhead, 7); /* fwd_overhead, the default */
    ASSERT_TRUE(c->stages[1].options == NULL);
    remat_chain_free(c);
    o[0].saved_bytes = 15;
    st[0].has_fall_overhead = 1; /* 0 is then Fall's own overhead */
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[0].fall_overhead, 0);
    remat_chain_free(c);
    /* each bad field, named in the message; the caller's arrays are untouched */
    o[1].saved_bytes = 9;
    ASSERT_REFUSED(st, "chain: stages[0].options[1].saved_bytes: 9 is less than out_bytes 10");
    o[1].saved_bytes = 10;
    o[0].bwd_time = INFINITY;
    ASSERT_REFUSED(st, "stages[0].options[0].bwd_time: not a finite number");
    o[0].bwd_time = 3;
    o[1].fall_overhead = REMAT_MAX_BYTES;
    ASSERT_REFUSED(st, "stages[0].options[1].fall_overhead: size 9007199254740992 is 2^53");
    o[1].fall_overhead = 0;
    memset(o[1].name, 'x', sizeof o[1].name);
    ASSERT_REFUSED(st, "stages[0].options[1].name: not terminated within 64 bytes");
    o[1].name[0] = '\0';
    st[0].fall_overhead = REMAT_MAX_BYTES;
    ASSERT_REFUSED(st, "stages[0].fall_overhead");
    st[0].has_fall_overhead = 0; /* the field is not read then */
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[0].fall_overhead, 7);
    remat_chain_free(c);
    st[0].n_options = REMAT_MAX_OPTIONS + 1;
    ASSERT_REFUSED(st, "stages[0].options: 9 options, more than the limit of 8");
    st[0].n_options = 1;
    st[0].options = NULL;
    ASSERT_REFUSED(st, "stages[0].options: 1 options but no option array");
}

/* The stopped Fall's fields through remat_chain_create: defaults where the
 * has_ flag is 0 (whatever the value), each bad value named. */
static void chain_create_stops(void) {
    remat_stage st[2] = {test_stage_full(4, 2, 10, 20, 10, 7, 0), test_stage(1, 1, 1, 1)};
    st[0].stop_time = 99; /* not read: has_stop_time is 0 */
    remat_chain *c = NULL;
    remat_error e;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_OK);
    ASSERT_NEAR(c->stages[0].stop_time, 4, 0);
    ASSERT_EQ_U64(c->stages[0].stop_saved_bytes, 20);
    ASSERT_EQ_U64(c->stages[0].stop_overhead, 7); /* fall_overhead's default, fwd_overhead */
    remat_chain_free(c);
    st[0].has_stop_time = st[0].has_stop_saved_bytes = st[0].has_stop_overhead = 5;
    st[0].stop_time = 4;
    st[0].stop_saved_bytes = 0;
    st[0].stop_overhead = 100;
    ASSERT_STATUS(remat_chain_create("x", 5, 5, st, 2, &c, &e), REMAT_OK);
    ASSERT_EQ_INT(c->stages[0].has_stop_time, 1); /* flags read as 0 or 1 */
    ASSERT_EQ_U64(c->stages[0].stop_overhead, 100);
    remat_chain_free(c);
    st[0].stop_time = 4.5;
    ASSERT_REFUSED(st, "chain: stages[0].stop_time: 4.5 is more than fwd_time 4");
    st[0].stop_time = NAN;
    ASSERT_REFUSED(st, "stages[0].stop_time: not a finite number");
    st[0].stop_time = 0;
    st[0].stop_saved_bytes = 21;
    ASSERT_REFUSED(st, "stages[0].stop_saved_bytes: 21 is more than saved_bytes 20");
    st[0].stop_saved_bytes = 20;
    st[0].stop_overhead = REMAT_MAX_BYTES;
    ASSERT_REFUSED(st, "stages[0].stop_overhead: size 9007199254740992 is 2^53");
    st[0].stop_overhead = 0;
    st[1].has_stop_saved_bytes = 1; /* the loss */
    ASSERT_REFUSED(st, "stages[1].stop_saved_bytes: the loss stage (the last) has no stopped Fall");
}

static void op_text_round_trips(void) {
    const char *good[] = {"Fn 1", "Fck 12", "Fall 3", "B 7", "Del a[0]", "Del abar[4]",
                          "Off abar[2]", "Pre a[9]", "Wait abar[1]", "Fall 3/1", "Fall 12/255"};
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        remat_op op;
        char back[REMAT_OP_TEXT_MAX];
        ASSERT_STATUS(remat_op_parse(good[k], &op, NULL), REMAT_OK);
        remat_op_format(op, back);
        ASSERT_TRUE(strcmp(back, good[k]) == 0);
    }
    const char *bad[] = {"", "F 1", "Fall", "Fall x", "Fall -1", "Fall 1 ", "B 99999999999",
                         "Del 3", "Del a[3", "Del b[3]", "Del abar[]", "fall 1", "Fall 1/",
                         "Fall 1/256", "Fall 1/1/1", "Fn 1/1", "B 2/0", "Fall /1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        remat_op op;
        remat_error e;
        ASSERT_STATUS(remat_op_parse(bad[k], &op, &e), REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, "op");
    }
}

static void algorithm_names_round_trip(void) {
    for (int a = 0; a < REMAT_ALG_COUNT_; a++) {
        remat_algorithm back;
        ASSERT_STATUS(remat_algorithm_parse(remat_algorithm_name((remat_algorithm)a), &back, NULL),
                      REMAT_OK);
        ASSERT_EQ_INT(back, a);
    }
    remat_algorithm x;
    remat_error e;
    ASSERT_STATUS(remat_algorithm_parse("magic", &x, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "magic");
}

static remat_chain *three_stage(void) {
    remat_stage st[3] = {test_stage(1, 2, 10, 30), test_stage(2, 3, 20, 40), test_stage(1, 1, 1, 2)};
    remat_chain *c = NULL;
    remat_chain_create("three", 10, 10, st, 3, &c, NULL);
    return c;
}

/* The table of algorithms, as the public functions read it. */
static void algorithm_table(void) {
    ASSERT_EQ_U64(remat_algorithm_count(), REMAT_ALG_COUNT_);
    remat_algorithm x;
    remat_error e;
    ASSERT_STATUS(remat_algorithm_parse("magic", &x, &e), REMAT_E_INPUT);
    remat_chain *c = three_stage();
    for (size_t a = 0; a < remat_algorithm_count(); a++) {
        remat_algorithm al = (remat_algorithm)a;
        ASSERT_CONTAINS(e.message, remat_algorithm_name(al)); /* the refusal lists them all */
        ASSERT_TRUE(strlen(remat_algorithm_summary(al)) > 10);
        int offload = al == REMAT_ALG_POFO || al == REMAT_ALG_OFFLOAD_ONLY ||
                      al == REMAT_ALG_OPPORTUNIST || al == REMAT_ALG_AUTOCAPPER;
        ASSERT_EQ_INT(remat_algorithm_is_offload(al), offload);
        /* every offload algorithm but pofo (rematerialization alone then) needs a link */
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.algorithm = al;
        o.memory = 1000;
        remat_schedule *s = NULL;
        remat_error se;
        remat_status st = remat_solve(c, &o, &s, &se);
        if (offload && al != REMAT_ALG_POFO) {
            ASSERT_STATUS(st, REMAT_E_INPUT);
            ASSERT_CONTAINS(se.message, "needs a bandwidth");
        } else {
            ASSERT_STATUS(st, REMAT_OK);
        }
        remat_schedule_free(s);
        for (size_t b = 0; b < a; b++)
            ASSERT_TRUE(strcmp(remat_algorithm_name(al), remat_algorithm_name((remat_algorithm)b)));
    }
    remat_chain_free(c);
    remat_algorithm out = (remat_algorithm)REMAT_ALG_COUNT_;
    ASSERT_TRUE(strcmp(remat_algorithm_name(out), "?") == 0);
    ASSERT_TRUE(strcmp(remat_algorithm_summary(out), "?") == 0);
    ASSERT_EQ_INT(remat_algorithm_is_offload(out), 0);
    ASSERT_EQ_INT(remat_algorithm_is_offload((remat_algorithm)-1), 0);
}

static void store_all_cost_and_schedule(void) {
    remat_chain *c = three_stage();
    ASSERT_TRUE(c != NULL);
    /* held: a0 10; Fall1 +30 = 40; Fall2 +40 = 80; Fall3 +2 = 82;
     * B3: +d2 20 -> 102 while it runs, then 102 - 2 = 100;
     * B2: +d1 10 -> 110 while it runs, then 110 - 20 - 40 = 50;
     * B1: +d0 10 -> 60 while it runs. Peak 110; time 4 forward + 6 backward = 10. */
    uint64_t peak = 0;
    double t = 0;
    ASSERT_STATUS(remat_store_all_cost(c, &peak, &t, NULL), REMAT_OK);
    ASSERT_EQ_U64(peak, 110);
    ASSERT_NEAR(t, 10, 0);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = REMAT_ALG_STORE_ALL;
    o.memory = 110;
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_solve(c, &o, &s, NULL), REMAT_OK);
    ASSERT_EQ_U64(s->n_ops, 6);
    ASSERT_TRUE(strcmp(s->algorithm, "store-all") == 0);
    ASSERT_EQ_U64(s->memory_limit, 110);
    ASSERT_TRUE(test_schedule_ok(c, s, 110));
    remat_schedule_free(s);
    remat_error e;
    o.memory = 109;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_TRUE(s == NULL);
    ASSERT_EQ_U64(e.min_memory, 110);
    uint64_t m = 0;
    ASSERT_STATUS(remat_min_memory(c, &o, &m, NULL), REMAT_OK);
    ASSERT_EQ_U64(m, 110);
    remat_chain_free(c);
}

static void solve_rejects_bad_options(void) {
    remat_chain *c = three_stage();
    remat_solve_options o;
    remat_schedule *s = NULL;
    remat_error e;
    remat_solve_options_init(&o);
    o.memory = 1000;
    o.slots = -2;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "slots");
    remat_solve_options_init(&o);
    o.memory = REMAT_MAX_BYTES;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "memory");
    remat_solve_options_init(&o);
    o.memory = 1000;
    o.algorithm = REMAT_ALG_OFFLOAD_ONLY;
    o.bandwidth = -1;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "bandwidth");
    o.bandwidth = INFINITY;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    o.bandwidth = 0; /* offload-only without a link */
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    remat_solve_options_init(&o);
    o.algorithm = (remat_algorithm)99;
    o.memory = 1000;
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INPUT);
    remat_solve_options_init(&o);
    o.memory = 5; /* below the input a[0] = 10 */
    ASSERT_STATUS(remat_solve(c, &o, &s, &e), REMAT_E_INFEASIBLE);
    ASSERT_CONTAINS(e.message, "input");
    ASSERT_TRUE(s == NULL);
    remat_chain_free(c);
}

static void simulate_rejects_bad_bandwidth(void) {
    remat_chain *c = three_stage();
    remat_schedule *s = NULL;
    remat_sim_result *r = NULL;
    remat_sim_options so;
    remat_error e;
    remat_schedule_create("x", &s, NULL);
    remat_sim_options_init(&so);
    so.bandwidth = -1;
    ASSERT_STATUS(remat_simulate(c, s, &so, &r, &e), REMAT_E_INPUT);
    so.bandwidth = NAN;
    ASSERT_STATUS(remat_simulate(c, s, &so, &r, &e), REMAT_E_INPUT);
    ASSERT_TRUE(r == NULL);
    /* an empty schedule is simulated and found invalid: it ends before B 3 */
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, &e), REMAT_OK);
    ASSERT_TRUE(!r->valid);
    ASSERT_CONTAINS(r->reason, "B 3");
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void struct_sizes(void) {
    ASSERT_EQ_U64(remat_sizeof("remat_solve_options"), sizeof(remat_solve_options));
    ASSERT_EQ_U64(remat_sizeof("remat_chain"), sizeof(remat_chain));
    ASSERT_EQ_U64(remat_sizeof("remat_stage_option"), sizeof(remat_stage_option));
    ASSERT_EQ_U64(remat_sizeof("remat_sim_result"), sizeof(remat_sim_result));
    ASSERT_EQ_U64(remat_sizeof("remat_join_curve"), sizeof(remat_join_curve));
    ASSERT_EQ_U64(remat_sizeof("remat_join_plan"), 0); /* opaque */
    ASSERT_EQ_U64(remat_sizeof("remat_chain "), 0);
    ASSERT_EQ_U64(remat_sizeof(NULL), 0);
}

static void version_and_status_names(void) {
    ASSERT_EQ_INT(remat_version_number(), REMAT_VERSION_NUMBER);
    ASSERT_CONTAINS(remat_version_string(), ".");
    ASSERT_CONTAINS(remat_status_name(REMAT_E_INFEASIBLE), "INFEASIBLE");
    ASSERT_CONTAINS(remat_status_name((remat_status)77), "UNKNOWN");
    ASSERT_CONTAINS(remat_strerror(REMAT_E_NOMEM), "out of memory");
    ASSERT_CONTAINS(remat_strerror((remat_status)-1), "unknown");
    /* The list is dense from 0: every value up to the last has a name and a text. */
    int seen = 0;
#define COUNT_STATUS(name, value, text) \
    ASSERT_EQ_INT(value, seen);         \
    ASSERT_TRUE(strcmp(remat_status_name(REMAT_##name), "REMAT_" #name) == 0); \
    ASSERT_TRUE(strcmp(remat_strerror(REMAT_##name), text) == 0);              \
    seen++;
    REMAT_STATUS_MAP(COUNT_STATUS)
#undef COUNT_STATUS
    ASSERT_EQ_INT(seen, 7);
    ASSERT_CONTAINS(remat_status_name((remat_status)seen), "UNKNOWN");
}

static const test_case cases[] = {
    {"chain_create_validates", chain_create_validates},
    {"chain_create_options", chain_create_options},
    {"chain_create_stops", chain_create_stops},
    {"op_text_round_trips", op_text_round_trips},
    {"algorithm_names_round_trip", algorithm_names_round_trip},
    {"algorithm_table", algorithm_table},
    {"store_all_cost_and_schedule", store_all_cost_and_schedule},
    {"solve_rejects_bad_options", solve_rejects_bad_options},
    {"simulate_rejects_bad_bandwidth", simulate_rejects_bad_bandwidth},
    {"version_and_status_names", version_and_status_names},
    {"struct_sizes", struct_sizes},
};
TEST_MAIN(cases)
