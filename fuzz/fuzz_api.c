/* libFuzzer target: every public function, called on structs built straight
 * from the bytes (not through the validating constructors): NULL pointers,
 * counts past the arrays, unterminated names, NaN times, branch counts past
 * REMAT_JOIN_MAX_BRANCHES and REMAT_HJOIN_MAX_BRANCHES. The library must answer each with a status (or,
 * for helpers without one, a neutral value) and never read out of bounds.
 * tests/cli/test_abi.sh checks that every REMAT_API function appears in some
 * fuzz target. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static uint64_t u64(reader *r) {
    static const uint64_t pick[] = {0, 1, 2, 3, 5, 8, 100, 4096, (uint64_t)1 << 52,
                                    ((uint64_t)1 << 53) - 1, (uint64_t)1 << 53, UINT64_MAX,
                                    (uint64_t)1 << 62, 17, 40, 1000};
    return pick[byte(r) % 16];
}

static double real(reader *r) {
    static const double pick[] = {0, 1, 2.5, -1, 1e300, 1.7976931348623157e308, 5e-324, 3,
                                  7, 0.5, 1e-300, 100};
    unsigned b = byte(r);
    if (b == 255) return NAN;
    if (b == 254) return INFINITY;
    return pick[b % 12];
}

static void fill_name(reader *r, char *dst, size_t cap) {
    memset(dst, 'x', cap);
    unsigned b = byte(r);
    if (b != 255) dst[b % cap] = '\0'; /* 255: no terminating NUL at all */
}

/* A stage's partial saves and fall_overhead as the bytes say; opts has room
 * for 3 options, so larger counts stay past REMAT_MAX_OPTIONS (refused
 * before any read) or have no array. */
static void make_options(reader *r, remat_stage *s, remat_stage_option *opts) {
    s->fall_overhead = u64(r);
    s->has_fall_overhead = (int)(byte(r) % 3); /* 2: any nonzero flag */
    static const size_t counts[] = {0, 1, 2, 3, 9, SIZE_MAX};
    unsigned b = byte(r);
    s->n_options = counts[b % 6];
    s->options = b & 0x80 ? NULL : opts;
    for (size_t k = 0; k < 3; k++) {
        fill_name(r, opts[k].name, sizeof opts[k].name);
        opts[k].saved_bytes = byte(r) & 1 ? s->out_bytes : u64(r);
        opts[k].fall_overhead = byte(r) & 1 ? 0 : u64(r);
        opts[k].bwd_time = real(r);
        opts[k].bwd_overhead = byte(r) & 1 ? 0 : u64(r);
    }
}

/* A chain struct exactly as the bytes say; stages has room for 8, opts for
 * 3 options per stage. */
static void make_chain(reader *r, remat_chain *c, remat_stage *stages, remat_stage_option *opts) {
    memset(c, 0, sizeof *c);
    fill_name(r, c->name, sizeof c->name);
    fill_name(r, c->time_unit, sizeof c->time_unit);
    c->input_bytes = u64(r);
    c->input_grad_bytes = u64(r);
    unsigned b = byte(r);
    c->n = b % 9;                    /* 0..8 */
    if (b & 0x80) c->n = 1000000;    /* far more than the array */
    c->stages = b & 0x40 ? NULL : stages;
    for (size_t i = 0; i < 8; i++) {
        remat_stage *s = &stages[i];
        fill_name(r, s->name, sizeof s->name);
        s->fwd_time = real(r);
        s->bwd_time = real(r);
        s->out_bytes = u64(r);
        s->saved_bytes = byte(r) & 1 ? s->out_bytes : u64(r);
        s->grad_bytes = byte(r) & 1 ? 0 : u64(r);
        s->fwd_overhead = byte(r) & 3 ? 0 : u64(r);
        s->bwd_overhead = byte(r) & 3 ? 0 : u64(r);
        s->n_options = 0;
        s->options = NULL;
        s->has_fall_overhead = 0;
        if (byte(r) & 1) make_options(r, s, &opts[3 * i]);
    }
}

