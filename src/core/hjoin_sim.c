/* Heterogeneous join networks: the simulator (SPEC section 2 on each branch
 * through remat__sim_apply, plus the turn), the branches as chains and the
 * flat chain. */
#include <stdio.h>
#include <string.h>

#include "hjoin_internal.h"

/* ---- the state ---- */

remat_status remat__hjoin_state_init(const remat__hjoin_net *net, remat__hjoin_state *st,
                                     remat_error *err) {
    memset(st, 0, sizeof *st);
    for (size_t b = 0; b < net->k; b++) {
        remat_status s = remat__sim_state_init(net->c[b], &st->b[b], err);
        if (s != REMAT_OK) {
            remat__hjoin_state_free(st);
            return s;
        }
        /* no seed: the turn makes d[n_b]; the end stage never runs */
        st->b[b].dheld[net->c[b]->n] = 0;
        st->b[b].next_b = net->n[b];
        st->mem += st->b[b].mem;
    }
    return REMAT_OK;
}

void remat__hjoin_state_free(remat__hjoin_state *st) {
    for (size_t b = 0; b < REMAT_HJOIN_MAX_BRANCHES; b++)
        if (st->b[b].val) remat__sim_state_free(&st->b[b]);
}

void remat__hjoin_state_copy(const remat__hjoin_net *net, remat__hjoin_state *dst,
                             const remat__hjoin_state *src) {
    for (size_t b = 0; b < net->k; b++) {
        size_t n1 = net->c[b]->n + 1;
        memcpy(dst->b[b].val, src->b[b].val, n1);
        memcpy(dst->b[b].opt, src->b[b].opt, n1);
        memcpy(dst->b[b].dheld, src->b[b].dheld, n1);
        dst->b[b].mem = src->b[b].mem;
        dst->b[b].next_b = src->b[b].next_b;
    }
    dst->mem = src->mem;
    dst->turned = src->turned;
    dst->at = src->at;
}

static int apply_turn(const remat__hjoin_net *net, remat__hjoin_state *st, uint64_t *during,
                      double *time, char *reason, size_t cap) {
    if (st->turned) {
        snprintf(reason, cap, "the turn has already run");
        return 0;
    }
    for (size_t b = 0; b < net->k; b++)
        if (st->b[b].val[net->n[b]] == REMAT__HELD_NONE) {
            snprintf(reason, cap, "needs a[%zu.%u], which is not held", b + 1,
                     (unsigned)net->n[b]);
            return 0;
        }
    *during = st->mem + remat__hjoin_turn_need(net);
    *time = net->turn.fwd_time + net->turn.bwd_time;
    st->mem = 0;
    for (size_t b = 0; b < net->k; b++) {
        remat__sim_state *s = &st->b[b];
        uint32_t n = net->n[b];
        s->dheld[n] = 1;
        s->mem += remat_chain_d_bytes(net->c[b], n);
        if (s->val[n] == REMAT__HELD_A) {
            s->val[n] = REMAT__HELD_NONE;
            s->mem -= remat_chain_a_bytes(net->c[b], n);
        }
        st->mem += s->mem;
    }
    st->turned = 1;
    return 1;
}

/* Ordered networks: before T, no op of a branch below one that has run;
 * after T, none of a branch while a later one has B's left. */
static int in_order(const remat__hjoin_net *net, const remat__hjoin_state *st, size_t b,
                    char *reason, size_t cap) {
    if (!st->turned && b < st->at) {
        snprintf(reason, cap, "branch %zu after branch %u: the branches run in order (the "
                 "network is ordered)", b + 1, (unsigned)st->at + 1);
        return 0;
    }
    for (size_t q = b + 1; st->turned && q < net->k; q++)
        if (st->b[q].next_b != 0) {
            snprintf(reason, cap, "branch %zu before branch %zu is back-propagated: the "
                     "branches run in order (the network is ordered)", b + 1, q + 1);
            return 0;
        }
    return 1;
}

/* next as an op of branch b's chain, or NULL when it is not one (the turn,
 * another branch, the end): only an op of the same branch can be the B that
 * stops a Fall. */
static const remat_op *branch_next(const remat_hjoin_op *next, size_t b, remat_op *buf) {
    if (!next || next->kind == REMAT_HJOIN_OP_T || next->branch != b + 1) return NULL;
    *buf = (remat_op){next->kind, 0, next->index, next->option};
    return buf;
}

int remat__hjoin_fall_stops(const remat__hjoin_net *net, const remat__hjoin_state *st,
                            remat_hjoin_op op, const remat_hjoin_op *next) {
    if (op.kind != REMAT_HJOIN_OP_FALL || op.branch < 1 || op.branch > net->k) return 0;
    size_t b = op.branch - 1u;
    if (op.index < 1 || op.index > net->n[b]) return 0;
    remat_op cop = {op.kind, 0, op.index, op.option}, buf;
    return remat__fall_stops(net->c[b], &st->b[b], cop, branch_next(next, b, &buf));
}

