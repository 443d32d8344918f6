/* The simulator: SPEC section 2, exactly. */
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"

remat_status remat__sim_state_init(const remat_chain *c, remat__sim_state *st, remat_error *err) {
    st->val = remat__calloc(c->n + 1, 1);
    st->opt = remat__calloc(c->n + 1, 1);
    st->dheld = remat__calloc(c->n + 1, 1);
    if (!st->val || !st->opt || !st->dheld) {
        remat__sim_state_free(st);
        return remat__fail(err, REMAT_E_NOMEM, "simulate: out of memory");
    }
    st->val[0] = REMAT__HELD_A;
    st->dheld[c->n] = 1;
    st->mem = c->input_bytes;
    st->next_b = (uint32_t)c->n;
    return REMAT_OK;
}

void remat__sim_state_free(remat__sim_state *st) {
    free(st->val);
    free(st->opt);
    free(st->dheld);
    st->val = st->opt = st->dheld = NULL;
}

#define FAIL(...)                                    \
    do {                                             \
        snprintf(reason, reason_cap, __VA_ARGS__);   \
        return 0;                                    \
    } while (0)

uint64_t remat__value_bytes(const remat_chain *c, size_t i, uint8_t kind, uint8_t k) {
    if (kind == REMAT__HELD_A) return remat_chain_a_bytes(c, i);
    if (kind != REMAT__HELD_ABAR || i == 0 || i > c->n) return 0;
    return remat__stage_save(&c->stages[i - 1], k).saved_bytes;
}

static uint64_t held_bytes(const remat_chain *c, const remat__sim_state *st, size_t i) {
    return remat__value_bytes(c, i, st->val[i], st->opt[i]);
}

/* The chain validator caps the sum of all sizes below 2^62, so these sums fit. */
static int apply_forward(const remat_chain *c, remat__sim_state *st, remat_op op,
                         uint64_t *during, double *time, char *reason, size_t reason_cap) {
    uint32_t i = op.index;
    const remat_stage *sg = &c->stages[i - 1];
    if (i <= c->n && st->next_b < i) FAIL("forward of stage %u after B %u", i, i);
    if (st->val[i - 1] == REMAT__HELD_NONE) FAIL("needs a[%u], which is not held", i - 1);
    if (op.option > sg->n_options)
        FAIL("stage %u has %zu option%s: there is no option %u", i, sg->n_options,
             sg->n_options == 1 ? "" : "s", (unsigned)op.option);
    uint8_t have = st->val[i];
    uint8_t want = op.kind == REMAT_OP_FALL ? REMAT__HELD_ABAR : REMAT__HELD_A;
    uint64_t add = 0;
    if (have < want) add = remat__value_bytes(c, i, want, op.option);
    uint64_t overhead = op.kind == REMAT_OP_FALL ? remat__stage_save(sg, op.option).fall_overhead
                                                 : sg->fwd_overhead;
    *during = st->mem + add + overhead;
    *time = sg->fwd_time;
    if (have < want) { /* an abar already held keeps its own option */
        st->mem = st->mem - held_bytes(c, st, i) + add;
        st->val[i] = want;
        st->opt[i] = op.option;
    }
    if (op.kind == REMAT_OP_FN && st->val[i - 1] == REMAT__HELD_A) {
        st->mem -= remat_chain_a_bytes(c, i - 1);
        st->val[i - 1] = REMAT__HELD_NONE;
    }
    return 1;
}

static int apply_backward(const remat_chain *c, remat__sim_state *st, remat_op op,
                          uint64_t *during, double *time, char *reason, size_t reason_cap) {
    uint32_t i = op.index;
    const remat_stage *sg = &c->stages[i - 1];
    if (st->next_b == 0) FAIL("every B has already run");
    if (i != st->next_b) FAIL("B %u out of order: B %u must run first", i, st->next_b);
    if (!st->dheld[i]) FAIL("needs d[%u], which is not held", i);
    if (st->val[i] != REMAT__HELD_ABAR) FAIL("needs abar[%u], which is not held", i);
    if (st->val[i - 1] == REMAT__HELD_NONE) FAIL("needs a[%u], which is not held", i - 1);
    remat__save sv = remat__stage_save(sg, st->opt[i]);
    uint64_t dout = remat_chain_d_bytes(c, i - 1);
    *during = st->mem + dout + sv.bwd_overhead;
    *time = sv.bwd_time;
    st->mem += dout;
    st->dheld[i - 1] = 1;
    st->mem -= remat_chain_d_bytes(c, i);
    st->dheld[i] = 0;
    st->mem -= held_bytes(c, st, i);
    st->val[i] = REMAT__HELD_NONE;
    if (st->val[i - 1] == REMAT__HELD_A) {
        st->mem -= remat_chain_a_bytes(c, i - 1);
        st->val[i - 1] = REMAT__HELD_NONE;
    }
    st->next_b = i - 1;
    return 1;
}

