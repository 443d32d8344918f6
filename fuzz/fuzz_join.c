/* libFuzzer target: join problems and schedules (remat-join-1,
 * remat-join-schedule-1, op text), the join simulator and, for small
 * problems, the join solvers. Input: a problem document, a NUL byte, then a
 * schedule document or op text one per line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static remat_join_op ops_buf[256];

static size_t ops_from_lines(const char *text, size_t len) {
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= len && n < 256; i++) {
        if (i < len && text[i] != '\n') continue;
        char line[64];
        size_t m = i - start < sizeof line - 1 ? i - start : sizeof line - 1;
        memcpy(line, text + start, m);
        line[m] = '\0';
        start = i + 1;
        remat_error e;
        remat_join_op op;
        remat_status st = remat_join_op_parse(line, &op, &e);
        if (st != REMAT_OK) {
            check_error(st, &e);
            continue;
        }
        char back[REMAT_JOIN_OP_TEXT_MAX];
        remat_join_op_format(op, back);
        remat_join_op op2;
        CHECK(remat_join_op_parse(back, &op2, &e) == REMAT_OK);
        CHECK(op2.kind == op.kind && op2.branch == op.branch && op2.index == op.index);
        ops_buf[n++] = op;
    }
    return n;
}

static uint64_t total_length(const remat_join_problem *p) {
    uint64_t t = 0;
    for (size_t j = 0; j < p->k; j++) t += p->lengths[j];
    return t;
}

static void check_schedule(const remat_join_problem *p, const remat_join_schedule *s,
                           uint64_t slots) {
    remat_join_sim_result *r = NULL;
    remat_error e;
    CHECK(remat_join_simulate(p, s->ops, s->n_ops, slots, &r, &e) == REMAT_OK);
    if (!r->valid) fprintf(stderr, "join schedule invalid: %s\n", r->reason);
    CHECK(r->valid);
    CHECK(r->peak_slots <= slots);
    remat_join_sim_result_free(r);
}

static void solve(const remat_join_problem *p, uint64_t slots) {
    remat_join_options o;
    remat_join_options_init(&o);
    o.max_steps = 2000000;
    o.max_work_bytes = 64u << 20;
    remat_error e;
    remat_join_schedule *s = NULL;
    remat_status st = remat_join_solve(p, slots, &o, &s, &e);
    if (st == REMAT_OK) {
        check_schedule(p, s, slots);
        remat_join_schedule_free(s);
    } else {
        check_error(st, &e);
    }
    st = remat_join_equiv_chain(p, slots, &o, &s, &e);
    if (st == REMAT_OK) {
        check_schedule(p, s, slots);
        remat_join_schedule_free(s);
    } else {
        check_error(st, &e);
    }
    remat_join_curve *cv = NULL;
    st = remat_join_curve_compute(p, 1, &o, &cv, &e);
    if (st == REMAT_OK)
        remat_join_curve_free(cv);
    else
        check_error(st, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t plen = nul ? (size_t)(nul - text) : size;
    const char *stext = nul ? nul + 1 : text + size;
    size_t slen = nul ? size - plen - 1 : 0;

    remat_error e;
    remat_join_problem p;
    (void)remat_join_is_problem_json(text, plen);
    remat_status st = remat_join_problem_from_json(text, plen, "<fuzz-join>", &p, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
    } else {
        char *json = NULL;
        CHECK(remat_join_problem_to_json(&p, &json, &e) == REMAT_OK);
        remat_join_problem p2;
        CHECK(remat_join_problem_from_json(json, strlen(json), "<round-trip>", &p2, &e) ==
              REMAT_OK);
        CHECK(p2.k == p.k && p2.slots == p.slots && p2.fwd_time == p.fwd_time &&
              p2.bwd_time == p.bwd_time && p2.turn_time == p.turn_time &&
              memcmp(p2.lengths, p.lengths, sizeof p.lengths) == 0);
        CHECK(remat_join_is_problem_json(json, strlen(json)));
        remat_free(json);
    }

    remat_join_schedule *s = NULL;
    st = remat_join_schedule_from_json(stext, slen, "<fuzz-join-schedule>", &s, &e);
    const remat_join_op *ops = ops_buf;
    size_t n_ops;
    if (st == REMAT_OK) {
        char *json = NULL;
        CHECK(remat_join_schedule_to_json(s, &json, &e) == REMAT_OK);
        remat_join_schedule *s2 = NULL;
        CHECK(remat_join_schedule_from_json(json, strlen(json), "<round-trip>", &s2, &e) ==
              REMAT_OK);
        CHECK(s2->n_ops == s->n_ops);
        remat_join_schedule_free(s2);
        remat_free(json);
        ops = s->ops;
        n_ops = s->n_ops;
    } else {
        check_error(st, &e);
        n_ops = ops_from_lines(stext, slen);
    }

    if (remat_join_problem_from_json(text, plen, "<fuzz-join>", &p, &e) == REMAT_OK) {
        for (int lim = 0; lim < 2; lim++) {
            remat_join_sim_result *r = NULL;
            st = remat_join_simulate(&p, ops, n_ops, lim ? p.slots : 0, &r, &e);
            if (st != REMAT_OK) check_error(st, &e);
            else if (!r->valid) CHECK(r->reason[0] && r->failed_op <= n_ops);
            remat_join_sim_result_free(r);
        }
        (void)remat_join_min_slots(&p);
        (void)remat_join_full_slots(&p);
        (void)remat_join_span_star(&p);
        if (total_length(&p) <= 64) solve(&p, p.slots ? p.slots : remat_join_min_slots(&p));
    }
    remat_join_schedule_free(s);
    return 0;
}
