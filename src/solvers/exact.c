/* exact: the true optimum over every SPEC section 2 schedule of a small chain.
 *
 * A schedule is a path in a graph whose nodes are memory states. Between ops
 * the state is fully described by
 *   - next_b = b, the B expected next (n..0), and
 *   - for each index j in 0..b, whether a[j], abar[j] made with option k
 *     (0..n_options of stage j, SPEC section 2) or neither is held.
 * Nothing with index > b is ever held: B j frees abar[j] and no forward of
 * stage j may run after B j. The only gradient held is d[b] (B i frees d[i] and
 * adds d[i-1]; nothing else touches gradients). So memory, validity and the
 * future of a schedule depend on the state alone, and a shortest path from the
 * start (b = n, a[0] held) to b = 0, using only ops whose in-use memory is
 * <= M, is an optimal schedule. Edges are applied with remat__sim_apply(), the
 * simulator's own rules, so the search cannot drift from SPEC.
 *
 * The search is A* keyed by (time + heuristic, peak); the heuristic is
 *   h = sum_{i<=b, abar[i] held with option k} bwd_time_k[i]
 *     + sum_{i<=b, abar[i] not held} (fwd_time[i] + min_k bwd_time_k[i]):
 * every remaining B must run, and B i needs abar[i], which only Fall i creates.
 * h is consistent (Fall i/k lowers h by at most its cost, B b by exactly its
 * cost, Del only raises h, Fn/Fck never drop an abar), so each state is
 * settled once. Ties on time go to the lower peak; (sum, max) pairs compare
 * monotonically along paths, so this stays exact.
 *
 * Pruning, each sound (it never removes the only optimal schedule):
 *  P1 (Del allowed) no forward recomputes a value already held at the level it
 *     produces: such an op leaves the state unchanged or only frees plain
 *     a[i-1] (Fn); Del a[i-1] reaches the same state in time 0 with in-use
 *     memory = memory held, which is <= the forward's. (A Fall over a held
 *     abar keeps that abar's option, so this holds for every option.)
 *  P2 (Del allowed) no Fn/Fck of stage b: plain a[b] is useless (B b needs
 *     abar[b], forward b+1 may not run before B b+1, which already ran), so
 *     the op only costs time and memory; its side effect (freeing plain
 *     a[b-1]) is Del a[b-1], again free.
 *  P3 never free a[0] (Del a[0], Fn 1): B 1 needs it and nothing recomputes it.
 *  P4 Fn i with a[i-1] not plain is Fck i (same state, same cost): skipped.
 *  P5 (no Del) self-loops are skipped; a path never gains from one.
 * With o->exact_no_del, P1 and P2 do not apply: Fn is then the only way to
 * drop a value early, so the search keeps every op SPEC allows except Del.
 *
 * The stopped Fall (docs/formats.md): a full-save Fall b (b = next_b < n,
 * abar[b] not held) followed at once by B b takes the stage's stop figures,
 * so the op before B b matters. For a stage whose stop figures differ from
 * the plain ones, the search has two edges for that Fall: "Fall b; B b" as
 * one edge, with the stopped figures, and a plain Fall b leading to a
 * "fresh" copy of the state, from which B b may not run next (the schedule
 * would read as the stopped pair); any other op leaves the fresh copy. So
 * every schedule is a path with the simulator's costs and vice versa. P1
 * and P2 do not apply in a fresh copy: an op there that changes nothing else
 * (a forward of a value held) still keeps the Fall from stopping. The
 * fresh copies of next_b = b are prod_{j<b} r_j more states; a chain
 * without differing stop figures uses none of this and searches as before.
 * h stays consistent with fwd[i] = stop_time[i] + min_k bwd_time_k[i]
 * (stop_time <= fwd_time).
 *
 * When nothing fits, the same graph is searched for the smallest peak instead
 * (a bottleneck path, keyed by (peak, time)), which is the exact min memory.
 * Index j has r_j = 3 + n_options(j) states (none, a, abar with each option;
 * r_0 = 3 too), and the state count is sum_b prod_{j<=b} r_j: (3^(n+2) - 3) / 2
 * without options (about 2.4 million for n = 12). The search refuses
 * n > EXACT_MAX_STAGES, more than EXACT_MAX_STATES states and tables above
 * max_work_bytes. */
