/* Execution plans: hand-worked schedules and consistency of plans built from
 * solver outputs (every read value exists, every created one is new). */
#include <math.h>
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

/* A plan step says whether its Fall stops: a full save followed by its B
 * (not the loss, not a partial save, not over a held abar); the stopped
 * Fall's figures are the plan's. */
static void test_stops(void) {
    remat_stage_option o = {"half", 150, 0, 3, 0};
    remat_stage st[3];
    memset(st, 0, sizeof st);
    for (size_t i = 0; i < 3; i++) {
        st[i].fwd_time = 2;
        st[i].bwd_time = 2;
        st[i].out_bytes = st[i].grad_bytes = 10 * (i + 1);
        st[i].saved_bytes = 100 * (i + 1);
    }
    st[0].stop_time = 0.5;
    st[0].has_stop_time = 1;
    st[0].stop_saved_bytes = 4; /* below a[1]: the stopped Fall makes no a[1] */
    st[0].has_stop_saved_bytes = 1;
    st[1].options = &o;
    st[1].n_options = 1;
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_create("stops", 5, 5, st, 3, &c, NULL), REMAT_OK);
    const char *ops[] = {"Fck 1", "Fall 2/1", "Fall 3", "B 3", "B 2", "Fall 1", "B 1"};
    remat_schedule *s = parse_ops(ops, 7);
    ASSERT_TRUE(s);
    remat_exec_plan *p = NULL;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, NULL), REMAT_OK);
    const remat_exec_step *x = p->steps;
    for (size_t k = 0; k < 7; k++) ASSERT_EQ_INT(x[k].stops, k == 5);
    EXPECT_REFS(x[5].creates, x[5].n_creates, "abar[1]");
    ASSERT_EQ_U64(x[5].mem_during - x[4].mem_after, 4);
    ASSERT_NEAR(x[5].end - x[5].start, 0.5, 0);
    ASSERT_EQ_INT(x[6].option, 0);
    EXPECT_REFS(x[6].frees, x[6].n_frees, "a[0] abar[1] d[1]");
    ASSERT_EQ_U64(x[6].mem_after, 5); /* the 4 bytes are freed: only d[0] is left */
    remat_exec_plan_free(p);
    /* the timed plan says the same */
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 7, &p, NULL), REMAT_OK);
    for (size_t k = 0; k < 7; k++) ASSERT_EQ_INT(p->steps[k].stops, k == 5);
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
    ASSERT_CONTAINS(e.message, "bandwidth");
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 0, &p, &e), REMAT_E_INPUT);
    /* With a link: abar[1] is on the host when B 2 reads it. */
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 1000, &p, &e), REMAT_E_INPUT);
    ASSERT_TRUE(p == NULL);
    ASSERT_CONTAINS(e.message, "op 3 (B 2)");
    ASSERT_CONTAINS(e.message, "Pre it first");
    const double bad_bw[] = {-1, NAN, INFINITY};
    for (size_t k = 0; k < 3; k++) {
        ASSERT_STATUS(remat_exec_plan_create_timed(c, s, bad_bw[k], &p, &e), REMAT_E_INPUT);
        ASSERT_CONTAINS(e.message, "bandwidth");
    }
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

/* The step index of each release before step k of a timed plan, as an
 * executor finds them: Off steps j < k with copy_at == k. */
static int released_before(const remat_exec_plan *p, size_t j, size_t k) {
    return p->steps[j].op.kind == REMAT_OP_OFF && p->steps[j].copy_at == k;
}

static int prefetched_before(const remat_exec_plan *p, size_t j, size_t k) {
    return p->steps[j].op.kind == REMAT_OP_PRE && p->steps[j].copy_at == k;
}

/* The overhead of a step, partial saves included (SPEC section 2). */
static uint64_t step_overhead(const remat_chain *c, const remat_exec_step *st) {
    remat_op op = st->op;
    const remat_stage *sg = op.kind <= REMAT_OP_B ? &c->stages[op.index - 1] : NULL;
    if (op.kind == REMAT_OP_B)
        return st->option ? sg->options[st->option - 1].bwd_overhead : sg->bwd_overhead;
    if (op.kind == REMAT_OP_FALL)
        return st->option ? sg->options[st->option - 1].fall_overhead : sg->fall_overhead;
    if (op.kind <= REMAT_OP_FCK) return sg->fwd_overhead;
    return 0;
}