static void make_schedule(reader *r, remat_schedule *s, remat_op *ops) {
    memset(s, 0, sizeof *s);
    fill_name(r, s->algorithm, sizeof s->algorithm);
    for (size_t k = 0; k < 16; k++)
        ops[k] = (remat_op){(uint8_t)(byte(r) % 10), (uint8_t)(byte(r) % 3), byte(r) % 10,
                            (uint8_t)(byte(r) % 5)};
    unsigned b = byte(r);
    s->n_ops = b % 17;
    s->cap = b & 0x20 ? 0 : 16;
    if (b & 0x40) { /* more ops than the capacity says: detectable */
        s->n_ops = 1000;
        s->cap = 16;
    }
    s->ops = b & 0x80 ? NULL : ops;
    s->time = real(r);
    s->memory_limit = u64(r);
    s->peak_bytes = u64(r);
}

static void make_problem(reader *r, remat_join_problem *p) {
    memset(p, 0, sizeof *p);
    unsigned b = byte(r);
    p->k = b % 20; /* past REMAT_JOIN_MAX_BRANCHES too */
    if (b & 0x80) p->k = SIZE_MAX;
    for (size_t j = 0; j < REMAT_JOIN_MAX_BRANCHES; j++) p->lengths[j] = byte(r) % 5;
    p->fwd_time = real(r);
    p->bwd_time = real(r);
    p->turn_time = real(r);
    p->slots = u64(r) % 64;
}

/* A join network struct exactly as the bytes say; each branch has room for
 * 8 of `stages`. */
static void make_hjoin(reader *r, remat_hjoin *j, remat_stage *stages) {
    memset(j, 0, sizeof *j);
    fill_name(r, j->name, sizeof j->name);
    fill_name(r, j->time_unit, sizeof j->time_unit);
    unsigned b = byte(r);
    j->k = b % 7; /* past REMAT_HJOIN_MAX_BRANCHES too */
    if (b & 0x80) j->k = SIZE_MAX;
    for (size_t q = 0; q < REMAT_HJOIN_MAX_BRANCHES; q++) {
        remat_hjoin_branch *br = &j->branches[q];
        fill_name(r, br->name, sizeof br->name);
        br->input_bytes = u64(r) % 64;
        br->input_grad_bytes = byte(r) & 1 ? 0 : u64(r);
        unsigned c = byte(r);
        br->n = c % 5;
        if (c & 0x80) br->n = 1000000;
        br->stages = c & 0x40 ? NULL : stages;
    }
    j->turn = stages[byte(r) % 8];
    j->turn.out_bytes %= 16;
    j->turn.saved_bytes = j->turn.out_bytes + byte(r) % 4;
}

/* A failure comes with a message; a success leaves something to free. */
static void status_ok(remat_status st, const remat_error *e) {
    if (st != REMAT_OK) check_error(st, e);
}