#include <math.h>
#include <string.h>

#include "../core/sim_core.h"
#include "solvers_internal.h"

#define EXACT_MAX_STAGES 12
#define EXACT_MAX_STATES ((uint64_t)1 << 31)
#define POS_NONE UINT32_MAX
#define POS_DONE (UINT32_MAX - 1)

typedef struct exact_node {
    double g;        /* time of the best path found */
    double f;        /* g + heuristic */
    uint64_t peak;   /* largest in-use memory on that path */
    uint32_t parent; /* previous state on that path */
    uint32_t pos;    /* heap position, POS_NONE (never seen) or POS_DONE (settled) */
    uint16_t op;     /* packed op leading here (pack_op; PACK_THEN_B: "op; B i") */
} exact_node;

typedef struct exact_search {
    const remat_chain *c;
    uint32_t n;
    int no_del;
    int by_peak;    /* 1: minimise the peak (min memory); 0: the time within limit */
    uint64_t limit; /* in-use memory bound per op (time mode) */
    uint32_t off[EXACT_MAX_STAGES + 2];  /* first id of the states with next_b = b */
    uint32_t fresh[EXACT_MAX_STAGES + 2]; /* first id of the fresh states with next_b = b */
    uint8_t stops[EXACT_MAX_STAGES + 1];  /* stage i's stopped Fall differs from its Fall */
    uint32_t weight[EXACT_MAX_STAGES + 2]; /* weight[j] = prod_{i<j} radix[i] */
    uint8_t radix[EXACT_MAX_STAGES + 1];   /* r_j: states of index j */
    double fwd[EXACT_MAX_STAGES + 1];      /* fwd_time[i] + the least bwd_time of its options */
    exact_node *nodes;
    uint32_t *heap;
    size_t heap_len;
    uint8_t base[EXACT_MAX_STAGES + 1]; /* the state being expanded, as codes (code_of) */
    uint32_t base_b;
    int base_fresh; /* the state being expanded is a fresh copy: no B base_b next */
    remat__sim_state sim;
} exact_search;

/* kind: 3 bits, value: 1, index: 4 (<= 12), option: 4 (<= 8); then one bit
 * for the stopped pair "Fall i; B i". */
#define PACK_THEN_B ((uint16_t)1 << 12)
static uint16_t pack_op(remat_op op) {
    return (uint16_t)(op.kind | (op.value << 3) | (op.index << 4) | (op.option << 8));
}

static remat_op unpack_op(uint16_t p) {
    remat_op op = {(uint8_t)(p & 7u), (uint8_t)((p >> 3) & 1u), (uint32_t)((p >> 4) & 15u),
                   (uint8_t)((p >> 8) & 15u)};
    return op;
}

/* The code of what index j holds: REMAT__HELD_NONE, _A, or _ABAR + option. */
static uint8_t code_of(const remat__sim_state *s, uint32_t j) {
    return s->val[j] == REMAT__HELD_ABAR ? (uint8_t)(REMAT__HELD_ABAR + s->opt[j]) : s->val[j];
}

/* A fresh copy (code[b] is then the full save's abar) leaves code[b] out. */
static uint32_t encode(const exact_search *x, const uint8_t *code, uint32_t b, int fresh) {
    uint32_t id = fresh ? x->fresh[b] : x->off[b];
    for (uint32_t j = 0; j < b + !fresh; j++) id += code[j] * x->weight[j];
    return id;
}

