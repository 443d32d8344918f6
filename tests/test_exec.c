/* Execution plans: hand-worked schedules and consistency of plans built from
 * solver outputs (every read value exists, every created one is new). */
#include <stdlib.h>

#include "remat/exec.h"
#include "test.h"
#include "common/testlib.h"

/* Stage sizes: out 10*i, saved 100*i, grad 10*i; input 5. */
static remat_chain *small_chain(size_t n) {
    remat_stage st[8];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        snprintf(st[i].name, sizeof st[i].name, "s%zu", i + 1);
        st[i].fwd_time = 1;
        st[i].bwd_time = 2;
        st[i].out_bytes = 10 * (i + 1);
        st[i].saved_bytes = 100 * (i + 1);
        st[i].grad_bytes = 10 * (i + 1);
    }
    remat_chain *c = NULL;
    if (remat_chain_create("small", 5, 5, st, n, &c, NULL) != REMAT_OK) return NULL;
    return c;
}

static remat_schedule *parse_ops(const char **ops, size_t n) {
    remat_schedule *s = NULL;
    if (remat_schedule_create("hand", &s, NULL) != REMAT_OK) return NULL;
    for (size_t k = 0; k < n; k++) {
        remat_op op;
        if (remat_op_parse(ops[k], &op, NULL) != REMAT_OK || remat_schedule_push(s, op, NULL) != REMAT_OK) {
            remat_schedule_free(s);
            return NULL;
        }
    }
    return s;
}

/* "a[1] abar[2]" style text of a ref list, for compact assertions. */
static void refs_text(const remat_exec_ref *r, size_t n, char *out, size_t cap) {
    out[0] = 0;
    for (size_t k = 0; k < n; k++) {
        char one[24];
        remat_exec_ref_format(r[k], one);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", k ? " " : "", one);
    }
}