int remat__hjoin_apply(const remat__hjoin_net *net, remat__hjoin_state *st, remat_hjoin_op op,
                       const remat_hjoin_op *next, uint64_t *during, double *time, char *reason,
                       size_t cap) {
    *during = st->mem;
    *time = 0;
    if (op.kind == REMAT_HJOIN_OP_T) return apply_turn(net, st, during, time, reason, cap);
    if (op.kind > REMAT_HJOIN_OP_T) {
        snprintf(reason, cap, "unknown op kind %u", (unsigned)op.kind);
        return 0;
    }
    if (op.branch < 1 || op.branch > net->k) {
        snprintf(reason, cap, "branch %u is not in 1..%zu", (unsigned)op.branch, net->k);
        return 0;
    }
    size_t b = op.branch - 1u;
    if (net->ordered && !in_order(net, st, b, reason, cap)) return 0;
    if (op.index < 1 || op.index > net->n[b]) {
        snprintf(reason, cap, "stage %u is not in 1..%u of branch %zu", (unsigned)op.index,
                 (unsigned)net->n[b], b + 1);
        return 0;
    }
    remat__sim_state *s = &st->b[b];
    uint64_t before = s->mem, local;
    char why[200];
    remat_op cop = {op.kind, 0, op.index, op.option}, buf;
    if (!remat__sim_apply(net->c[b], s, cop, branch_next(next, b, &buf), &local, time, why, sizeof why)) {
        snprintf(reason, cap, "branch %zu: %s", b + 1, why);
        return 0;
    }
    *during = st->mem - before + local;
    st->mem = st->mem - before + s->mem;
    if (net->ordered) st->at = (uint32_t)b;
    return 1;
}

int remat__hjoin_done(const remat__hjoin_net *net, const remat__hjoin_state *st, char *reason,
                      size_t cap) {
    if (!st->turned) {
        snprintf(reason, cap, "the schedule ends before T");
        return 0;
    }
    for (size_t b = 0; b < net->k; b++)
        if (st->b[b].next_b != 0) {
            snprintf(reason, cap, "the schedule ends before B %zu.%u", b + 1,
                     (unsigned)st->b[b].next_b);
            return 0;
        }
    return 1;
}

/* ---- the simulator ---- */

void remat_hjoin_sim_result_free(remat_hjoin_sim_result *r) {
    if (!r) return;
    free(r->mem_during);
    free(r->mem_after);
    free(r);
}

static void sim_fail(remat_hjoin_sim_result *r, const remat_hjoin_schedule *s, size_t k,
                     const char *why) {
    r->valid = 0;
    r->failed_op = k;
    if (k < s->n_ops) remat_hjoin_op_format(s->ops[k], r->failed_op_text);
    else remat__strlcpy(r->failed_op_text, "(end)", sizeof r->failed_op_text);
    remat__strlcpy(r->reason, why, sizeof r->reason);
}

static remat_status replay(const remat__hjoin_net *net, const remat_hjoin_schedule *s,
                           remat_hjoin_sim_result *r, remat_error *err) {
    remat__hjoin_state st;
    REMAT__FORWARD(remat__hjoin_state_init(net, &st, err));
    char why[256];
    r->valid = 1;
    r->peak_bytes = st.mem;
    for (size_t k = 0; k < s->n_ops; k++) {
        uint64_t during;
        double t;
        if (!remat__hjoin_apply(net, &st, s->ops[k], remat__hjoin_next_op(s, k), &during, &t, why, sizeof why)) {
            sim_fail(r, s, k, why);
            break;
        }
        r->mem_during[k] = during;
        r->mem_after[k] = st.mem;
        if (during > r->peak_bytes) r->peak_bytes = during;
        r->time += t;
    }
    if (r->valid && !remat__hjoin_done(net, &st, why, sizeof why)) sim_fail(r, s, s->n_ops, why);
    remat__hjoin_state_free(&st);
    return REMAT_OK;
}

