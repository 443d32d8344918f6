/* libFuzzer target: a chain and a schedule from one input (chain JSON, a NUL
 * byte, then a remat-schedule-1 document or op text one per line), replayed by
 * the simulator without and with a host link, then turned into a plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz_common.h"

/* Op text one per line; lines that do not parse are skipped. */
static remat_schedule *ops_from_lines(const char *text, size_t len) {
    remat_schedule *s = NULL;
    remat_error e;
    if (remat_schedule_create("fuzz", &s, &e) != REMAT_OK) return NULL;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != '\n') continue;
        char line[64];
        size_t n = i - start < sizeof line - 1 ? i - start : sizeof line - 1;
        memcpy(line, text + start, n);
        line[n] = '\0';
        start = i + 1;
        remat_op op;
        remat_status st = remat_op_parse(line, &op, &e);
        if (st != REMAT_OK) {
            check_error(st, &e);
            continue;
        }
        char back[REMAT_OP_TEXT_MAX];
        remat_op_format(op, back);
        remat_op op2;
        CHECK(remat_op_parse(back, &op2, &e) == REMAT_OK);
        CHECK(op2.kind == op.kind && op2.index == op.index &&
              (op.kind <= REMAT_OP_B || op2.value == op.value));
        CHECK(remat_schedule_push(s, op, &e) == REMAT_OK);
    }
    return s;
}

static void check_result(const remat_schedule *s, const remat_sim_result *r) {
    CHECK(r->n_ops == s->n_ops);
    if (!r->valid) {
        CHECK(r->failed_op <= s->n_ops);
        CHECK(r->reason[0] != '\0');
        return;
    }
    CHECK(r->time >= 0 && !isnan(r->time));
    for (size_t k = 0; k < r->n_ops; k++) CHECK(r->mem_during[k] <= r->peak_bytes);
}

static void simulate(const remat_chain *c, const remat_schedule *s, double bandwidth,
                     int timeline) {
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = bandwidth;
    o.record_timeline = timeline;
    remat_sim_result *r = NULL;
    remat_error e;
    remat_status st = remat_simulate(c, s, &o, &r, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        return;
    }
    check_result(s, r);
    char *json = NULL;
    CHECK(remat_sim_result_to_json(r, &json, &e) == REMAT_OK);
    cJSON *doc = cJSON_Parse(json); /* the summary must stay JSON (no inf/nan) */
    if (!doc) fprintf(stderr, "not JSON: %s\n", json);
    CHECK(doc != NULL);
    cJSON_Delete(doc);
    remat_free(json);
    remat_sim_result_free(r);
}

static void plan(const remat_chain *c, const remat_schedule *s, double bw) {
    remat_exec_plan *p = NULL;
    remat_error e;
    remat_status st = bw > 0 ? remat_exec_plan_create_timed(c, s, bw, &p, &e)
                             : remat_exec_plan_create(c, s, &p, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        CHECK(p == NULL);
        return;
    }
    CHECK(p->n_steps == s->n_ops);
    for (size_t k = 0; k < p->n_steps; k++) {
        CHECK(p->steps[k].n_reads <= REMAT_EXEC_MAX_REFS);
        CHECK(p->steps[k].n_creates <= REMAT_EXEC_MAX_REFS);
        CHECK(p->steps[k].n_frees <= REMAT_EXEC_MAX_REFS);
        CHECK(p->steps[k].mem_during <= p->peak_bytes);
        CHECK(p->steps[k].copy_at <= p->n_steps);
        if (p->steps[k].op.kind == REMAT_OP_OFF || p->steps[k].op.kind == REMAT_OP_PRE)
            CHECK(p->steps[k].copy_at > k);
        else
            CHECK(p->steps[k].copy_at == k);
    }
    remat_exec_plan_free(p);
}

static const double bandwidths[] = {1, 0.5, 1e300, 1e-300, 3, 1e6, 7, 1e-3};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, '\0', size);
    if (!nul) return 0;
    size_t clen = (size_t)(nul - text);
    const char *stext = nul + 1;
    size_t slen = size - clen - 1;

    remat_error e;
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_from_json(stext, slen, "<fuzz-schedule>", &s, &e);
    if (st == REMAT_OK) {
        char *json = NULL;
        CHECK(remat_schedule_to_json(s, &json, &e) == REMAT_OK);
        remat_schedule *s2 = NULL;
        CHECK(remat_schedule_from_json(json, strlen(json), "<round-trip>", &s2, &e) == REMAT_OK);
        CHECK(s2->n_ops == s->n_ops);
        for (size_t k = 0; k < s->n_ops; k++)
            CHECK(s->ops[k].kind == s2->ops[k].kind && s->ops[k].value == s2->ops[k].value &&
                  s->ops[k].index == s2->ops[k].index);
        remat_schedule_free(s2);
        remat_free(json);
    } else {
        check_error(st, &e);
        s = ops_from_lines(stext, slen);
        if (!s) return 0;
    }

    remat_chain *c = NULL;
    st = remat_chain_from_json(text, clen, "<fuzz-chain>", &c, &e);
    if (st != REMAT_OK) {
        check_error(st, &e);
        remat_schedule_free(s);
        return 0;
    }
    simulate(c, s, 0, 0);
    simulate(c, s, 0, 1);
    double bw = bandwidths[size % (sizeof bandwidths / sizeof *bandwidths)];
    simulate(c, s, bw, 0);
    simulate(c, s, bw, 1);
    plan(c, s, 0);
    plan(c, s, bw);
    remat_schedule_free(s);
    remat_chain_free(c);
    return 0;
}