#define EXPECT_REFS(list, nlist, want)                                  \
    do {                                                                \
        char got_[128];                                                 \
        refs_text(list, nlist, got_, sizeof got_);                      \
        if (strcmp(got_, want) != 0) TEST_FAIL_("%s: got \"%s\", want \"%s\"", #list, got_, want); \
    } while (0)

static void test_hand_schedule(void) {
    remat_chain *c = small_chain(3);
    ASSERT_TRUE(c);
    const char *ops[] = {"Fck 1", "Fn 2", "Fall 3", "B 3", "Fall 1", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 8);
    ASSERT_TRUE(s);
    remat_exec_plan *p = NULL;
    remat_error e;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, &e), REMAT_OK);
    ASSERT_EQ_INT(p->n_steps, 8);
    ASSERT_EQ_INT(p->first_backward, 3);
    const remat_exec_step *st = p->steps;
    EXPECT_REFS(st[0].reads, st[0].n_reads, "a[0]");
    EXPECT_REFS(st[0].creates, st[0].n_creates, "a[1]");
    EXPECT_REFS(st[0].frees, st[0].n_frees, "");
    EXPECT_REFS(st[1].reads, st[1].n_reads, "a[1]");
    EXPECT_REFS(st[1].creates, st[1].n_creates, "a[2]");
    EXPECT_REFS(st[1].frees, st[1].n_frees, "a[1]");
    EXPECT_REFS(st[2].creates, st[2].n_creates, "abar[3]");
    EXPECT_REFS(st[3].reads, st[3].n_reads, "d[3] abar[3] a[2]");
    EXPECT_REFS(st[3].creates, st[3].n_creates, "d[2]");
    EXPECT_REFS(st[3].frees, st[3].n_frees, "a[2] abar[3] d[3]");
    EXPECT_REFS(st[5].reads, st[5].n_reads, "abar[1]");
    EXPECT_REFS(st[6].reads, st[6].n_reads, "d[2] abar[2] abar[1]");
    EXPECT_REFS(st[6].frees, st[6].n_frees, "abar[2] d[2]");
    EXPECT_REFS(st[7].reads, st[7].n_reads, "d[1] abar[1] a[0]");
    EXPECT_REFS(st[7].creates, st[7].n_creates, "d[0]");
    EXPECT_REFS(st[7].frees, st[7].n_frees, "a[0] abar[1] d[1]");
    /* Memory: a0=5; Fck 1 -> +10; Fn 2 -> +20 -10; Fall 3 during = 5+20+300. */
    ASSERT_EQ_U64(st[0].mem_after, 15);
    ASSERT_EQ_U64(st[1].mem_during, 35);
    ASSERT_EQ_U64(st[1].mem_after, 25);
    ASSERT_EQ_U64(st[2].mem_during, 325);
    remat_sim_result *r = NULL;
    ASSERT_STATUS(remat_simulate(c, s, NULL, &r, NULL), REMAT_OK);
    ASSERT_EQ_U64(p->peak_bytes, r->peak_bytes);
    ASSERT_NEAR(p->time, r->time, 1e-12);
    remat_sim_result_free(r);
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_upgrade_and_noop(void) {
    remat_chain *c = small_chain(2);
    ASSERT_TRUE(c);
    const char *ops[] = {"Fck 1", "Fall 1", "Fck 1", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 6);
    ASSERT_TRUE(s);
    remat_exec_plan *p = NULL;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, NULL), REMAT_OK);
    const remat_exec_step *st = p->steps;
    EXPECT_REFS(st[1].creates, st[1].n_creates, "abar[1]");
    EXPECT_REFS(st[1].frees, st[1].n_frees, "a[1]");
    /* Fck 1 while abar[1] is held: nothing to compute. */
    EXPECT_REFS(st[2].creates, st[2].n_creates, "");
    EXPECT_REFS(st[2].frees, st[2].n_frees, "");
    EXPECT_REFS(st[3].reads, st[3].n_reads, "abar[1]");
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_del(void) {
    remat_chain *c = small_chain(2);
    ASSERT_TRUE(c);
    const char *ops[] = {"Fall 1", "Del abar[1]", "Fall 1", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 6);
    ASSERT_TRUE(s);
    remat_exec_plan *p = NULL;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, NULL), REMAT_OK);
    EXPECT_REFS(p->steps[1].reads, p->steps[1].n_reads, "");
    EXPECT_REFS(p->steps[1].frees, p->steps[1].n_frees, "abar[1]");
    ASSERT_EQ_U64(p->steps[1].mem_after, 5);
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void test_rejects(void) {
    remat_chain *c = small_chain(2);
    ASSERT_TRUE(c);
    const char *bad[] = {"Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(bad, 3);
    ASSERT_TRUE(s);
    remat_exec_plan *p = (remat_exec_plan *)&p;
    remat_error e;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, &e), REMAT_E_INPUT);
    ASSERT_TRUE(p == NULL);
    ASSERT_CONTAINS(e.message, "op 0 (Fall 2)");
    ASSERT_CONTAINS(e.message, "a[1]");
    remat_schedule_free(s);

    const char *early[] = {"Fall 1", "Fall 2", "B 2"};
    s = parse_ops(early, 3);
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "before B 1");
    remat_schedule_free(s);

    const char *off[] = {"Fall 1", "Off abar[1]", "Fall 2", "B 2", "B 1"};
    s = parse_ops(off, 5);
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "offload");
    remat_schedule_free(s);
    ASSERT_STATUS(remat_exec_plan_create(NULL, NULL, &p, &e), REMAT_E_INPUT);
    remat_exec_plan_free(NULL);
    remat_chain_free(c);
}

static uint64_t ref_bytes(const remat_chain *c, remat_exec_ref r) {
    if (r.kind == REMAT_EXEC_A) return remat_chain_a_bytes(c, r.index);
    if (r.kind == REMAT_EXEC_ABAR) return remat_chain_abar_bytes(c, r.index);
    return remat_chain_d_bytes(c, r.index);
}

/* Replays a plan on a live set: reads must be live, creations new, frees
 * live; the live bytes must equal mem_after. Returns 0 and prints on failure. */
