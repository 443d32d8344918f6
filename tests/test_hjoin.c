/* Heterogeneous join networks (remat-join-2): the solver against brute force,
 * against optimal with one branch, every schedule through the simulator,
 * the formats, the simulator's messages, plans, curves and limits. */
#include <stdlib.h>

#include "common/testlib.h"
#include "core/hjoin_internal.h"
#include "remat/remat.h"
#include "test.h"

/* ---- random networks ---- */

typedef struct net_spec {
    size_t k;
    uint32_t len[REMAT_HJOIN_MAX_BRANCHES];
    uint64_t max_bytes;
    int overheads, grad_sizes, zero_sizes, int_times;
    test_option_spec saves; /* fall_overhead and partial saves (options) */
    int ordered;            /* the branches run in order */
    int stops;              /* 0: no stop fields; else 1 + a TEST_STOPS_ mode */
} net_spec;

static remat_stage random_turn(test_rng *r, const net_spec *sp) {
    remat_stage t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "loss");
    t.fwd_time = sp->int_times ? (double)test_rng_range(r, 0, 4) : 4 * test_rng_unit(r);
    t.bwd_time = sp->int_times ? (double)test_rng_range(r, 0, 4) : 4 * test_rng_unit(r);
    t.out_bytes = test_rng_range(r, 0, 2);
    t.saved_bytes = t.out_bytes + test_rng_range(r, 0, sp->max_bytes / 2);
    if (sp->overheads) {
        t.fwd_overhead = test_rng_range(r, 0, sp->max_bytes);
        t.bwd_overhead = test_rng_range(r, 0, sp->max_bytes);
    }
    return t;
}

/* About one partial save in four gets a backward faster than its stage's
 * full save (a measured profile can show that), so that store-all is not
 * always the fastest schedule. */
static void faster_saves(test_rng *r, remat_chain *c) {
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < c->stages[i].n_options; k++)
            if (test_rng_range(r, 0, 3) == 0)
                c->stages[i].options[k].bwd_time = c->stages[i].bwd_time * test_rng_unit(r);
}

/* A random network; never NULL. */
static remat_hjoin *random_net(test_rng *r, const net_spec *sp) {
    remat_hjoin_branch br[REMAT_HJOIN_MAX_BRANCHES];
    remat_chain *cs[REMAT_HJOIN_MAX_BRANCHES] = {NULL};
    memset(br, 0, sizeof br);
    for (size_t j = 0; j < sp->k; j++) {
        test_chain_spec cs_spec = {sp->len[j] + 1, sp->max_bytes, sp->overheads, sp->grad_sizes,
                                   sp->zero_sizes, sp->int_times};
        cs[j] = test_random_chain_with(r, &cs_spec, &sp->saves);
        faster_saves(r, cs[j]);
        if (sp->stops) { /* every branch stage may get them; the chain's loss does not */
            remat_chain *w = test_with_stops(r, cs[j], sp->stops - 1, sp->max_bytes);
            remat_chain_free(cs[j]);
            cs[j] = w;
        }
        snprintf(br[j].name, sizeof br[j].name, "b%zu", j + 1);
        br[j].input_bytes = cs[j]->input_bytes;
        br[j].input_grad_bytes = test_rng_range(r, 0, 3) == 0 ? 0 : cs[j]->input_grad_bytes;
        br[j].n = sp->len[j];
        br[j].stages = cs[j]->stages;
        /* the chain's loss seed is 0: give the last stage a gradient */
        if (sp->len[j] >= 1) br[j].stages[sp->len[j] - 1].grad_bytes = cs[j]->stages[0].grad_bytes;
    }
    remat_stage t = random_turn(r, sp);
    remat_hjoin *j = NULL;
    remat_error e;
    if (remat_hjoin_create("random", "ms", sp->k, br, &t, &j, &e) != REMAT_OK) {
        fprintf(stderr, "random_net: %s\n", e.message);
        abort();
    }
    for (size_t q = 0; q < sp->k; q++) remat_chain_free(cs[q]);
    remat_hjoin_set_ordered(j, sp->ordered);
    return j;
}

static remat_status solve_at(const remat_hjoin *j, uint64_t mem, int64_t slots,
                             remat_hjoin_schedule **s, remat_error *e) {
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = mem;
    o.slots = slots;
    o.max_seconds = -1;
    return remat_hjoin_solve(j, &o, s, e);
}

/* Simulates s on j: valid, peak <= limit and the time it claims. */
static int schedule_ok(const remat_hjoin *j, const remat_hjoin_schedule *s, uint64_t limit) {
    remat_hjoin_sim_result *r = NULL;
    remat_error e;
    if (remat_hjoin_simulate(j, s, &r, &e) != REMAT_OK) {
        fprintf(stderr, "  simulate: %s\n", e.message);
        return 0;
    }
    int ok = r->valid && r->peak_bytes <= limit && r->peak_bytes == s->peak_bytes &&
             fabs(r->time - s->time) <= 1e-9 * (1 + fabs(r->time));
    if (!ok)
        fprintf(stderr, "  schedule: valid %d (%s: %s), peak %llu (claims %llu, limit %llu), "
                        "time %g (claims %g)\n",
                r->valid, r->failed_op_text, r->reason, (unsigned long long)r->peak_bytes,
                (unsigned long long)s->peak_bytes, (unsigned long long)limit, r->time, s->time);
    remat_hjoin_sim_result_free(r);
    return ok;
}

/* ---- brute force ----
 *
 * Every schedule of the class the solver optimises over, written out op by
 * op and replayed by the simulator's rules, with no memory bookkeeping of its
 * own. A level of the forward phase picks a branch m at its start s and
 * either runs Fall s (B s comes once the rest is done) or Fck s, Fn s+1..s'-1
 * (the segment s..s'-1 is back-propagated once the rest is done); with every
 * branch at its end, T. A segment is back-propagated by any persistent chain
 * schedule (rotor's Theorem 1 form, every choice). In order "nested", the
 * pending work runs last-in first-out; in order "any", after T the pending
 * segments of the branches may run in any order that keeps each branch's
 * last-in first-out (a wider class, to measure what nesting costs).
 *
 * It collects the (peak, time) Pareto front of all complete schedules, so one
 * enumeration answers every memory limit. */

enum { BT_LEVEL, BT_B, BT_SEG };
typedef struct bf_task {
    uint8_t kind, m;
    uint32_t s, e;
} bf_task;

#define BF_MAX_TASKS 64
#define BF_MAX_DEPTH 256
#define BF_MAX_FRONT 4096

typedef struct bf_search {
    const remat__hjoin_net *net;
    int any_order;
    remat__hjoin_state pool[BF_MAX_DEPTH];
    uint64_t front_peak[BF_MAX_FRONT];
    double front_time[BF_MAX_FRONT];
    size_t n_front;
    size_t leaves;
} bf_search;

static void bf_record(bf_search *b, uint64_t peak, double time) {
    for (size_t i = 0; i < b->n_front; i++)
        if (b->front_peak[i] <= peak && b->front_time[i] <= time) return;
    size_t out = 0;
    for (size_t i = 0; i < b->n_front; i++)
        if (!(peak <= b->front_peak[i] && time <= b->front_time[i])) {
            b->front_peak[out] = b->front_peak[i];
            b->front_time[out++] = b->front_time[i];
        }
    if (out < BF_MAX_FRONT) {
        b->front_peak[out] = peak;
        b->front_time[out++] = time;
    }
    b->n_front = out;
}

static double bf_best(const bf_search *b, uint64_t limit) {
    double best = INFINITY;
    for (size_t i = 0; i < b->n_front; i++)
        if (b->front_peak[i] <= limit && b->front_time[i] < best) best = b->front_time[i];
    return best;
}

/* A pending state of the search: the tasks left (LIFO), and per branch the
 * segments pending after T (for order "any"). */
typedef struct bf_node {
    bf_task tasks[BF_MAX_TASKS];
    size_t n_tasks;
    uint32_t s[REMAT_HJOIN_MAX_BRANCHES]; /* the forward phase's starts */
} bf_node;

static void bf_run(bf_search *b, size_t depth, const bf_node *node, uint64_t peak, double time);

/* Applies ops to the state at depth into depth + 1 and continues with node. */
static void bf_apply(bf_search *b, size_t depth, const remat_hjoin_op *ops, size_t n,
                     const bf_node *node, uint64_t peak, double time) {
    if (depth + 1 >= BF_MAX_DEPTH) abort();
    remat__hjoin_state *st = &b->pool[depth + 1];
    remat__hjoin_state_copy(b->net, st, &b->pool[depth]);
    char why[256];
    for (size_t i = 0; i < n; i++) {
        uint64_t during;
        double t;
        if (!remat__hjoin_apply(b->net, st, ops[i], i + 1 < n ? &ops[i + 1] : NULL, &during, &t, why, sizeof why)) {
            fprintf(stderr, "brute force: an op of the class fails: %s\n", why);
            abort();
        }
        if (during > peak) peak = during;
        time += t;
    }
    bf_run(b, depth + 1, node, peak, time);
}

static remat_hjoin_op hop(uint8_t kind, size_t m, uint32_t i) {
    return (remat_hjoin_op){kind, (uint8_t)(m + 1), i, 0};
}

static remat_hjoin_op fall_op(size_t m, uint32_t i, size_t k) {
    return (remat_hjoin_op){REMAT_HJOIN_OP_FALL, (uint8_t)(m + 1), i, (uint8_t)k};
}

/* Saves of stage i of branch m: the full one and its options. */
static size_t saves_of(const remat__hjoin_net *net, size_t m, uint32_t i) {
    return net->c[m]->stages[i - 1].n_options + 1;
}

static void push_task(bf_node *n, bf_task t) {
    if (n->n_tasks >= BF_MAX_TASKS) abort();
    n->tasks[n->n_tasks++] = t;
}

/* A forward level at node->s. */
static void bf_level(bf_search *b, size_t depth, const bf_node *node, uint64_t peak,
                     double time) {
    const remat__hjoin_net *net = b->net;
    int done = 1;
    for (size_t m = 0; m < net->k; m++) done &= node->s[m] > net->n[m];
    if (done) {
        remat_hjoin_op t = {REMAT_HJOIN_OP_T, 0, 0, 0};
        bf_apply(b, depth, &t, 1, node, peak, time);
        return;
    }
    for (size_t m = 0; m < net->k; m++) {
        uint32_t s = node->s[m];
        if (s > net->n[m]) continue;
        if (net->ordered && m > 0 && node->s[m - 1] <= net->n[m - 1]) break; /* in order */
        bf_node next = *node;
        push_task(&next, (bf_task){BT_B, (uint8_t)m, s, s});
        next.s[m] = s + 1;
        push_task(&next, (bf_task){BT_LEVEL, 0, 0, 0});
        for (size_t k = 0; k < saves_of(net, m, s); k++) {
            remat_hjoin_op fall = fall_op(m, s, k);
            bf_apply(b, depth, &fall, 1, &next, peak, time);
        }
        for (uint32_t sp = s + 1; sp <= net->n[m] + 1; sp++) {
            remat_hjoin_op ops[64];
            size_t n = 0;
            ops[n++] = hop(REMAT_HJOIN_OP_FCK, m, s);
            for (uint32_t i = s + 1; i < sp; i++) ops[n++] = hop(REMAT_HJOIN_OP_FN, m, i);
            next = *node;
            push_task(&next, (bf_task){BT_SEG, (uint8_t)m, s, sp - 1});
            next.s[m] = sp;
            push_task(&next, (bf_task){BT_LEVEL, 0, 0, 0});
            bf_apply(b, depth, ops, n, &next, peak, time);
        }
    }
}