static void chain_calls(reader *r, const remat_chain *c, const remat_schedule *s) {
    remat_error e;
    for (size_t i = 0; i < 3; i++) {
        size_t idx = byte(r) % 12;
        (void)remat_chain_a_bytes(c, idx);
        (void)remat_chain_abar_bytes(c, idx);
        (void)remat_chain_d_bytes(c, idx);
    }
    char *json = NULL;
    remat_status st = remat_chain_to_json(c, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        remat_chain *back = NULL;
        CHECK(remat_chain_from_json(json, strlen(json), "<round-trip>", &back, &e) == REMAT_OK);
        remat_chain_free(back);
        remat_free(json);
    }
    status_ok(remat_chain_save(c, "/dev/null", &e), &e);
    uint64_t peak = 0, m = 0;
    double t = 0;
    status_ok(remat_store_all_cost(c, &peak, &t, &e), &e);

    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = byte(r) & 1 ? real(r) : 0;
    so.record_timeline = byte(r) & 1;
    remat_sim_result *res = NULL;
    st = remat_simulate(c, s, &so, &res, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(remat_sim_result_to_json(res, &json, &e) == REMAT_OK);
        remat_free(json);
        remat_sim_result_free(res);
    }
    remat_exec_plan *plan = NULL;
    st = remat_exec_plan_create(c, s, &plan, &e);
    status_ok(st, &e);
    if (st == REMAT_OK && plan->n_steps) {
        char ref[24];
        remat_exec_ref_format(plan->steps[0].reads[0], ref);
    }
    remat_exec_plan_free(plan);
    plan = NULL;
    st = remat_exec_plan_create_timed(c, s, so.bandwidth, &plan, &e);
    status_ok(st, &e);
    remat_exec_plan_free(plan);

    /* The solvers, kept small: short chains, one thread, small tables. */
    st = remat_chain_to_json(c, &json, NULL);
    remat_free(json);
    if (st != REMAT_OK || c->n > 5) return;
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.algorithm = (remat_algorithm)(byte(r) % (REMAT_ALG_COUNT_ + 1));
    o.memory = u64(r);
    o.slots = (int64_t)(byte(r) % 40) - 2;
    o.threads = byte(r) % 3;
    o.bandwidth = real(r);
    o.max_work_bytes = 16u << 20;
    o.offload_values = byte(r) % 8;
    if (o.algorithm == REMAT_ALG_POFO || o.algorithm == REMAT_ALG_OFFLOAD_ONLY)
        o.bandwidth = 1; /* extreme bandwidths are fuzz_solve's job */
    remat_schedule *out = NULL;
    st = remat_solve(c, &o, &out, &e);
    status_ok(st, &e);
    remat_schedule_free(out);
    status_ok(remat_min_memory(c, &o, &m, &e), &e);
    remat_curve *cv = NULL;
    st = remat_curve_compute(c, &o, byte(r) % 4, &cv, &e);
    status_ok(st, &e);
    if (st == REMAT_OK)
        for (size_t k = 0; k < cv->n; k++) CHECK(isfinite(cv->points[k].time));
    remat_curve_free(cv);
}

static void schedule_calls(reader *r, remat_schedule *s) {
    remat_error e;
    char *json = NULL;
    remat_status st = remat_schedule_to_json(s, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(!strstr(json, "nan") && !strstr(json, "inf"));
        remat_free(json);
    }
    status_ok(remat_schedule_save(s, "/dev/null", &e), &e);
    char text[REMAT_OP_TEXT_MAX];
    remat_op op = {(uint8_t)(byte(r) % 10), (uint8_t)(byte(r) % 3), byte(r),
                   (uint8_t)(byte(r) & 1 ? 0 : byte(r))};
    remat_op_format(op, text);
    remat_op back;
    /* "/k" is written for an F or B op and read back for Fall only */
    if (op.kind <= REMAT_OP_WAIT && op.value <= REMAT_VALUE_ABAR &&
        remat_op_parse(text, &back, &e) == REMAT_OK)
        CHECK(back.kind == op.kind && back.index == op.index &&
              (back.option == op.option || op.kind > REMAT_OP_B));
    remat_schedule *grown = NULL;
    CHECK(remat_schedule_create(byte(r) & 1 ? NULL : "fuzz", &grown, &e) == REMAT_OK);
    /* an op without a text (kind or value outside its enum) is refused: no
     * document could hold it (issue 23) */
    int has_text = op.kind <= REMAT_OP_WAIT && op.value <= REMAT_VALUE_ABAR;
    for (int k = 0; k < 3; k++) {
        remat_status ps = remat_schedule_push(grown, op, &e);
        CHECK(ps == (has_text ? REMAT_OK : REMAT_E_INPUT));
        if (ps != REMAT_OK) check_error(ps, &e);
    }
    CHECK(grown->n_ops == (has_text ? 3u : 0u));
    remat_schedule_free(grown);
    /* Pushing onto a hand-made schedule must never write past its array. */
    if (s->cap == 16 && s->ops && s->n_ops < s->cap) status_ok(remat_schedule_push(s, op, &e), &e);
}

