/* Golden tests of the SPEC section 2 simulator on hand-built chains. The
 * expected memory while each op runs ("during") and after it ("after") is
 * worked out in the comments.
 *
 * Chain G (n = 3, stage 3 is the loss), sizes chosen so that every sum names
 * the values it adds up:
 *   a[0] = 1, d[0] = 2
 *   stage 1: a 10,   abar 30,   d 40,  fwd 1, bwd 2
 *   stage 2: a 100,  abar 300,  d 400, fwd 3, bwd 4
 *   stage 3: a 1000, abar 3000, d[3] is the seed (0), fwd 5, bwd 6 */
#include <stdlib.h>

#include "common/testlib.h"
#include "test.h"

/* Chain G; with overheads, stage 2 gets fwd_overhead 7000 and bwd_overhead 9000. */
static remat_chain *chain_g(int overheads) {
    remat_stage st[3] = {test_stage_full(1, 2, 10, 30, 40, 0, 0),
                         test_stage_full(3, 4, 100, 300, 400, overheads ? 7000 : 0, overheads ? 9000 : 0),
                         test_stage_full(5, 6, 1000, 3000, 5000, 0, 0)};
    remat_chain *c = NULL;
    if (remat_chain_create("g", 1, 2, st, 3, &c, NULL) != REMAT_OK) abort();
    return c;
}

/* Builds a schedule from op texts; aborts on a typo in the test itself. */
static remat_schedule *sched(const char *const *ops, size_t n) {
    remat_schedule *s = NULL;
    if (remat_schedule_create("test", &s, NULL) != REMAT_OK) abort();
    for (size_t k = 0; k < n; k++) {
        remat_op op;
        if (remat_op_parse(ops[k], &op, NULL) != REMAT_OK) abort();
        if (remat_schedule_push(s, op, NULL) != REMAT_OK) abort();
    }
    return s;
}
#define SCHED(...) sched((const char *const[]){__VA_ARGS__}, \
                         sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static remat_sim_result *run(const remat_chain *c, const remat_schedule *s) {
    remat_sim_result *r = NULL;
    if (remat_simulate(c, s, NULL, &r, NULL) != REMAT_OK) abort();
    return r;
}

/* Compares the during/after columns with the expected ones. */
#define ASSERT_MEMORY(r, during, after)                                    \
    do {                                                                   \
        const uint64_t d_[] = during, a_[] = after;                        \
        ASSERT_EQ_U64((r)->n_ops, sizeof d_ / sizeof d_[0]);               \
        for (size_t k_ = 0; k_ < (r)->n_ops; k_++) {                       \
            if ((r)->mem_during[k_] != d_[k_] || (r)->mem_after[k_] != a_[k_]) \
                TEST_FAIL_("op %zu: during %llu after %llu, expected %llu %llu", k_, \
                           (unsigned long long)(r)->mem_during[k_],        \
                           (unsigned long long)(r)->mem_after[k_],         \
                           (unsigned long long)d_[k_], (unsigned long long)a_[k_]); \
        }                                                                  \
    } while (0)
#define L(...) {__VA_ARGS__}