/* Back-propagates segment s..e of branch m (d[m.e] held), every rotor form. */
static void bf_segment(bf_search *b, size_t depth, const bf_node *node, size_t m, uint32_t s,
                       uint32_t e, uint64_t peak, double time) {
    bf_node next = *node;
    /* s == e: B s comes right after the Fall, which may stop, so the two run
     * as one step (bf_apply shows each op the one after it) */
    if (s < e) {
        push_task(&next, (bf_task){BT_B, (uint8_t)m, s, s});
        push_task(&next, (bf_task){BT_SEG, (uint8_t)m, s + 1, e});
    }
    for (size_t k = 0; k < saves_of(b->net, m, s); k++) {
        remat_hjoin_op pair[2] = {fall_op(m, s, k), hop(REMAT_HJOIN_OP_B, m, s)};
        bf_apply(b, depth, pair, s < e ? 1 : 2, &next, peak, time);
    }
    for (uint32_t sp = s + 1; sp <= e; sp++) {
        remat_hjoin_op ops[64];
        size_t n = 0;
        ops[n++] = hop(REMAT_HJOIN_OP_FCK, m, s);
        for (uint32_t i = s + 1; i < sp; i++) ops[n++] = hop(REMAT_HJOIN_OP_FN, m, i);
        next = *node;
        push_task(&next, (bf_task){BT_SEG, (uint8_t)m, s, sp - 1});
        push_task(&next, (bf_task){BT_SEG, (uint8_t)m, sp, e});
        bf_apply(b, depth, ops, n, &next, peak, time);
    }
}

static void bf_run_task(bf_search *b, size_t depth, bf_node *node, size_t at, uint64_t peak,
                        double time) {
    bf_task t = node->tasks[at];
    memmove(&node->tasks[at], &node->tasks[at + 1], (node->n_tasks - at - 1) * sizeof t);
    node->n_tasks--;
    if (t.kind == BT_LEVEL) {
        bf_level(b, depth, node, peak, time);
    } else if (t.kind == BT_B) {
        remat_hjoin_op op = hop(REMAT_HJOIN_OP_B, t.m, t.s);
        bf_apply(b, depth, &op, 1, node, peak, time);
    } else {
        bf_segment(b, depth, node, t.m, t.s, t.e, peak, time);
    }
}

static void bf_run(bf_search *b, size_t depth, const bf_node *node, uint64_t peak, double time) {
    if (node->n_tasks == 0) {
        b->leaves++;
        bf_record(b, peak, time);
        return;
    }
    bf_node next = *node;
    const bf_task *top = &node->tasks[node->n_tasks - 1];
    if (!b->any_order || top->kind == BT_LEVEL || !b->pool[depth].turned) {
        bf_run_task(b, depth, &next, node->n_tasks - 1, peak, time);
        return;
    }
    /* After T, order "any": the last pending task of any branch. */
    int seen[REMAT_HJOIN_MAX_BRANCHES] = {0};
    for (size_t i = node->n_tasks; i-- > 0;) {
        uint8_t m = node->tasks[i].m;
        if (seen[m]) continue;
        seen[m] = 1;
        next = *node;
        bf_run_task(b, depth, &next, i, peak, time);
    }
}

/* Fills b's front for net; 0 when the instance is too big to enumerate. */
static int brute_force(bf_search *b, const remat__hjoin_net *net, int any_order) {
    memset(b, 0, sizeof *b);
    b->net = net;
    b->any_order = any_order;
    for (size_t d = 0; d < BF_MAX_DEPTH; d++)
        if (remat__hjoin_state_init(net, &b->pool[d], NULL) != REMAT_OK) abort();
    bf_node root;
    memset(&root, 0, sizeof root);
    for (size_t m = 0; m < net->k; m++) root.s[m] = 1;
    root.tasks[root.n_tasks++] = (bf_task){BT_LEVEL, 0, 0, 0};
    bf_run(b, 0, &root, b->pool[0].mem, 0);
    for (size_t d = 0; d < BF_MAX_DEPTH; d++) remat__hjoin_state_free(&b->pool[d]);
    return 1;
}

static remat__hjoin_net net_of(const remat_hjoin *j) {
    remat__hjoin_net net;
    if (remat__hjoin_net_init(&net, j, "test", NULL) != REMAT_OK) abort();
    return net;
}

static size_t partial_schedules; /* solver schedules with a partial save */

static int uses_partial_save(const remat_hjoin_schedule *s) {
    for (size_t k = 0; k < s->n_ops; k++)
        if (s->ops[k].option) return 1;
    return 0;
}

static size_t stop_pairs; /* schedules with a full-save Fall j.i right before B j.i */

static int has_stop_pair(const remat_hjoin_schedule *s) {
    for (size_t k = 0; k + 1 < s->n_ops; k++) {
        remat_hjoin_op a = s->ops[k], b = s->ops[k + 1];
        if (a.kind == REMAT_HJOIN_OP_FALL && !a.option && b.kind == REMAT_HJOIN_OP_B &&
            a.branch == b.branch && a.index == b.index)
            return 1;
    }
    return 0;
}

/* The solver at every limit from below the front's least peak to above the
 * store-all peak, exact bytes: equal to brute force, every schedule valid. */
static int agree_with_brute_force(const remat_hjoin *j, bf_search *b, size_t *compared) {
    remat__hjoin_net net = net_of(j);
    brute_force(b, &net, 0);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < b->n_front; i++) {
        if (b->front_peak[i] < lo) lo = b->front_peak[i];
        if (b->front_peak[i] > hi) hi = b->front_peak[i];
    }
    int ok = 1;
    uint64_t mm = 0;
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.slots = 0;
    remat_error e;
    if (remat_hjoin_min_memory(j, &o, &mm, &e) != REMAT_OK || mm != lo) {
        fprintf(stderr, "  min memory %llu, brute force %llu\n", (unsigned long long)mm,
                (unsigned long long)lo);
        ok = 0;
    }
    for (uint64_t m = lo ? lo - 1 : 0; ok && m <= hi + 1; m++) {
        remat_hjoin_schedule *s = NULL;
        remat_status st = solve_at(j, m, 0, &s, &e);
        double want = bf_best(b, m);
        if (isinf(want)) {
            ok = st == REMAT_E_INFEASIBLE && e.min_memory == lo;
            if (!ok) fprintf(stderr, "  M=%llu: expected infeasible, status %d\n",
                             (unsigned long long)m, st);
        } else if (st != REMAT_OK) {
            fprintf(stderr, "  M=%llu: %s (brute force %g)\n", (unsigned long long)m, e.message,
                    want);
            ok = 0;
        } else {
            ok = schedule_ok(j, s, m) && fabs(s->time - want) <= 1e-5 * (1 + want);
            if (!ok)
                fprintf(stderr, "  M=%llu: solver %.9g, brute force %.9g\n",
                        (unsigned long long)m, s->time, want);
            (*compared)++;
            partial_schedules += uses_partial_save(s);
            stop_pairs += has_stop_pair(s);
        }
        remat_hjoin_schedule_free(s);
    }
    remat__hjoin_net_free(&net);
    return ok;
}

static bf_search bf; /* large: static */

static void random_spec(test_rng *r, net_spec *sp, size_t k, uint32_t maxlen) {
    memset(sp, 0, sizeof *sp);
    sp->k = k;
    for (size_t j = 0; j < k; j++) sp->len[j] = (uint32_t)test_rng_range(r, 1, maxlen);
    sp->max_bytes = test_rng_range(r, 2, 8);
    sp->overheads = (int)test_rng_range(r, 0, 1);
    sp->grad_sizes = (int)test_rng_range(r, 0, 1);
    sp->zero_sizes = (int)test_rng_range(r, 0, 1);
    sp->int_times = (int)test_rng_range(r, 0, 1);
}

/* With fall_overheads and up to `most` partial saves per stage. */
static void random_spec_saves(test_rng *r, net_spec *sp, size_t k, uint32_t maxlen, size_t most) {
    random_spec(r, sp, k, maxlen);
    sp->saves.fall_overheads = most > 0;
    sp->saves.options = most;
}

static void run_random_stops(uint64_t seed, size_t count, size_t k, uint32_t maxlen,
                             size_t most, int ordered, int stops) {
    test_rng r = {seed};
    size_t compared = 0;
    partial_schedules = 0;
    stop_pairs = 0;
    for (size_t it = 0; it < count; it++) {
        net_spec sp;
        random_spec_saves(&r, &sp, k, maxlen, most);
        sp.ordered = ordered;
        sp.stops = stops;
        remat_hjoin *j = random_net(&r, &sp);
        int ok = agree_with_brute_force(j, &bf, &compared);
        if (!ok) {
            char *text = NULL;
            remat_hjoin_to_json(j, &text, NULL);
            fprintf(stderr, "  instance %zu (seed %llu):\n%s\n", it, (unsigned long long)seed,
                    text ? text : "?");
            remat_free(text);
        }
        remat_hjoin_free(j);
        if (!ok) TEST_FAIL_("solver and brute force differ");
    }
    printf("  %zu random networks, %zu limits compared", count, compared);
    if (most) printf(", %zu schedules with a partial save", partial_schedules);
    if (stops) printf(", %zu with a Fall j.i right before B j.i", stop_pairs);
    printf("\n");
    if (stops) ASSERT_TRUE(stop_pairs > 0);
}

static void run_random_all(uint64_t seed, size_t count, size_t k, uint32_t maxlen,
                           size_t most, int ordered) {
    run_random_stops(seed, count, k, maxlen, most, ordered, 0);
}

static void run_random_saves(uint64_t seed, size_t count, size_t k, uint32_t maxlen,
                             size_t most) {
    run_random_all(seed, count, k, maxlen, most, 0);
}

static void run_random(uint64_t seed, size_t count, size_t k, uint32_t maxlen) {
    run_random_saves(seed, count, k, maxlen, 0);
}

