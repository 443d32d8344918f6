/* sequential: periodic segments, like torch.utils.checkpoint.checkpoint_sequential.
 *
 * K segments split the n stages the way torch does: every segment but the last
 * has m = n / K stages, the last takes the remainder, so segment k (0-based,
 * k < K-1) is stages k*m+1 .. (k+1)*m and the last is (K-1)*m+1 .. n.
 * Schedule: segments 0..K-2 run "Fck s, Fn s+1 .. Fn e" (only the segment's
 * input a[s-1] stays); the last runs Fall s..n, then B n..s; each earlier
 * segment, right to left, is recomputed with Fall s..e and then B e..s.
 *
 * With o->segments = 0 every K in 1..n is tried and the fastest that fits wins
 * (ties go to fewer segments). The peak of each K comes from closed forms
 * (below) instead of building n schedules; the chosen schedule is replayed by
 * the simulator and must agree with the closed form. Segments sharing the same
 * m share their first K-1 blocks, so all K cost O(n sqrt n) in total. */
#include <string.h>

#include "solvers_internal.h"

typedef struct seq_tables {
    size_t n;
    uint64_t *pa;  /* [n+1] pa[i] = sum of abar[1..i] */
    uint64_t *sx;  /* [n+2] sx[s] = max_{i>=s} pa[i] + fall_overhead[i] */
    uint64_t *sy;  /* [n+2] sy[s] = max_{i>=s} pa[i] + d[i] + d[i-1] + bwd_overhead[i] */
    double *pf;    /* [n+1] pf[i] = sum of fwd_time[1..i] */
    double total;  /* time of store-all: every forward and backward once */
} seq_tables;

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* In-use memory while Fall i runs inside a segment starting at s, with
 * `base` bytes held besides the segment's own abar values. */
static uint64_t fall_mem(const remat_chain *c, const seq_tables *t, uint64_t base, size_t s,
                         size_t i) {
    return base + t->pa[i] - t->pa[s - 1] + remat__fall_overhead_bound(&c->stages[i - 1]);
}

static uint64_t b_mem(const remat_chain *c, const seq_tables *t, uint64_t base, size_t s,
                      size_t i) {
    return base + t->pa[i] - t->pa[s - 1] + remat_chain_d_bytes(c, i) +
           remat_chain_d_bytes(c, i - 1) + c->stages[i - 1].bwd_overhead;
}

/* Peak of a non-last segment s..e whose checkpoints (a[s-1] included) sum to cp:
 * its forward (Fck s, Fn s+1..e), its recomputation with d[e] held, its B ops. */
static uint64_t block_peak(const remat_chain *c, const seq_tables *t, uint64_t cp, size_t s,
                           size_t e) {
    uint64_t p = cp + remat_chain_a_bytes(c, s) + c->stages[s - 1].fwd_overhead;
    uint64_t de = remat_chain_d_bytes(c, e);
    for (size_t i = s; i <= e; i++) {
        if (i > s)
            p = max_u64(p, cp + remat_chain_a_bytes(c, i - 1) + remat_chain_a_bytes(c, i) +
                               c->stages[i - 1].fwd_overhead);
        p = max_u64(p, fall_mem(c, t, cp + de, s, i));
        p = max_u64(p, b_mem(c, t, cp, s, i));
    }
    return p;
}

/* Peak of the last segment s..n with checkpoints cp (a[s-1] included). */
static uint64_t last_peak(const seq_tables *t, uint64_t cp, size_t s) {
    return cp + max_u64(t->sx[s], t->sy[s]) - t->pa[s - 1];
}

static double seq_time(const seq_tables *t, size_t K) {
    return t->total + t->pf[(K - 1) * (t->n / K)];
}

static void tables_free(seq_tables *t) {
    free(t->pa);
    free(t->sx);
    free(t->sy);
    free(t->pf);
}

/* Every partial sum the closed forms take is at most the sum of all sizes,
 * checked here to fit in 64 bits. */