typedef struct exec_model {
    const remat_chain *c;
    size_t n;
    uint8_t *live; /* [3 (n+1)]: on the device */
    uint8_t *host; /* [3 (n+1)]: a released offload's copy is on the host */
    uint64_t mem;
    uint8_t opt[16], host_opt[16]; /* the option of abar[i] on the device and on the host */
} exec_model;

/* Bytes of r as the model holds it: an abar at the size of its option. */
static uint64_t model_bytes(const exec_model *m, remat_exec_ref r, int on_host) {
    uint8_t k = on_host ? m->host_opt[r.index] : m->opt[r.index];
    if (r.kind != REMAT_EXEC_ABAR || k == 0 || r.index > 15) return ref_bytes(m->c, r);
    return m->c->stages[r.index - 1].options[k - 1].saved_bytes;
}

static uint8_t *model_at(uint8_t *arr, const exec_model *m, remat_exec_ref r) {
    return &arr[r.kind * (m->n + 1) + r.index];
}

static remat_exec_ref op_ref(remat_op op) {
    remat_exec_ref r = {op.value == REMAT_VALUE_ABAR ? REMAT_EXEC_ABAR : REMAT_EXEC_A, op.index};
    return r;
}

/* The releases and prefetch starts of a timed plan before step k. */
static int model_before(exec_model *m, const remat_exec_plan *p, size_t k) {
    for (size_t j = 0; j < k && j < p->n_steps; j++) {
        remat_exec_ref r = op_ref(p->steps[j].op);
        if (released_before(p, j, k)) {
            if (!*model_at(m->live, m, r)) return 0;
            *model_at(m->live, m, r) = 0;
            *model_at(m->host, m, r) = 1;
            m->mem -= model_bytes(m, r, 0);
            if (r.kind == REMAT_EXEC_ABAR && r.index < 16) m->host_opt[r.index] = m->opt[r.index];
        }
        if (prefetched_before(p, j, k)) {
            if (*model_at(m->live, m, r) || !*model_at(m->host, m, r)) return 0;
            *model_at(m->live, m, r) = 1;
            *model_at(m->host, m, r) = 0;
            m->mem += model_bytes(m, r, 1);
            if (r.kind == REMAT_EXEC_ABAR && r.index < 16) m->opt[r.index] = m->host_opt[r.index];
        }
    }
    return 1;
}

/* Step k itself: reads on the device, creations, frees; for a compute step,
 * the memory it takes must not pass the simulator's mem_during. */
static int model_step(exec_model *m, const remat_exec_plan *p, size_t k) {
    const remat_exec_step *st = &p->steps[k];
    for (size_t j = 0; j < st->n_reads; j++)
        if (!*model_at(m->live, m, st->reads[j])) return 0;
    if (st->op.kind == REMAT_OP_OFF) return st->copy_at > k && st->copy_at <= p->n_steps;
    if (st->op.kind == REMAT_OP_PRE) /* held from its copy_at on */
        return st->copy_at > k && *model_at(m->host, m, op_ref(st->op));
    if (st->op.kind == REMAT_OP_WAIT) return st->copy_at == k;
    uint64_t add = 0;
    for (size_t j = 0; j < st->n_creates; j++) {
        uint8_t *v = model_at(m->live, m, st->creates[j]);
        if (*v) return 0;
        *v = 1;
        if (st->creates[j].kind == REMAT_EXEC_ABAR && st->creates[j].index < 16)
            m->opt[st->creates[j].index] = st->option; /* only a Fall creates an abar here */
        add += model_bytes(m, st->creates[j], 0);
    }
    uint64_t ov = step_overhead(m->c, st);
    if (st->op.kind != REMAT_OP_DEL && m->mem + add + ov > st->mem_during) {
        fprintf(stderr, "  step %zu: an executor holds %llu > mem_during %llu\n", k,
                (unsigned long long)(m->mem + add + ov), (unsigned long long)st->mem_during);
        return 0;
    }
    m->mem += add;
    for (size_t j = 0; j < st->n_frees; j++) {
        uint8_t *v = model_at(m->live, m, st->frees[j]);
        if (!*v) return 0;
        *v = 0;
        m->mem -= model_bytes(m, st->frees[j], 0);
    }
    /* A value made again on the device no longer needs its host copy. */
    for (size_t j = 0; j < st->n_creates; j++) *model_at(m->host, m, st->creates[j]) = 0;
    return 1;
}