static void test_brute_force_two_branches(void) { run_random(11, 150, 2, 3); }
static void test_brute_force_three_branches(void) { run_random(12, 80, 3, 2); }
static void test_brute_force_one_branch(void) { run_random(13, 60, 1, 4); }
static void test_brute_force_four_branches(void) { run_random(14, 20, 4, 1); }
/* Partial saves and fall_overhead: every save of every Fall in the brute force. */
static void test_brute_force_saves_one_branch(void) { run_random_saves(15, 80, 1, 4, 2); }
static void test_brute_force_saves_two_branches(void) { run_random_saves(16, 150, 2, 3, 2); }
static void test_brute_force_saves_three_branches(void) { run_random_saves(17, 60, 3, 2, 2); }
/* Stop fields on the branch stages (random ones may raise the Fall's memory;
 * benign ones never do): the brute force runs each Fall s; B s of a segment
 * with the simulator's stopped Fall, and the solver must equal it. */
static void test_brute_force_stops(void) {
    run_random_stops(21, 120, 1, 4, 0, 0, 1 + TEST_STOPS_RANDOM);
    run_random_stops(22, 120, 2, 3, 0, 0, 1 + TEST_STOPS_RANDOM);
    run_random_stops(23, 60, 3, 2, 2, 0, 1 + TEST_STOPS_RANDOM);
    run_random_stops(24, 100, 2, 3, 1, 0, 1 + TEST_STOPS_BENIGN);
    run_random_stops(25, 60, 2, 3, 1, 1, 1 + TEST_STOPS_RANDOM);
}

/* Stop fields set to their defaults explicitly: the same schedules, op for op,
 * as without them (the solver's figures are the same numbers). */
static void test_stop_defaults_same_schedules(void) {
    size_t same = 0;
    for (int it = 0; it < 80; it++) {
        remat_hjoin *j[2];
        for (int v = 0; v < 2; v++) {
            test_rng r = {(uint64_t)(500 + it)};
            net_spec sp;
            random_spec_saves(&r, &sp, 1 + (size_t)it % 3, 3, (size_t)it % 2);
            sp.stops = v ? 1 + TEST_STOPS_DEFAULTS : 0;
            j[v] = random_net(&r, &sp);
        }
        ASSERT_TRUE(j[1]->branches[0].stages[0].has_stop_time);
        ASSERT_EQ_INT(j[0]->branches[0].stages[0].has_stop_time, 0);
        uint64_t peak = 0, mm = 0;
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.slots = 0;
        ASSERT_STATUS(remat_hjoin_store_all_cost(j[0], &peak, NULL, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_min_memory(j[0], &o, &mm, NULL), REMAT_OK);
        for (uint64_t m = mm; m <= peak; m++) {
            remat_hjoin_schedule *s[2] = {NULL, NULL};
            ASSERT_STATUS(solve_at(j[0], m, 0, &s[0], NULL), REMAT_OK);
            ASSERT_STATUS(solve_at(j[1], m, 0, &s[1], NULL), REMAT_OK);
            ASSERT_EQ_U64(s[0]->n_ops, s[1]->n_ops);
            for (size_t k = 0; k < s[0]->n_ops; k++) { /* field by field: the struct has padding */
                remat_hjoin_op a = s[0]->ops[k], b = s[1]->ops[k];
                ASSERT_TRUE(a.kind == b.kind && a.branch == b.branch && a.index == b.index &&
                            a.option == b.option);
            }
            ASSERT_EQ_U64(s[0]->peak_bytes, s[1]->peak_bytes);
            ASSERT_TRUE(s[0]->time == s[1]->time);
            same++;
            remat_hjoin_schedule_free(s[0]);
            remat_hjoin_schedule_free(s[1]);
        }
        remat_hjoin_free(j[0]);
        remat_hjoin_free(j[1]);
    }
    printf("  %zu limits: the same schedules\n", same);
}

/* Ordered networks: the brute force runs the branches in order too. */
static void test_brute_force_ordered(void) {
    run_random_all(18, 80, 2, 3, 1, 1);
    run_random_all(19, 60, 3, 2, 1, 1);
}

/* The wider class (segments after T in any order per branch) never does worse
 * than the nested one, and the solver is within the nested class' optimum. */
static void test_any_order_at_most_nested(void) {
    test_rng r = {21};
    size_t lower = 0, total = 0;
    static bf_search any;
    for (size_t it = 0; it < 40; it++) {
        net_spec sp;
        random_spec(&r, &sp, 2, 2);
        remat_hjoin *j = random_net(&r, &sp);
        remat__hjoin_net net = net_of(j);
        brute_force(&bf, &net, 0);
        brute_force(&any, &net, 1);
        for (size_t i = 0; i < bf.n_front; i++) {
            double a = bf_best(&any, bf.front_peak[i]);
            if (!(a <= bf.front_time[i] + 1e-12)) {
                remat__hjoin_net_free(&net);
                remat_hjoin_free(j);
                TEST_FAIL_("any order %g above nested %g", a, bf.front_time[i]);
            }
        }
        for (size_t i = 0; i < any.n_front; i++) {
            total++;
            lower += bf_best(&bf, any.front_peak[i]) > any.front_time[i] + 1e-12;
        }
        remat__hjoin_net_free(&net);
        remat_hjoin_free(j);
    }
    printf("  any order beats nesting at %zu of %zu Pareto points\n", lower, total);
}


/* ---- one branch is a chain: the same optimum as optimal ---- */

/* The chain of branch 1 of j with the turn as its loss. */
static remat_chain *as_chain(const remat_hjoin *j) {
    remat_chain *c = NULL;
    if (remat_hjoin_flatten(j, &c, NULL) != REMAT_OK) abort();
    return c;
}

static void one_branch_equals_optimal(uint64_t seed, size_t count, size_t most) {
    test_rng r = {seed};
    size_t compared = 0;
    for (size_t it = 0; it < count; it++) {
        net_spec sp;
        random_spec_saves(&r, &sp, 1, 8, most);
        remat_hjoin *j = random_net(&r, &sp);
        remat_chain *c = as_chain(j);
        uint64_t peak = 0;
        ASSERT_STATUS(remat_store_all_cost(c, &peak, NULL, NULL), REMAT_OK);
        for (uint64_t m = 1; m <= peak + 1; m++) {
            remat_solve_options o;
            remat_solve_options_init(&o);
            o.memory = m;
            o.slots = 0;
            remat_schedule *cs = NULL;
            remat_hjoin_schedule *js = NULL;
            remat_error e1, e2;
            remat_status s1 = remat_solve(c, &o, &cs, &e1);
            remat_status s2 = solve_at(j, m, 0, &js, &e2);
            int ok = s1 == s2;
            if (ok && s1 == REMAT_OK)
                ok = schedule_ok(j, js, m) && fabs(cs->time - js->time) <= 1e-5 * (1 + cs->time);
            if (ok && s1 == REMAT_E_INFEASIBLE) ok = e1.min_memory == e2.min_memory;
            if (!ok)
                fprintf(stderr, "  M=%llu: optimal %d %g (%s), join %d %g (%s)\n",
                        (unsigned long long)m, s1, cs ? cs->time : -1, e1.message, s2,
                        js ? js->time : -1, e2.message);
            compared += s1 == REMAT_OK;
            remat_schedule_free(cs);
            remat_hjoin_schedule_free(js);
            if (!ok) {
                remat_chain_free(c);
                remat_hjoin_free(j);
                TEST_FAIL_("one branch: join and optimal differ");
            }
        }
        remat_chain_free(c);
        remat_hjoin_free(j);
    }
    printf("  %zu limits compared\n", compared);
}

static void test_one_branch_equals_optimal(void) { one_branch_equals_optimal(31, 120, 0); }
static void test_one_branch_equals_optimal_saves(void) { one_branch_equals_optimal(32, 120, 3); }

/* With slots the solver keeps the limit and is never better than exact bytes. */
static void test_slots_within_limit(void) {
    test_rng r = {41};
    for (size_t it = 0; it < 60; it++) {
        net_spec sp;
        random_spec_saves(&r, &sp, 2 + it % 2, 5, it < 40 ? 0 : 2);
        sp.max_bytes = 4000;
        remat_hjoin *j = random_net(&r, &sp);
        uint64_t peak = 0;
        ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.slots = 20;
        uint64_t mm = 0;
        ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mm, NULL), REMAT_OK);
        for (int q = 0; q <= 8; q++) {
            uint64_t m = mm + (peak - mm) * (uint64_t)q / 8;
            remat_hjoin_schedule *s = NULL;
            remat_error e;
            ASSERT_STATUS(solve_at(j, m, 20, &s, &e), REMAT_OK);
            ASSERT_TRUE(schedule_ok(j, s, m));
            remat_hjoin_schedule_free(s);
        }
        if (mm > 0) {
            remat_hjoin_schedule *s = NULL;
            remat_error e;
            ASSERT_STATUS(solve_at(j, mm - 1, 20, &s, &e), REMAT_E_INFEASIBLE);
            ASSERT_EQ_U64(e.min_memory, mm);
        }
        remat_hjoin_free(j);
    }
}

static remat_hjoin *order_conflict(void);

/* ---- the true optimum: every valid schedule, exact-style ----
 *
 * A Dijkstra over memory states, as src/solvers/exact.c does for a chain.
 * Between ops a state is: whether T has run, and per branch the B expected
 * next and, for every index up to it, whether a, abar or neither is held
 * (the gradients held follow from those). Edges are the simulator's ops
 * (remat__hjoin_apply) whose memory in use fits the limit; persistence is
 * not required (an Fn may drop any plain value), Del is not an op here. The
 * nested solver can only be slower. Each op is applied without its successor
 * (no stopped Fall): it runs on networks without stop fields only. */

#define EX_KEY 24

typedef struct ex_node {
    uint8_t key[EX_KEY];
    double g;
    int done;
} ex_node;

typedef struct ex_search {
    const remat__hjoin_net *net;
    ex_node *nodes;
    size_t n, cap;
    uint32_t *slot; /* open addressing: node index + 1, 0 empty */
    size_t nslot;
    uint32_t *heap;
    size_t nheap;
} ex_search;

static void ex_key(const remat__hjoin_net *net, const remat__hjoin_state *st, uint8_t *key) {
    memset(key, 0, EX_KEY);
    size_t at = 0;
    key[at++] = (uint8_t)(st->turned | st->at << 1); /* and where an ordered network is */
    for (size_t b = 0; b < net->k; b++) {
        key[at++] = (uint8_t)st->b[b].next_b;
        for (uint32_t i = 0; i <= net->n[b]; i++) /* what is held, and an abar's save */
            key[at++] = (uint8_t)(st->b[b].val[i] |
                                  (st->b[b].val[i] == REMAT__HELD_ABAR ? st->b[b].opt[i] << 2 : 0));
    }
}

/* The state of a key (dheld rebuilt from next_b and the turn). */
static void ex_state(const remat__hjoin_net *net, const uint8_t *key, remat__hjoin_state *st) {
    size_t at = 0;
    st->turned = key[at] & 1;
    st->at = key[at++] >> 1;
    st->mem = 0;
    for (size_t b = 0; b < net->k; b++) {
        remat__sim_state *s = &st->b[b];
        const remat_chain *c = net->c[b];
        s->next_b = key[at++];
        memset(s->dheld, 0, c->n + 1);
        s->mem = 0;
        for (uint32_t i = 0; i <= net->n[b]; i++) {
            s->val[i] = key[at] & 3;
            s->opt[i] = key[at++] >> 2;
            s->mem += remat__value_bytes(c, i, s->val[i], s->opt[i]);
        }
        if (st->turned) {
            s->dheld[s->next_b] = 1;
            s->mem += remat_chain_d_bytes(c, s->next_b);
        }
        st->mem += s->mem;
    }
}