static remat_status tables_init(const remat_chain *c, uint64_t max_work, seq_tables *t,
                                remat_error *err) {
    memset(t, 0, sizeof *t);
    size_t n = c->n;
    t->n = n;
    uint64_t all = c->input_bytes, x;
    int ok = remat__add_u64(all, c->input_grad_bytes, &all);
    for (size_t i = 1; i <= n && ok; i++) {
        const remat_stage *sg = &c->stages[i - 1];
        ok = remat__add_u64(all, sg->out_bytes, &x) && remat__add_u64(x, sg->saved_bytes, &x) &&
             remat__add_u64(x, sg->grad_bytes, &x) && remat__add_u64(x, sg->grad_bytes, &x) &&
             remat__add_u64(x, sg->fwd_overhead, &x) && remat__add_u64(x, sg->bwd_overhead, &x) &&
             remat__add_u64(x, remat__fall_overhead_bound(sg), &all);
    }
    REMAT__RETURN_IF(!ok, err, REMAT_E_TOO_LARGE,
                     "sequential: the chain's sizes add up to more than 2^64 bytes");
    remat_status st = remat__alloc_table((void **)&t->pa, n + 1, sizeof *t->pa, max_work,
                                         "sequential: prefix table", err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&t->sx, n + 2, sizeof *t->sx, max_work,
                                "sequential: suffix table", err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&t->sy, n + 2, sizeof *t->sy, max_work,
                                "sequential: suffix table", err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&t->pf, n + 1, sizeof *t->pf, max_work,
                                "sequential: time table", err);
    if (st != REMAT_OK) {
        tables_free(t);
        return st;
    }
    double tb = 0;
    for (size_t i = 1; i <= n; i++) {
        t->pa[i] = t->pa[i - 1] + remat_chain_abar_bytes(c, i);
        t->pf[i] = t->pf[i - 1] + c->stages[i - 1].fwd_time;
        tb += c->stages[i - 1].bwd_time;
    }
    t->total = t->pf[n] + tb;
    for (size_t i = n; i >= 1; i--) {
        const remat_stage *sg = &c->stages[i - 1];
        t->sx[i] = max_u64(t->sx[i + 1], t->pa[i] + remat__fall_overhead_bound(sg));
        t->sy[i] = max_u64(t->sy[i + 1], t->pa[i] + remat_chain_d_bytes(c, i) +
                                             remat_chain_d_bytes(c, i - 1) + sg->bwd_overhead);
    }
    return REMAT_OK;
}

/* Peak of K segments, by the closed forms. */
static uint64_t seq_peak(const remat_chain *c, const seq_tables *t, size_t K) {
    size_t m = t->n / K;
    uint64_t cp = 0, p = c->input_bytes;
    for (size_t k = 0; k + 1 < K; k++) {
        cp += remat_chain_a_bytes(c, k * m);
        p = max_u64(p, block_peak(c, t, cp, k * m + 1, (k + 1) * m));
    }
    cp += remat_chain_a_bytes(c, (K - 1) * m);
    return max_u64(p, last_peak(t, cp, (K - 1) * m + 1));
}

