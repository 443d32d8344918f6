/* The two offloading heuristics of the pofo paper, section 5.1.
 *
 * opportunist keeps the link busy: a group starts with Fall g, offloading its
 * input and abar[g]; Fn follows until the copies would be over, then the next
 * group starts. Once the rest of the chain fits in memory it is solved by
 * rematerialization alone. Backward: each group is prefetched while the group
 * after it runs its backward, and rematerialized from abar[g].
 *
 * autocapper runs capper for 40 limits M' from M to the store-all peak:
 * capper takes rotor's optimal rematerialization schedule for M', finds its memory peak in
 * the timed simulation, and offloads the lowest-indexed value held there
 * (Off after its last use, Wait before the peak, Pre early enough before its
 * next use), until the peak fits in M. The fastest simulated result wins.
 *
 * Both validate their schedule with the timed simulator and report
 * REMAT_E_INFEASIBLE when it does not fit; their predicted time is the
 * simulated one. */
#include <math.h>
#include <string.h>

#include "../core/sim_core.h"
#include "pofo_internal.h"

#define CAPPER_LIMITS 40
#define REMAT_VALUES 50

static remat_status simulate_bw(const remat_chain *c, const remat_schedule *s, double bw,
                                remat_sim_result **r, remat_error *err) {
    remat_sim_options o;
    remat_sim_options_init(&o);
    o.bandwidth = bw;
    return remat_simulate(c, s, &o, r, err);
}

/* ---------------- opportunist ---------------- */

/* Stages first..last of c as a chain of their own, closed by a free loss
 * when `fake_loss` (d[last] is then produced by that loss). */
static remat_status sub_chain(const remat_chain *c, size_t first, size_t last, uint64_t in_bytes,
                              int fake_loss, remat_chain **out, remat_error *err) {
    size_t n = last - first + 1 + (fake_loss ? 1 : 0);
    remat_stage *st = remat__calloc(n, sizeof *st);
    REMAT__RETURN_IF(!st, err, REMAT_E_NOMEM, "opportunist: out of memory");
    for (size_t k = first; k <= last; k++) st[k - first] = c->stages[k - 1];
    if (fake_loss) {
        memset(&st[n - 1], 0, sizeof st[n - 1]);
        remat__strlcpy(st[n - 1].name, "end", sizeof st[n - 1].name);
    }
    remat_status s = remat_chain_create("part", in_bytes, remat_chain_d_bytes(c, first - 1), st, n,
                                        out, err);
    free(st);
    return s;
}

/* Appends the rematerialization schedule of stages first..last (input held,
 * d[last] held) within `budget` bytes, shifted to the real stage numbers. */
static remat_status remat_part(const remat_chain *c, size_t first, size_t last, uint64_t in_bytes,
                               int fake_loss, uint64_t budget, remat_schedule *out,
                               remat_error *err) {
    remat_chain *sub = NULL;
    REMAT__FORWARD(sub_chain(c, first, last, in_bytes, fake_loss, &sub, err));
    remat_schedule *p = NULL;
    remat_status st =
        remat__pofo_plan(sub, budget, REMAT_VALUES, 0, REMAT__POFO_REMAT_ONLY, 0, &p, err);
    size_t loss = sub->n;
    int last_plain = 0; /* the latest forward of `last` left a plain a[last] */
    for (size_t k = 0; st == REMAT_OK && k < p->n_ops; k++) {
        remat_op op = p->ops[k];
        if (fake_loss && op.index == loss) {
            if (op.kind == REMAT_OP_B && last_plain)
                st = remat__push_value(out, REMAT_OP_DEL, REMAT_VALUE_A, (uint32_t)last, err);
            continue;
        }
        if (op.index + 1 == loss && op.kind != REMAT_OP_B) last_plain = op.kind != REMAT_OP_FALL;
        op.index += (uint32_t)(first - 1);
        st = remat_schedule_push(out, op, err);
    }
    remat_schedule_free(p);
    remat_chain_free(sub);
    return st;
}