static uint64_t ex_hash(const uint8_t *key) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < EX_KEY; i++) h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

static uint32_t ex_find(ex_search *x, const uint8_t *key) {
    size_t h = (size_t)(ex_hash(key) % x->nslot);
    while (x->slot[h]) {
        if (memcmp(x->nodes[x->slot[h] - 1].key, key, EX_KEY) == 0) return x->slot[h] - 1;
        h = (h + 1) % x->nslot;
    }
    if (x->n == x->cap) {
        x->cap *= 2;
        x->nodes = realloc(x->nodes, x->cap * sizeof *x->nodes);
        if (!x->nodes) abort();
    }
    if (2 * x->n >= x->nslot) abort(); /* the table is sized for the state count */
    memcpy(x->nodes[x->n].key, key, EX_KEY);
    x->nodes[x->n].g = INFINITY;
    x->nodes[x->n].done = 0;
    x->slot[h] = (uint32_t)(x->n + 1);
    return (uint32_t)x->n++;
}

static int ex_less(const ex_search *x, uint32_t a, uint32_t b) {
    return x->nodes[a].g < x->nodes[b].g;
}

static void ex_push(ex_search *x, uint32_t v) {
    size_t i = x->nheap++;
    x->heap[i] = v;
    while (i && ex_less(x, x->heap[i], x->heap[(i - 1) / 2])) {
        uint32_t t = x->heap[i];
        x->heap[i] = x->heap[(i - 1) / 2];
        x->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static uint32_t ex_pop(ex_search *x) {
    uint32_t top = x->heap[0];
    x->heap[0] = x->heap[--x->nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < x->nheap && ex_less(x, x->heap[l], x->heap[m])) m = l;
        if (r < x->nheap && ex_less(x, x->heap[r], x->heap[m])) m = r;
        if (m == i) break;
        uint32_t t = x->heap[i];
        x->heap[i] = x->heap[m];
        x->heap[m] = t;
        i = m;
    }
    return top;
}

/* The least time of any valid schedule within limit (INFINITY when none). */
static double exact_join(const remat__hjoin_net *net, uint64_t limit) {
    size_t states = 2;
    for (size_t b = 0; b < net->k; b++) {
        size_t per = net->n[b] + 1u;
        for (uint32_t i = 0; i <= net->n[b]; i++) per *= i ? 2 + saves_of(net, b, i) : 3;
        states *= per;
        if (net->ordered) states *= 2; /* where the order is: at most k values (k <= 4) */
    }
    ex_search x = {net, NULL, 0, 1024, NULL, 2 * states + 1, NULL, 0};
    x.nodes = malloc(x.cap * sizeof *x.nodes);
    x.slot = calloc(x.nslot, sizeof *x.slot);
    x.heap = malloc((4 * states + 4) * sizeof *x.heap); /* lazy deletion: one entry per relax */
    remat__hjoin_state st, nx;
    if (!x.nodes || !x.slot || !x.heap || remat__hjoin_state_init(net, &st, NULL) != REMAT_OK ||
        remat__hjoin_state_init(net, &nx, NULL) != REMAT_OK)
        abort();
    double best = INFINITY;
    uint8_t key[EX_KEY];
    if (st.mem <= limit) {
        ex_key(net, &st, key);
        uint32_t s0 = ex_find(&x, key);
        x.nodes[s0].g = 0;
        ex_push(&x, s0);
    }
    char why[256];
    while (x.nheap) {
        uint32_t u = ex_pop(&x);
        if (x.nodes[u].done) continue;
        x.nodes[u].done = 1;
        double g = x.nodes[u].g;
        ex_state(net, x.nodes[u].key, &st);
        if (remat__hjoin_done(net, &st, why, sizeof why)) {
            best = g;
            break;
        }
        for (size_t b = 0; b <= net->k; b++) {
            for (uint32_t i = b < net->k ? 1 : 0; i <= (b < net->k ? net->n[b] : 0); i++)
                for (size_t q = 0; q <= (b < net->k ? REMAT_HJOIN_OP_B + saves_of(net, b, i) - 1
                                                    : 0); q++) {
                    /* Fn, Fck, Fall with each save, B */
                    uint8_t kind = (uint8_t)(q <= REMAT_HJOIN_OP_FALL ? q
                                             : q < REMAT_HJOIN_OP_B + saves_of(net, b, i) - 1
                                                 ? REMAT_HJOIN_OP_FALL
                                                 : REMAT_HJOIN_OP_B);
                    uint8_t opt = (uint8_t)(kind == REMAT_HJOIN_OP_FALL ? q - REMAT_HJOIN_OP_FALL : 0);
                    remat_hjoin_op op =
                        b < net->k ? (remat_hjoin_op){kind, (uint8_t)(b + 1), i, opt}
                                   : (remat_hjoin_op){REMAT_HJOIN_OP_T, 0, 0, 0};
                    remat__hjoin_state_copy(net, &nx, &st);
                    uint64_t during;
                    double t;
                    if (!remat__hjoin_apply(net, &nx, op, NULL, &during, &t, why, sizeof why) ||
                        during > limit)
                        continue;
                    ex_key(net, &nx, key);
                    if (memcmp(key, x.nodes[u].key, EX_KEY) == 0) continue;
                    uint32_t v = ex_find(&x, key);
                    if (!x.nodes[v].done && g + t < x.nodes[v].g) {
                        x.nodes[v].g = g + t;
                        if (x.nheap >= 4 * states + 4) abort();
                        ex_push(&x, v);
                    }
                }
        }
    }
    remat__hjoin_state_free(&st);
    remat__hjoin_state_free(&nx);
    free(x.nodes);
    free(x.slot);
    free(x.heap);
    return best;
}

/* On hand-checked cases first: the conflict example fits 21 bytes in 4 ms;
 * then the solver against every schedule on random tiny networks. */
static void exact_at_most_solver(uint64_t seed, size_t count, size_t most) {
    size_t at[3] = {0, 0, 0}, lower = 0, total = 0;
    double worst = 1;
    size_t below = 0, nb = 0;
    test_rng r = {seed};
    for (size_t it = 0; it < count; it++) {
        net_spec sp;
        random_spec_saves(&r, &sp, 1 + it % 3, it % 3 == 2 ? 1 : 2, most);
        remat_hjoin *j = random_net(&r, &sp);
        remat__hjoin_net net = net_of(j);
        uint64_t peak = 0, mm = 0;
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.slots = 0;
        ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mm, NULL), REMAT_OK);
        for (int q = 0; q < 3; q++) {
            uint64_t m = mm + (peak - mm) * (uint64_t)q / 4;
            remat_hjoin_schedule *s = NULL;
            ASSERT_STATUS(solve_at(j, m, 0, &s, NULL), REMAT_OK);
            double ex = exact_join(&net, m);
            total++;
            if (!(ex <= s->time + 1e-9)) {
                remat_hjoin_schedule_free(s);
                remat__hjoin_net_free(&net);
                remat_hjoin_free(j);
                TEST_FAIL_("exact %g above the solver's %g", ex, s->time);
            }
            if (ex < s->time - 1e-9 * (1 + s->time)) {
                lower++;
                at[q]++;
                if (s->time / ex > worst) worst = s->time / ex;
            }
            remat_hjoin_schedule_free(s);
        }
        if (mm > 0) { /* below the solver's smallest limit some schedule may still fit */
            nb++;
            below += exact_join(&net, mm - 1) < INFINITY;
        }
        remat__hjoin_net_free(&net);
        remat_hjoin_free(j);
    }
    printf("  every schedule beats the nested optimum at %zu of %zu limits (%zu, %zu, %zu at the "
           "smallest, a quarter, half way to store-all), worst ratio %.3f; fits below the "
           "smallest limit in %zu of %zu\n",
           lower, total, at[0], at[1], at[2], worst, below, nb);
}

static void test_exact_at_most_solver_saves(void) { exact_at_most_solver(92, 40, 2); }


static void test_exact_at_most_solver(void) {
    exact_at_most_solver(91, 60, 0);
    remat_hjoin *c = order_conflict();
    remat__hjoin_net net = net_of(c);
    ASSERT_NEAR(exact_join(&net, 21), 4, 0);
    remat__hjoin_net_free(&net);
    remat_hjoin_free(c);
}

/* Two one-stage branches where the forward wants branch 1 first (its
 * Fall has a large overhead, best run while little is held) and the backward
 * wants branch 2 last (its B has a large overhead, best run once branch 1
 * has freed its input): nesting cannot have both, the wider class can. */
static remat_hjoin *order_conflict(void) {
    remat_hjoin_branch br[2];
    memset(br, 0, sizeof br);
    remat_stage s1 = test_stage_full(1, 1, 1, 5, 1, 10, 0);
    remat_stage s2 = test_stage_full(1, 1, 1, 5, 1, 0, 10);
    br[0] = (remat_hjoin_branch){"a", 5, 0, 1, &s1};
    br[1] = (remat_hjoin_branch){"b", 1, 0, 1, &s2};
    remat_stage t = test_stage_full(0, 0, 0, 0, 0, 0, 0);
    remat_hjoin *j = NULL;
    if (remat_hjoin_create("conflict", "ms", 2, br, &t, &j, NULL) != REMAT_OK) abort();
    return j;
}

static void test_nesting_limit_example(void) {
    remat_hjoin *j = order_conflict();
    remat__hjoin_net net = net_of(j);
    static bf_search any;
    brute_force(&bf, &net, 0);
    brute_force(&any, &net, 1);
    double nested = bf_best(&bf, 21), wide = bf_best(&any, 21);
    remat__hjoin_net_free(&net);
    remat_hjoin_schedule *s = NULL;
    remat_error e;
    remat_status st = solve_at(j, 21, 0, &s, &e);
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
    printf("  at 21 bytes: nested %g, any order %g\n", nested, wide);
    ASSERT_NEAR(wide, 4, 0);
    ASSERT_TRUE(isinf(nested));
    ASSERT_STATUS(st, REMAT_E_INFEASIBLE);
}

/* ---- a network worked by hand ---- */

/* Branch 1: a[0] 4; (f 1, b 2, a 2, abar 3, d 2), (f 1, b 1, a 1, abar 2, d 1); d[0] 0.
 * Branch 2: a[0] 3; (f 2, b 2, a 3, abar 4, d 3); d[0] 3.
 * Turn: f 0.5, b 0.5, saved 1, fwd_overhead 2. */