/* Replays a timed plan as an executor carries it out: before step k the
 * offloads whose copy_at is k are released and the prefetches whose copy_at
 * is k take their memory; every read must find its value on the device, and
 * every compute step's memory stays within the simulator's mem_during. */
static int timed_plan_consistent(const remat_chain *c, const remat_exec_plan *p) {
    exec_model m = {c, c->n, calloc(3 * (c->n + 1), 1), calloc(3 * (c->n + 1), 1),
                    c->input_bytes, {0}, {0}};
    int ok = m.live && m.host;
    if (ok) {
        m.live[0] = 1;
        m.live[REMAT_EXEC_D * (c->n + 1) + c->n] = 1;
    }
    for (size_t k = 0; k <= p->n_steps && ok; k++) {
        ok = model_before(&m, p, k) && (k == p->n_steps || model_step(&m, p, k));
        if (!ok) fprintf(stderr, "  timed plan step %zu inconsistent\n", k);
    }
    free(m.live);
    free(m.host);
    return ok;
}

/* Hand-worked: 100 bytes per time unit, abar[1] (100 bytes) goes to the host
 * during the forward and comes back during the backward. */
static void test_offload_hand(void) {
    remat_chain *c = small_chain(3);
    ASSERT_TRUE(c);
    const char *ops[] = {"Fall 1", "Off abar[1]", "Fck 2", "Fall 3", "B 3",
                         "Pre abar[1]", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 9);
    ASSERT_TRUE(s);
    remat_exec_plan *p = NULL;
    remat_error e;
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 100, &p, &e), REMAT_OK);
    const remat_exec_step *st = p->steps;
    ASSERT_EQ_INT(p->first_backward, 4);
    EXPECT_REFS(st[1].reads, st[1].n_reads, "abar[1]");
    ASSERT_NEAR(st[1].start, 1, 1e-12); /* the copy: 100 bytes at 100/unit */
    ASSERT_NEAR(st[1].end, 2, 1e-12);
    /* Fck 2 reads abar[1] while it is copied; Fall 3 starts when the copy has
     * ended and does not read it: released before Fall 3. */
    EXPECT_REFS(st[2].reads, st[2].n_reads, "abar[1]");
    ASSERT_EQ_INT(st[1].copy_at, 3);
    ASSERT_EQ_U64(st[2].mem_during, 125);
    ASSERT_EQ_U64(st[3].mem_during, 325); /* 5 + 20 + 300, abar[1] gone */
    ASSERT_EQ_U64(st[4].mem_during, 345);
    ASSERT_EQ_U64(st[4].mem_after, 25);
    /* Pre at t = 5 (the link is free, abar[1] released at 2): taken before Fall 2,
     * which waits for the copy's end (6). */
    EXPECT_REFS(st[5].creates, st[5].n_creates, "abar[1]");
    ASSERT_NEAR(st[5].start, 5, 1e-12);
    ASSERT_NEAR(st[5].end, 6, 1e-12);
    ASSERT_EQ_INT(st[5].copy_at, 6);
    EXPECT_REFS(st[6].reads, st[6].n_reads, "abar[1]");
    EXPECT_REFS(st[6].creates, st[6].n_creates, "abar[2]");
    ASSERT_NEAR(st[6].start, 6, 1e-12);
    ASSERT_EQ_U64(st[6].mem_during, 325);
    EXPECT_REFS(st[8].frees, st[8].n_frees, "a[0] abar[1] d[1]");
    for (size_t k = 0; k < 9; k++)
        if (st[k].op.kind != REMAT_OP_OFF && st[k].op.kind != REMAT_OP_PRE) ASSERT_EQ_INT(st[k].copy_at, k);
    ASSERT_EQ_U64(p->peak_bytes, 345);
    ASSERT_NEAR(p->time, 11, 1e-12);
    ASSERT_NEAR(p->bandwidth, 100, 0);
    ASSERT_TRUE(timed_plan_consistent(c, p));
    remat_exec_plan_free(p);
    remat_schedule_free(s);

    /* A Wait releases the offload: it is the Off's copy_at, and the clock moves. */
    const char *waits[] = {"Fall 1", "Fck 2", "Off abar[1]", "Wait abar[1]", "Fall 3", "B 3",
                           "Pre abar[1]", "Fall 2", "B 2", "B 1"};
    s = parse_ops(waits, 10);
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 100, &p, &e), REMAT_OK);
    ASSERT_EQ_INT(p->steps[2].copy_at, 3);
    ASSERT_NEAR(p->steps[3].start, 3, 1e-12);
    ASSERT_NEAR(p->steps[4].start, 3, 1e-12);
    ASSERT_EQ_U64(p->steps[4].mem_during, 325);
    ASSERT_TRUE(timed_plan_consistent(c, p));
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* With a link but no offload op, a timed plan is the plain one. */
static void test_timed_without_offloads(void) {
    remat_chain *c = small_chain(3);
    ASSERT_TRUE(c);
    const char *ops[] = {"Fck 1", "Fn 2", "Fall 3", "B 3", "Fall 1", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 8);
    remat_exec_plan *p = NULL, *q = NULL;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, NULL), REMAT_OK);
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 7, &q, NULL), REMAT_OK);
    ASSERT_EQ_U64(p->peak_bytes, q->peak_bytes);
    ASSERT_NEAR(p->time, q->time, 1e-12);
    for (size_t k = 0; k < 8; k++) {
        const remat_exec_step *a = &p->steps[k], *b = &q->steps[k];
        ASSERT_TRUE(a->n_reads == b->n_reads && a->n_creates == b->n_creates &&
                    a->n_frees == b->n_frees);
        ASSERT_TRUE(memcmp(a->reads, b->reads, a->n_reads * sizeof a->reads[0]) == 0);
        ASSERT_TRUE(memcmp(a->frees, b->frees, a->n_frees * sizeof a->frees[0]) == 0);
        ASSERT_EQ_U64(a->mem_during, b->mem_during);
        ASSERT_EQ_U64(a->mem_after, b->mem_after);
        ASSERT_NEAR(a->start, b->start, 1e-12);
        ASSERT_NEAR(a->end, b->end, 1e-12);
        ASSERT_EQ_INT(b->copy_at, k);
    }
    remat_exec_plan_free(p);
    remat_exec_plan_free(q);
    remat_schedule_free(s);
    remat_chain_free(c);
}