static void decode(const exact_search *x, uint32_t id, uint8_t *code, uint32_t *b, int *fresh) {
    uint32_t bb = 0;
    *fresh = id >= x->off[x->n + 1];
    const uint32_t *start = *fresh ? x->fresh : x->off;
    while (id >= start[bb + 1]) bb++;
    id -= start[bb];
    for (uint32_t j = 0; j <= x->n; j++) {
        code[j] = j <= bb ? (uint8_t)(id % x->radix[j]) : REMAT__HELD_NONE;
        if (j <= bb) id /= x->radix[j];
    }
    if (*fresh) code[bb] = REMAT__HELD_ABAR; /* option 0 */
    *b = bb;
}

static double heuristic(const exact_search *x, const remat__sim_state *s, uint32_t b) {
    if (x->by_peak) return 0;
    double h = 0;
    for (uint32_t i = 1; i <= b; i++)
        h += s->val[i] == REMAT__HELD_ABAR
                 ? remat__stage_save(&x->c->stages[i - 1], s->opt[i]).bwd_time
                 : x->fwd[i];
    return h;
}

/* Strict order of the heap. */
static int before(const exact_search *x, uint32_t u, uint32_t v) {
    const exact_node *a = &x->nodes[u], *b = &x->nodes[v];
    if (x->by_peak) {
        if (a->peak != b->peak) return a->peak < b->peak;
        return a->g < b->g;
    }
    if (a->f != b->f) return a->f < b->f;
    return a->peak < b->peak;
}

static void heap_set(exact_search *x, size_t k, uint32_t id) {
    x->heap[k] = id;
    x->nodes[id].pos = (uint32_t)k;
}

static void sift_up(exact_search *x, size_t k) {
    uint32_t id = x->heap[k];
    while (k > 0 && before(x, id, x->heap[(k - 1) / 2])) {
        heap_set(x, k, x->heap[(k - 1) / 2]);
        k = (k - 1) / 2;
    }
    heap_set(x, k, id);
}

static void sift_down(exact_search *x, size_t k) {
    uint32_t id = x->heap[k];
    for (;;) {
        size_t l = 2 * k + 1, best = k;
        uint32_t best_id = id;
        if (l < x->heap_len && before(x, x->heap[l], best_id)) best = l, best_id = x->heap[l];
        if (l + 1 < x->heap_len && before(x, x->heap[l + 1], best_id)) best = l + 1, best_id = x->heap[l + 1];
        if (best == k) break;
        heap_set(x, k, best_id);
        k = best;
    }
    heap_set(x, k, id);
}

static uint32_t heap_pop(exact_search *x) {
    uint32_t top = x->heap[0];
    x->heap_len--;
    if (x->heap_len > 0) {
        x->heap[0] = x->heap[x->heap_len];
        sift_down(x, 0);
    }
    x->nodes[top].pos = POS_DONE;
    return top;
}

/* Offers the path (g, peak) through `from` by `op` to state `to`. */
static void relax(exact_search *x, uint32_t from, uint32_t to, uint16_t op, double g,
                  uint64_t peak) {
    exact_node *v = &x->nodes[to];
    if (v->pos == POS_DONE) return;
    if (v->pos != POS_NONE) {
        int better = x->by_peak ? (peak < v->peak || (peak == v->peak && g < v->g))
                                : (g < v->g || (g == v->g && peak < v->peak));
        if (!better) return;
    }
    v->f = g + heuristic(x, &x->sim, x->sim.next_b);
    v->g = g;
    v->peak = peak;
    v->parent = from;
    v->op = op;
    if (v->pos == POS_NONE) {
        x->heap_len++;
        heap_set(x, x->heap_len - 1, to);
    }
    sift_up(x, v->pos);
}

/* Applies op to the state being expanded and relaxes the result; then_b: the
 * stopped pair "op; B i" (op is Fall i, i = next_b). Returns 0 on an internal
 * inconsistency (a value held above next_b). */