static remat_hjoin *hand_net(void) {
    remat_stage b1[2] = {test_stage_full(1, 2, 2, 3, 2, 0, 0), test_stage_full(1, 1, 1, 2, 1, 0, 0)};
    remat_stage b2[1] = {test_stage_full(2, 2, 3, 4, 3, 0, 0)};
    remat_hjoin_branch br[2];
    memset(br, 0, sizeof br);
    br[0] = (remat_hjoin_branch){"text", 4, 0, 2, b1};
    br[1] = (remat_hjoin_branch){"image", 3, 3, 1, b2};
    remat_stage t = test_stage_full(0.5, 0.5, 0, 1, 0, 2, 0);
    snprintf(t.name, sizeof t.name, "loss");
    remat_hjoin *j = NULL;
    if (remat_hjoin_create("hand", "ms", 2, br, &t, &j, NULL) != REMAT_OK) abort();
    return j;
}

static remat_hjoin_schedule *schedule_of_text(const char *const *ops, size_t n) {
    remat_hjoin_schedule *s = NULL;
    if (remat_hjoin_schedule_create("hand", &s, NULL) != REMAT_OK) abort();
    for (size_t i = 0; i < n; i++) {
        remat_hjoin_op op;
        remat_error e;
        if (remat_hjoin_op_parse(ops[i], &op, &e) != REMAT_OK) {
            fprintf(stderr, "%s: %s\n", ops[i], e.message);
            abort();
        }
        if (remat_hjoin_schedule_push(s, op, NULL) != REMAT_OK) abort();
    }
    return s;
}

#define SCHED(...) \
    schedule_of_text((const char *const[]){__VA_ARGS__}, \
                     sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static remat_hjoin_sim_result *sim(const remat_hjoin *j, const remat_hjoin_schedule *s) {
    remat_hjoin_sim_result *r = NULL;
    if (remat_hjoin_simulate(j, s, &r, NULL) != REMAT_OK) abort();
    return r;
}

static void test_simulator_by_hand(void) {
    remat_hjoin *j = hand_net();
    remat_hjoin_schedule *s = SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2",
                                    "B 1.1");
    remat_hjoin_sim_result *r = sim(j, s);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 10, 1e-12);
    ASSERT_EQ_U64(r->peak_bytes, 23);
    static const uint64_t during[] = {10, 12, 16, 21, 23, 15, 12};
    static const uint64_t after[] = {10, 12, 16, 20, 13, 12, 3};
    for (size_t k = 0; k < 7; k++) {
        ASSERT_EQ_U64(r->mem_during[k], during[k]);
        ASSERT_EQ_U64(r->mem_after[k], after[k]);
    }
    uint64_t peak = 0;
    double t = 0;
    ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, &t, NULL), REMAT_OK);
    ASSERT_EQ_U64(peak, 23);
    ASSERT_NEAR(t, 10, 1e-12);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    /* T frees a plain input; a recomputation from the kept a[1.0] */
    s = SCHED("Fck 1.1", "Fn 1.2", "Fall 2.1", "T", "B 2.1", "Fall 1.1", "Fall 1.2", "B 1.2",
              "B 1.1");
    r = sim(j, s);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 12, 1e-12);
    ASSERT_EQ_U64(r->mem_during[3], 4 + 1 + 3 + 4 + 1 + 4);
    ASSERT_EQ_U64(r->mem_after[3], 4 + 3 + 4 + 1 + 3);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
}

static void expect_invalid(const remat_hjoin *j, remat_hjoin_schedule *s, size_t at,
                           const char *why) {
    remat_hjoin_sim_result *r = sim(j, s);
    int ok = !r->valid && r->failed_op == at && strstr(r->reason, why);
    if (!ok) fprintf(stderr, "  valid %d at %zu: %s (expected %zu: %s)\n", r->valid, r->failed_op,
                     r->reason, at, why);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    if (!ok) abort();
}

static void test_simulator_messages(void) {
    remat_hjoin *j = hand_net();
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "B 1.2"), 2, "needs d[2]");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "T"), 2, "needs a[2.1], which is not held");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "T"), 4,
                   "the turn has already run");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 1.1"), 4,
                   "B 1 out of order");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "Fall 2.1"), 5,
                   "forward of stage 1 after B 1");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1"), 5,
                   "ends before B 1.2");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2"), 2, "ends before T");
    expect_invalid(j, SCHED("Fall 3.1"), 0, "branch 3 is not in 1..2");
    expect_invalid(j, SCHED("Fall 2.2"), 0, "stage 2 is not in 1..1 of branch 2");
    expect_invalid(j, SCHED("Fn 1.2"), 0, "branch 1: needs a[1]");
    remat_hjoin_free(j);
}

static void test_plan(void) {
    remat_hjoin *j = hand_net();
    remat_hjoin_schedule *s = SCHED("Fck 1.1", "Fn 1.2", "Fall 2.1", "T", "B 2.1", "Fall 1.1",
                                    "Fall 1.2", "B 1.2", "B 1.1");
    remat_hjoin_exec_plan *p = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_exec_plan_create(j, s, &p, &e), REMAT_OK);
    ASSERT_EQ_U64(p->n_steps, 9);
    ASSERT_EQ_U64(p->turn, 3);
    ASSERT_NEAR(p->time, 12, 1e-12);
    const remat_hjoin_exec_step *t = &p->steps[3];
    ASSERT_EQ_U64(t->n_reads, 2);
    ASSERT_TRUE(t->reads[0].kind == REMAT_EXEC_A && t->reads[0].branch == 1 && t->reads[0].index == 2);
    ASSERT_TRUE(t->reads[1].kind == REMAT_EXEC_ABAR && t->reads[1].branch == 2 && t->reads[1].index == 1);
    ASSERT_EQ_U64(t->n_creates, 2);
    ASSERT_TRUE(t->creates[1].kind == REMAT_EXEC_D && t->creates[1].branch == 2);
    ASSERT_EQ_U64(t->n_frees, 1);
    ASSERT_TRUE(t->frees[0].kind == REMAT_EXEC_A && t->frees[0].branch == 1 && t->frees[0].index == 2);
    const remat_hjoin_exec_step *fn = &p->steps[1]; /* Fn 1.2: reads a[1.1], frees it */
    ASSERT_TRUE(fn->n_reads == 1 && fn->reads[0].index == 1 && fn->reads[0].branch == 1);
    ASSERT_TRUE(fn->n_creates == 1 && fn->creates[0].index == 2);
    ASSERT_TRUE(fn->n_frees == 1 && fn->frees[0].index == 1);
    const remat_hjoin_exec_step *b = &p->steps[4]; /* B 2.1: d, abar, a[2.0]; frees all three */
    ASSERT_EQ_U64(b->n_reads, 3);
    ASSERT_TRUE(b->reads[2].kind == REMAT_EXEC_A && b->reads[2].index == 0 && b->reads[2].branch == 2);
    ASSERT_EQ_U64(b->n_frees, 3);
    ASSERT_TRUE(b->n_creates == 1 && b->creates[0].kind == REMAT_EXEC_D && b->creates[0].index == 0);
    remat_hjoin_sim_result *r = sim(j, s);
    for (size_t k = 0; k < p->n_steps; k++) {
        ASSERT_EQ_U64(p->steps[k].mem_during, r->mem_during[k]);
        ASSERT_EQ_U64(p->steps[k].mem_after, r->mem_after[k]);
    }
    ASSERT_EQ_U64(p->peak_bytes, r->peak_bytes);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_exec_plan_free(p);
    remat_hjoin_schedule_free(s);
    s = SCHED("Fall 1.1", "T");
    ASSERT_STATUS(remat_hjoin_exec_plan_create(j, s, &p, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "op 1 (T): needs a[1.2]");
    ASSERT_TRUE(p == NULL);
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
}

/* Every solver schedule's plan replays to the schedule's own peak. */
static void test_plans_of_solutions(void) {
    test_rng r = {51};
    for (size_t it = 0; it < 30; it++) {
        net_spec sp;
        random_spec(&r, &sp, 1 + it % 4, 6);
        remat_hjoin *j = random_net(&r, &sp);
        uint64_t peak = 0, mm = 0;
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.slots = 0;
        ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mm, NULL), REMAT_OK);
        remat_hjoin_schedule *s = NULL;
        remat_hjoin_exec_plan *p = NULL;
        ASSERT_STATUS(solve_at(j, (mm + peak) / 2, 0, &s, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_exec_plan_create(j, s, &p, NULL), REMAT_OK);
        ASSERT_EQ_U64(p->peak_bytes, s->peak_bytes);
        ASSERT_NEAR(p->time, s->time, 1e-9 * (1 + s->time));
        ASSERT_EQ_U64(s->ops[p->turn].kind, REMAT_HJOIN_OP_T);
        for (size_t k = 0; k < p->turn; k++) ASSERT_TRUE(s->ops[k].kind != REMAT_HJOIN_OP_B);
        remat_hjoin_exec_plan_free(p);
        remat_hjoin_schedule_free(s);
        remat_hjoin_free(j);
    }
}

/* ---- formats ---- */

static void test_json_round_trip(void) {
    remat_hjoin *j = hand_net();
    char *text = NULL, *again = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_to_json(j, &text, &e), REMAT_OK);
    ASSERT_TRUE(remat_hjoin_is_json(text, strlen(text)));
    ASSERT_TRUE(!remat_join_is_problem_json(text, strlen(text)));
    remat_hjoin *back = NULL;
    ASSERT_STATUS(remat_hjoin_from_json(text, strlen(text), "rt", &back, &e), REMAT_OK);
    ASSERT_STATUS(remat_hjoin_to_json(back, &again, &e), REMAT_OK);
    ASSERT_TRUE(strcmp(text, again) == 0);
    ASSERT_EQ_U64(back->k, 2);
    ASSERT_EQ_U64(back->branches[1].input_grad_bytes, 3);
    ASSERT_EQ_U64(back->branches[0].stages[1].grad_bytes, 1);
    ASSERT_EQ_U64(back->turn.saved_bytes, 1);
    ASSERT_TRUE(strcmp(back->branches[1].name, "image") == 0);
    remat_free(text);
    remat_free(again);
    remat_hjoin_free(back);
    remat_hjoin_free(j);
    /* defaults: input_grad_bytes = input_bytes, grad_bytes = out_bytes, saved = out */
    const char *doc = "{\"format\": \"remat-join-2\", \"branches\": [{\"input_bytes\": 8, "
                      "\"stages\": [{\"fwd_time\": 1, \"bwd_time\": 2, \"out_bytes\": 5, "
                      "\"saved_bytes\": 6}]}], \"turn\": {\"fwd_time\": 0, \"bwd_time\": 0, "
                      "\"out_bytes\": 4}, \"note\": \"ignored\"}";
    ASSERT_STATUS(remat_hjoin_from_json(doc, strlen(doc), "d", &back, &e), REMAT_OK);
    ASSERT_EQ_U64(back->branches[0].input_grad_bytes, 8);
    ASSERT_EQ_U64(back->branches[0].stages[0].grad_bytes, 5);
    ASSERT_EQ_U64(back->turn.saved_bytes, 4);
    remat_hjoin_free(back);
}