int remat__sim_apply(const remat_chain *c, remat__sim_state *st, remat_op op, uint64_t *during,
                     double *time, char *reason, size_t reason_cap) {
    *during = st->mem;
    *time = 0;
    if (op.option && op.kind != REMAT_OP_FALL) /* B takes the option of the abar it consumes */
        FAIL("only Fall takes an option");
    switch (op.kind) {
    case REMAT_OP_FN:
    case REMAT_OP_FCK:
    case REMAT_OP_FALL:
    case REMAT_OP_B:
        if (op.index < 1 || op.index > c->n) FAIL("stage %u is not in 1..%zu", op.index, c->n);
        if (op.kind == REMAT_OP_B) return apply_backward(c, st, op, during, time, reason, reason_cap);
        return apply_forward(c, st, op, during, time, reason, reason_cap);
    case REMAT_OP_DEL: {
        uint8_t want = op.value == REMAT_VALUE_ABAR ? REMAT__HELD_ABAR : REMAT__HELD_A;
        const char *nm = want == REMAT__HELD_ABAR ? "abar" : "a";
        if (op.index > c->n || (want == REMAT__HELD_ABAR && op.index == 0))
            FAIL("%s[%u] is not a value of this chain", nm, op.index);
        if (st->val[op.index] != want) FAIL("%s[%u] is not held", nm, op.index);
        st->mem -= held_bytes(c, st, op.index);
        st->val[op.index] = REMAT__HELD_NONE;
        return 1;
    }
    default:
        FAIL("offload ops need a host link: simulate with a bandwidth");
    }
}
#undef FAIL

void remat_sim_options_init(remat_sim_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

void remat_sim_result_free(remat_sim_result *r) {
    if (!r) return;
    free(r->mem_during);
    free(r->mem_after);
    free(r->events);
    free(r->mem_points);
    free(r);
}

void remat__sim_fail(remat_sim_result *r, const remat_schedule *s, size_t k, const char *why) {
    r->valid = 0;
    r->failed_op = k;
    if (k < s->n_ops)
        remat_op_format(s->ops[k], r->failed_op_text);
    else
        remat__strlcpy(r->failed_op_text, "(end)", sizeof r->failed_op_text);
    remat__strlcpy(r->reason, why, sizeof r->reason);
}

static int has_offload_ops(const remat_schedule *s) {
    for (size_t k = 0; k < s->n_ops; k++)
        if (s->ops[k].kind >= REMAT_OP_OFF) return 1;
    return 0;
}

static remat_status simulate_plain(const remat_chain *c, const remat_schedule *s,
                                   remat_sim_result *r, remat_error *err) {
    remat__sim_state st;
    REMAT__FORWARD(remat__sim_state_init(c, &st, err));
    char why[256];
    r->valid = 1;
    r->peak_bytes = c->input_bytes;
    for (size_t k = 0; k < s->n_ops; k++) {
        uint64_t during;
        double t;
        if (!remat__sim_apply(c, &st, s->ops[k], &during, &t, why, sizeof why)) {
            remat__sim_fail(r, s, k, why);
            break;
        }
        r->mem_during[k] = during;
        r->mem_after[k] = st.mem;
        if (during > r->peak_bytes) r->peak_bytes = during;
        r->time += t;
    }
    if (r->valid && st.next_b != 0) {
        snprintf(why, sizeof why, "the schedule ends before B %u", st.next_b);
        remat__sim_fail(r, s, s->n_ops, why);
    }
    remat__sim_state_free(&st);
    return REMAT_OK;
}

remat_status remat_simulate(const remat_chain *c, const remat_schedule *s,
                            const remat_sim_options *opt, remat_sim_result **out,
                            remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!c || !s || !out, err, REMAT_E_INPUT, "remat_simulate: NULL argument");
    REMAT__FORWARD(remat__chain_validate(c, "remat_simulate", err));
    REMAT__FORWARD(remat__schedule_validate(s, "remat_simulate", err));
    remat_sim_options dflt;
    remat_sim_options_init(&dflt);
    if (!opt) opt = &dflt;
    REMAT__RETURN_IF(!(opt->bandwidth >= 0) || opt->bandwidth > 1e300, err, REMAT_E_INPUT,
                     "bandwidth: must be a finite number >= 0");
    remat_sim_result *r = calloc(1, sizeof *r);
    REMAT__RETURN_IF(!r, err, REMAT_E_NOMEM, "simulate: out of memory");
    r->n_ops = s->n_ops;
    r->mem_during = remat__calloc(s->n_ops, sizeof *r->mem_during);
    r->mem_after = remat__calloc(s->n_ops, sizeof *r->mem_after);
    remat_status st;
    if (!r->mem_during || !r->mem_after)
        st = remat__fail(err, REMAT_E_NOMEM, "simulate: out of memory");
    else if (opt->bandwidth > 0 || opt->record_timeline || has_offload_ops(s))
        st = remat__simulate_timed(c, s, opt, r, NULL, err);
    else
        st = simulate_plain(c, s, r, err);
    if (st != REMAT_OK) {
        remat_sim_result_free(r);
        return st;
    }
    *out = r;
    return REMAT_OK;
}