static void store_all(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* start {a0}=1. Fall 1: +abar1 -> 31. Fall 2: +abar2 -> 331. Fall 3: +abar3 -> 3331.
     * B 3: +d2 while running (3731), frees abar3 and the seed; a2 is held
     * inside abar2, so it stays -> 731. B 2: +d1 (771), frees d2, abar2 -> 71.
     * B 1: +d0 (73), frees d1, abar1 and the plain a0 -> d0 = 2. */
    ASSERT_MEMORY(r, L(31, 331, 3331, 3731, 771, 73), L(31, 331, 3331, 731, 71, 2));
    ASSERT_EQ_U64(r->peak_bytes, 3731);
    ASSERT_NEAR(r->time, 1 + 3 + 5 + 6 + 4 + 2, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void fck_fn_chain(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s =
        SCHED("Fck 1", "Fn 2", "Fall 3", "B 3", "Fck 1", "Fall 2", "B 2", "Fall 1", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fck 1: a0 + a1 = 11. Fn 2: +a2 (111), frees plain a1 -> 101.
     * Fall 3: +abar3 -> 3101. B 3: +d2 (3501), frees abar3 and plain a2 -> a0 + d2 = 401.
     * Fck 1: +a1 -> 411. Fall 2: +abar2 -> 711. B 2: +d1 (751), frees d2, abar2, a1 -> 41.
     * Fall 1: +abar1 -> 71. B 1: +d0 (73) -> 2. */
    ASSERT_MEMORY(r, L(11, 111, 3101, 3501, 411, 711, 751, 71, 73),
                  L(11, 101, 3101, 401, 411, 711, 41, 71, 2));
    ASSERT_EQ_U64(r->peak_bytes, 3501);
    ASSERT_NEAR(r->time, 1 + 3 + 5 + 6 + 1 + 3 + 4 + 1 + 2, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void fn_keeps_abar_input(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fall 1", "Fn 2", "Fall 3", "B 3", "Fall 2", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fall 1 -> 31. Fn 2: +a2 (131); its input is abar1, not plain a1, so it
     * stays -> 131. Fall 3 -> 3131. B 3: +d2 (3531), frees abar3 and plain a2
     * -> a0 + abar1 + d2 = 431. Fall 2 reads abar1 -> 731. B 2: +d1 (771),
     * frees d2 and abar2 but not abar1 -> 71. B 1: 73 -> 2. */
    ASSERT_MEMORY(r, L(31, 131, 3131, 3531, 731, 771, 73), L(31, 131, 3131, 431, 731, 71, 2));
    ASSERT_EQ_U64(r->peak_bytes, 3531);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void fall_upgrades_held_a(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fck 1", "Fall 1", "Fck 1", "Fn 2", "Fall 3", "B 3", "Fall 2",
                              "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fck 1 -> 11. Fall 1 adds abar1, which is not held yet (41 while it runs);
     * a1 is part of abar1 afterwards -> 31. Fck 1 again adds nothing (a1 is
     * inside abar1) -> 31. Fn 2 -> 131 (abar1 stays). Then as in
     * fn_keeps_abar_input. */
    ASSERT_MEMORY(r, L(11, 41, 31, 131, 3131, 3531, 731, 771, 73),
                  L(11, 31, 31, 131, 3131, 431, 731, 71, 2));
    ASSERT_NEAR(r->time, 1 + 1 + 1 + 3 + 5 + 6 + 3 + 4 + 2, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void recompute_held_a_adds_nothing(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fck 1", "Fck 1", "Fall 2", "Fall 3", "B 3", "B 2", "Del a[0]",
                              "Fall 1", "B 1");
    remat_sim_result *r = run(c, s);
    /* Fck 1 -> 11; Fck 1 again: a1 held, adds nothing -> 11. Fall 2 -> 311.
     * Fall 3 -> 3311. B 3: 3711 -> 711. B 2: +d1 (751), frees d2, abar2, plain
     * a1 -> 41. Del a[0] -> 40. Fall 1 needs a0: fails. */
    ASSERT_TRUE(!r->valid);
    ASSERT_EQ_U64(r->failed_op, 7);
    ASSERT_CONTAINS(r->failed_op_text, "Fall 1");
    ASSERT_CONTAINS(r->reason, "needs a[0]");
    ASSERT_EQ_U64(r->mem_during[1], 11);
    ASSERT_EQ_U64(r->mem_after[5], 41);
    ASSERT_EQ_U64(r->mem_during[6], 41);
    ASSERT_EQ_U64(r->mem_after[6], 40);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void del_frees_values(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fck 1", "Fall 2", "Del abar[2]", "Fall 2", "Del a[1]", "Fall 3",
                              "B 3", "Fall 1", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fck 1 -> 11. Fall 2 -> 311. Del abar[2]: 311 while it "runs", then 11.
     * Fall 2 -> 311. Del a[1]: 311, then 301. Fall 3 -> 3301. B 3: +d2 (3701) -> 701
     * (a2 inside abar2 stays). Fall 1 -> 731. B 2: 771 -> 71. B 1: 73 -> 2.
     * Del takes no time. */
    ASSERT_MEMORY(r, L(11, 311, 311, 311, 311, 3301, 3701, 731, 771, 73),
                  L(11, 311, 11, 311, 301, 3301, 701, 731, 71, 2));
    ASSERT_NEAR(r->time, 1 + 3 + 3 + 5 + 6 + 1 + 4 + 2, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void overheads_count_while_running(void) {
    remat_chain *c = chain_g(1);
    remat_schedule *s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* As store_all, plus 7000 while Fall 2 runs and 9000 while B 2 runs; the
     * memory after each op is unchanged. */
    ASSERT_MEMORY(r, L(31, 7331, 3331, 3731, 9771, 73), L(31, 331, 3331, 731, 71, 2));
    ASSERT_EQ_U64(r->peak_bytes, 9771);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void peak_includes_input(void) {
    /* A large input: every op runs with a[0] held until Fn 1 frees it. */
    remat_stage st[2] = {test_stage_full(1, 1, 5, 8, 5, 0, 0), test_stage_full(1, 1, 1, 2, 0, 0, 0)};
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_create("big-input", 1000, 3, st, 2, &c, NULL), REMAT_OK);
    remat_schedule *s = SCHED("Fall 1", "Fall 2", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fall 1: 1000 + 8. Fall 2: 1010. B 2: +d1 (5) = 1015 -> 1013. B 1: +d0 (3)
     * = 1016, frees d1, abar1 and a0 -> 3. */
    ASSERT_MEMORY(r, L(1008, 1010, 1015, 1016), L(1008, 1010, 1013, 3));
    ASSERT_EQ_U64(r->peak_bytes, 1016);
    remat_sim_result_free(r);
    remat_schedule_free(s);

    /* Fn 1 frees the plain input, which cannot be recomputed. */
    s = SCHED("Fn 1", "Fall 2", "B 2", "Fall 1");
    r = run(c, s);
    ASSERT_TRUE(!r->valid);
    ASSERT_EQ_U64(r->failed_op, 3);
    ASSERT_CONTAINS(r->reason, "needs a[0], which is not held");
    ASSERT_EQ_U64(r->mem_during[0], 1005);
    ASSERT_EQ_U64(r->mem_after[0], 5);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Expects the schedule to fail at op `at` with `why` in the reason. */
static int fails_at(remat_schedule *s, size_t at, const char *op_text, const char *why) {
    remat_chain *c = chain_g(0);
    remat_sim_result *r = run(c, s);
    int ok = !r->valid && r->failed_op == at && strcmp(r->failed_op_text, op_text) == 0 &&
             strstr(r->reason, why) != NULL;
    if (!ok)
        fprintf(stderr, "  valid %d, failed_op %zu (%s): %s; expected %zu (%s): %s\n", r->valid,
                r->failed_op, r->failed_op_text, r->reason, at, op_text, why);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
    return ok;
}

static void failures(void) {
    ASSERT_TRUE(fails_at(SCHED("Fn 1", "Fn 2", "Fall 3", "B 3", "Fall 2"), 4, "Fall 2",
                         "needs a[1], which is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fn 2"), 0, "Fn 2", "needs a[1], which is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fck 1", "Fck 2", "Fck 3", "B 3"), 3, "B 3",
                         "needs abar[3], which is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 2"), 3, "B 2",
                         "B 2 out of order: B 3 must run first"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "Fall 3"), 4, "Fall 3",
                         "forward of stage 3 after B 3"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "Fn 2"), 5, "Fn 2",
                         "forward of stage 2 after B 2"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1", "B 1"), 6,
                         "B 1", "every B has already run"));
    /* B 2 is missing: the schedule ends early. */
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 3"), 4, "(end)",
                         "ends before B 2"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1"), 1, "(end)", "ends before B 3"));
    ASSERT_TRUE(fails_at(SCHED("Del a[1]"), 0, "Del a[1]", "a[1] is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fck 1", "Del abar[1]"), 1, "Del abar[1]", "abar[1] is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Del a[1]"), 1, "Del a[1]", "a[1] is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Del abar[1]", "Del abar[1]"), 2, "Del abar[1]",
                         "abar[1] is not held"));
    ASSERT_TRUE(fails_at(SCHED("Fn 0"), 0, "Fn 0", "stage 0 is not in 1..3"));
    ASSERT_TRUE(fails_at(SCHED("Fall 4"), 0, "Fall 4", "stage 4 is not in 1..3"));
    ASSERT_TRUE(fails_at(SCHED("B 0"), 0, "B 0", "stage 0 is not in 1..3"));
    ASSERT_TRUE(fails_at(SCHED("Fall 1", "Fall 2", "Fall 3", "B 4"), 3, "B 4",
                         "stage 4 is not in 1..3"));
    ASSERT_TRUE(fails_at(SCHED("Del abar[0]"), 0, "Del abar[0]",
                         "abar[0] is not a value of this chain"));
    ASSERT_TRUE(fails_at(SCHED("Del a[4]"), 0, "Del a[4]", "a[4] is not a value of this chain"));
    ASSERT_TRUE(fails_at(SCHED("Fn 4294967295"), 0, "Fn 4294967295", "is not in 1..3"));
}

static void empty_schedule_is_invalid(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = NULL;
    ASSERT_STATUS(remat_schedule_create("empty", &s, NULL), REMAT_OK);
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(!r->valid);
    ASSERT_EQ_U64(r->failed_op, 0);
    ASSERT_CONTAINS(r->failed_op_text, "(end)");
    ASSERT_CONTAINS(r->reason, "ends before B 3");
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void single_stage_chain(void) {
    /* Only the loss: n = 1. Fall 1: a0 (4) + abar1 (6) = 10. B 1: +d0 (4) = 14,
     * frees abar1 and a0 -> 4. */
    remat_stage st[1] = {test_stage_full(2, 3, 1, 6, 0, 0, 0)};
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_create("one", 4, 4, st, 1, &c, NULL), REMAT_OK);
    remat_schedule *s = SCHED("Fall 1", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    ASSERT_MEMORY(r, L(10, 14), L(10, 4));
    ASSERT_EQ_U64(r->peak_bytes, 14);
    ASSERT_NEAR(r->time, 5, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void result_json(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    char *text = NULL;
    ASSERT_STATUS(remat_sim_result_to_json(r, &text, NULL), REMAT_OK);
    ASSERT_CONTAINS(text, "\"valid\": true");
    ASSERT_CONTAINS(text, "\"peak_bytes\": 3731");
    remat_free(text);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 2");
    r = run(c, s);
    ASSERT_STATUS(remat_sim_result_to_json(r, &text, NULL), REMAT_OK);
    ASSERT_CONTAINS(text, "\"valid\": false");
    ASSERT_CONTAINS(text, "\"op_index\": 3");
    ASSERT_CONTAINS(text, "\"op\": \"B 2\"");
    remat_free(text);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void bad_arguments(void) {
    remat_chain *c = chain_g(0);
    remat_schedule *s = SCHED("Fall 1");
    remat_sim_result *r = (remat_sim_result *)1;
    remat_error e;
    ASSERT_STATUS(remat_simulate(NULL, s, NULL, &r, &e), REMAT_E_INPUT);
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = -1;
    ASSERT_STATUS(remat_simulate(c, s, &o, &r, &e), REMAT_E_INPUT);
    ASSERT_TRUE(r == NULL);
    ASSERT_CONTAINS(e.message, "bandwidth");
    o.bandwidth = NAN;
    ASSERT_STATUS(remat_simulate(c, s, &o, &r, &e), REMAT_E_INPUT);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Chain P: partial saves and fall_overhead (SPEC section 1's optional fields).
 *   a[0] = 10 (d[0] = 10)
 *   stage 1: a 20, abar 50, fwd 1, bwd 2, fwd_overhead 3, fall_overhead 7, bwd_overhead 4;
 *            option 1: abar 30, fall_overhead 1, bwd 5, bwd_overhead 9
 *   stage 2 (loss): a 1, abar 21, fwd 1, bwd 1 */
static remat_chain *chain_p(void) {
    remat_stage_option o = {"matmuls", 30, 1, 5, 9};
    remat_stage st[2] = {test_stage_full(1, 2, 20, 50, 20, 3, 4), test_stage(1, 1, 1, 21)};
    st[0].fall_overhead = 7;
    st[0].has_fall_overhead = 1;
    st[0].options = &o;
    st[0].n_options = 1;
    remat_chain *c = NULL;
    if (remat_chain_create("p", 10, 10, st, 2, &c, NULL) != REMAT_OK) abort();
    return c;
}

static void partial_saves(void) {
    remat_chain *c = chain_p();
    /* Fall 1/1 adds abar[1] of 30 with its own overhead 1; B 1 takes option
     * 1's time 5 and overhead 9, and frees its 30 bytes. */
    remat_schedule *s = SCHED("Fall 1/1", "Fall 2", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    /* Fall 1/1: 10 + 30 + 1; Fall 2: 40 + 21; B 2: 61 + d[1] 20, frees abar[2];
     * B 1: 60 + d[0] 10 + 9, frees d[1], abar[1], a[0] */
    ASSERT_MEMORY(r, L(41, 61, 81, 79), L(40, 61, 60, 10));
    ASSERT_NEAR(r->time, 1 + 1 + 1 + 5, 0);
    ASSERT_EQ_U64(r->peak_bytes, 81);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    /* The full save: Fall takes fall_overhead 7, B the stage's own figures;
     * Fck and Fn keep fwd_overhead 3. */
    s = SCHED("Fall 1", "Fall 2", "B 2", "B 1");
    r = run(c, s);
    ASSERT_MEMORY(r, L(67, 81, 101, 94), L(60, 81, 80, 10));
    ASSERT_NEAR(r->time, 5, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    /* An upgrade from a[1]; a second Fall over the held abar[1] adds nothing
     * and keeps its option (B 1 still takes 5); Del frees the option's size. */
    s = SCHED("Fck 1", "Fall 1/1", "Fall 1", "Del abar[1]", "Fall 1/1", "Fall 2", "B 2", "B 1");
    r = run(c, s);
    ASSERT_TRUE(r->valid);
    ASSERT_MEMORY(r, L(33, 61, 47, 40, 41, 61, 81, 79), L(30, 40, 40, 10, 40, 61, 60, 10));
    ASSERT_NEAR(r->time, 4 + 1 + 1 + 5, 0); /* four forwards of stage 1 */
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Chain S: a stopped Fall (docs/formats.md).
 *   a[0] = 10 (d[0] = 10)
 *   stage 1: a 20, abar 50, fwd 4, bwd 2, fall_overhead 7; stop_time 1,
 *            stop_saved_bytes 8 (below a[1]: the stopped Fall makes no a[1]),
 *            stop_overhead 30 (above fall_overhead)
 *   stage 2: a 5, abar 15, fwd 3, bwd 3 (no stop fields: the defaults)
 *   stage 3 (loss): a 1, abar 2, fwd 1, bwd 1 */
static remat_chain *chain_s(void) {
    remat_stage st[3] = {test_stage(4, 2, 20, 50), test_stage(3, 3, 5, 15), test_stage(1, 1, 1, 2)};
    st[0].fall_overhead = 7;
    st[0].has_fall_overhead = 1;
    st[0].stop_time = 1;
    st[0].has_stop_time = 1;
    st[0].stop_saved_bytes = 8;
    st[0].has_stop_saved_bytes = 1;
    st[0].stop_overhead = 30;
    st[0].has_stop_overhead = 1;
    remat_chain *c = NULL;
    if (remat_chain_create("s", 10, 10, st, 3, &c, NULL) != REMAT_OK) abort();
    return c;
}

static void stopped_fall(void) {
    remat_chain *c = chain_s();
    /* Store-all: Fall 1 is followed by Fall 2, so it runs whole (fwd 4,
     * overhead 7, abar 50). Fall 1: 10 + 50 + 7; Fall 2: 60 + 15; Fall 3:
     * 75 + 2; B 3: 77 + d[2] 5; B 2: 80 + d[1] 20; B 1: 80 + d[0] 10. */
    remat_schedule *s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_TRUE(r->valid);
    ASSERT_MEMORY(r, L(67, 75, 77, 82, 100, 90), L(60, 75, 77, 80, 80, 10));
    ASSERT_NEAR(r->time, 4 + 3 + 1 + 1 + 3 + 2, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    /* Fall 1; B 1 stops: time 1, abar[1] of 8 with overhead 30 (30 + 8 + 30),
     * and B 1 frees those 8 bytes. Fall 2; B 2 stops too, with stage 2's
     * defaults: the figures of its plain Fall. */
    const char *const ops[] = {"Fck 1", "Fck 2", "Fall 3", "B 3", "Fall 2", "B 2", "Fall 1", "B 1"};
    s = sched(ops, 8);
    r = run(c, s);
    ASSERT_TRUE(r->valid);
    ASSERT_MEMORY(r, L(30, 35, 37, 42, 50, 70, 68, 48), L(30, 35, 37, 35, 50, 30, 38, 10));
    ASSERT_NEAR(r->time, 4 + 3 + 1 + 1 + 3 + 3 + 1 + 2, 0);
    ASSERT_EQ_U64(r->peak_bytes, 70);
    remat_sim_result_free(r);
    /* the timed simulator applies the same rule */
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = 5;
    ASSERT_STATUS(remat_simulate(c, s, &o, &r, NULL), REMAT_OK);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 18, 1e-12);
    ASSERT_EQ_U64(r->peak_bytes, 70);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    /* A Fall over a held abar[1] does not stop (it makes nothing): 80 + 7,
     * time 4; B 1 then frees the 50 bytes of the first Fall's abar. */
    s = SCHED("Fall 1", "Fall 2", "Fall 3", "B 3", "B 2", "Fall 1", "B 1");
    r = run(c, s);
    ASSERT_TRUE(r->valid);
    ASSERT_MEMORY(r, L(67, 75, 77, 82, 100, 87, 90), L(60, 75, 77, 80, 80, 80, 10));
    ASSERT_NEAR(r->time, 14 + 4, 0);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void partial_saves_invalid(void) {
    remat_chain *c = chain_p();
    remat_schedule *s = SCHED("Fall 1/2", "Fall 2", "B 2", "B 1");
    remat_sim_result *r = run(c, s);
    ASSERT_EQ_INT(r->valid, 0);
    ASSERT_EQ_U64(r->failed_op, 0);
    ASSERT_TRUE(strcmp(r->failed_op_text, "Fall 1/2") == 0);
    ASSERT_CONTAINS(r->reason, "stage 1 has 1 option: there is no option 2");
    remat_sim_result_free(r);
    remat_schedule_free(s);
    s = SCHED("Fall 1", "Fall 2/1", "B 2", "B 1");
    r = run(c, s);
    ASSERT_EQ_U64(r->failed_op, 1);
    ASSERT_CONTAINS(r->reason, "stage 2 has 0 options: there is no option 1");
    remat_sim_result_free(r);
    /* an option on an op other than Fall (only a struct can carry one) */
    for (int k = 2; k < 4; k++) {
        s->ops[1].option = 0;
        s->ops[k].option = 1;
        r = run(c, s);
        ASSERT_EQ_U64(r->failed_op, (uint64_t)k);
        ASSERT_CONTAINS(r->failed_op_text, "/1");
        ASSERT_CONTAINS(r->reason, "only Fall takes an option");
        remat_sim_result_free(r);
        s->ops[k].option = 0;
    }
    remat_schedule_free(s);
    s = SCHED("Fall 1/1", "Off abar[1]", "Fall 2", "B 2", "Pre abar[1]", "B 1");
    s->ops[1].option = 1;
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = 10;
    ASSERT_STATUS(remat_simulate(c, s, &o, &r, NULL), REMAT_OK);
    ASSERT_EQ_U64(r->failed_op, 1);
    ASSERT_CONTAINS(r->reason, "only Fall takes an option");
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* The timed simulator copies the abar an option made, at its own size. */
static void partial_saves_offloaded(void) {
    remat_chain *c = chain_p();
    remat_schedule *s =
        SCHED("Fall 1/1", "Fall 2", "B 2", "Off abar[1]", "Wait abar[1]", "Pre abar[1]", "B 1");
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = 10;
    o.record_timeline = 1;
    remat_sim_result *r = NULL;
    ASSERT_STATUS(remat_simulate(c, s, &o, &r, NULL), REMAT_OK);
    ASSERT_TRUE(r->valid);
    /* Off: 30 bytes from t = 3 to 6; Pre from 6 to 9; B 1 (option 1) 9 to 14 */
    ASSERT_NEAR(r->time, 14, 1e-12);
    int offs = 0;
    for (size_t k = 0; k < r->n_events; k++)
        if (r->events[k].lane != 0) {
            ASSERT_NEAR(r->events[k].end - r->events[k].start, 3, 1e-12);
            offs++;
        }
    ASSERT_EQ_INT(offs, 2);
    /* after B 1 only d[0] is held: the copies were counted at the option's size */
    ASSERT_EQ_U64(r->mem_after[6], 10);
    remat_sim_result_free(r);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"partial_saves", partial_saves},
    {"partial_saves_invalid", partial_saves_invalid},
    {"stopped_fall", stopped_fall},
    {"partial_saves_offloaded", partial_saves_offloaded},
    {"store_all", store_all},
    {"fck_fn_chain", fck_fn_chain},
    {"fn_keeps_abar_input", fn_keeps_abar_input},
    {"fall_upgrades_held_a", fall_upgrades_held_a},
    {"recompute_held_a_adds_nothing", recompute_held_a_adds_nothing},
    {"del_frees_values", del_frees_values},
    {"overheads_count_while_running", overheads_count_while_running},
    {"peak_includes_input", peak_includes_input},
    {"failures", failures},
    {"empty_schedule_is_invalid", empty_schedule_is_invalid},
    {"single_stage_chain", single_stage_chain},
    {"result_json", result_json},
    {"bad_arguments", bad_arguments},
};
TEST_MAIN(cases)