static void expect_bad(const char *doc, const char *want) {
    remat_hjoin *j = NULL;
    remat_error e;
    remat_status st = remat_hjoin_from_json(doc, strlen(doc), "p.json", &j, &e);
    int ok = st == REMAT_E_INPUT && !j && strstr(e.message, want) &&
             strncmp(e.message, "p.json: ", 8) == 0;
    if (!ok) fprintf(stderr, "  %s\n  -> %d \"%s\", expected \"%s\"\n", doc, st, e.message, want);
    remat_hjoin_free(j);
    if (!ok) abort();
}

#define J2(body) "{\"format\": \"remat-join-2\", " body "}"
#define ST "{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 2, \"saved_bytes\": 3}"
#define BR "{\"input_bytes\": 4, \"stages\": [" ST "]}"
#define TURN "\"turn\": {\"fwd_time\": 1, \"bwd_time\": 1}"

static void test_hostile_documents(void) {
    expect_bad(J2(TURN), "branches: missing required field");
    expect_bad(J2("\"branches\": [" BR "]"), "turn: missing required field");
    expect_bad(J2("\"branches\": [], " TURN), "branches: a join needs 1 to 4 branches (got 0)");
    expect_bad(J2("\"branches\": [" BR "," BR "," BR "," BR "," BR "], " TURN), "(got 5)");
    expect_bad(J2("\"branches\": 3, " TURN), "branches: expected an array, got a number");
    expect_bad(J2("\"branches\": [7], " TURN), "branches[0]: expected an object, got a number");
    expect_bad(J2("\"branches\": [{\"stages\": [" ST "]}], " TURN),
               "branches[0].input_bytes: missing required field");
    expect_bad(J2("\"branches\": [{\"input_bytes\": 1}], " TURN),
               "branches[0].stages: missing required field");
    expect_bad(J2("\"branches\": [{\"input_bytes\": 1, \"stages\": []}], " TURN),
               "branches[0].stages: a branch needs 1 to");
    expect_bad(J2("\"branches\": [" BR ", {\"input_bytes\": 1, \"stages\": [{\"bwd_time\": 1, "
                  "\"out_bytes\": 1, \"saved_bytes\": 1}]}], " TURN),
               "branches[1].stages[0].fwd_time: missing required field");
    expect_bad(J2("\"branches\": [{\"input_bytes\": 1, \"stages\": [{\"fwd_time\": -1, "
                  "\"bwd_time\": 1, \"out_bytes\": 1, \"saved_bytes\": 1}]}], " TURN),
               "branches[0].stages[0].fwd_time");
    expect_bad(J2("\"branches\": [{\"input_bytes\": 1, \"stages\": [{\"fwd_time\": 1, "
                  "\"bwd_time\": 1, \"out_bytes\": 3, \"saved_bytes\": 1}]}], " TURN),
               "branches[0]: stages[0].saved_bytes: 1 is less than out_bytes 3");
    expect_bad(J2("\"branches\": [{\"input_bytes\": 9007199254740992, \"stages\": [" ST "]}], "
                  TURN),
               "branches[0].input_bytes");
    expect_bad(J2("\"branches\": [" BR "], \"turn\": {\"fwd_time\": 1}"),
               "turn.bwd_time: missing required field");
    expect_bad(J2("\"branches\": [" BR "], \"turn\": {\"fwd_time\": 1, \"bwd_time\": \"x\"}"),
               "turn.bwd_time");
    expect_bad(J2("\"branches\": [" BR "], \"turn\": {\"fwd_time\": 1, \"bwd_time\": 1, "
                  "\"out_bytes\": 5, \"saved_bytes\": 2}"),
               "turn.saved_bytes: 2 is less than out_bytes 5");
    expect_bad(J2("\"branches\": [" BR "], \"turn\": []"), "turn: expected an object");
    expect_bad("{\"format\": \"remat-join-1\", \"branches\": [1]}", "format");
    expect_bad("[1, 2]", "p.json");
}

static void test_schedule_format(void) {
    remat_hjoin_schedule *s = SCHED("Fck 1.1", "Fn 1.2", "Fall 2.1", "T", "B 2.1", "Fall 1.1",
                                    "Fall 1.2", "B 1.2", "B 1.1");
    s->time = 12;
    s->peak_bytes = 17;
    s->memory_limit = 20;
    char *text = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_schedule_to_json(s, &text, &e), REMAT_OK);
    ASSERT_CONTAINS(text, "\"format\": \"remat-join-schedule-2\"");
    ASSERT_CONTAINS(text, "\"Fck 1.1\", \"Fn 1.2\", \"Fall 2.1\", \"T\"");
    ASSERT_TRUE(remat_hjoin_schedule_is_json(text, strlen(text)));
    remat_hjoin_schedule *back = NULL;
    ASSERT_STATUS(remat_hjoin_schedule_from_json(text, strlen(text), "s", &back, &e), REMAT_OK);
    ASSERT_EQ_U64(back->n_ops, 9);
    ASSERT_EQ_U64(back->peak_bytes, 17);
    ASSERT_EQ_U64(back->memory_limit, 20);
    ASSERT_NEAR(back->time, 12, 0);
    for (size_t k = 0; k < 9; k++)
        ASSERT_TRUE(back->ops[k].kind == s->ops[k].kind && back->ops[k].branch == s->ops[k].branch &&
                    back->ops[k].index == s->ops[k].index);
    remat_free(text);
    remat_hjoin_schedule_free(back);
    remat_hjoin_schedule_free(s);
    static const char *const bad[] = {"Fck 0.1", "Fck 1.0", "Fck 1", "Fck 5.1", "Q 1.1", "T 1",
                                      "B 1.x", "Fn 1.2 ", "Fall 1.99999999999", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        remat_hjoin_op op;
        ASSERT_STATUS(remat_hjoin_op_parse(bad[i], &op, &e), REMAT_E_INPUT);
        ASSERT_TRUE(e.message[0] != '\0');
    }
    const char *doc = "{\"format\": \"remat-join-schedule-2\", \"ops\": [\"Fall 1.1\", \"X\"]}";
    ASSERT_STATUS(remat_hjoin_schedule_from_json(doc, strlen(doc), "s.json", &back, &e),
                  REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "s.json: ops[1]: unknown op");
    ASSERT_TRUE(back == NULL);
}

static void test_create_checks(void) {
    remat_stage st = test_stage(1, 1, 2, 3);
    remat_hjoin_branch br = {"b", 1, 1, 1, &st};
    remat_stage t = test_stage(0, 0, 0, 0);
    remat_hjoin *j = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 0, &br, &t, &j, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 5, &br, &t, &j, &e), REMAT_E_INPUT);
    br.n = 0;
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 1, &br, &t, &j, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "join: branches[0]: stages: a branch needs 1 to");
    br.n = 1;
    t.fwd_time = NAN;
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 1, &br, &t, &j, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "turn.fwd_time");
    t.fwd_time = 0;
    /* each branch below 2^62 (a chain's own cap), all four above */
    static remat_stage big[100];
    for (int q = 0; q < 100; q++) {
        big[q] = test_stage(1, 1, (uint64_t)1 << 52, ((uint64_t)1 << 53) - 1);
        big[q].fwd_overhead = big[q].bwd_overhead = big[q].grad_bytes = ((uint64_t)1 << 53) - 1;
    }
    remat_hjoin_branch bb[4] = {{"a", 0, 0, 100, big}, {"b", 0, 0, 100, big},
                                {"c", 0, 0, 100, big}, {"d", 0, 0, 100, big}};
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 4, bb, &t, &j, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "2^62");
    ASSERT_STATUS(remat_hjoin_create("x", "ms", 1, &br, &t, &j, &e), REMAT_OK);
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_hjoin_branch_chain(j, 1, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->n, 2);
    ASSERT_EQ_U64(remat_chain_d_bytes(c, 1), 2);
    remat_chain_free(c);
    ASSERT_STATUS(remat_hjoin_branch_chain(j, 2, &c, &e), REMAT_E_INPUT);
    remat_hjoin_free(j);
}

static void test_flatten(void) {
    remat_hjoin *j = hand_net();
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_hjoin_flatten(j, &c, NULL), REMAT_OK);
    ASSERT_EQ_U64(c->n, 4);
    ASSERT_EQ_U64(c->input_bytes, 7);
    ASSERT_EQ_U64(c->input_grad_bytes, 3);
    /* branch 1's stages carry a[2.0] (3) and d[2.0] (3) */
    ASSERT_EQ_U64(c->stages[0].out_bytes, 2 + 3);
    ASSERT_EQ_U64(c->stages[0].saved_bytes, 3 + 3);
    ASSERT_EQ_U64(c->stages[1].grad_bytes, 1 + 3);
    /* branch 2's stage carries a[1.2] (1) and d[1.2] (1) */
    ASSERT_EQ_U64(c->stages[2].out_bytes, 3 + 1);
    ASSERT_EQ_U64(c->stages[2].grad_bytes, 3 + 1);
    ASSERT_NEAR(c->stages[3].fwd_time, 0.5, 0);
    ASSERT_EQ_U64(c->stages[3].saved_bytes, 1);
    ASSERT_EQ_U64(c->stages[3].fwd_overhead, 2);
    remat_chain_free(c);
    remat_hjoin_free(j);
}

/* ---- partial saves and fall_overhead ---- */

/* hand_net with stage 1.1 given a Fall overhead of 2 and one partial save:
 * abar 2, Fall overhead 1, B time 5, B overhead 4. */
/* hand_net with stop fields on stage 1.2 (or on the turn when `turn`). */
static remat_status hand_net_stops(int turn, remat_hjoin **j, remat_error *e) {
    remat_stage b1[2] = {test_stage_full(1, 2, 2, 3, 2, 0, 0), test_stage_full(1, 1, 1, 2, 1, 0, 0)};
    remat_stage b2[1] = {test_stage_full(2, 2, 3, 4, 3, 0, 0)};
    remat_stage t = test_stage_full(0.5, 0.5, 0, 1, 0, 2, 0);
    remat_stage *at = turn ? &t : &b1[1];
    at->stop_time = 0.5;
    at->stop_saved_bytes = 0; /* below out_bytes: a[1.2] is not made */
    at->stop_overhead = 3;
    at->has_stop_time = at->has_stop_saved_bytes = at->has_stop_overhead = 1;
    remat_hjoin_branch br[2];
    memset(br, 0, sizeof br);
    br[0] = (remat_hjoin_branch){"text", 4, 0, 2, b1};
    br[1] = (remat_hjoin_branch){"image", 3, 3, 1, b2};
    return remat_hjoin_create("stops", "ms", 2, br, &t, j, e);
}

/* A full-save Fall j.i right before B j.i stops: the simulator and the plan
 * take the stopped figures; the fields survive the document; the turn
 * refuses them. */