static void join_calls(reader *r, const remat_join_problem *p) {
    remat_error e;
    (void)remat_join_min_slots(p);
    (void)remat_join_full_slots(p);
    double span = remat_join_span_star(p);
    char *json = NULL;
    remat_status st = remat_join_problem_to_json(p, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(isfinite(span));
        CHECK(remat_join_is_problem_json(json, strlen(json)));
        remat_join_problem back;
        CHECK(remat_join_problem_from_json(json, strlen(json), "<rt>", &back, &e) == REMAT_OK);
        remat_free(json);
    }
    remat_join_op ops[8];
    for (size_t k = 0; k < 8; k++)
        ops[k] = (remat_join_op){(uint8_t)(byte(r) % 7), byte(r) % 4, byte(r) % 5};
    remat_join_sim_result *res = NULL;
    st = remat_join_simulate(p, byte(r) & 1 ? ops : NULL, byte(r) % 9, u64(r) % 16, &res, &e);
    status_ok(st, &e);
    remat_join_sim_result_free(res);
    char text[REMAT_JOIN_OP_TEXT_MAX];
    remat_join_op_format(ops[0], text);
    remat_join_op back;
    (void)remat_join_op_parse(text, &back, &e);
    double v;
    status_ok(remat_join_opt0(byte(r) % 8, byte(r) % 10, real(r), real(r), &v, &e), &e);

    remat_join_options o;
    remat_join_options_init(&o);
    o.max_steps = 200000;
    o.max_work_bytes = 4u << 20;
    remat_join_schedule *s = NULL;
    uint64_t slots = byte(r) % 20;
    st = remat_join_solve(p, slots, &o, &s, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(remat_join_schedule_to_json(s, &json, &e) == REMAT_OK);
        remat_join_schedule *s2 = NULL;
        CHECK(remat_join_schedule_from_json(json, strlen(json), "<rt>", &s2, &e) == REMAT_OK);
        remat_join_schedule_free(s2);
        remat_free(json);
    }
    remat_join_schedule_free(s);
    st = remat_join_equiv_chain(p, slots, &o, &s, &e);
    status_ok(st, &e);
    remat_join_schedule_free(s);
    remat_join_curve *cv = NULL;
    st = remat_join_curve_compute(p, byte(r) & 1, &o, &cv, &e);
    status_ok(st, &e);
    remat_join_curve_free(cv);
    unsigned char keep[REMAT_JOIN_MAX_BRANCHES];
    for (size_t j = 0; j < REMAT_JOIN_MAX_BRANCHES; j++) keep[j] = byte(r) & 1;
    remat_join_plan *plan = NULL;
    st = remat_join_plan_create(p, byte(r) & 1 ? keep : NULL, slots, &o, &plan, &e);
    status_ok(st, &e);
    (void)remat_join_plan_makespan(plan, slots);
    (void)remat_join_plan_min_slots(plan);
    st = remat_join_plan_schedule(plan, slots, &s, &e);
    if (plan) status_ok(st, &e);
    remat_join_schedule_free(s);
    remat_join_plan_free(plan);
    /* A hand-made join schedule: counts without arrays, an odd algorithm. */
    remat_join_schedule hand;
    memset(&hand, 0, sizeof hand);
    fill_name(r, hand.algorithm, sizeof hand.algorithm);
    hand.time = real(r);
    hand.n_ops = byte(r) % 3;
    hand.ops = byte(r) & 1 ? ops : NULL;
    st = remat_join_schedule_to_json(&hand, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(!strstr(json, "nan") && !strstr(json, "inf"));
        remat_free(json);
    }
}