static int plan_consistent(const remat_chain *c, const remat_exec_plan *p) {
    size_t n = c->n;
    uint8_t *live = calloc(3 * (n + 1), 1);
    if (!live) return 0;
    live[REMAT_EXEC_A * (n + 1) + 0] = 1;
    live[REMAT_EXEC_D * (n + 1) + n] = 1;
    uint64_t mem = c->input_bytes;
    int ok = 1;
    for (size_t k = 0; k < p->n_steps && ok; k++) {
        const remat_exec_step *st = &p->steps[k];
        for (size_t j = 0; j < st->n_reads; j++)
            if (!live[st->reads[j].kind * (n + 1) + st->reads[j].index]) ok = 0;
        for (size_t j = 0; j < st->n_creates; j++) {
            uint8_t *v = &live[st->creates[j].kind * (n + 1) + st->creates[j].index];
            if (*v) ok = 0;
            *v = 1;
            mem += ref_bytes(c, st->creates[j]);
        }
        for (size_t j = 0; j < st->n_frees; j++) {
            uint8_t *v = &live[st->frees[j].kind * (n + 1) + st->frees[j].index];
            if (!*v) ok = 0;
            *v = 0;
            mem -= ref_bytes(c, st->frees[j]);
        }
        if (mem != st->mem_after) ok = 0;
        if (!ok) fprintf(stderr, "  plan step %zu inconsistent\n", k);
    }
    /* Only d[0] (and perhaps a[0], if no op consumed it) may remain. */
    for (size_t j = 0; j < 3 * (n + 1) && ok; j++)
        if (live[j] && j != REMAT_EXEC_D * (n + 1) && j != 0) {
            fprintf(stderr, "  value %zu still live at the end\n", j);
            ok = 0;
        }
    free(live);
    return ok;
}

static void test_solver_plans(void) {
    test_rng rng = {42};
    const char *algs[] = {"store-all", "optimal", "revolve", "sequential"};
    int checked = 0;
    for (int trial = 0; trial < 30; trial++) {
        test_chain_spec spec = {0};
        spec.n = 2 + (size_t)test_rng_range(&rng, 0, 10);
        spec.max_bytes = 50;
        spec.overheads = trial % 2;
        spec.grad_sizes = trial % 3 == 0;
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t peak = 0;
        double t = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, &t, NULL), REMAT_OK);
        for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            ASSERT_STATUS(remat_algorithm_parse(algs[a], &o.algorithm, NULL), REMAT_OK);
            o.slots = 0;
            o.threads = 1;
            o.memory = a == 0 ? peak : peak * (2 + (uint64_t)(trial % 3)) / 4;
            remat_schedule *s = NULL;
            if (remat_solve(c, &o, &s, NULL) != REMAT_OK) continue; /* infeasible or not built yet */
            remat_exec_plan *p = NULL;
            remat_error e;
            remat_status st = remat_exec_plan_create(c, s, &p, &e);
            if (st != REMAT_OK) fprintf(stderr, "  %s: %s\n", algs[a], e.message);
            ASSERT_STATUS(st, REMAT_OK);
            ASSERT_TRUE(plan_consistent(c, p));
            ASSERT_LE_U64(p->peak_bytes, o.memory);
            remat_sim_result *r = NULL;
            ASSERT_STATUS(remat_simulate(c, s, NULL, &r, NULL), REMAT_OK);
            ASSERT_EQ_U64(p->peak_bytes, r->peak_bytes);
            remat_sim_result_free(r);
            ASSERT_TRUE(p->first_backward < p->n_steps);
            ASSERT_EQ_INT(p->steps[p->first_backward].op.index, c->n);
            checked++;
            remat_exec_plan_free(p);
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
    ASSERT_TRUE(checked >= 30);
}

static const test_case cases[] = {
    {"hand_schedule", test_hand_schedule},
    {"upgrade_and_noop", test_upgrade_and_noop},
    {"del", test_del},
    {"rejects", test_rejects},
    {"solver_plans", test_solver_plans},
};
TEST_MAIN(cases)