static void test_stops_by_hand(void) {
    remat_hjoin *plain = hand_net(), *j = NULL;
    remat_error e;
    ASSERT_STATUS(hand_net_stops(0, &j, &e), REMAT_OK);
    remat_hjoin_schedule *s = SCHED("Fck 1.1", "Fn 1.2", "Fall 2.1", "T", "B 2.1", "Fall 1.1",
                                    "Fall 1.2", "B 1.2", "B 1.1");
    remat_hjoin_exec_plan *p = NULL, *q = NULL;
    ASSERT_STATUS(remat_hjoin_exec_plan_create(j, s, &p, &e), REMAT_OK);
    ASSERT_STATUS(remat_hjoin_exec_plan_create(plain, s, &q, &e), REMAT_OK);
    ASSERT_NEAR(q->time, 12, 1e-12);
    ASSERT_NEAR(p->time, 11.5, 1e-12); /* Fall 1.2 takes stop_time 0.5 */
    for (size_t k = 0; k < p->n_steps; k++) {
        ASSERT_EQ_INT(p->steps[k].stops, k == 6);
        ASSERT_EQ_INT(q->steps[k].stops, k == 6); /* the defaults: stops, changes nothing */
        if (k == 6) continue;
        /* B 1.2 holds the smaller abar (0 bytes, not 2) */
        ASSERT_EQ_U64(p->steps[k].mem_during + (k == 7 ? 2 : 0), q->steps[k].mem_during);
    }
    /* abar 0 + overhead 3 where the plain Fall adds abar 2 + overhead 0 */
    ASSERT_EQ_U64(p->steps[6].mem_during, q->steps[6].mem_during + 1);
    ASSERT_EQ_U64(p->steps[6].mem_after, q->steps[6].mem_after - 2);
    remat_hjoin_sim_result *r = sim(j, s);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 11.5, 1e-12);
    for (size_t k = 0; k < p->n_steps; k++) ASSERT_EQ_U64(p->steps[k].mem_during, r->mem_during[k]);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_exec_plan_free(p);
    remat_hjoin_exec_plan_free(q);
    remat_hjoin_schedule_free(s);
    /* not right before B 1.2: the plain Fall */
    s = SCHED("Fck 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2", "Fall 1.1", "B 1.1");
    r = sim(j, s);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 11, 1e-12);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    char *text = NULL;
    ASSERT_STATUS(remat_hjoin_to_json(j, &text, &e), REMAT_OK);
    ASSERT_CONTAINS(text, "\"stop_saved_bytes\": 0");
    remat_hjoin *back = NULL;
    ASSERT_STATUS(remat_hjoin_from_json(text, strlen(text), "j", &back, &e), REMAT_OK);
    const remat_stage *st = &back->branches[0].stages[1];
    ASSERT_TRUE(st->has_stop_time && st->has_stop_saved_bytes && st->has_stop_overhead);
    ASSERT_EQ_U64(st->stop_overhead, 3);
    ASSERT_EQ_INT(back->branches[0].stages[0].has_stop_time, 0);
    remat_hjoin_free(back);
    remat_free(text);
    ASSERT_STATUS(hand_net_stops(1, &back, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "turn.stop_time: the turn has no stopped Fall");
    const char *doc = "{\"format\": \"remat-join-2\", \"branches\": [{\"input_bytes\": 1, "
                      "\"stages\": [{\"fwd_time\": 1, \"bwd_time\": 1, \"out_bytes\": 1, "
                      "\"saved_bytes\": 1}]}], \"turn\": "
                      "{\"fwd_time\": 0, \"bwd_time\": 0, \"stop_overhead\": 1}}";
    ASSERT_STATUS(remat_hjoin_from_json(doc, strlen(doc), "t", &back, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "turn.stop_overhead: the turn has no stopped Fall");
    remat_hjoin_free(j);
    remat_hjoin_free(plain);
}

static remat_hjoin *hand_net_saves(remat_stage_option *opt) {
    remat_stage b1[2] = {test_stage_full(1, 2, 2, 3, 2, 0, 0), test_stage_full(1, 1, 1, 2, 1, 0, 0)};
    remat_stage b2[1] = {test_stage_full(2, 2, 3, 4, 3, 0, 0)};
    *opt = (remat_stage_option){"half", 2, 1, 5, 4};
    b1[0].fall_overhead = 2;
    b1[0].has_fall_overhead = 1;
    b1[0].n_options = 1;
    b1[0].options = opt;
    remat_hjoin_branch br[2];
    memset(br, 0, sizeof br);
    br[0] = (remat_hjoin_branch){"text", 4, 0, 2, b1};
    br[1] = (remat_hjoin_branch){"image", 3, 3, 1, b2};
    remat_stage t = test_stage_full(0.5, 0.5, 0, 1, 0, 2, 0);
    remat_hjoin *j = NULL;
    if (remat_hjoin_create("saves", "ms", 2, br, &t, &j, NULL) != REMAT_OK) abort();
    return j;
}

static void test_saves_by_hand(void) {
    remat_stage_option opt;
    remat_hjoin *j = hand_net_saves(&opt);
    opt.saved_bytes = 99; /* the network has its own copy */
    ASSERT_EQ_U64(j->branches[0].stages[0].options[0].saved_bytes, 2);
    ASSERT_TRUE(strcmp(j->branches[0].stages[0].options[0].name, "half") == 0);
    /* op text */
    remat_hjoin_op op;
    char optext[REMAT_HJOIN_OP_TEXT_MAX];
    ASSERT_STATUS(remat_hjoin_op_parse("Fall 1.1/1", &op, NULL), REMAT_OK);
    ASSERT_TRUE(op.kind == REMAT_HJOIN_OP_FALL && op.branch == 1 && op.index == 1 && op.option == 1);
    remat_hjoin_op_format(op, optext);
    ASSERT_TRUE(strcmp(optext, "Fall 1.1/1") == 0);
    ASSERT_STATUS(remat_hjoin_op_parse("Fall 1.1/0", &op, NULL), REMAT_OK);
    remat_hjoin_op_format(op, optext);
    ASSERT_TRUE(strcmp(optext, "Fall 1.1") == 0);
    remat_error e;
    ASSERT_STATUS(remat_hjoin_op_parse("Fall 1.1/256", &op, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_hjoin_op_parse("Fall 1.1/", &op, &e), REMAT_E_INPUT);
    /* the simulator: option 1's abar, Fall overhead, B time and overhead */
    remat_hjoin_schedule *s = SCHED("Fall 1.1/1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2",
                                    "B 1.1");
    remat_hjoin_sim_result *r = sim(j, s);
    ASSERT_TRUE(r->valid);
    ASSERT_NEAR(r->time, 13, 1e-12);
    static const uint64_t during[] = {10, 11, 15, 20, 22, 14, 15};
    static const uint64_t after[] = {9, 11, 15, 19, 12, 11, 3};
    for (size_t k = 0; k < 7; k++) {
        ASSERT_EQ_U64(r->mem_during[k], during[k]);
        ASSERT_EQ_U64(r->mem_after[k], after[k]);
    }
    remat_hjoin_sim_result_free(r);
    /* the plan: Fall 1.1/1 and the B consuming its abar carry option 1 */
    remat_hjoin_exec_plan *p = NULL;
    ASSERT_STATUS(remat_hjoin_exec_plan_create(j, s, &p, &e), REMAT_OK);
    ASSERT_EQ_U64(p->steps[0].option, 1);
    ASSERT_EQ_U64(p->steps[1].option, 0);
    ASSERT_EQ_U64(p->steps[5].option, 0);
    ASSERT_EQ_U64(p->steps[6].option, 1);
    ASSERT_EQ_U64(p->steps[6].mem_during, 15);
    remat_hjoin_exec_plan_free(p);
    /* the schedule document keeps the option */
    char *doc = NULL;
    ASSERT_STATUS(remat_hjoin_schedule_to_json(s, &doc, &e), REMAT_OK);
    ASSERT_CONTAINS(doc, "\"Fall 1.1/1\"");
    remat_hjoin_schedule *back = NULL;
    ASSERT_STATUS(remat_hjoin_schedule_from_json(doc, strlen(doc), "s", &back, &e), REMAT_OK);
    ASSERT_EQ_U64(back->ops[0].option, 1);
    remat_hjoin_schedule_free(back);
    remat_free(doc);
    remat_hjoin_schedule_free(s);
    /* the full save takes the stage's own Fall overhead */
    s = SCHED("Fall 1.1");
    r = sim(j, s);
    ASSERT_EQ_U64(r->mem_during[0], 7 + 3 + 2);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    expect_invalid(j, SCHED("Fall 1.1/2"), 0, "no option 2");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2/1"), 1, "no option 1");
    expect_invalid(j, SCHED("Fck 1.1/1"), 0, "only Fall takes an option");
    /* the problem document keeps fall_overhead and the options */
    char *text = NULL, *again = NULL;
    ASSERT_STATUS(remat_hjoin_to_json(j, &text, &e), REMAT_OK);
    ASSERT_CONTAINS(text, "\"fall_overhead\": 2");
    ASSERT_CONTAINS(text, "\"options\"");
    remat_hjoin *j2 = NULL;
    ASSERT_STATUS(remat_hjoin_from_json(text, strlen(text), "rt", &j2, &e), REMAT_OK);
    ASSERT_STATUS(remat_hjoin_to_json(j2, &again, &e), REMAT_OK);
    ASSERT_TRUE(strcmp(text, again) == 0);
    ASSERT_EQ_U64(j2->branches[0].stages[0].n_options, 1);
    ASSERT_NEAR(j2->branches[0].stages[0].options[0].bwd_time, 5, 0);
    remat_free(text);
    remat_free(again);
    /* the flat chain: the option carries a[2.0] as the full save does */
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_hjoin_flatten(j2, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[0].n_options, 1);
    ASSERT_EQ_U64(c->stages[0].options[0].saved_bytes, 2 + 3);
    ASSERT_EQ_U64(c->stages[0].fall_overhead, 2);
    remat_chain_free(c);
    ASSERT_STATUS(remat_hjoin_branch_chain(j2, 1, &c, &e), REMAT_OK);
    ASSERT_EQ_U64(c->stages[0].options[0].bwd_overhead, 4);
    remat_chain_free(c);
    remat_hjoin_free(j2);
    /* the solver takes the partial save where the full one does not fit */
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.slots = 0;
    uint64_t mm = 0;
    ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mm, NULL), REMAT_OK);
    ASSERT_STATUS(solve_at(j, mm, 0, &s, NULL), REMAT_OK);
    ASSERT_TRUE(schedule_ok(j, s, mm));
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
}

/* An ordered network: the simulator refuses branches out of order, the
 * document keeps the flag, and every valid schedule (the Dijkstra, whose
 * state says where the order is) is at most the solver's. */