static int try_op(exact_search *x, uint32_t from, remat_op op, int then_b) {
    remat__sim_state *s = &x->sim;
    uint32_t b = x->base_b;
    memset(s->dheld, 0, x->n + 1u);
    s->dheld[b] = 1;
    s->next_b = b;
    s->mem = remat_chain_d_bytes(x->c, b);
    for (uint32_t j = 0; j <= x->n; j++) {
        uint8_t v = x->base[j];
        s->val[j] = v >= REMAT__HELD_ABAR ? REMAT__HELD_ABAR : v;
        s->opt[j] = v >= REMAT__HELD_ABAR ? (uint8_t)(v - REMAT__HELD_ABAR) : 0;
        s->mem += remat__value_bytes(x->c, j, s->val[j], s->opt[j]);
    }
    uint64_t during, during_b = 0;
    double t, t_b = 0;
    char why[128];
    remat_op bop = {REMAT_OP_B, 0, b, 0};
    /* a plain Fall b of a stage whose stop differs leads to the fresh copy */
    int fresh = !then_b && op.kind == REMAT_OP_FALL && op.option == 0 && op.index == b &&
                x->stops[b] && s->val[b] != REMAT__HELD_ABAR;
    if (!remat__sim_apply(x->c, s, op, then_b ? &bop : NULL, &during, &t, why, sizeof why))
        return 1;
    if (then_b && !remat__sim_apply(x->c, s, bop, NULL, &during_b, &t_b, why, sizeof why))
        return 1;
    if (during_b > during) during = during_b;
    if (!x->by_peak && during > x->limit) return 1;
    for (uint32_t j = s->next_b + 1; j <= x->n; j++)
        if (s->val[j] != REMAT__HELD_NONE) return 0;
    uint8_t code[EXACT_MAX_STAGES + 1];
    for (uint32_t j = 0; j <= s->next_b; j++) code[j] = code_of(s, j);
    uint32_t to = encode(x, code, s->next_b, fresh);
    if (to == from) return 1; /* P5 */
    const exact_node *u = &x->nodes[from];
    relax(x, from, to, (uint16_t)(pack_op(op) | (then_b ? PACK_THEN_B : 0)), u->g + t + t_b,
          during > u->peak ? during : u->peak);
    return 1;
}

static int expand(exact_search *x, uint32_t id) {
    decode(x, id, x->base, &x->base_b, &x->base_fresh);
    uint32_t b = x->base_b;
    int ok = 1;
    for (uint32_t i = 1; i <= b && ok; i++) {
        uint8_t have = x->base[i], in = x->base[i - 1];
        if (in == REMAT__HELD_NONE) continue;
        remat_op op = {REMAT_OP_FALL, 0, i, 0};
        /* from a fresh copy, an op that changes nothing still parts Fall b from B b */
        int spacer = x->base_fresh;
        size_t options =
            have >= REMAT__HELD_ABAR && !spacer ? 0 : x->c->stages[i - 1].n_options + 1;
        for (size_t k = 0; k < options && ok; k++) {
            op.option = (uint8_t)k;
            ok &= try_op(x, id, op, 0);
        }
        op.option = 0;
        if (have < REMAT__HELD_ABAR && i == b && x->stops[b] && ok)
            ok &= try_op(x, id, op, 1); /* Fall b; B b */
        int plain_useful = x->no_del || spacer || (have == REMAT__HELD_NONE && i < b); /* P1, P2 */
        if (!plain_useful) continue;
        op.kind = REMAT_OP_FCK;
        ok &= try_op(x, id, op, 0);
        op.kind = REMAT_OP_FN;
        if (in == REMAT__HELD_A && i > 1) ok &= try_op(x, id, op, 0); /* P3, P4 */
    }
    remat_op bop = {REMAT_OP_B, 0, b, 0};
    if (b >= 1 && ok && !x->base_fresh) ok &= try_op(x, id, bop, 0);
    for (uint32_t j = 1; j <= b && ok && !x->no_del; j++) { /* P3: never j = 0 */
        if (x->base[j] == REMAT__HELD_NONE) continue;
        remat_op del = {REMAT_OP_DEL,
                        x->base[j] >= REMAT__HELD_ABAR ? REMAT_VALUE_ABAR : REMAT_VALUE_A, j, 0};
        ok &= try_op(x, id, del, 0);
    }
    return ok;
}