remat_status remat_hjoin_simulate(const remat_hjoin *j, const remat_hjoin_schedule *s,
                                  remat_hjoin_sim_result **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_simulate: NULL argument");
    REMAT__FORWARD(remat__hjoin_schedule_validate(s, "remat_hjoin_simulate", err));
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_simulate", err);
    remat_hjoin_sim_result *r = st == REMAT_OK ? calloc(1, sizeof *r) : NULL;
    if (st == REMAT_OK && r) {
        size_t cap = s->n_ops ? s->n_ops : 1;
        r->n_ops = s->n_ops;
        r->mem_during = remat__calloc(cap, sizeof *r->mem_during);
        r->mem_after = remat__calloc(cap, sizeof *r->mem_after);
    }
    if (st == REMAT_OK && (!r || !r->mem_during || !r->mem_after))
        st = remat__fail(err, REMAT_E_NOMEM, "join simulate: out of memory for %zu ops",
                         s->n_ops);
    if (st == REMAT_OK) st = replay(&net, s, r, err);
    remat__hjoin_net_free(&net);
    if (st != REMAT_OK) {
        remat_hjoin_sim_result_free(r);
        return st;
    }
    *out = r;
    return REMAT_OK;
}

/* ---- chains ---- */

remat_status remat_hjoin_branch_chain(const remat_hjoin *j, size_t b, remat_chain **out,
                                      remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_branch_chain: NULL argument");
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_branch_chain", err);
    if (st == REMAT_OK && (b < 1 || b > net.k))
        st = remat__fail(err, REMAT_E_INPUT, "remat_hjoin_branch_chain: branch %zu is not in 1..%zu",
                         b, net.k);
    if (st == REMAT_OK) {
        *out = net.c[b - 1];
        net.c[b - 1] = NULL;
        remat__strlcpy((*out)->time_unit, j->time_unit, sizeof (*out)->time_unit);
    }
    remat__hjoin_net_free(&net);
    return st;
}

/* The flat chain's stages: branch after branch, then the turn
 * (remat_hjoin_flatten). Each stage gets its own copy of its options, which
 * carry what the stage's saves carry; 0 when out of memory (out is then
 * freed by remat__stages_free). */
static int flat_stages(const remat__hjoin_net *net, remat_stage *out) {
    size_t at = 0;
    for (size_t b = 0; b < net->k; b++) {
        uint64_t carried = 0, cgrad = 0;
        for (size_t q = 0; q < net->k; q++) {
            if (q == b) continue;
            size_t i = q < b ? net->n[q] : 0;
            carried += remat_chain_a_bytes(net->c[q], i);
            cgrad += remat_chain_d_bytes(net->c[q], i);
        }
        for (size_t i = 0; i < net->n[b]; i++) {
            remat_stage s = net->c[b]->stages[i];
            s.out_bytes += carried;
            s.saved_bytes += carried;
            s.grad_bytes += cgrad;
            /* a stopped Fall's abar keeps what the stage carries, as its saves do */
            if (s.has_stop_saved_bytes) s.stop_saved_bytes += carried;
            snprintf(s.name, sizeof s.name, "%zu.%zu %.200s", b + 1, i + 1,
                     net->c[b]->stages[i].name);
            s.options = NULL;
            if (s.n_options) {
                s.options = remat__calloc(s.n_options, sizeof *s.options);
                if (!s.options) return 0;
                memcpy(s.options, net->c[b]->stages[i].options, s.n_options * sizeof *s.options);
                for (size_t k = 0; k < s.n_options; k++) s.options[k].saved_bytes += carried;
            }
            out[at++] = s;
        }
    }
    remat_stage loss = net->turn;
    loss.grad_bytes = 0;
    loss.n_options = 0;
    loss.options = NULL;
    out[at] = loss;
    return 1;
}

remat_status remat_hjoin_flatten(const remat_hjoin *j, remat_chain **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_flatten: NULL argument");
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_flatten", err);
    size_t n = 1;
    uint64_t in = 0, in_grad = 0;
    for (size_t b = 0; b < net.k; b++) {
        n += net.n[b];
        in += net.c[b]->input_bytes;
        in_grad += net.c[b]->input_grad_bytes;
    }
    if (st == REMAT_OK && n > REMAT_MAX_STAGES)
        st = remat__fail(err, REMAT_E_INPUT,
                         "remat_hjoin_flatten: %zu stages in all, more than a chain's %u", n,
                         REMAT_MAX_STAGES);
    remat_stage *stages = st == REMAT_OK ? remat__calloc(n, sizeof *stages) : NULL;
    if (st == REMAT_OK && !stages)
        st = remat__fail(err, REMAT_E_NOMEM, "remat_hjoin_flatten: out of memory");
    if (st == REMAT_OK && !flat_stages(&net, stages)) {
        remat__stages_free(stages, n);
        st = remat__fail(err, REMAT_E_NOMEM, "remat_hjoin_flatten: out of memory");
    } else if (st == REMAT_OK) {
        st = remat__chain_adopt("flat chain", j->name, in, in_grad, stages, n, out, err);
    }
    if (st == REMAT_OK) remat__strlcpy((*out)->time_unit, j->time_unit, sizeof (*out)->time_unit);
    remat__hjoin_net_free(&net);
    return st;
}