static remat_status build(const remat_chain *c, size_t K, remat_schedule **out,
                          remat_error *err) {
    size_t n = c->n, m = n / K;
    remat_schedule *s = NULL;
    REMAT__FORWARD(remat_schedule_create("sequential", &s, err));
    remat_status st = REMAT_OK;
    for (size_t k = 0; k + 1 < K && st == REMAT_OK; k++)
        for (size_t i = k * m + 1; i <= (k + 1) * m && st == REMAT_OK; i++)
            st = remat__push(s, i == k * m + 1 ? REMAT_OP_FCK : REMAT_OP_FN, (uint32_t)i, err);
    size_t last = (K - 1) * m + 1;
    for (size_t i = last; i <= n && st == REMAT_OK; i++)
        st = remat__push(s, REMAT_OP_FALL, (uint32_t)i, err);
    for (size_t i = n; i >= last && st == REMAT_OK; i--)
        st = remat__push(s, REMAT_OP_B, (uint32_t)i, err);
    for (size_t k = K - 1; k-- > 0 && st == REMAT_OK;) {
        for (size_t i = k * m + 1; i <= (k + 1) * m && st == REMAT_OK; i++)
            st = remat__push(s, REMAT_OP_FALL, (uint32_t)i, err);
        for (size_t i = (k + 1) * m; i >= k * m + 1 && st == REMAT_OK; i--)
            st = remat__push(s, REMAT_OP_B, (uint32_t)i, err);
    }
    if (st == REMAT_OK) st = remat__schedule_measure(c, s, 0, err);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

/* Best K (fastest that fits, ties to fewer segments), or 0 when none fits;
 * *min_peak is the smallest peak over all K. Groups the K with the same
 * block size m, whose first blocks coincide. */
static size_t best_k(const remat_chain *c, const seq_tables *t, uint64_t limit,
                     uint64_t *min_peak) {
    size_t n = t->n, best = 0;
    double best_time = 0;
    *min_peak = UINT64_MAX;
    for (size_t lo = 1; lo <= n;) {
        size_t m = n / lo, hi = n / m; /* every K in lo..hi has n / K == m */
        uint64_t cp = 0, prefix = c->input_bytes;
        for (size_t K = 1; K <= hi; K++) {
            cp += remat_chain_a_bytes(c, (K - 1) * m); /* cp = checkpoints of blocks 0..K-1 */
            if (K >= lo) {
                uint64_t p = max_u64(prefix, last_peak(t, cp, (K - 1) * m + 1));
                double tm = seq_time(t, K);
                if (p < *min_peak) *min_peak = p;
                if (p <= limit && (best == 0 || tm < best_time)) best = K, best_time = tm;
            }
            if (K < hi) prefix = max_u64(prefix, block_peak(c, t, cp, (K - 1) * m + 1, K * m));
        }
        lo = hi + 1;
    }
    return best;
}

remat_status remat__solve_sequential(const remat_chain *c, const remat_solve_options *o,
                                     remat_schedule **out, remat_error *err) {
    REMAT__RETURN_IF(o->segments > c->n, err, REMAT_E_INPUT,
                     "segments: %u is more than the chain's %zu stages", o->segments, c->n);
    seq_tables t;
    REMAT__FORWARD(tables_init(c, o->max_work_bytes, &t, err));
    size_t K = o->segments;
    uint64_t need = 0;
    if (K == 0)
        K = best_k(c, &t, o->memory, &need);
    else
        need = seq_peak(c, &t, K);
    remat_status st = REMAT_OK;
    if (K == 0 || need > o->memory) {
        if (err) err->min_memory = need;
        if (o->segments)
            st = remat__fail(err, REMAT_E_INFEASIBLE,
                             "sequential: %u segments need %llu bytes, more than the limit of "
                             "%llu",
                             o->segments, (unsigned long long)need, (unsigned long long)o->memory);
        else
            st = remat__fail(err, REMAT_E_INFEASIBLE,
                             "sequential: no segmentation fits in %llu bytes; the smallest peak "
                             "is %llu bytes",
                             (unsigned long long)o->memory, (unsigned long long)need);
    }
    uint64_t predicted = st == REMAT_OK ? seq_peak(c, &t, K) : 0;
    double predicted_time = st == REMAT_OK ? seq_time(&t, K) : 0;
    tables_free(&t);
    if (st != REMAT_OK) return st;
    REMAT__FORWARD(build(c, K, out, err));
    remat_schedule *s = *out;
    /* a stopped Fall (each segment's last Fall) only lowers what the closed forms count */
    int below = remat__chain_stops_differ(c);
    if ((below ? s->peak_bytes > predicted : s->peak_bytes != predicted) ||
        !(s->time <= predicted_time + 1e-9 * (1 + predicted_time) &&
          (below || s->time >= predicted_time - 1e-9 * (1 + predicted_time)))) {
        st = remat__fail(err, REMAT_E_INTERNAL,
                         "sequential: K=%zu predicted peak %llu time %.17g, simulator says %llu %.17g",
                         K, (unsigned long long)predicted, predicted_time,
                         (unsigned long long)s->peak_bytes, s->time);
        remat_schedule_free(s);
        *out = NULL;
    }
    return st;
}