/* Plans of the offload solvers' schedules on random chains: consistent as an
 * executor replays them, with the simulator's peak and time. */
static void test_offload_solver_plans(void) {
    test_rng rng = {11};
    const char *algs[] = {"pofo", "offload-only", "opportunist", "autocapper"};
    int checked[4] = {0, 0, 0, 0}, offloads = 0;
    for (int trial = 0; trial < 24; trial++) {
        test_chain_spec spec = {3 + (size_t)(trial % 7), 60, trial % 2, trial % 3 == 0, 0, 0};
        remat_chain *c = test_random_chain(&rng, &spec);
        uint64_t peak = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        for (size_t a = 0; a < 4; a++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            ASSERT_STATUS(remat_algorithm_parse(algs[a], &o.algorithm, NULL), REMAT_OK);
            o.memory = peak * (uint64_t)(4 + trial % 5) / 10 + 10;
            o.bandwidth = 5 + 10.0 * (trial % 4);
            o.threads = 1;
            remat_schedule *s = NULL;
            if (remat_solve(c, &o, &s, NULL) != REMAT_OK) continue; /* infeasible */
            remat_exec_plan *p = NULL;
            remat_error e;
            remat_status st = remat_exec_plan_create_timed(c, s, o.bandwidth, &p, &e);
            if (st != REMAT_OK) fprintf(stderr, "  %s: %s\n", algs[a], e.message);
            ASSERT_STATUS(st, REMAT_OK);
            ASSERT_TRUE(timed_plan_consistent(c, p));
            remat_sim_options so;
            remat_sim_options_init(&so);
            so.bandwidth = o.bandwidth;
            remat_sim_result *r = NULL;
            ASSERT_STATUS(remat_simulate(c, s, &so, &r, NULL), REMAT_OK);
            ASSERT_EQ_U64(p->peak_bytes, r->peak_bytes);
            ASSERT_LE_U64(p->peak_bytes, o.memory);
            ASSERT_NEAR(p->time, r->time, 1e-9 * (1 + r->time));
            for (size_t k = 0; k < p->n_steps; k++) {
                ASSERT_EQ_U64(p->steps[k].mem_during, r->mem_during[k]);
                if (p->steps[k].op.kind == REMAT_OP_OFF) offloads++;
            }
            remat_sim_result_free(r);
            checked[a]++;
            remat_exec_plan_free(p);
            remat_schedule_free(s);
        }
        remat_chain_free(c);
    }
    for (size_t a = 0; a < 4; a++) ASSERT_TRUE(checked[a] >= 5);
    ASSERT_TRUE(offloads >= 20);
}

