/* libFuzzer target: heterogeneous join networks ("remat-join-2",
 * "remat-join-schedule-2", op text), the join simulator, execution plans and,
 * for small networks, the solver, the curve and the flat chain. Input: a
 * problem document, a NUL byte, then a schedule document or op text one per
 * line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

/* Op text lines into s (at most 256). */
static void ops_from_lines(const char *text, size_t len, remat_hjoin_schedule *s) {
    size_t start = 0;
    for (size_t i = 0; i <= len && s->n_ops < 256; i++) {
        if (i < len && text[i] != '\n') continue;
        char line[64];
        size_t m = i - start < sizeof line - 1 ? i - start : sizeof line - 1;
        memcpy(line, text + start, m);
        line[m] = '\0';
        start = i + 1;
        remat_error e;
        remat_hjoin_op op;
        remat_status st = remat_hjoin_op_parse(line, &op, &e);
        if (st != REMAT_OK) {
            check_error(st, &e);
            continue;
        }
        char back[REMAT_HJOIN_OP_TEXT_MAX];
        remat_hjoin_op_format(op, back);
        remat_hjoin_op op2;
        CHECK(remat_hjoin_op_parse(back, &op2, &e) == REMAT_OK);
        CHECK(op2.kind == op.kind && op2.branch == op.branch && op2.index == op.index &&
              op2.option == op.option);
        CHECK(remat_hjoin_schedule_push(s, op, &e) == REMAT_OK);
    }
}

/* A valid schedule: simulated within its limit, its plan agreeing. */
static void check_schedule(const remat_hjoin *j, const remat_hjoin_schedule *s, uint64_t limit) {
    remat_hjoin_sim_result *r = NULL;
    remat_error e;
    CHECK(remat_hjoin_simulate(j, s, &r, &e) == REMAT_OK);
    if (!r->valid) fprintf(stderr, "join schedule invalid: %s\n", r->reason);
    CHECK(r->valid);
    CHECK(r->peak_bytes <= limit && r->peak_bytes == s->peak_bytes);
    remat_hjoin_exec_plan *p = NULL;
    CHECK(remat_hjoin_exec_plan_create(j, s, &p, &e) == REMAT_OK);
    CHECK(p->peak_bytes == r->peak_bytes && p->n_steps == s->n_ops);
    remat_hjoin_exec_plan_free(p);
    remat_hjoin_sim_result_free(r);
}

static size_t total_stages(const remat_hjoin *j) {
    size_t n = 0;
    for (size_t b = 0; b < j->k; b++) n += j->branches[b].n;
    return n;
}

static void solve(const remat_hjoin *j) {
    uint64_t peak = 0;
    remat_error e;
    CHECK(remat_hjoin_store_all_cost(j, &peak, NULL, &e) == REMAT_OK);
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.max_work_bytes = 64u << 20;
    o.max_seconds = 2;
    o.threads = 1;
    o.slots = 64;
    uint64_t mm = 0;
    remat_status st = remat_hjoin_min_memory(j, &o, &mm, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        return;
    }
    CHECK(mm <= peak);
    for (int q = 0; q < 3; q++) {
        o.memory = mm + (peak - mm) * (uint64_t)q / 2;
        remat_hjoin_schedule *s = NULL;
        st = remat_hjoin_solve(j, &o, &s, &e);
        if (st == REMAT_OK) check_schedule(j, s, o.memory);
        else check_error(st, &e);
        remat_hjoin_schedule_free(s);
    }
    o.memory = 0;
    remat_curve *cv = NULL;
    st = remat_hjoin_curve(j, &o, 8, &cv, &e);
    if (st == REMAT_OK) {
        CHECK(cv->n >= 1 && cv->n <= 8);
        remat_curve_free(cv);
    } else {
        check_error(st, &e);
    }
    remat_chain *c = NULL;
    st = remat_hjoin_flatten(j, &c, &e);
    if (st == REMAT_OK) remat_chain_free(c);
    else check_error(st, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    size_t plen = nul ? (size_t)(nul - text) : size;
    const char *stext = nul ? nul + 1 : text + size;
    size_t slen = nul ? size - plen - 1 : 0;

    remat_error e;
    remat_hjoin *j = NULL;
    (void)remat_hjoin_is_json(text, plen);
    remat_status st = remat_hjoin_from_json(text, plen, "<fuzz-hjoin>", &j, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        CHECK(j == NULL);
    } else {
        char *json = NULL;
        CHECK(remat_hjoin_to_json(j, &json, &e) == REMAT_OK);
        CHECK(remat_hjoin_is_json(json, strlen(json)));
        remat_hjoin *j2 = NULL;
        CHECK(remat_hjoin_from_json(json, strlen(json), "<round-trip>", &j2, &e) == REMAT_OK);
        char *json2 = NULL;
        CHECK(remat_hjoin_to_json(j2, &json2, &e) == REMAT_OK);
        CHECK(strcmp(json, json2) == 0);
        for (size_t b = 1; b <= j->k; b++) {
            remat_chain *c = NULL;
            CHECK(remat_hjoin_branch_chain(j, b, &c, &e) == REMAT_OK);
            CHECK(c->n == j->branches[b - 1].n + 1);
            remat_chain_free(c);
        }
        int was = j->ordered; /* the setter flips it and back, nothing else */
        remat_hjoin_set_ordered(j, !was);
        CHECK(j->ordered == !was);
        remat_hjoin_set_ordered(j, was);
        CHECK(j->ordered == was);
        remat_free(json);
        remat_free(json2);
        remat_hjoin_free(j2);
    }

    remat_hjoin_schedule *s = NULL;
    st = remat_hjoin_schedule_from_json(stext, slen, "<fuzz-hjoin-schedule>", &s, &e);
    if (st == REMAT_OK) {
        CHECK(remat_hjoin_schedule_is_json(stext, slen));
        char *json = NULL;
        CHECK(remat_hjoin_schedule_to_json(s, &json, &e) == REMAT_OK);
        remat_hjoin_schedule *s2 = NULL;
        CHECK(remat_hjoin_schedule_from_json(json, strlen(json), "<round-trip>", &s2, &e) ==
              REMAT_OK);
        CHECK(s2->n_ops == s->n_ops);
        remat_hjoin_schedule_free(s2);
        remat_free(json);
    } else {
        check_error(st, &e);
        CHECK(remat_hjoin_schedule_create("lines", &s, &e) == REMAT_OK);
        ops_from_lines(stext, slen, s);
    }

    if (j) {
        remat_hjoin_sim_result *r = NULL;
        st = remat_hjoin_simulate(j, s, &r, &e);
        CHECK(st == REMAT_OK);
        if (!r->valid) CHECK(r->reason[0] && r->failed_op <= s->n_ops);
        remat_hjoin_exec_plan *p = NULL;
        st = remat_hjoin_exec_plan_create(j, s, &p, &e);
        CHECK((st == REMAT_OK) == (r->valid != 0));
        if (st == REMAT_OK) CHECK(p->peak_bytes == r->peak_bytes);
        else check_error(st, &e);
        remat_hjoin_exec_plan_free(p);
        remat_hjoin_sim_result_free(r);
        if (total_stages(j) <= 24) solve(j);
    }
    remat_hjoin_schedule_free(s);
    remat_hjoin_free(j);
    return 0;
}
