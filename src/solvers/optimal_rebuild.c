/* optimal's Algorithm 2: the schedule from a filled table, with its time and
 * its exact peak in bytes. */
#include "optimal_internal.h"

static void note(opt_rebuild *r, uint64_t during) {
    if (during > r->peak) r->peak = during;
}

static remat_status emit(opt_rebuild *r, remat_op_kind k, size_t i, remat_error *err) {
    const remat_stage *sg = &r->x->c->stages[i - 1];
    r->time += k == REMAT_OP_B ? sg->bwd_time : sg->fwd_time;
    return r->sch ? remat__push(r->sch, k, (uint32_t)i, err) : REMAT_OK;
}

static remat_status push_task(opt_rebuild *r, opt_task t, remat_error *err) {
    REMAT__RETURN_IF(r->top >= r->cap, err, REMAT_E_INTERNAL, "optimal: rebuild stack overflow");
    r->stack[r->top++] = t;
    return REMAT_OK;
}

/* Finds which choice gave C(s, t, m): 0 for Fall s, else s'. */
static remat_status best_choice(const opt_ctx *x, size_t s, size_t t, uint64_t m, size_t *out,
                                remat_error *err) {
    float want = table_at(x, s, t, m), best = INFINITY;
    *out = 0;
    if (m >= x->g[IDX(x, s, t)]) return REMAT_OK; /* all Fall: the tail value */
    /* The first choice whose value, computed as the fill did, is the table's
     * (the table holds the min, so it is the best). */
    *out = SIZE_MAX;
    opt_view A = view_of(x, s + 1, t);
    if (m >= m_all(x, s, t) && m >= x->ab[s]) {
        best = ((float)(x->pfb[s] - x->pfb[s - 1]) + view_at(&A, m - x->ab[s])) + 0.0f;
        *out = 0;
    }
    uint64_t run = sat(x->a[s] + x->of[s]);
    for (size_t sp = s + 1; sp <= t && !(best <= want); sp++) {
        if (sp > s + 1 && x->fnp[sp - 1] > run) run = x->fnp[sp - 1];
        if (m < x->d[t] + run || m < x->a[sp - 1]) continue;
        A = view_of(x, sp, t);
        opt_view B = view_of(x, s, sp - 1);
        float c = (float)(x->pf[sp - 1] - x->pf[s - 1]);
        float v = (c + view_at(&A, m - x->a[sp - 1])) + view_at(&B, m);
        if (v < best) {
            best = v;
            *out = sp;
        }
    }
    REMAT__RETURN_IF(*out == SIZE_MAX || !(best <= want), err, REMAT_E_INTERNAL,
                     "optimal: no choice at (%zu, %zu, %llu) matches the table", s, t,
                     (unsigned long long)m);
    return REMAT_OK;
}

/* Algorithm 2 with an explicit stack; tracks time and the peak in bytes. */
remat_status remat__opt_rebuild(opt_rebuild *r, uint64_t m, remat_error *err) {
    const opt_ctx *x = r->x;
    const remat_chain *c = x->c;
    size_t n = x->n;
    r->cap = 2 * n + 2;
    r->stack = remat__calloc(r->cap, sizeof *r->stack);
    REMAT__RETURN_IF(!r->stack, err, REMAT_E_NOMEM, "optimal: out of memory");
    r->top = 0;
    r->time = 0;
    r->peak = byte_a(c, 0);
    opt_task t0 = {TASK_SOLVE, 1, (uint32_t)n, m, byte_a(c, 0)};
    remat_status st = push_task(r, t0, err);
    while (st == REMAT_OK && r->top > 0) {
        opt_task k = r->stack[--r->top];
        size_t s = k.s, t = k.t;
        uint64_t ab = remat_chain_abar_bytes(c, s), ds = remat_chain_d_bytes(c, s);
        uint64_t dp = remat_chain_d_bytes(c, s - 1), dt = remat_chain_d_bytes(c, t);
        const remat_stage *sg = &c->stages[s - 1];
        if (k.kind == TASK_B) {
            note(r, k.base + ab + ds + dp + sg->bwd_overhead);
            st = emit(r, REMAT_OP_B, s, err);
            continue;
        }
        size_t sp = 0;
        if (s < t) st = best_choice(x, s, t, k.m, &sp, err);
        if (st != REMAT_OK) break;
        if (sp == 0) { /* Fall s, then (s+1, t), then B s */
            note(r, k.base + dt + ab + sg->fwd_overhead);
            st = emit(r, REMAT_OP_FALL, s, err);
            opt_task b = {TASK_B, k.s, k.s, 0, k.base};
            if (st == REMAT_OK) st = push_task(r, b, err);
            if (st == REMAT_OK && s < t) {
                opt_task ch = {TASK_SOLVE, k.s + 1, k.t, k.m - x->ab[s], k.base + ab};
                st = push_task(r, ch, err);
            }
            continue;
        }
        /* Fck s, Fn s+1..s'-1, then (s', t), then (s, s'-1) */
        note(r, k.base + dt + byte_a(c, s) + sg->fwd_overhead);
        st = emit(r, REMAT_OP_FCK, s, err);
        for (size_t j = s + 1; j < sp && st == REMAT_OK; j++) {
            note(r, k.base + dt + byte_a(c, j - 1) + byte_a(c, j) + c->stages[j - 1].fwd_overhead);
            st = emit(r, REMAT_OP_FN, j, err);
        }
        opt_task left = {TASK_SOLVE, k.s, (uint32_t)(sp - 1), k.m, k.base};
        opt_task right = {TASK_SOLVE, (uint32_t)sp, k.t, k.m - x->a[sp - 1],
                          k.base + byte_a(c, sp - 1)};
        if (st == REMAT_OK) st = push_task(r, left, err);
        if (st == REMAT_OK) st = push_task(r, right, err);
    }
    free(r->stack);
    r->stack = NULL;
    return st;
}

/* Time and exact peak of the schedule the table gives at budget b. */
remat_status remat__opt_follow(const opt_ctx *x, uint64_t b, double *time, uint64_t *peak,
                               remat_error *err) {
    opt_rebuild r = {x, NULL, 0, 0, NULL, 0, 0};
    REMAT__FORWARD(remat__opt_rebuild(&r, b, err));
    *time = r.time;
    *peak = r.peak;
    return REMAT_OK;
}