typedef struct group {
    size_t g, e; /* stages g..e: Fall g, Fn g+1..e; the input is a[g-1] */
} group;

static uint64_t in_size(const remat_chain *c, const group *gr) {
    return remat_chain_a_bytes(c, gr->g - 1);
}

static remat_status vpush(remat_schedule *s, remat_op_kind k, int abar, size_t i, remat_error *e) {
    return remat__push_value(s, k, abar ? REMAT_VALUE_ABAR : REMAT_VALUE_A, (uint32_t)i, e);
}

static remat_status prefetch_group(const group *gr, remat_schedule *s, remat_error *err) {
    REMAT__FORWARD(vpush(s, REMAT_OP_PRE, 0, gr->g - 1, err));
    return vpush(s, REMAT_OP_PRE, 1, gr->g, err);
}

/* Store-all peak of stages i..n entered with an input of `in` bytes. */
static uint64_t tail_peak(const remat_chain *c, size_t i, uint64_t in) {
    remat_chain *tail = NULL;
    uint64_t peak = UINT64_MAX;
    if (sub_chain(c, i, c->n, in, 0, &tail, NULL) == REMAT_OK &&
        remat_store_all_cost(tail, &peak, NULL, NULL) != REMAT_OK)
        peak = UINT64_MAX;
    remat_chain_free(tail);
    return peak;
}

static uint64_t group_bytes(const remat_chain *c, const group *gr) {
    return in_size(c, gr) + remat_chain_abar_bytes(c, gr->g);
}

static remat_status opportunist(const remat_chain *c, const remat_solve_options *o,
                                remat_schedule **out, remat_error *err) {
    size_t n = c->n;
    group *gs = remat__calloc(n, sizeof *gs);
    REMAT__RETURN_IF(!gs, err, REMAT_E_NOMEM, "opportunist: out of memory");
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create("opportunist", &s, err);
    size_t ng = 0, i = 1;
    double bw = o->bandwidth;
    /* Forward: groups (Fall g and at least one Fn) until the rest fits with
     * everything stored, the last group's prefetch reserved. */
    while (st == REMAT_OK && i + 1 < n) {
        uint64_t reserve = ng ? group_bytes(c, &gs[ng - 1]) : 0;
        uint64_t need = tail_peak(c, i, remat_chain_a_bytes(c, i - 1));
        if (need <= o->memory && reserve <= o->memory - need) break;
        group *gr = &gs[ng++];
        gr->g = i;
        double copy = (double)group_bytes(c, gr) / bw, t = c->stages[i - 1].fwd_time;
        st = vpush(s, REMAT_OP_OFF, 0, i - 1, err);
        if (st == REMAT_OK) st = remat__push(s, REMAT_OP_FALL, (uint32_t)i, err);
        if (st == REMAT_OK) st = vpush(s, REMAT_OP_OFF, 1, i, err);
        size_t e = i;
        while (st == REMAT_OK && (e == i || t < copy) && e + 1 < n) {
            e++;
            st = remat__push(s, REMAT_OP_FN, (uint32_t)e, err);
            t += c->stages[e - 1].fwd_time;
        }
        gr->e = e;
        if (st == REMAT_OK) st = vpush(s, REMAT_OP_WAIT, 1, i, err);
        i = e + 1;
    }
    /* The tail from stage i, everything stored; the last group's prefetch
     * starts right after the loss's B. */
    for (size_t k = i; k <= n && st == REMAT_OK; k++) st = remat__push(s, REMAT_OP_FALL, (uint32_t)k, err);
    if (st == REMAT_OK) st = remat__push(s, REMAT_OP_B, (uint32_t)n, err);
    if (st == REMAT_OK && ng) st = prefetch_group(&gs[ng - 1], s, err);
    for (size_t k = n - 1; k >= i && st == REMAT_OK; k--) st = remat__push(s, REMAT_OP_B, (uint32_t)k, err);
    /* Backward of the groups, last first; the group before is prefetched
     * meanwhile. */
    for (size_t k = ng; st == REMAT_OK && k-- > 0;) {
        group *gr = &gs[k];
        st = vpush(s, REMAT_OP_WAIT, 0, gr->g - 1, err);
        if (st == REMAT_OK) st = vpush(s, REMAT_OP_WAIT, 1, gr->g, err);
        uint64_t next = k > 0 ? group_bytes(c, &gs[k - 1]) : 0;
        if (st == REMAT_OK && k > 0) st = prefetch_group(&gs[k - 1], s, err);
        uint64_t need = in_size(c, gr) + next + remat_chain_d_bytes(c, gr->e);
        if (st == REMAT_OK && need >= o->memory)
            st = remat__fail(err, REMAT_E_INFEASIBLE, "opportunist: a group does not fit");
        if (st == REMAT_OK)
            st = remat_part(c, gr->g + 1, gr->e, remat_chain_abar_bytes(c, gr->g), 1,
                            o->memory - need, s, err);
        if (st == REMAT_OK) st = remat__push(s, REMAT_OP_B, (uint32_t)gr->g, err);
    }
    free(gs);
    if (st == REMAT_OK) {
        *out = s;
        return REMAT_OK;
    }
    remat_schedule_free(s);
    if (st == REMAT_E_INFEASIBLE || st == REMAT_E_TOO_LARGE)
        return remat__fail(err, REMAT_E_INFEASIBLE, "opportunist: no schedule within %llu bytes",
                           (unsigned long long)o->memory);
    return st;
}

