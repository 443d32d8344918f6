/* optimal's Algorithm 2: the schedule from a filled table, with its time and
 * its exact peak in bytes. */
#include "optimal_internal.h"

static void note(opt_rebuild *r, uint64_t during) {
    if (during > r->peak) r->peak = during;
}

/* A task's save when the Fall s of the base case (s, s) stops. */
#define SAVE_STOPS 0x100u

/* Emits op k of stage i; a Fall makes save j, a B consumes save j
 * (SAVE_STOPS: a stopped Fall and the B after it, save 0). */
static remat_status emit(opt_rebuild *r, remat_op_kind k, size_t i, size_t j, remat_error *err) {
    const remat_stage *sg = &r->x->c->stages[i - 1];
    int stops = (j & SAVE_STOPS) != 0;
    j &= ~(size_t)SAVE_STOPS;
    r->time += k == REMAT_OP_B ? remat__stage_save(sg, (unsigned)j).bwd_time
               : stops         ? remat__stop_time(sg)
                               : sg->fwd_time;
    remat_op op = {(uint8_t)k, 0, (uint32_t)i, (uint8_t)(k == REMAT_OP_FALL ? j : 0)};
    return r->sch ? remat_schedule_push(r->sch, op, err) : REMAT_OK;
}

static remat_status push_task(opt_rebuild *r, opt_task t, remat_error *err) {
    REMAT__RETURN_IF(r->top >= r->cap, err, REMAT_E_INTERNAL, "optimal: rebuild stack overflow");
    r->stack[r->top++] = t;
    return REMAT_OK;
}

/* Finds which choice gave C(s, t, m): 0 for Fall s (with save *save), else
 * s'. */
static remat_status best_choice(const opt_ctx *x, size_t s, size_t t, uint64_t m, size_t *out,
                                size_t *save, remat_error *err) {
    float want = table_at(x, s, t, m), best = INFINITY;
    *out = 0;
    *save = s == t ? x->dpl[s] : x->pl[s];
    if (m >= x->g[IDX(x, s, t)]) return REMAT_OK; /* all Fall, plain saves: the tail value */
    /* The first choice whose value, computed as the fill did, is the table's
     * (the table holds the min, so it is the best). */
    *out = SIZE_MAX;
    opt_view A = s < t ? view_of(x, s + 1, t) : opt_zero;
    for (size_t j = 0; j < nsaves(x, s); j++) {
        uint64_t ab = x->sab[sv(x, s, j)];
        if (m < m_all_j(x, s, t, j) || (s < t && m < ab)) continue;
        float v = s < t ? (fall_cost(x, s, j) + view_at(&A, m - ab)) + 0.0f : diag_cost(x, s, j);
        if (v < best) {
            best = v;
            *out = 0;
            *save = j;
        }
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

/* Algorithm 2 with an explicit stack from (s0, t0); tracks time and the peak
 * in bytes. */
remat_status remat__opt_rebuild(opt_rebuild *r, size_t s0, size_t t0, uint64_t m,
                                remat_error *err) {
    const opt_ctx *x = r->x;
    const remat_chain *c = x->c;
    size_t n = x->n;
    r->cap = 2 * n + 2;
    r->stack = remat__calloc(r->cap, sizeof *r->stack);
    REMAT__RETURN_IF(!r->stack, err, REMAT_E_NOMEM, "optimal: out of memory");
    r->top = 0;
    r->time = 0;
    r->peak = byte_a(c, s0 - 1);
    opt_task root = {TASK_SOLVE, (uint32_t)s0, (uint32_t)t0, m, byte_a(c, s0 - 1), 0};
    remat_status st = push_task(r, root, err);
    while (st == REMAT_OK && r->top > 0) {
        opt_task k = r->stack[--r->top];
        size_t s = k.s, t = k.t;
        uint64_t ds = remat_chain_d_bytes(c, s);
        uint64_t dp = remat_chain_d_bytes(c, s - 1), dt = remat_chain_d_bytes(c, t);
        const remat_stage *sg = &c->stages[s - 1];
        if (k.kind == TASK_B) {
            remat__save v = remat__stage_save(sg, k.save & ~SAVE_STOPS);
            uint64_t ab = k.save & SAVE_STOPS ? remat__stop_saved(sg) : v.saved_bytes;
            note(r, k.base + ab + ds + dp + v.bwd_overhead);
            st = emit(r, REMAT_OP_B, s, k.save, err);
            continue;
        }
        size_t sp = 0, j = 0;
        st = best_choice(x, s, t, k.m, &sp, &j, err);
        if (st != REMAT_OK) break;
        if (sp == 0) { /* Fall s with save j, then (s+1, t), then B s */
            remat__save v = remat__stage_save(sg, (unsigned)j);
            int stops = s == t && j == 0 && x->dstop[s]; /* B s comes next */
            if (stops) {
                note(r, k.base + dt + remat__stop_saved(sg) + remat__stop_overhead(sg));
                j |= SAVE_STOPS;
            } else {
                note(r, k.base + dt + v.saved_bytes + v.fall_overhead);
            }
            st = emit(r, REMAT_OP_FALL, s, j, err);
            opt_task b = {TASK_B, k.s, k.s, 0, k.base, (uint32_t)j};
            if (st == REMAT_OK) st = push_task(r, b, err);
            if (st == REMAT_OK && s < t) {
                opt_task ch = {TASK_SOLVE, k.s + 1, k.t, k.m - x->sab[sv(x, s, j)],
                               k.base + v.saved_bytes, 0};
                st = push_task(r, ch, err);
            }
            continue;
        }
        /* Fck s, Fn s+1..s'-1, then (s', t), then (s, s'-1) */
        note(r, k.base + dt + byte_a(c, s) + sg->fwd_overhead);
        st = emit(r, REMAT_OP_FCK, s, 0, err);
        for (size_t i = s + 1; i < sp && st == REMAT_OK; i++) {
            note(r, k.base + dt + byte_a(c, i - 1) + byte_a(c, i) + c->stages[i - 1].fwd_overhead);
            st = emit(r, REMAT_OP_FN, i, 0, err);
        }
        opt_task left = {TASK_SOLVE, k.s, (uint32_t)(sp - 1), k.m, k.base, 0};
        opt_task right = {TASK_SOLVE, (uint32_t)sp, k.t, k.m - x->a[sp - 1],
                          k.base + byte_a(c, sp - 1), 0};
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
    REMAT__FORWARD(remat__opt_rebuild(&r, 1, x->n, b, err));
    *time = r.time;
    *peak = r.peak;
    return REMAT_OK;
}