static void hjoin_calls(reader *r, const remat_hjoin *j) {
    remat_error e;
    char *json = NULL;
    remat_status st = remat_hjoin_to_json(j, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(remat_hjoin_is_json(json, strlen(json)));
        remat_hjoin *back = NULL;
        CHECK(remat_hjoin_from_json(json, strlen(json), "<rt>", &back, &e) == REMAT_OK);
        remat_hjoin_free(back);
        remat_free(json);
    }
    status_ok(remat_hjoin_save(j, "/dev/null", &e), &e);
    remat_hjoin *copy = NULL;
    status_ok(remat_hjoin_create(j->name, NULL, j->k, j->branches, &j->turn, &copy, &e), &e);
    remat_hjoin_free(copy);
    remat_chain *c = NULL;
    status_ok(remat_hjoin_branch_chain(j, byte(r) % 6, &c, &e), &e);
    remat_chain_free(c);
    status_ok(remat_hjoin_flatten(j, &c, &e), &e);
    remat_chain_free(c);
    uint64_t peak = 0, mm = 0;
    double t = 0;
    status_ok(remat_hjoin_store_all_cost(j, &peak, &t, &e), &e);
    /* a hand-made schedule: counts without arrays, past the capacity */
    remat_hjoin_op ops[8];
    for (size_t k = 0; k < 8; k++)
        ops[k] = (remat_hjoin_op){(uint8_t)(byte(r) % 6), (uint8_t)(byte(r) % 6), byte(r) % 6};
    remat_hjoin_schedule hand;
    memset(&hand, 0, sizeof hand);
    fill_name(r, hand.algorithm, sizeof hand.algorithm);
    hand.time = real(r);
    hand.n_ops = byte(r) % 10;
    hand.cap = byte(r) & 1 ? 8 : 0;
    if (!hand.cap && hand.n_ops > 8) hand.n_ops = 8; /* past the array only where cap says so */
    hand.ops = byte(r) & 1 ? ops : NULL;
    remat_hjoin_sim_result *res = NULL;
    status_ok(remat_hjoin_simulate(j, &hand, &res, &e), &e);
    remat_hjoin_sim_result_free(res);
    remat_hjoin_exec_plan *plan = NULL;
    status_ok(remat_hjoin_exec_plan_create(j, &hand, &plan, &e), &e);
    remat_hjoin_exec_plan_free(plan);
    st = remat_hjoin_schedule_to_json(&hand, &json, &e);
    status_ok(st, &e);
    if (st == REMAT_OK) {
        CHECK(!strstr(json, "nan") && !strstr(json, "inf"));
        remat_free(json);
    }
    status_ok(remat_hjoin_schedule_save(&hand, "/dev/null", &e), &e);
    if (hand.cap == 8 && hand.ops && hand.n_ops < hand.cap)
        status_ok(remat_hjoin_schedule_push(&hand, ops[0], &e), &e);
    char text[REMAT_HJOIN_OP_TEXT_MAX];
    remat_hjoin_op_format(ops[1], text);
    remat_hjoin_op back;
    (void)remat_hjoin_op_parse(text, &back, &e);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = u64(r);
    o.slots = byte(r) % 3 == 0 ? 0 : 16;
    o.max_work_bytes = 4u << 20;
    o.max_seconds = 0.5;
    o.threads = 1;
    remat_hjoin_schedule *s = NULL;
    status_ok(remat_hjoin_solve(j, &o, &s, &e), &e);
    remat_hjoin_schedule_free(s);
    status_ok(remat_hjoin_min_memory(j, &o, &mm, &e), &e);
    remat_curve *cv = NULL;
    o.memory = 0;
    status_ok(remat_hjoin_curve(j, &o, byte(r) % 4, &cv, &e), &e);
    remat_curve_free(cv);
}