/* ---------------- autocapper ---------------- */

typedef struct decision {
    uint8_t abar;
    uint32_t index;
    size_t off_after;  /* base op index after which Off goes */
    size_t wait_before;
    size_t pre_before; /* SIZE_MAX: no Pre (the value is recomputed or deleted) */
    size_t drop;       /* base op to drop (a Del of the value), SIZE_MAX none */
} decision;

static int touches(remat_op op, size_t i) {
    if (op.kind <= REMAT_OP_B) return op.index == i || op.index == i + 1;
    return op.index == i;
}

/* Builds base + decisions into *out, with map[k] = base op of out op k. */
static remat_status build(const remat_schedule *base, const decision *d, size_t nd,
                          remat_schedule **out, size_t *map, remat_error *err) {
    remat_schedule *s = NULL;
    REMAT__FORWARD(remat_schedule_create("autocapper", &s, err));
    remat_status st = REMAT_OK;
    for (size_t k = 0; k <= base->n_ops && st == REMAT_OK; k++) {
        /* before op k: Offs (after op k-1), Waits, then Pres */
        for (size_t h = 0; h < nd && st == REMAT_OK; h++)
            if (k > 0 && d[h].off_after == k - 1) {
                map[s->n_ops] = k;
                st = vpush(s, REMAT_OP_OFF, d[h].abar, d[h].index, err);
            }
        for (size_t h = 0; h < nd && st == REMAT_OK; h++)
            if (d[h].wait_before == k) {
                map[s->n_ops] = k;
                st = vpush(s, REMAT_OP_WAIT, d[h].abar, d[h].index, err);
            }
        for (size_t h = 0; h < nd && st == REMAT_OK; h++)
            if (d[h].pre_before == k) {
                map[s->n_ops] = k;
                st = vpush(s, REMAT_OP_PRE, d[h].abar, d[h].index, err);
            }
        if (k == base->n_ops) break;
        int dropped = 0;
        for (size_t h = 0; h < nd; h++) dropped |= d[h].drop == k;
        if (dropped || st != REMAT_OK) continue;
        map[s->n_ops] = k;
        st = remat_schedule_push(s, base->ops[k], err);
    }
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

/* Picks the value to offload for a peak at base op `peak`; 0 when none. */
static int choose(const remat_chain *c, const remat_schedule *base, size_t peak, const decision *d,
                  size_t nd, double bw, decision *pick) {
    remat__sim_state st;
    if (remat__sim_state_init(c, &st, NULL) != REMAT_OK) return 0;
    char why[8];
    for (size_t k = 0; k < peak; k++) {
        uint64_t during;
        double t;
        if (base->ops[k].kind <= REMAT_OP_DEL)
            remat__sim_apply(c, &st, base->ops[k], remat__next_op(base, k), &during, &t, why,
                             sizeof why);
    }
    int found = 0;
    for (size_t i = 0; i <= c->n && !found; i++) {
        if (st.val[i] == REMAT__HELD_NONE || touches(base->ops[peak], i)) continue;
        int covered = 0;
        for (size_t h = 0; h < nd; h++)
            if (d[h].index == i && d[h].off_after < peak &&
                (d[h].pre_before == SIZE_MAX || d[h].pre_before > peak))
                covered = 1;
        if (covered) continue;
        size_t last = SIZE_MAX, next = SIZE_MAX;
        for (size_t k = peak; k-- > 0;)
            if (touches(base->ops[k], i)) {
                last = k;
                break;
            }
        if (last == SIZE_MAX) {
            if (i != 0) continue;
            continue; /* a[0] before any op: no place for an Off after a use */
        }
        for (size_t k = peak + 1; k < base->n_ops; k++)
            if (touches(base->ops[k], i)) {
                next = k;
                break;
            }
        pick->abar = st.val[i] == REMAT__HELD_ABAR;
        pick->index = (uint32_t)i;
        pick->off_after = last;
        pick->wait_before = peak;
        pick->drop = SIZE_MAX;
        pick->pre_before = SIZE_MAX;
        if (next != SIZE_MAX) {
            remat_op op = base->ops[next];
            int writes = op.kind <= REMAT_OP_FALL && op.index == i;
            if (op.kind == REMAT_OP_DEL)
                pick->drop = next;
            else if (!writes) {
                /* start the copy early enough to hide it, but after the peak */
                uint64_t bytes = remat__value_bytes(c, i, st.val[i], st.opt[i]);
                double need = (double)bytes / bw, acc = 0;
                size_t k = next;
                while (k > peak + 1 && acc < need) {
                    k--;
                    remat_op b = base->ops[k];
                    if (b.kind <= REMAT_OP_B) acc += b.kind == REMAT_OP_B
                                                         ? c->stages[b.index - 1].bwd_time
                                                         : c->stages[b.index - 1].fwd_time;
                }
                pick->pre_before = k;
            }
        }
        found = 1;
    }
    remat__sim_state_free(&st);
    return found;
}

/* capper: offloads until the peak fits; returns REMAT_OK with *out or
 * REMAT_E_INFEASIBLE. */
static remat_status capper(const remat_chain *c, const remat_schedule *base, uint64_t limit,
                           double bw, remat_schedule **out, remat_error *err) {
    size_t max_d = 2 * (c->n + 1), nd = 0;
    decision *d = remat__calloc(max_d, sizeof *d);
    size_t *map = NULL;
    remat_status st = REMAT_OK;
    if (d) map = remat__calloc(base->n_ops + 3 * max_d + 1, sizeof *map);
    if (!d || !map) st = remat__fail(err, REMAT_E_NOMEM, "autocapper: out of memory");
    while (st == REMAT_OK) {
        remat_schedule *s = NULL;
        remat_sim_result *r = NULL;
        st = build(base, d, nd, &s, map, err);
        if (st == REMAT_OK) st = simulate_bw(c, s, bw, &r, err);
        if (st != REMAT_OK) {
            remat_schedule_free(s);
            break;
        }
        if (!r->valid) {
            st = remat__fail(err, REMAT_E_INFEASIBLE, "autocapper: %s at op %zu", r->reason,
                             r->failed_op);
        } else if (r->peak_bytes <= limit) {
            s->time = r->time;
            s->peak_bytes = r->peak_bytes;
            *out = s;
            s = NULL;
            remat_sim_result_free(r);
            break;
        } else {
            size_t worst = 0;
            for (size_t k = 0; k < r->n_ops; k++)
                if (r->mem_during[k] > r->mem_during[worst]) worst = k;
            size_t peak = map[worst];
            while (peak < base->n_ops && base->ops[peak].kind > REMAT_OP_B) peak++;
            if (peak >= base->n_ops || nd == max_d ||
                !choose(c, base, peak, d, nd, bw, &d[nd]))
                st = remat__fail(err, REMAT_E_INFEASIBLE, "autocapper: cannot lower the peak");
            else
                nd++;
        }
        remat_sim_result_free(r);
        remat_schedule_free(s);
    }
    free(d);
    free(map);
    return st;
}

static remat_status autocapper(const remat_chain *c, const remat_solve_options *o,
                               remat_schedule **out, remat_error *err) {
    uint64_t high;
    REMAT__FORWARD(remat_store_all_cost(c, &high, NULL, err));
    if (high < o->memory) high = o->memory;
    remat_schedule *best = NULL;
    for (int k = 0; k < CAPPER_LIMITS; k++) {
        uint64_t mp = o->memory + (uint64_t)((double)(high - o->memory) * k / (CAPPER_LIMITS - 1));
        remat_schedule *base = NULL, *s = NULL;
        remat_error e;
        remat_solve_options oo = *o;
        oo.algorithm = REMAT_ALG_OPTIMAL;
        oo.memory = mp;
        remat_status st = remat__solve_optimal(c, &oo, &base, &e);
        if (st == REMAT_OK) st = capper(c, base, o->memory, o->bandwidth, &s, &e);
        remat_schedule_free(base);
        if (st == REMAT_E_NOMEM || st == REMAT_E_INTERNAL) {
            remat_schedule_free(best);
            return remat__fail(err, st, "%s", e.message);
        }
        if (st != REMAT_OK) continue;
        if (!best || s->time < best->time) {
            remat_schedule_free(best);
            best = s;
        } else {
            remat_schedule_free(s);
        }
    }
    REMAT__RETURN_IF(!best, err, REMAT_E_INFEASIBLE,
                     "autocapper: no schedule within %llu bytes", (unsigned long long)o->memory);
    *out = best;
    return REMAT_OK;
}

remat_status remat__solve_offload_heuristic(const remat_chain *c, const remat_solve_options *o,
                                            remat_schedule **out, remat_error *err) {
    *out = NULL;
    remat_schedule *s = NULL;
    if (o->algorithm == REMAT_ALG_AUTOCAPPER) return autocapper(c, o, out, err);
    REMAT__FORWARD(opportunist(c, o, &s, err));
    remat_sim_result *r = NULL;
    remat_status st = simulate_bw(c, s, o->bandwidth, &r, err);
    if (st == REMAT_OK && !r->valid)
        st = remat__fail(err, REMAT_E_INTERNAL, "opportunist built an invalid schedule: op %zu (%s): %s",
                         r->failed_op, r->failed_op_text, r->reason);
    else if (st == REMAT_OK && r->peak_bytes > o->memory)
        st = remat__fail(err, REMAT_E_INFEASIBLE, "opportunist: peak %llu above the limit %llu",
                         (unsigned long long)r->peak_bytes, (unsigned long long)o->memory);
    if (st == REMAT_OK) {
        s->time = r->time;
        s->peak_bytes = r->peak_bytes;
        *out = s;
    } else {
        remat_schedule_free(s);
    }
    remat_sim_result_free(r);
    return st;
}