/* Partial saves: a Fall step carries its option, a B step the option of the
 * abar it consumes, also when that abar comes back from the host after a
 * recomputation with another option. Stage 1: a 10, abar 100, bwd 2, and
 * options 1 (abar 40, bwd 5, bwd_overhead 3) and 2 (abar 20, bwd 6). */
static remat_chain *options_chain(void) {
    static const char *doc =
        "{\"format\": \"remat-chain-1\", \"input_bytes\": 5, \"stages\": ["
        "{\"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 10, \"saved_bytes\": 100, "
        "\"options\": [{\"saved_bytes\": 40, \"bwd_time\": 5, \"bwd_overhead\": 3}, "
        "{\"saved_bytes\": 20, \"bwd_time\": 6}]},"
        "{\"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 1, \"saved_bytes\": 30}]}";
    remat_chain *c = NULL;
    if (remat_chain_from_json(doc, strlen(doc), "<test>", &c, NULL) != REMAT_OK) return NULL;
    return c;
}

static void test_partial_saves(void) {
    remat_chain *c = options_chain();
    ASSERT_TRUE(c);
    const char *ops[] = {"Fall 1/1", "Fall 2", "B 2", "B 1"};
    remat_schedule *s = parse_ops(ops, 4);
    remat_exec_plan *p = NULL;
    remat_error e;
    ASSERT_STATUS(remat_exec_plan_create(c, s, &p, &e), REMAT_OK);
    ASSERT_EQ_INT(p->steps[0].option, 1);
    EXPECT_REFS(p->steps[0].creates, p->steps[0].n_creates, "abar[1]");
    ASSERT_EQ_U64(p->steps[0].mem_after, 45);
    ASSERT_EQ_INT(p->steps[1].option, 0);
    ASSERT_EQ_INT(p->steps[2].option, 0);
    ASSERT_EQ_INT(p->steps[3].option, 1);
    ASSERT_EQ_U64(p->steps[3].mem_during, 45 + 10 + 5 + 3); /* d[1], d[0], the overhead */
    ASSERT_NEAR(p->time, 1 + 1 + 2 + 5, 1e-12);
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    /* abar[1] of option 1 to the host and back: 40 bytes each way */
    const char *back[] = {"Fall 1/1", "Fall 2", "B 2", "Off abar[1]", "Wait abar[1]",
                          "Pre abar[1]", "B 1"};
    s = parse_ops(back, 7);
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 10, &p, &e), REMAT_OK);
    ASSERT_NEAR(p->steps[3].end - p->steps[3].start, 4, 1e-12);
    ASSERT_NEAR(p->steps[5].end - p->steps[5].start, 4, 1e-12);
    ASSERT_EQ_INT(p->steps[6].option, 1);
    ASSERT_TRUE(timed_plan_consistent(c, p));
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    /* Recomputed with option 2 for B 2 while the host holds option 1's copy,
     * deleted, and brought back: B 1 consumes option 1's abar, as in the
     * timed simulator (B 1 takes option 1's 5 time units). */
    const char *host[] = {"Fall 1/1", "Off abar[1]", "Wait abar[1]", "Fall 1/2", "Fall 2",
                          "B 2", "Del abar[1]", "Pre abar[1]", "B 1"};
    s = parse_ops(host, 9);
    ASSERT_STATUS(remat_exec_plan_create_timed(c, s, 10, &p, &e), REMAT_OK);
    ASSERT_EQ_INT(p->steps[3].option, 2);
    ASSERT_EQ_INT(p->steps[8].option, 1);
    ASSERT_NEAR(p->steps[8].end - p->steps[8].start, 5, 1e-12);
    remat_exec_plan_free(p);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static const test_case cases[] = {
    {"partial_saves", test_partial_saves},
    {"hand_schedule", test_hand_schedule},
    {"upgrade_and_noop", test_upgrade_and_noop},
    {"del", test_del},
    {"stops", test_stops},
    {"rejects", test_rejects},
    {"solver_plans", test_solver_plans},
    {"offload_hand", test_offload_hand},
    {"timed_without_offloads", test_timed_without_offloads},
    {"offload_solver_plans", test_offload_solver_plans},
};
TEST_MAIN(cases)