void remat__buf_json_string(remat__buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            remat__buf_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            remat__buf_printf(b, "\\u%04x", ch);
        else
            remat__buf_printf(b, "%c", ch);
    }
}

remat_status remat_sim_result_to_json(const remat_sim_result *r, char **out, remat_error *err) {
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!r || !out, err, REMAT_E_INPUT, "remat_sim_result_to_json: NULL argument");
    REMAT__RETURN_IF((r->n_events && !r->events) || (r->n_mem_points && !r->mem_points), err,
                     REMAT_E_INPUT, "remat_sim_result_to_json: a timeline count without its array");
    REMAT__RETURN_IF(!memchr(r->failed_op_text, '\0', sizeof r->failed_op_text) ||
                         !memchr(r->reason, '\0', sizeof r->reason),
                     err, REMAT_E_INPUT, "remat_sim_result_to_json: a text is not terminated");
    remat__buf b = {0};
    if (r->valid) {
        remat__buf_printf(&b, "{\"valid\": true, \"time\": ");
        remat__json_number(&b, r->time);
        remat__buf_printf(&b, ", \"peak_bytes\": %llu", (unsigned long long)r->peak_bytes);
    } else {
        remat__buf_printf(&b, "{\"valid\": false, \"op_index\": %zu, \"op\": \"", r->failed_op);
        remat__buf_json_string(&b, r->failed_op_text);
        remat__buf_printf(&b, "\", \"reason\": \"");
        remat__buf_json_string(&b, r->reason);
        remat__buf_printf(&b, "\"");
    }
    if (r->events || r->mem_points) {
        remat__buf_printf(&b, ", \"compute_idle\": ");
        remat__json_number(&b, r->compute_idle);
        remat__buf_printf(&b, ", \"d2h_idle\": ");
        remat__json_number(&b, r->d2h_idle);
        remat__buf_printf(&b, ", \"h2d_idle\": ");
        remat__json_number(&b, r->h2d_idle);
        remat__buf_printf(&b, ", \"events\": [");
        for (size_t k = 0; k < r->n_events; k++) {
            remat__buf_printf(&b, "%s{\"op\": %zu, \"lane\": %d, \"start\": ", k ? ", " : "",
                              r->events[k].op, r->events[k].lane);
            remat__json_number(&b, r->events[k].start);
            remat__buf_printf(&b, ", \"end\": ");
            remat__json_number(&b, r->events[k].end);
            remat__buf_printf(&b, "}");
        }
        remat__buf_printf(&b, "], \"memory\": [");
        for (size_t k = 0; k < r->n_mem_points; k++) {
            remat__buf_printf(&b, "%s[", k ? ", " : "");
            remat__json_number(&b, r->mem_points[k].time);
            remat__buf_printf(&b, ", %llu]", (unsigned long long)r->mem_points[k].bytes);
        }
        remat__buf_printf(&b, "]");
    }
    remat__buf_printf(&b, "}\n");
    return remat__buf_finish(&b, out, err);
}