/* Runs the search; *found is 1 when the goal (every B done) was reached. */
static remat_status search(exact_search *x, int *found, remat_error *err) {
    size_t states = x->fresh[x->n + 1];
    for (size_t k = 0; k < states; k++) x->nodes[k].pos = POS_NONE;
    x->heap_len = 0;
    uint8_t start[EXACT_MAX_STAGES + 1] = {0};
    start[0] = REMAT__HELD_A;
    uint32_t sid = encode(x, start, x->n, 0);
    exact_node *s = &x->nodes[sid];
    s->g = 0;
    memset(x->sim.val, 0, x->n + 1u); /* the start holds no abar */
    s->f = heuristic(x, &x->sim, x->n);
    s->peak = x->c->input_bytes;
    s->parent = sid;
    x->heap_len = 1;
    heap_set(x, 0, sid);
    *found = 0;
    while (x->heap_len > 0) {
        uint32_t id = heap_pop(x);
        if (id == 0) { /* next_b = 0 with nothing held: the only goal state */
            *found = 1;
            return REMAT_OK;
        }
        REMAT__RETURN_IF(!expand(x, id), err, REMAT_E_INTERNAL,
                         "exact: a state holds a value above next_b");
    }
    return REMAT_OK;
}

static remat_status build_schedule(exact_search *x, remat_schedule **out, remat_error *err) {
    size_t len = 0;
    for (uint32_t id = 0; x->nodes[id].parent != id; id = x->nodes[id].parent)
        len += x->nodes[id].op & PACK_THEN_B ? 2 : 1;
    remat_op *ops = NULL;
    REMAT__FORWARD(remat__alloc_table((void **)&ops, len, sizeof *ops, 0, "exact: schedule", err));
    size_t k = len;
    for (uint32_t id = 0; x->nodes[id].parent != id; id = x->nodes[id].parent) {
        remat_op op = unpack_op((uint16_t)(x->nodes[id].op & ~PACK_THEN_B));
        if (x->nodes[id].op & PACK_THEN_B) {
            remat_op bop = {REMAT_OP_B, 0, op.index, 0};
            ops[--k] = bop;
        }
        ops[--k] = op;
    }
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create("exact", &s, err);
    for (k = 0; k < len && st == REMAT_OK; k++) st = remat_schedule_push(s, ops[k], err);
    free(ops);
    if (st == REMAT_OK) st = remat__schedule_measure(x->c, s, 0, err);
    double g = x->nodes[0].g;
    if (st == REMAT_OK && (s->peak_bytes != x->nodes[0].peak ||
                           fabs(s->time - g) > 1e-9 * (1 + fabs(g))))
        st = remat__fail(err, REMAT_E_INTERNAL,
                         "exact: search predicted time %.17g peak %llu, simulator says %.17g %llu",
                         g, (unsigned long long)x->nodes[0].peak, s->time,
                         (unsigned long long)s->peak_bytes);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

static remat_status setup(exact_search *x, const remat_chain *c, const remat_solve_options *o,
                          remat_error *err) {
    memset(x, 0, sizeof *x);
    REMAT__RETURN_IF(c->n > EXACT_MAX_STAGES, err, REMAT_E_TOO_LARGE,
                     "exact: the chain has %zu stages; the exact search handles at most %d "
                     "(its state space grows as 3^n): use optimal",
                     c->n, EXACT_MAX_STAGES);
    x->c = c;
    x->n = (uint32_t)c->n;
    x->no_del = o->exact_no_del != 0;
    x->limit = o->memory;
    uint64_t weight = 1, total = 0;
    for (uint32_t j = 0; j <= x->n && total <= EXACT_MAX_STATES; j++) {
        x->radix[j] = (uint8_t)(3 + (j ? c->stages[j - 1].n_options : 0));
        x->weight[j] = (uint32_t)weight;
        weight *= x->radix[j]; /* below 11 * 2^31 */
        x->off[j] = (uint32_t)total;
        total += weight;
    }
    REMAT__RETURN_IF(total > EXACT_MAX_STATES, err, REMAT_E_TOO_LARGE,
                     "exact: the chain's options make more than %llu search states (each stage "
                     "multiplies them by 3 + its options): use optimal",
                     (unsigned long long)EXACT_MAX_STATES);
    x->off[x->n + 1] = (uint32_t)total;
    /* fresh copies of next_b = b (1 <= b < n) for the stages whose stop differs */
    for (uint32_t b = 0; b <= x->n; b++) {
        const remat_stage *sg = &c->stages[b ? b - 1 : 0];
        x->stops[b] = b >= 1 && b < x->n &&
                      (remat__stop_time(sg) != sg->fwd_time ||
                       remat__stop_saved(sg) != sg->saved_bytes ||
                       remat__stop_overhead(sg) != remat__fall_overhead(sg));
        x->fresh[b] = (uint32_t)total;
        if (x->stops[b]) total += x->weight[b];
    }
    REMAT__RETURN_IF(total > EXACT_MAX_STATES, err, REMAT_E_TOO_LARGE,
                     "exact: the chain's options and stopped Falls make more than %llu search "
                     "states: use optimal",
                     (unsigned long long)EXACT_MAX_STATES);
    x->fresh[x->n + 1] = (uint32_t)total;
    for (uint32_t i = 1; i <= x->n; i++) {
        const remat_stage *sg = &c->stages[i - 1];
        double least = sg->bwd_time;
        for (size_t k = 0; k < sg->n_options; k++)
            if (sg->options[k].bwd_time < least) least = sg->options[k].bwd_time;
        x->fwd[i] = (i < x->n ? remat__stop_time(sg) : sg->fwd_time) + least;
    }
    size_t states = x->fresh[x->n + 1];
    uint64_t cap = o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    uint64_t node_bytes = (uint64_t)states * sizeof(exact_node);
    REMAT__FORWARD(remat__alloc_table((void **)&x->nodes, states, sizeof(exact_node), cap,
                                      "exact: state table", err));
    remat_status st = remat__alloc_table((void **)&x->heap, states, sizeof(uint32_t),
                                         cap > node_bytes ? cap - node_bytes : 1,
                                         "exact: search queue", err);
    if (st == REMAT_OK) st = remat__sim_state_init(c, &x->sim, err);
    return st;
}

static void teardown(exact_search *x) {
    free(x->nodes);
    free(x->heap);
    remat__sim_state_free(&x->sim);
}

remat_status remat__solve_exact(const remat_chain *c, const remat_solve_options *o,
                                remat_schedule **out, remat_error *err) {
    exact_search x;
    remat_status st = setup(&x, c, o, err);
    int found = 0;
    if (st == REMAT_OK) st = search(&x, &found, err);
    if (st == REMAT_OK && found) st = build_schedule(&x, out, err);
    if (st == REMAT_OK && !found) {
        x.by_peak = 1;
        st = search(&x, &found, err);
        if (st == REMAT_OK && !found)
            st = remat__fail(err, REMAT_E_INTERNAL, "exact: no schedule at any memory");
        if (st == REMAT_OK) {
            uint64_t need = x.nodes[0].peak;
            if (err) err->min_memory = need;
            st = remat__fail(err, REMAT_E_INFEASIBLE,
                             "exact: no schedule%s fits in %llu bytes; the smallest limit that "
                             "fits is %llu bytes",
                             x.no_del ? " without Del" : "", (unsigned long long)o->memory,
                             (unsigned long long)need);
        }
    }
    teardown(&x);
    return st;
}
