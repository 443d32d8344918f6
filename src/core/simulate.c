/* The simulator: SPEC section 2, exactly. The op rules are in sim_core.c;
 * the timed simulator for a host link in simulate_timed.c. */
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "sim_core.h"


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
        if (!remat__sim_apply(c, &st, s->ops[k], remat__next_op(s, k), &during, &t, why,
                              sizeof why)) {
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