static void text_calls(const uint8_t *data, size_t size) {
    char text[48];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    remat_error e;
    uint64_t v;
    status_ok(remat_parse_size(text, &v, &e), &e);
    remat_algorithm a;
    if (remat_algorithm_parse(text, &a, &e) == REMAT_OK)
        CHECK(strcmp(remat_algorithm_name(a), text) == 0);
    (void)remat_algorithm_name((remat_algorithm)(n % 12));
    /* Out-of-range values answer "?" and 0; every valid one has a line. */
    remat_algorithm any = (remat_algorithm)(n % 12);
    int valid = (size_t)any < remat_algorithm_count();
    CHECK(remat_algorithm_summary(any)[0] && (valid || !remat_algorithm_is_offload(any)));
    CHECK(valid == (strcmp(remat_algorithm_summary(any), "?") != 0));
    remat_join_op jop;
    status_ok(remat_join_op_parse(text, &jop, &e), &e);
    remat_hjoin_op hop;
    status_ok(remat_hjoin_op_parse(text, &hop, &e), &e);
    (void)remat_hjoin_is_json(text, n);
    (void)remat_hjoin_schedule_is_json(text, n);
    remat_hjoin *hj = NULL;
    status_ok(remat_hjoin_load("/dev/null", &hj, &e), &e);
    status_ok(remat_hjoin_from_json(text, n, NULL, &hj, &e), &e);
    remat_hjoin_free(hj);
    remat_hjoin_schedule *hs = NULL;
    status_ok(remat_hjoin_schedule_load("/dev/null", &hs, &e), &e);
    status_ok(remat_hjoin_schedule_from_json(text, n, NULL, &hs, &e), &e);
    remat_hjoin_schedule_free(hs);
    status_ok(remat_hjoin_schedule_create(text, &hs, &e), &e);
    remat_hjoin_schedule_free(hs);
    remat_op op;
    status_ok(remat_op_parse(text, &op, &e), &e);
    (void)remat_sizeof(text);
    CHECK(remat_status_name((remat_status)(int)(n % 9 - 1)) != NULL);
    CHECK(remat_strerror((remat_status)(int)(n % 9 - 1)) != NULL);
    CHECK(remat_version_number() >= 0 && remat_version_string()[0]);
    /* Files: a device reads empty; writing one is done in place. */
    char *buf = NULL;
    size_t len = 0;
    CHECK(remat_read_file("/dev/null", &buf, &len, &e) == REMAT_OK && len == 0);
    remat_free(buf);
    CHECK(remat_write_file("/dev/null", text, n, &e) == REMAT_OK);
    remat_join_problem p;
    uint32_t lengths[2] = {(uint32_t)n % 4, 2};
    status_ok(remat_join_problem_set(&p, n % 3, lengths, 1, 1, 1, 0, &e), &e);
    status_ok(remat_join_problem_load("/dev/null", &p, &e), &e);
    remat_join_schedule *js = NULL;
    status_ok(remat_join_schedule_load("/dev/null", &js, &e), &e);
    remat_chain *c = NULL;
    status_ok(remat_chain_load("/dev/null", &c, &e), &e);
    remat_schedule *s = NULL;
    status_ok(remat_schedule_load("/dev/null", &s, &e), &e);
    remat_stage st = {.fwd_time = 1, .bwd_time = 1, .out_bytes = n, .saved_bytes = n};
    status_ok(remat_chain_create(text, n, n, &st, 1, &c, &e), &e);
    remat_chain_free(c);
    remat_schedule *parsed = NULL;
    status_ok(remat_schedule_from_json(text, n, NULL, &parsed, &e), &e);
    remat_schedule_free(parsed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    remat_stage stages[8];
    remat_stage_option opts[3 * 8];
    remat_chain c;
    remat_op ops[16];
    remat_schedule s;
    remat_join_problem p;
    remat_hjoin hj;
    make_chain(&r, &c, stages, opts);
    make_schedule(&r, &s, ops);
    make_problem(&r, &p);
    make_hjoin(&r, &hj, stages);
    switch (byte(&r) % 5) {
    case 0: chain_calls(&r, &c, &s); break;
    case 1: schedule_calls(&r, &s); break;
    case 2: join_calls(&r, &p); break;
    case 3: hjoin_calls(&r, &hj); break;
    default: text_calls(data, size); break;
    }
    /* NULL everywhere a pointer is taken. */
    remat_error e;
    char *json = NULL;
    CHECK(remat_chain_to_json(NULL, &json, &e) == REMAT_E_INPUT);
    CHECK(remat_simulate(NULL, NULL, NULL, NULL, &e) == REMAT_E_INPUT);
    CHECK(remat_sim_result_to_json(NULL, &json, &e) == REMAT_E_INPUT);
    CHECK(isnan(remat_join_span_star(NULL)));
    CHECK(isnan(remat_join_plan_makespan(NULL, 3)));
    CHECK(remat_hjoin_to_json(NULL, &json, &e) == REMAT_E_INPUT);
    CHECK(remat_hjoin_simulate(NULL, NULL, NULL, &e) == REMAT_E_INPUT);
    remat_hjoin_free(NULL);
    remat_hjoin_schedule_free(NULL);
    remat_hjoin_sim_result_free(NULL);
    remat_hjoin_exec_plan_free(NULL);
    return 0;
}