static void test_ordered(void) {
    remat_hjoin *j = hand_net();
    remat_hjoin_set_ordered(j, 1);
    expect_invalid(j, SCHED("Fall 2.1", "Fall 1.1"), 1, "branch 1 after branch 2");
    expect_invalid(j, SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 1.2"), 4,
                   "branch 1 before branch 2 is back-propagated");
    remat_hjoin_schedule *s = SCHED("Fall 1.1", "Fall 1.2", "Fall 2.1", "T", "B 2.1", "B 1.2",
                                    "B 1.1");
    remat_hjoin_sim_result *r = sim(j, s);
    ASSERT_TRUE(r->valid);
    remat_hjoin_sim_result_free(r);
    remat_hjoin_schedule_free(s);
    char *text = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_to_json(j, &text, &e), REMAT_OK);
    ASSERT_CONTAINS(text, "\"ordered\": true");
    remat_hjoin *back = NULL;
    ASSERT_STATUS(remat_hjoin_from_json(text, strlen(text), "o", &back, &e), REMAT_OK);
    ASSERT_EQ_U64(back->ordered, 1);
    remat_free(text);
    remat_hjoin_free(back);
    const char *bad = "{\"format\": \"remat-join-2\", \"ordered\": 1, \"branches\": "
                      "[{\"input_bytes\": 1, \"stages\": [{\"fwd_time\": 1, \"bwd_time\": 1, "
                      "\"out_bytes\": 1, \"saved_bytes\": 1}]}], \"turn\": {\"fwd_time\": 0, \"bwd_time\": 0}}";
    ASSERT_STATUS(remat_hjoin_from_json(bad, strlen(bad), "o.json", &back, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "o.json: ordered: expected true or false");
    /* unordered, the smallest limit is at most the ordered one */
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.slots = 0;
    uint64_t mo = 0, mu = 0;
    ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mo, NULL), REMAT_OK);
    remat_hjoin_set_ordered(j, 0);
    ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mu, NULL), REMAT_OK);
    ASSERT_TRUE(mu <= mo);
    remat_hjoin_free(j);
    test_rng rng = {93};
    for (size_t it = 0; it < 30; it++) {
        net_spec sp;
        random_spec_saves(&rng, &sp, 2 + it % 2, 2 - it % 2, 1);
        sp.ordered = 1;
        remat_hjoin *n = random_net(&rng, &sp);
        remat__hjoin_net net = net_of(n);
        uint64_t peak = 0, mm = 0;
        ASSERT_STATUS(remat_hjoin_store_all_cost(n, &peak, NULL, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_min_memory(n, &o, &mm, NULL), REMAT_OK);
        for (int q = 0; q < 2; q++) {
            uint64_t m = mm + (peak - mm) * (uint64_t)q / 3;
            ASSERT_STATUS(solve_at(n, m, 0, &s, NULL), REMAT_OK);
            ASSERT_TRUE(schedule_ok(n, s, m));
            ASSERT_LE_DBL(exact_join(&net, m), s->time, 1e-9 * (1 + s->time));
            remat_hjoin_schedule_free(s);
        }
        remat__hjoin_net_free(&net);
        remat_hjoin_free(n);
    }
}

/* ---- curves and limits ---- */

/* 1 when a partial save of j has a faster B than its stage's full save. */
static int has_faster_save(const remat_hjoin *j) {
    for (size_t b = 0; b < j->k; b++)
        for (size_t i = 0; i < j->branches[b].n; i++) {
            const remat_stage *sg = &j->branches[b].stages[i];
            for (size_t k = 0; k < sg->n_options; k++)
                if (sg->options[k].bwd_time < sg->bwd_time) return 1;
        }
    return 0;
}

static void curves(uint64_t seed, size_t most) {
    test_rng r = {seed};
    for (size_t it = 0; it < 20; it++) {
        net_spec sp;
        random_spec_saves(&r, &sp, 2 + it % 3, 6, most);
        sp.max_bytes = 1000;
        remat_hjoin *j = random_net(&r, &sp);
        remat_solve_options o;
        remat_solve_options_init(&o);
        o.slots = 50;
        remat_curve *cv = NULL;
        uint64_t mm = 0, peak = 0;
        double t_all = 0;
        ASSERT_STATUS(remat_hjoin_curve(j, &o, 0, &cv, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_min_memory(j, &o, &mm, NULL), REMAT_OK);
        ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, &t_all, NULL), REMAT_OK);
        ASSERT_TRUE(cv->n >= 1);
        ASSERT_EQ_U64(cv->points[0].memory, mm);
        if (has_faster_save(j)) /* the table's time below the store-all peak */
            ASSERT_LE_DBL(cv->points[cv->n - 1].time, t_all, 1e-9 * (1 + t_all));
        else
            ASSERT_NEAR(cv->points[cv->n - 1].time, t_all, 1e-9 * (1 + t_all));
        ASSERT_TRUE(cv->points[cv->n - 1].memory <= peak);
        ASSERT_TRUE(strcmp(cv->algorithm, "join-optimal") == 0);
        for (size_t q = 0; q < cv->n; q++) {
            if (q) {
                ASSERT_TRUE(cv->points[q].memory > cv->points[q - 1].memory);
                ASSERT_TRUE(cv->points[q].time < cv->points[q - 1].time);
            }
            remat_hjoin_schedule *s = NULL;
            ASSERT_STATUS(solve_at(j, cv->points[q].memory, 50, &s, NULL), REMAT_OK);
            ASSERT_TRUE(schedule_ok(j, s, cv->points[q].memory));
            ASSERT_LE_DBL(s->time, cv->points[q].time, 1e-5 * (1 + s->time));
            remat_hjoin_schedule_free(s);
        }
        remat_curve_free(cv);
        ASSERT_STATUS(remat_hjoin_curve(j, &o, 3, &cv, NULL), REMAT_OK);
        ASSERT_TRUE(cv->n <= 3);
        remat_curve_free(cv);
        o.memory = mm ? mm - 1 : 0;
        if (mm > 1) {
            remat_error e;
            ASSERT_STATUS(remat_hjoin_curve(j, &o, 0, &cv, &e), REMAT_E_INFEASIBLE);
            ASSERT_EQ_U64(e.min_memory, mm);
        }
        remat_hjoin_free(j);
    }
}

static void test_curve(void) { curves(61, 0); }
static void test_curve_saves(void) { curves(62, 2); }

/* The fill runs level by level on worker threads: the same table, so the
 * same schedule, with 1 and 4 threads. */
static void test_threads_same_schedule(void) {
    test_rng r = {81};
    net_spec sp;
    random_spec(&r, &sp, 3, 1);
    for (size_t q = 0; q < 3; q++) sp.len[q] = 7;
    sp.max_bytes = 1 << 16;
    remat_hjoin *j = random_net(&r, &sp);
    uint64_t peak = 0;
    ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = peak / 3;
    o.max_seconds = -1;
    remat_hjoin_schedule *s[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
        o.threads = t ? 4 : 1;
        remat_error e;
        ASSERT_STATUS(remat_hjoin_solve(j, &o, &s[t], &e), REMAT_OK);
        ASSERT_TRUE(schedule_ok(j, s[t], o.memory));
    }
    ASSERT_EQ_U64(s[0]->n_ops, s[1]->n_ops);
    for (size_t k = 0; k < s[0]->n_ops; k++)
        ASSERT_TRUE(s[0]->ops[k].kind == s[1]->ops[k].kind &&
                    s[0]->ops[k].branch == s[1]->ops[k].branch &&
                    s[0]->ops[k].index == s[1]->ops[k].index);
    ASSERT_TRUE(s[0]->time == s[1]->time);
    remat_hjoin_schedule_free(s[0]);
    remat_hjoin_schedule_free(s[1]);
    remat_hjoin_free(j);
}

/* Refused before anything large is allocated: the states against the work
 * limit, the bounds pass against the time limit, then the table. */
static void test_too_large(void) {
    test_rng r = {71};
    net_spec sp;
    random_spec(&r, &sp, 4, 1);
    for (size_t q = 0; q < 4; q++) sp.len[q] = 40;
    sp.max_bytes = 1 << 20;
    remat_hjoin *j = random_net(&r, &sp);
    uint64_t peak = 0;
    ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = peak / 2;
    o.max_seconds = 1e-3;
    remat_hjoin_schedule *s = NULL;
    remat_error e;
    ASSERT_STATUS(remat_hjoin_solve(j, &o, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "join: estimated to take about");
    ASSERT_TRUE(s == NULL);
    o.max_seconds = -1;
    o.max_work_bytes = 1 << 20;
    ASSERT_STATUS(remat_hjoin_solve(j, &o, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "join: 43046721 states");
    ASSERT_CONTAINS(e.message, "work limit");
    remat_hjoin_free(j);
    for (size_t q = 0; q < 3; q++) sp.len[q] = 12;
    sp.k = 3;
    j = random_net(&r, &sp);
    ASSERT_STATUS(remat_hjoin_store_all_cost(j, &peak, NULL, NULL), REMAT_OK);
    o.memory = peak / 2;
    o.max_work_bytes = 4 << 20;
    ASSERT_STATUS(remat_hjoin_solve(j, &o, &s, &e), REMAT_E_TOO_LARGE);
    ASSERT_CONTAINS(e.message, "join: the table would need");
    ASSERT_CONTAINS(e.message, "--slots");
    remat_hjoin_free(j);
}

static const test_case cases[] = {
    {"simulator_by_hand", test_simulator_by_hand},
    {"simulator_messages", test_simulator_messages},
    {"plan", test_plan},
    {"plans_of_solutions", test_plans_of_solutions},
    {"json_round_trip", test_json_round_trip},
    {"hostile_documents", test_hostile_documents},
    {"schedule_format", test_schedule_format},
    {"create_checks", test_create_checks},
    {"flatten", test_flatten},
    {"curve", test_curve},
    {"threads_same_schedule", test_threads_same_schedule},
    {"too_large", test_too_large},
    {"nesting_limit_example", test_nesting_limit_example},
    {"exact_at_most_solver", test_exact_at_most_solver},
    {"brute_force_one_branch", test_brute_force_one_branch},
    {"brute_force_two_branches", test_brute_force_two_branches},
    {"brute_force_three_branches", test_brute_force_three_branches},
    {"brute_force_four_branches", test_brute_force_four_branches},
    {"any_order_at_most_nested", test_any_order_at_most_nested},
    {"one_branch_equals_optimal", test_one_branch_equals_optimal},
    {"slots_within_limit", test_slots_within_limit},
    {"brute_force_saves_one_branch", test_brute_force_saves_one_branch},
    {"brute_force_saves_two_branches", test_brute_force_saves_two_branches},
    {"brute_force_saves_three_branches", test_brute_force_saves_three_branches},
    {"one_branch_equals_optimal_saves", test_one_branch_equals_optimal_saves},
    {"exact_at_most_solver_saves", test_exact_at_most_solver_saves},
    {"curve_saves", test_curve_saves},
    {"saves_by_hand", test_saves_by_hand},
    {"brute_force_ordered", test_brute_force_ordered},
    {"brute_force_stops", test_brute_force_stops},
    {"stops_by_hand", test_stops_by_hand},
    {"stop_defaults_same_schedules", test_stop_defaults_same_schedules},
    {"ordered", test_ordered},
};
TEST_MAIN(cases)
