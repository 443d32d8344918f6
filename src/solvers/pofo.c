/* pofo: recomputation combined with offloading (the NeurIPS 2021 paper,
 * Section 4 and Appendix B), made valid under SPEC section 2's copy rules.
 *
 * The schedule is a sequence of segments. Segment i starts with its input
 * I = a[i-1] (x = 0) or abar[i-1] (x = 1) on the device, which it keeps
 * (Fall i, or Fck i followed by Fn up to j) and either leaves on the device or
 * offloads. Then comes the rest of the chain (a recursive call), then the
 * backward of the segment: B i after Fall i, or a persistent rematerialization
 * of stages i..j from I (the table C, rotor's dynamic program) after Fck i.
 *
 * State of OC (Appendix B.1): (i, x, A, dB) (and dF in carry mode). A is the
 * device memory held by earlier kept inputs; dB the memory of the offloaded
 * inputs of earlier segments whose prefetches are issued at the start of this
 * segment's backward (the previous segment's input, plus, when a segment
 * carried its own dB into its successor, the inputs of segments before it:
 * Table 2's new dB = I + carried dB). A carried prefetch holds its whole size
 * from its start and must land by the end of the backward that issued it, so
 * its successor's Lemma 1 idle counts it and the segment that carried it
 * waits for nothing. Memory is counted in
 * `values` units of memory/values bytes, rounded up for held values and exact
 * for transients.
 *
 * Strict plans (valid by construction under release at copy end): an offload
 * of a segment's input is issued right before the segment and waited for at
 * its end (Lemma 1's idle with the whole input held while it is copied); the
 * previous segment's input is prefetched during this segment's backward with
 * its whole size held from the start (the mirror image). Every offload is
 * then over before the loss, so the loss junction (B.2) adds no idle. The
 * predicted time counts the prefetch of dB rounded up to whole units, so it
 * bounds the simulated time from above.
 *
 * remat__solve_pofo() also tries relaxed plans, the counterpart of the
 * paper's gradual-release assumption and its section 5 conversion: the DP as
 * if the link were faster, so offloads overlap several segments, emitted
 * without the per-segment Waits, then repaired with the simulator (see
 * repair() and shift_pres()), and carry-mode plans:
 * the DP with the paper's dF (offloads in flight, held memory released
 * gradually) carried from segment to segment, waiting for the link only where
 * it pays (Lemma 1) and at the loss (B.2), repaired the same way (see
 * oc_carry(); its OC is a hash table of the reachable states, so it runs on
 * chains of any length). Independent DP runs are spread over o->threads.
 * It returns the fastest simulated candidate, rotor's optimum included (the
 * DP's no-offload corner at 500 slots). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "pofo_internal.h"

typedef struct pofo {
    const remat_chain *c;
    size_t n, L;        /* stages with the loss; L = n - 1 */
    uint64_t q;         /* bytes per unit */
    size_t W;           /* units + 1 */
    uint32_t cap;       /* units available */
    double bw;
    remat__pofo_mode mode;
    double *ctab;       /* C[i][j][m], i, j in 1..L */
    int32_t *cchoice;   /* 0 Fall, k >= 1: Fck then Fn up to i + k - 1, -1 none */
    double *otab;       /* OC[i][x][A][B], i in 1..n (not in carry mode) */
    int32_t *ochoice;   /* (j - i) << 4 | push << 3 | drain << 2 | off << 1 | fck, -1 none */
    /* carry mode: OC's reachable states only, in a hash table (see oc_find()) */
    struct oc_entry *hash;
    size_t hcap, hcount;
    uint64_t hmax;      /* bytes the hash table may grow to */
    int hfull;          /* it could not grow: the run is given up */
    remat_schedule *s;
    int relaxed;        /* emit no Wait after a segment's forward (see repair()) */
    uint64_t *sizes;    /* [5][n+1]: a, abar, d, units of a, units of abar */
    uint32_t base_cap;  /* units within the limit itself */
    /* carry mode (dF carried across segments, see oc_carry()): */
    int carry;
    int carry_b;        /* dB may be carried into the next segment (see oc_cell()) */
    unsigned flags;     /* REMAT__POFO_NO_* */
    size_t FK;          /* dF levels (1 when not carrying) */
    uint64_t fq;        /* bytes per dF level */
    int has_last;       /* emission: the last offload issued, for Waits */
    int last_x;
    size_t last_i;
} pofo;

static uint64_t A_(const pofo *P, size_t i) { return P->sizes[i]; }
static uint64_t AB(const pofo *P, size_t i) { return P->sizes[(P->n + 1) + i]; }
static uint64_t D_(const pofo *P, size_t i) { return P->sizes[2 * (P->n + 1) + i]; }
static uint64_t UA(const pofo *P, size_t i) { return P->sizes[3 * (P->n + 1) + i]; }
static uint64_t UAB(const pofo *P, size_t i) { return P->sizes[4 * (P->n + 1) + i]; }
static const remat_stage *ST(const pofo *P, size_t i) { return &P->c->stages[i - 1]; }
static uint64_t units(const pofo *P, uint64_t bytes) { return bytes / P->q + (bytes % P->q != 0); }
static uint64_t input_bytes(const pofo *P, size_t i, int x) { return x ? AB(P, i - 1) : A_(P, i - 1); }

static size_t cidx(const pofo *P, size_t i, size_t j, size_t m) {
    return ((i - 1) * P->L + (j - 1)) * P->W + m;
}
static size_t oidx(const pofo *P, size_t i, int x, size_t a, size_t b, size_t f) {
    return ((((i - 1) * 2 + (size_t)x) * P->W + a) * P->W + b) * P->FK + f;
}

/* ---- C: persistent rematerialization of stages i..j from a held input,
 * with d[j] held and m units for everything but the input. ---- */

static void c_cell(pofo *P, size_t i, size_t j, size_t m) {
    uint64_t mb = (uint64_t)m * P->q;
    const remat_stage *si = ST(P, i);
    double best = INFINITY;
    int32_t choice = -1;
    uint64_t bneed = AB(P, i) + D_(P, i) + D_(P, i - 1) + si->bwd_overhead;
    if (D_(P, j) + AB(P, i) + si->fwd_overhead <= mb && bneed <= mb) {
        if (i == j) {
            best = si->fwd_time + si->bwd_time;
            choice = 0;
        } else {
            uint64_t u = UAB(P, i);
            if (u <= m) {
                double sub = P->ctab[cidx(P, i + 1, j, m - u)];
                if (sub < INFINITY) {
                    best = si->fwd_time + sub + si->bwd_time;
                    choice = 0;
                }
            }
        }
    }
    uint64_t fmax = 0;
    double fsum = 0;
    for (size_t k = i; k < j; k++) {
        const remat_stage *sk = ST(P, k);
        uint64_t need = (k == i ? 0 : A_(P, k - 1)) + A_(P, k) + sk->fwd_overhead;
        if (need > fmax) fmax = need;
        if (D_(P, j) + fmax > mb) break;
        fsum += sk->fwd_time;
        uint64_t u = UA(P, k);
        if (u > m) continue;
        double t1 = P->ctab[cidx(P, k + 1, j, m - u)];
        double t2 = P->ctab[cidx(P, i, k, m)];
        double t = fsum + t1 + t2;
        if (t < best) {
            best = t;
            choice = (int32_t)(k - i + 1);
        }
    }
    P->ctab[cidx(P, i, j, m)] = best;
    P->cchoice[cidx(P, i, j, m)] = choice;
}

static void fill_c(pofo *P) {
    for (size_t len = 0; len < P->L; len++)
        for (size_t i = 1; i + len <= P->L; i++)
            for (size_t m = 0; m < P->W; m++) c_cell(P, i, i + len, m);
}

/* ---- OC: from segment i to the end of B i. ---- */

/* Carry mode's OC is sparse: a dense table of its states would take
 * n x 2 x W^2 x FK cells (1 GiB at L = 340), of which few are reachable
 * from (1, 0, 0, 0, 0). Open addressing, key = the dense index + 1. */
typedef struct oc_entry {
    uint64_t key;
    double val;
    int32_t choice;
} oc_entry;

static size_t oc_slot(const pofo *P, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (P->hcap - 1);
}

static oc_entry *oc_find(const pofo *P, uint64_t key) {
    for (size_t k = oc_slot(P, key);; k = (k + 1) & (P->hcap - 1)) {
        if (P->hash[k].key == key) return &P->hash[k];
        if (P->hash[k].key == 0) return NULL;
    }
}

static int oc_grow(pofo *P) {
    size_t ncap = P->hcap * 2;
    if (ncap < P->hcap || (uint64_t)ncap > P->hmax / sizeof(oc_entry)) return 0;
    oc_entry *old = P->hash, *nh = remat__calloc(ncap, sizeof *nh);
    if (!nh) return 0;
    size_t ocap = P->hcap;
    P->hash = nh;
    P->hcap = ncap;
    for (size_t k = 0; k < ocap; k++) {
        if (!old[k].key) continue;
        size_t s = oc_slot(P, old[k].key);
        while (nh[s].key) s = (s + 1) & (ncap - 1);
        nh[s] = old[k];
    }
    free(old);
    return 1;
}

/* Stores a state's value; sets hfull when the table is full. */
static void oc_put(pofo *P, size_t idx, double val, int32_t choice) {
    if (2 * (P->hcount + 1) > P->hcap && !oc_grow(P)) {
        P->hfull = 1;
        return;
    }
    uint64_t key = (uint64_t)idx + 1;
    size_t s = oc_slot(P, key);
    while (P->hash[s].key && P->hash[s].key != key) s = (s + 1) & (P->hcap - 1);
    if (!P->hash[s].key) P->hcount++;
    P->hash[s] = (oc_entry){key, val, choice};
}

static double prefetch_idle(const pofo *P, size_t b, double overlap) {
    double t = (double)b * (double)P->q / P->bw - overlap;
    return b && t > 0 ? t : 0;
}

static double oc_value(pofo *P, size_t i, int x, size_t a, size_t b, size_t f);

static void oc_cell(pofo *P, size_t i, int x, size_t a, size_t b) {
    double best = INFINITY;
    int32_t choice = -1;
    uint64_t in = input_bytes(P, i, x), ui = units(P, in);
    if (a + ui + b > P->cap) goto done;
    uint64_t ff = (P->cap - a - ui) * P->q;     /* bytes for forward transients */
    uint64_t fb = (P->cap - a - ui - b) * P->q; /* for backward ones */
    const remat_stage *si = ST(P, i);
    if (i == P->n) {
        if (AB(P, i) + si->fwd_overhead <= ff && AB(P, i) + D_(P, i - 1) + si->bwd_overhead <= fb) {
            best = si->fwd_time + si->bwd_time + prefetch_idle(P, b, si->bwd_time);
            choice = 0;
        }
        goto done;
    }
    int max_off = P->mode != REMAT__POFO_REMAT_ONLY && P->bw > 0 ? 1 : 0;
    for (int pc = 0; pc <= 2 * max_off + 1; pc++) {
        int off = pc & 1, push = pc >> 1; /* push: dB carried into the next segment */
        if (push && !(b && P->carry_b)) continue;
        size_t a2 = a + (off ? 0 : ui), b2 = (off ? ui : 0) + (push ? b : 0);
        double copy = off ? (double)in / P->bw : 0;
        int32_t flags = push << 3 | off << 1;
        /* Fall i: the next segment's input is abar[i]. */
        if (AB(P, i) + si->fwd_overhead <= ff &&
            AB(P, i) + D_(P, i) + D_(P, i - 1) + si->bwd_overhead <= fb) {
            double sub = push && !(prefetch_idle(P, b, si->bwd_time) > 0)
                             ? INFINITY /* no wait to save: never better than not pushing */
                             : oc_value(P, i + 1, 1, a2, b2, 0);
            double t = si->fwd_time + (copy > si->fwd_time ? copy - si->fwd_time : 0) + sub +
                       si->bwd_time + (push ? 0 : prefetch_idle(P, b, si->bwd_time));
            if (t < best) {
                best = t;
                choice = flags;
            }
        }
        if (P->mode == REMAT__POFO_OFFLOAD_ONLY) continue;
        /* Fck i, Fn up to j: the next segment's input is a[j]. */
        uint64_t fmax = 0;
        double fsum = 0;
        size_t mb = P->cap - a - ui - b;
        for (size_t j = i; j < P->n; j++) {
            const remat_stage *sj = ST(P, j);
            uint64_t need = (j == i ? 0 : A_(P, j - 1)) + A_(P, j) + sj->fwd_overhead;
            if (need > fmax) fmax = need;
            if (fmax > ff) break;
            fsum += sj->fwd_time;
            double cb = P->ctab[cidx(P, i, j, mb)];
            if (!(cb < INFINITY)) continue;
            if (push && !(prefetch_idle(P, b, cb) > 0)) continue; /* as above */
            double sub = oc_value(P, j + 1, 0, a2, b2, 0);
            double t = fsum + (copy > fsum ? copy - fsum : 0) + sub + cb +
                       (push ? 0 : prefetch_idle(P, b, cb));
            if (t < best) {
                best = t;
                choice = (int32_t)((j - i) << 4) | flags | 1;
            }
        }
    }
done:
    P->otab[oidx(P, i, x, a, b, 0)] = best;
    P->ochoice[oidx(P, i, x, a, b, 0)] = choice;
}

/* ---- Carry mode: the paper's dF (B.1) ----
 * f levels of fq bytes still to offload are carried from segment to
 * segment; they drain at the link's speed during forwards and count as held
 * memory (the paper's gradual release, rounded up to a level). A segment may
 * first wait for the link to drain (Lemma 1's idle, taken whole), and the
 * loss waits for every offload (B.2's junction idle). Emitted without the
 * per-segment Waits, then made valid by repair(). */

static double drain_time(const pofo *P, size_t f) { return (double)f * (double)P->fq / P->bw; }

/* the dF level after `span` time units of copying `pend` bytes; FK when out
 * of range */
static size_t f_after(const pofo *P, double pend, double span) {
    double rem = pend - span * P->bw;
    if (!(rem > 0)) return 0;
    double lv = ceil(rem / (double)P->fq);
    return lv >= (double)P->FK ? P->FK : (size_t)lv;
}

static void oc_carry(pofo *P, size_t i, int x, size_t a, size_t b, size_t f) {
    double best = INFINITY;
    int32_t choice = -1;
    uint64_t in = input_bytes(P, i, x), ui = units(P, in);
    const remat_stage *si = ST(P, i);
    if (a + ui + b > P->cap) goto done;
    uint64_t fb = (P->cap - a - ui - b) * P->q;
    if (i == P->n) { /* everything offloaded before the loss */
        uint64_t ff = (P->cap - a - ui) * P->q;
        if (AB(P, i) + si->fwd_overhead <= ff && AB(P, i) + D_(P, i - 1) + si->bwd_overhead <= fb) {
            best = drain_time(P, f) + si->fwd_time + si->bwd_time + prefetch_idle(P, b, si->bwd_time);
            choice = 0;
        }
        goto done;
    }
    int max_off = P->mode != REMAT__POFO_REMAT_ONLY && P->bw > 0 ? 1 : 0;
    for (int drain = 0; drain <= (f > 0); drain++) {
        uint64_t fbytes = drain ? 0 : (uint64_t)f * P->fq, fu = units(P, fbytes);
        if (a + ui + fu > P->cap) continue;
        double idle = drain ? drain_time(P, f) : 0;
        uint64_t ff = (P->cap - a - ui - fu) * P->q;
        for (int pc = 0; pc <= 2 * max_off + 1; pc++) {
            int off = pc & 1, push = pc >> 1; /* push: dB carried into the next segment */
            if (push && !(b && P->carry_b)) continue;
            size_t a2 = a + (off ? 0 : ui), b2 = (off ? ui : 0) + (push ? b : 0);
            double pend = (double)fbytes + (off ? (double)in : 0);
            int32_t flags = push << 3 | drain << 2 | off << 1;
            if (AB(P, i) + si->fwd_overhead <= ff &&
                AB(P, i) + D_(P, i) + D_(P, i - 1) + si->bwd_overhead <= fb) {
                size_t f2 = f_after(P, pend, si->fwd_time);
                double sub = f2 < P->FK ? oc_value(P, i + 1, 1, a2, b2, f2) : INFINITY;
                double t = idle + si->fwd_time + sub + si->bwd_time +
                           (push ? 0 : prefetch_idle(P, b, si->bwd_time));
                if (t < best) {
                    best = t;
                    choice = flags;
                }
            }
            if (P->mode == REMAT__POFO_OFFLOAD_ONLY) continue;
            uint64_t fmax = 0;
            double fsum = 0;
            size_t mb = P->cap - a - ui - b;
            for (size_t j = i; j < P->n; j++) {
                const remat_stage *sj = ST(P, j);
                uint64_t need = (j == i ? 0 : A_(P, j - 1)) + A_(P, j) + sj->fwd_overhead;
                if (need > fmax) fmax = need;
                if (fmax > ff) break;
                fsum += sj->fwd_time;
                double cb = P->ctab[cidx(P, i, j, mb)];
                if (!(cb < INFINITY)) continue;
                size_t f2 = f_after(P, pend, fsum);
                if (f2 >= P->FK) continue;
                double t = idle + fsum + oc_value(P, j + 1, 0, a2, b2, f2) + cb +
                           (push ? 0 : prefetch_idle(P, b, cb));
                if (t < best) {
                    best = t;
                    choice = (int32_t)((j - i) << 4) | flags | 1;
                }
            }
        }
    }
done:
    oc_put(P, oidx(P, i, x, a, b, f), best, choice);
}

/* Top-down: only the states reachable from (1, 0, 0, 0) are solved, and few
 * dB values are (0 or the size of some input). Depth <= n. */
#define OC_TODO (-2)
static double oc_value(pofo *P, size_t i, int x, size_t a, size_t b, size_t f) {
    size_t k = oidx(P, i, x, a, b, f);
    if (P->carry) {
        if (P->hfull) return INFINITY;
        const oc_entry *e = oc_find(P, (uint64_t)k + 1);
        if (e) return e->val;
        oc_carry(P, i, x, a, b, f);
        e = oc_find(P, (uint64_t)k + 1);
        return e ? e->val : INFINITY;
    }
    if (P->ochoice[k] == OC_TODO) oc_cell(P, i, x, a, b);
    return P->otab[k];
}

static int32_t oc_choice(const pofo *P, size_t i, int x, size_t a, size_t b, size_t f) {
    size_t k = oidx(P, i, x, a, b, f);
    if (!P->carry) return P->ochoice[k];
    const oc_entry *e = oc_find(P, (uint64_t)k + 1);
    return e ? e->choice : -1;
}

static void reset_oc(pofo *P) {
    if (P->carry) {
        memset(P->hash, 0, P->hcap * sizeof *P->hash);
        P->hcount = 0;
        P->hfull = 0;
        return;
    }
    size_t no = P->n * 2 * P->W * P->W * P->FK; /* checked in alloc_tables */
    for (size_t k = 0; k < no; k++) P->ochoice[k] = OC_TODO;
}

/* ---- Emission ---- */

static remat_status op(pofo *P, remat_op_kind k, size_t i, remat_error *err) {
    return remat__push(P->s, k, (uint32_t)i, err);
}
static remat_status vop(pofo *P, remat_op_kind k, int x, size_t i, remat_error *err) {
    return remat__push_value(P->s, k, x ? REMAT_VALUE_ABAR : REMAT_VALUE_A, (uint32_t)i, err);
}

static remat_status emit_c(pofo *P, size_t i, size_t j, size_t m, remat_error *err) {
    int32_t ch = P->cchoice[cidx(P, i, j, m)];
    REMAT__RETURN_IF(ch < 0, err, REMAT_E_INTERNAL, "pofo: broken rematerialization table");
    if (ch == 0) {
        REMAT__FORWARD(op(P, REMAT_OP_FALL, i, err));
        if (i < j) REMAT__FORWARD(emit_c(P, i + 1, j, m - units(P, AB(P, i)), err));
        return op(P, REMAT_OP_B, i, err);
    }
    size_t k = i + (size_t)ch - 1;
    REMAT__FORWARD(op(P, REMAT_OP_FCK, i, err));
    for (size_t h = i + 1; h <= k; h++) REMAT__FORWARD(op(P, REMAT_OP_FN, h, err));
    REMAT__FORWARD(emit_c(P, k + 1, j, m - units(P, A_(P, k)), err));
    return emit_c(P, i, k, m, err);
}

/* Waits for every offload issued so far (copies run in issue order). */
static remat_status wait_all(pofo *P, remat_error *err) {
    return P->has_last ? vop(P, REMAT_OP_WAIT, P->last_x, P->last_i, err) : REMAT_OK;
}

/* The offloaded inputs a segment's backward prefetches (its dB), the one
 * needed first at the head: a list through the emission's call stack. */
typedef struct pending {
    int x;
    size_t idx;
    const struct pending *next;
} pending;

static remat_status pre_all(pofo *P, const pending *pl, remat_error *err) {
    for (; pl; pl = pl->next) REMAT__FORWARD(vop(P, REMAT_OP_PRE, pl->x, pl->idx, err));
    return REMAT_OK;
}

/* pl lists the values in b (their units add up to b). */
static remat_status emit_oc(pofo *P, size_t i, int x, size_t a, size_t b, size_t f,
                            const pending *pl, remat_error *err) {
    int32_t ch = oc_choice(P, i, x, a, b, f);
    REMAT__RETURN_IF(ch < 0, err, REMAT_E_INTERNAL, "pofo: broken table at stage %zu", i);
    if (i == P->n) {
        if (P->carry) REMAT__FORWARD(wait_all(P, err));
        REMAT__FORWARD(op(P, REMAT_OP_FALL, i, err));
        REMAT__FORWARD(pre_all(P, pl, err));
        return op(P, REMAT_OP_B, i, err);
    }
    int fck = ch & 1, off = (ch >> 1) & 1, drain = (ch >> 2) & 1, push = (ch >> 3) & 1;
    size_t j = i + (size_t)(ch >> 4);
    uint64_t in = input_bytes(P, i, x), ui = units(P, in);
    size_t a2 = a + (off ? 0 : ui), b2 = (off ? ui : 0) + (push ? b : 0), f2 = 0;
    pending mine = {x, i - 1, push ? pl : NULL};
    const pending *child = off ? &mine : push ? pl : NULL;
    if (drain) REMAT__FORWARD(wait_all(P, err));
    if (off) REMAT__FORWARD(vop(P, REMAT_OP_OFF, x, i - 1, err));
    if (off) {
        P->has_last = 1;
        P->last_x = x;
        P->last_i = i - 1;
    }
    REMAT__FORWARD(op(P, fck ? REMAT_OP_FCK : REMAT_OP_FALL, i, err));
    for (size_t h = i + 1; fck && h <= j; h++) REMAT__FORWARD(op(P, REMAT_OP_FN, h, err));
    if (off && !P->relaxed) REMAT__FORWARD(vop(P, REMAT_OP_WAIT, x, i - 1, err));
    if (P->carry) { /* the same arithmetic as oc_carry() */
        double span = 0;
        for (size_t h = i; h <= j; h++) span += ST(P, h)->fwd_time;
        double pend = (double)(drain ? 0 : (uint64_t)f * P->fq) + (off ? (double)in : 0);
        f2 = f_after(P, pend, span);
    }
    REMAT__FORWARD(emit_oc(P, j + 1, !fck, a2, b2, f2, child, err));
    if (off) REMAT__FORWARD(vop(P, REMAT_OP_WAIT, x, i - 1, err));
    if (!push) REMAT__FORWARD(pre_all(P, pl, err));
    if (!fck) return op(P, REMAT_OP_B, i, err);
    return emit_c(P, i, j, P->cap - a - ui - b, err);
}

static void pofo_free(pofo *P) {
    free(P->ctab);
    free(P->cchoice);
    free(P->otab);
    free(P->ochoice);
    free(P->hash);
    free(P->sizes);
}

static remat_status alloc_tables(pofo *P, uint64_t max_work, remat_error *err) {
    size_t nc, no;
    REMAT__RETURN_IF(!remat__mul_size(P->L, P->L, &nc) || !remat__mul_size(nc, P->W, &nc) ||
                         !remat__mul_size(P->n * 2, P->W, &no) || !remat__mul_size(no, P->W, &no) ||
                         !remat__mul_size(no, P->FK, &no),
                     err, REMAT_E_TOO_LARGE, "pofo: tables too large for this chain and values");
    size_t per = sizeof(double) + sizeof(int32_t), total;
    REMAT__RETURN_IF(!remat__mul_size(P->carry ? nc : nc + no, per, &total) ||
                         (max_work && (uint64_t)total > max_work),
                     err, REMAT_E_TOO_LARGE,
                     "pofo: tables would need %zu x %zu bytes, more than max_work_bytes; use "
                     "fewer offload values", nc + no, per);
    if (nc) {
        REMAT__FORWARD(remat__alloc_table((void **)&P->ctab, nc, sizeof(double), max_work,
                                          "pofo C table", err));
        REMAT__FORWARD(remat__alloc_table((void **)&P->cchoice, nc, sizeof(int32_t), max_work,
                                          "pofo C choices", err));
    }
    if (P->carry) { /* sparse OC, grown on demand up to max_work minus C */
        size_t cbytes = nc * per;
        P->hmax = max_work > cbytes ? max_work - cbytes : 0;
        P->hcap = 1u << 14;
        return remat__alloc_table((void **)&P->hash, P->hcap, sizeof(oc_entry), P->hmax,
                                  "pofo carry OC table", err);
    }
    REMAT__FORWARD(remat__alloc_table((void **)&P->otab, no, sizeof(double), max_work,
                                      "pofo OC table", err));
    return remat__alloc_table((void **)&P->ochoice, no, sizeof(int32_t), max_work,
                              "pofo OC choices", err);
}

/* Sets up P for `memory` and fills the rematerialization table C, which
 * depends on the memory only, so several runs can share it. */
static remat_status ctx_init(pofo *P, const remat_chain *c, uint64_t memory, uint32_t values,
                             uint32_t extra, size_t fk, uint64_t max_work_bytes,
                             remat_error *err) {
    memset(P, 0, sizeof *P);
    P->FK = fk;
    REMAT__RETURN_IF(values == 0 || values > 100000, err, REMAT_E_INPUT,
                     "offload values: %u is not in 1..100000", values);
    P->c = c;
    P->n = c->n;
    P->L = c->n - 1;
    P->q = memory / values ? memory / values : 1;
    P->cap = (uint32_t)(memory / P->q > values * 2u ? values * 2u : memory / P->q);
    P->base_cap = P->cap;
    P->W = (size_t)P->cap + extra + 1; /* C serves every cap up to cap + extra */
    P->carry = fk > 1;
    if (P->carry) { /* FK - 1 levels span the W - 1 units */
        uint64_t span = (uint64_t)(P->W - 1) * P->q;
        P->fq = span / (fk - 1) + (span % (fk - 1) != 0);
        if (P->fq == 0) P->fq = 1;
    }
    if (max_work_bytes == 0) max_work_bytes = REMAT_DEFAULT_MAX_WORK_BYTES;
    remat_status st = alloc_tables(P, max_work_bytes, err);
    if (st == REMAT_OK) {
        P->sizes = remat__calloc(5 * (P->n + 1), sizeof *P->sizes);
        if (!P->sizes) st = remat__fail(err, REMAT_E_NOMEM, "pofo: out of memory");
    }
    for (size_t i = 0; st == REMAT_OK && i <= P->n; i++) {
        size_t w = P->n + 1;
        P->sizes[i] = remat_chain_a_bytes(c, i);
        P->sizes[w + i] = i ? remat_chain_abar_bytes(c, i) : 0;
        P->sizes[2 * w + i] = remat_chain_d_bytes(c, i);
        P->sizes[3 * w + i] = units(P, P->sizes[i]);
        P->sizes[4 * w + i] = units(P, P->sizes[w + i]);
    }
    if (st != REMAT_OK) {
        pofo_free(P);
        return st;
    }
    fill_c(P);
    return REMAT_OK;
}

/* One DP run with `cap` units (<= base_cap + extra of ctx_init). */
static remat_status ctx_run(pofo *P, uint32_t cap, double bw, remat__pofo_mode mode, int relaxed,
                            int carry_b, remat_schedule **out, remat_error *err) {
    *out = NULL;
    P->cap = cap;
    REMAT__RETURN_IF(!(bw >= 0) || !isfinite(bw), err, REMAT_E_INPUT,
                     "bandwidth: must be a finite number >= 0");
    P->bw = bw;
    P->mode = mode;
    P->relaxed = relaxed;
    P->carry_b = carry_b;
    P->s = NULL;
    P->has_last = 0;
    reset_oc(P);
    double t = oc_value(P, 1, 0, 0, 0, 0);
    REMAT__RETURN_IF(P->hfull, err, REMAT_E_TOO_LARGE,
                     "pofo: carry-mode states need more than max_work_bytes");
    REMAT__RETURN_IF(!(t < INFINITY), err, REMAT_E_INFEASIBLE,
                     "pofo: no schedule fits in %llu bytes with %u memory values",
                     (unsigned long long)(P->q * P->cap), P->cap);
    REMAT__FORWARD(remat_schedule_create("pofo", &P->s, err));
    remat_status st = emit_oc(P, 1, 0, 0, 0, 0, NULL, err);
    if (st != REMAT_OK) {
        remat_schedule_free(P->s);
        P->s = NULL;
        return st;
    }
    P->s->time = t;
    *out = P->s;
    P->s = NULL;
    return REMAT_OK;
}

static remat_status plan(const remat_chain *c, uint64_t memory, uint32_t values, double bw,
                         remat__pofo_mode mode, uint64_t max_work_bytes, int relaxed,
                         remat_schedule **out, remat_error *err) {
    *out = NULL;
    pofo P;
    REMAT__FORWARD(ctx_init(&P, c, memory, values, 0, 1, max_work_bytes, err));
    remat_status st = ctx_run(&P, P.base_cap, bw, mode, relaxed, 1, out, err);
    if (st == REMAT_OK) (*out)->memory_limit = memory;
    pofo_free(&P);
    return st;
}

remat_status remat__pofo_plan(const remat_chain *c, uint64_t memory, uint32_t values, double bw,
                              remat__pofo_mode mode, uint64_t max_work_bytes,
                              remat_schedule **out, remat_error *err) {
    return plan(c, memory, values, bw, mode, max_work_bytes, 0, out, err);
}

/* ---- The relaxed candidates (the paper's section 5 conversion) ----
 * The DP is run as if the link were `speedup` times faster, so offloads may
 * overlap several segments, and emitted without the Wait after each
 * segment's forward. repair() then inserts, at the first op whose memory is
 * over the limit, a Wait for the oldest offload still in flight there (the
 * copy that ends first), until the schedule fits. The simulator's time is
 * then the candidate's time. */

static int op_touches(remat_op op, size_t i) {
    if (op.kind <= REMAT_OP_B) return op.index == i || op.index == i + 1;
    return op.index == i;
}

static remat_status insert_op(remat_schedule *s, size_t at, remat_op op, remat_error *err) {
    REMAT__FORWARD(remat_schedule_push(s, op, err));
    memmove(&s->ops[at + 1], &s->ops[at], (s->n_ops - 1 - at) * sizeof *s->ops);
    s->ops[at] = op;
    return REMAT_OK;
}

#define REPAIR_ROUNDS 24

/* REMAT_OK with *sim_time when s now fits; REMAT_E_INFEASIBLE when it cannot. */
static remat_status repair(const remat_chain *c, remat_schedule *s, uint64_t memory, double bw,
                           double *sim_time, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    for (size_t round = 0; round <= s->n_ops; round++) {
        remat_sim_result *r = NULL;
        REMAT__FORWARD(remat_simulate(c, s, &so, &r, err));
        if (!r->valid) {
            remat_sim_result_free(r);
            return REMAT_E_INFEASIBLE;
        }
        size_t k = 0;
        while (k < r->n_ops && r->mem_during[k] <= memory) k++;
        if (k == r->n_ops) {
            *sim_time = r->time;
            s->peak_bytes = r->peak_bytes;
            remat_sim_result_free(r);
            return REMAT_OK;
        }
        remat_sim_result_free(r);
        /* the oldest offload in flight at op k that op k does not use; after
         * REPAIR_ROUNDS rounds the newest (copies run in issue order, so it
         * waits for all of them): each round costs a simulation, and plans
         * for a fast link can hold hundreds of offloads */
        size_t pick = SIZE_MAX;
        int newest = round >= REPAIR_ROUNDS;
        for (size_t h = 0; h < k && (newest || pick == SIZE_MAX); h++) {
            remat_op o = s->ops[h];
            if (o.kind != REMAT_OP_OFF) continue;
            int settled = 0;
            for (size_t g = h + 1; g < k; g++)
                if ((s->ops[g].kind == REMAT_OP_WAIT || s->ops[g].kind == REMAT_OP_PRE) &&
                    s->ops[g].index == o.index && s->ops[g].value == o.value)
                    settled = 1;
            if (settled) continue;
            if (op_touches(s->ops[k], o.index)) {
                if (newest) break; /* waiting past it would end a copy op k reads */
                continue;
            }
            pick = h;
        }
        if (pick == SIZE_MAX) return REMAT_E_INFEASIBLE;
        remat_op w = s->ops[pick];
        w.kind = REMAT_OP_WAIT;
        REMAT__FORWARD(insert_op(s, k, w, err));
    }
    return REMAT_E_INFEASIBLE;
}

/* Moves each Pre earlier, one op at a time, while the schedule stays valid
 * within `memory` and gets no slower: a prefetch issued earlier overlaps
 * more backward compute. Pres stay after the loss's B and in their order. */
static remat_status shift_pres(const remat_chain *c, remat_schedule *s, uint64_t memory,
                               double bw, double *sim_time, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bw;
    size_t floor_at = 0;
    for (size_t k = 0; k < s->n_ops; k++)
        if (s->ops[k].kind == REMAT_OP_B && s->ops[k].index == c->n) floor_at = k + 1;
    for (size_t k = floor_at; k < s->n_ops; k++) {
        if (s->ops[k].kind != REMAT_OP_PRE) continue;
        size_t at = k;
        while (at > floor_at && s->ops[at - 1].kind != REMAT_OP_PRE) {
            remat_op tmp = s->ops[at - 1];
            s->ops[at - 1] = s->ops[at];
            s->ops[at] = tmp;
            remat_sim_result *r = NULL;
            REMAT__FORWARD(remat_simulate(c, s, &so, &r, err));
            int keep = r->valid && r->peak_bytes <= memory && r->time <= *sim_time;
            if (keep) *sim_time = r->time;
            if (keep) s->peak_bytes = r->peak_bytes;
            remat_sim_result_free(r);
            if (!keep) { /* undo and stop */
                s->ops[at] = s->ops[at - 1];
                s->ops[at - 1] = tmp;
                break;
            }
            at--;
        }
        floor_at = at + 1;
    }
    return REMAT_OK;
}

/* Keeps s in *best when it is valid within `memory` and faster; frees it
 * otherwise. REMAT_OK when it fit, REMAT_E_INFEASIBLE when not. */
static remat_status keep_if_better(const remat_chain *c, const remat_solve_options *o,
                                   remat_schedule *s, int simulated_time, remat_schedule **best,
                                   double *best_sim, remat_error *err) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = o->bandwidth;
    remat_sim_result *r = NULL;
    remat_status st = remat_simulate(c, s, &so, &r, err);
    if (st == REMAT_OK && !r->valid)
        st = remat__fail(err, REMAT_E_INTERNAL, "pofo produced an invalid schedule: op %zu (%s): %s",
                         r->failed_op, r->failed_op_text, r->reason);
    else if (st == REMAT_OK && r->peak_bytes > o->memory)
        st = REMAT_E_INFEASIBLE;
    double t = st == REMAT_OK ? r->time : 0;
    if (st == REMAT_OK) s->peak_bytes = r->peak_bytes;
    if (st == REMAT_OK && (!*best || t < *best_sim)) {
        if (simulated_time) s->time = t;
        remat_schedule_free(*best);
        *best = s;
        *best_sim = t;
        s = NULL;
    }
    remat_sim_result_free(r);
    remat_schedule_free(s);
    return st;
}

/* Runs the DP with `cap` units and keeps the plan when it fits and is faster. */
static remat_status try_cap(pofo *P, const remat_solve_options *o, uint32_t cap, double speedup,
                            remat__pofo_mode mode, int carry_b, remat_schedule **best,
                            double *best_sim, remat_error *err) {
    remat_schedule *s = NULL;
    remat_error e;
    int relaxed = speedup != 0;
    remat_status st =
        ctx_run(P, cap, o->bandwidth * (relaxed ? speedup : 1), mode, relaxed, carry_b, &s, &e);
    double t = 0;
    if (st == REMAT_OK && relaxed) st = repair(P->c, s, o->memory, o->bandwidth, &t, &e);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        if (st != REMAT_E_INFEASIBLE && err) *err = e;
        return st;
    }
    return keep_if_better(P->c, o, s, relaxed, best, best_sim, err);
}

/* dB carried across segments multiplies the reachable dB values (sums of
 * inputs instead of one input) and so one DP run's time by ~7-10; the runs
 * are spread over threads (see pipeline()). */

/* A strict run at `cap` + a binary search over the extra units (the DP
 * rounds every held value up, wasting up to about a unit per checkpoint);
 * REMAT_OK unless an error other than infeasibility occurs. */
static remat_status strict_search(pofo *P, const remat_solve_options *o, remat__pofo_mode mode,
                                  uint32_t extra, int d, remat_schedule **best, double *best_sim,
                                  remat_error *err) {
    remat_status st = try_cap(P, o, P->base_cap, 0, mode, d, best, best_sim, err);
    if (st == REMAT_E_INFEASIBLE) st = REMAT_OK;
    uint32_t lo = 0, hi = extra + 1; /* extra units: lo fits (or is the base) */
    while (st == REMAT_OK && hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        remat_status s2 = try_cap(P, o, P->base_cap + mid, 0, mode, d, best, best_sim, err);
        if (s2 == REMAT_OK)
            lo = mid;
        else if (s2 == REMAT_E_INFEASIBLE)
            hi = mid;
        else
            st = s2;
    }
    return st;
}

static const double speedups[] = {1, 1.5, 2, 3, 4};
#define N_SPEEDUPS (sizeof speedups / sizeof *speedups)
#define PIPE_JOBS (2 + 2 * N_SPEEDUPS)
#define PIPE_THREADS 8

/* pipeline()'s independent jobs: 0, 1 the strict searches without / with dB
 * carried, then the relaxed plans for each speedup, without / with it. */
typedef struct pipe_job {
    const remat_solve_options *o;
    remat__pofo_mode mode;
    uint32_t extra;
    int db;
    pthread_mutex_t mu;
    unsigned next;
    remat_schedule *out[PIPE_JOBS];
    double sim[PIPE_JOBS];
    remat_status st[PIPE_JOBS];
    remat_error err[PIPE_JOBS];
} pipe_job;

typedef struct pipe_worker {
    pipe_job *J;
    pofo P; /* C and sizes shared, OC its own */
} pipe_worker;

static void run_pipe_job(pofo *P, pipe_job *J, unsigned k) {
    int d = k < 2 ? (int)k : (int)((k - 2) & 1);
    if (d && !J->db) return;
    if (k < 2)
        J->st[k] = strict_search(P, J->o, J->mode, J->extra, d, &J->out[k], &J->sim[k], &J->err[k]);
    else
        J->st[k] = try_cap(P, J->o, P->base_cap, speedups[(k - 2) / 2], J->mode, d, &J->out[k],
                           &J->sim[k], &J->err[k]);
    if (J->st[k] == REMAT_E_INFEASIBLE) J->st[k] = REMAT_OK;
}

static void *pipe_worker_run(void *arg) {
    pipe_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->J->mu);
        unsigned k = w->J->next++;
        pthread_mutex_unlock(&w->J->mu);
        if (k >= PIPE_JOBS) return NULL;
        run_pipe_job(&w->P, w->J, k);
    }
}

/* One mode's candidates, all checked by the simulator (see the header):
 * strict plans at the limit and with a few extra units, relaxed plans for
 * link speedups 1..4, each with dB carried and not (the peak of a plan at a
 * given cap differs; relaxed plans with dB carried hold prefetched memory
 * longer, which repair() cannot undo). Jobs run on up to o->threads threads,
 * each with its own OC table while they fit in max_work_bytes; the results
 * are merged in job order, so they do not depend on the threads. The
 * fastest gets its prefetches moved earlier and is kept in *best if faster. */
static remat_status pipeline(pofo *P, const remat_solve_options *o, remat__pofo_mode mode,
                             uint32_t extra, remat_schedule **best, double *best_sim,
                             remat_error *err) {
    pipe_job J;
    memset(&J, 0, sizeof J);
    J.o = o;
    J.mode = mode;
    J.extra = extra;
    J.db = !(P->flags & REMAT__POFO_NO_DB_CARRY);
    pthread_mutex_init(&J.mu, NULL);
    unsigned nt = remat__threads(o->threads);
    if (nt > PIPE_THREADS) nt = PIPE_THREADS;
    pipe_worker w[PIPE_THREADS];
    pthread_t tid[PIPE_THREADS];
    size_t no = P->n * 2 * P->W * P->W * P->FK; /* checked in alloc_tables */
    size_t nc = P->L * P->L * P->W, per = sizeof(double) + sizeof(int32_t);
    uint64_t max_work = o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    uint64_t used = (uint64_t)(nc + no) * per;
    unsigned started = 0;
    w[0].J = &J;
    w[0].P = *P;
    while (started + 1 < nt && used + (uint64_t)no * per <= max_work) {
        pipe_worker *x = &w[started + 1];
        x->J = &J;
        x->P = *P;
        x->P.otab = remat__calloc(no, sizeof(double));
        x->P.ochoice = remat__calloc(no, sizeof(int32_t));
        if (x->P.otab && x->P.ochoice &&
            pthread_create(&tid[started], NULL, pipe_worker_run, x) == 0) {
            started++;
            used += (uint64_t)no * per;
            continue;
        }
        free(x->P.otab);
        free(x->P.ochoice);
        break;
    }
    pipe_worker_run(&w[0]);
    for (unsigned t = 0; t < started; t++) {
        pthread_join(tid[t], NULL);
        free(w[t + 1].P.otab);
        free(w[t + 1].P.ochoice);
    }
    pthread_mutex_destroy(&J.mu);
    remat_schedule *mine = NULL;
    double mine_sim = 0;
    remat_status st = REMAT_OK;
    for (unsigned k = 0; k < PIPE_JOBS; k++) {
        if (J.st[k] != REMAT_OK && st == REMAT_OK) {
            st = J.st[k];
            if (err) *err = J.err[k];
        }
        if (J.out[k] && (!mine || J.sim[k] < mine_sim)) {
            remat_schedule_free(mine);
            mine = J.out[k];
            mine_sim = J.sim[k];
        } else {
            remat_schedule_free(J.out[k]);
        }
    }
    if (st == REMAT_OK && mine) st = shift_pres(P->c, mine, o->memory, o->bandwidth, &mine_sim, err);
    if (st == REMAT_OK && mine && (!*best || mine_sim < *best_sim)) {
        remat_schedule_free(*best);
        *best = mine;
        *best_sim = mine_sim;
        mine = NULL;
    }
    remat_schedule_free(mine);
    return st;
}

/* Carry-mode candidates: the DP with dF carried (oc_carry()) in
 * carry_levels() levels at CARRY_RUNS caps from the limit to limit + extra,
 * for the real link speed, repaired and kept in *best if faster. The runs
 * are independent: worker threads share the table C and each has its own
 * sparse OC, all of them within min(max_work_bytes, CARRY_MAX_BYTES);
 * a run that would need more is skipped. */
#define CARRY_RUNS 5
#define CARRY_MAX_BYTES ((uint64_t)256 << 20)

/* dF levels: fewer on long chains, where the DP's time (reachable states x
 * the O(L) segment loop) would pass the time targets. */
static size_t carry_levels(size_t n) { return n <= 80 ? 33 : n <= 160 ? 17 : 9; }

typedef struct carry_job {
    const pofo *base;
    const remat_solve_options *o;
    remat__pofo_mode mode;
    uint32_t extra;
    pthread_mutex_t mu;
    unsigned next;
    remat_schedule *out[CARRY_RUNS];
    remat_status st[CARRY_RUNS];
    remat_error err[CARRY_RUNS];
} carry_job;

static void *carry_worker(void *arg) {
    carry_job *J = arg;
    pofo W = *J->base; /* C, sizes shared read-only; own OC */
    W.hcount = 0;
    W.hash = (uint64_t)W.hcap * sizeof *W.hash <= W.hmax ? remat__calloc(W.hcap, sizeof *W.hash)
                                                          : NULL;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        unsigned k = J->next++;
        pthread_mutex_unlock(&J->mu);
        if (k >= CARRY_RUNS) break;
        double sim = 0;
        if (!W.hash) { /* no room: skipped, like a run whose states outgrow it */
            J->st[k] = REMAT_E_TOO_LARGE;
            continue;
        }
        J->st[k] = try_cap(&W, J->o, W.base_cap + J->extra * k / (CARRY_RUNS - 1), 1, J->mode, 0,
                           &J->out[k], &sim, &J->err[k]);
    }
    free(W.hash);
    return NULL;
}

static remat_status carry_pipeline(pofo *P0, const remat_solve_options *o,
                                   remat__pofo_mode mode, uint32_t extra, remat_schedule **best,
                                   double *best_sim, remat_error *err) {
    pofo P = *P0;
    remat_status st = REMAT_OK;
    carry_job J;
    memset(&J, 0, sizeof J);
    J.base = &P;
    J.o = o;
    J.mode = mode;
    J.extra = extra;
    pthread_mutex_init(&J.mu, NULL);
    unsigned nt = remat__threads(o->threads);
    if (nt > CARRY_RUNS) nt = CARRY_RUNS;
    if (nt < 1) nt = 1;
    P.hmax /= nt; /* the work limit holds for all workers together */
    pthread_t tid[CARRY_RUNS];
    unsigned started = 0;
    while (started + 1 < nt && started + 1 < CARRY_RUNS &&
           pthread_create(&tid[started], NULL, carry_worker, &J) == 0)
        started++;
    carry_worker(&J);
    for (unsigned t = 0; t < started; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&J.mu);
    /* merged in cap order, so the result does not depend on the threads */
    remat_schedule *mine = NULL;
    double mine_sim = 0;
    for (unsigned k = 0; k < CARRY_RUNS; k++) {
        remat_status s2 = J.st[k];
        if (s2 == REMAT_E_TOO_LARGE || s2 == REMAT_E_INFEASIBLE) s2 = REMAT_OK;
        if (s2 != REMAT_OK && st == REMAT_OK) {
            st = s2;
            if (err) *err = J.err[k];
        }
        if (J.out[k] && (!mine || J.out[k]->time < mine_sim)) {
            remat_schedule_free(mine);
            mine = J.out[k];
            mine_sim = mine->time;
        } else {
            remat_schedule_free(J.out[k]);
        }
    }
    if (st == REMAT_OK && mine) st = shift_pres(P.c, mine, o->memory, o->bandwidth, &mine_sim, err);
    if (st == REMAT_OK && mine) mine->time = mine_sim; /* every carry plan is repaired */
    if (st == REMAT_OK && mine && (!*best || mine_sim < *best_sim)) {
        remat_schedule_free(*best);
        *best = mine;
        *best_sim = mine_sim;
        mine = NULL;
    }
    remat_schedule_free(mine);
    return st;
}

/* pofo takes the best of its own pipeline, offload-only's (a part of its
 * space) and rotor's optimum; one table C serves every DP run: the unit stays
 * M/N and only the number of units changes. */
remat_status remat__solve_pofo(const remat_chain *c, const remat_solve_options *o,
                               remat_schedule **out, remat_error *err) {
    return remat__solve_pofo_flags(c, o, 0, out, err);
}

remat_status remat__solve_pofo_flags(const remat_chain *c, const remat_solve_options *o,
                                     unsigned flags, remat_schedule **out, remat_error *err) {
    *out = NULL;
    if (o->algorithm == REMAT_ALG_POFO && o->bandwidth == 0)
        return remat__solve_optimal(c, o, out, err); /* no link: rotor's optimum */
    uint32_t values = o->offload_values ? o->offload_values : REMAT_DEFAULT_OFFLOAD_VALUES;
    remat__pofo_mode mode =
        o->algorithm == REMAT_ALG_OFFLOAD_ONLY ? REMAT__POFO_OFFLOAD_ONLY : REMAT__POFO_FULL;
    uint32_t extra = (uint32_t)(c->n + 2 < values / 4u + 1 ? c->n + 2 : values / 4u + 1);
    pofo P;
    REMAT__FORWARD(ctx_init(&P, c, o->memory, values, extra, 1, o->max_work_bytes, err));
    P.flags = flags;
    remat_schedule *best = NULL;
    double best_sim = 0;
    remat_status st = pipeline(&P, o, mode, extra, &best, &best_sim, err);
    if (st == REMAT_OK && mode == REMAT__POFO_FULL)
        st = pipeline(&P, o, REMAT__POFO_OFFLOAD_ONLY, extra, &best, &best_sim, err);
    pofo_free(&P);
    if (st == REMAT_OK && !(flags & REMAT__POFO_NO_CARRY)) { /* one C for both modes */
        uint64_t lim = o->max_work_bytes && o->max_work_bytes < CARRY_MAX_BYTES
                           ? o->max_work_bytes
                           : CARRY_MAX_BYTES;
        remat_error e;
        st = ctx_init(&P, c, o->memory, values, extra, carry_levels(c->n), lim, &e);
        if (st == REMAT_E_TOO_LARGE) {
            st = REMAT_OK; /* skipped */
        } else if (st != REMAT_OK) {
            if (err) *err = e;
        } else {
            free(P.hash); /* each worker has its own */
            P.hash = NULL;
            st = carry_pipeline(&P, o, mode, extra, &best, &best_sim, err);
            if (st == REMAT_OK && mode == REMAT__POFO_FULL)
                st = carry_pipeline(&P, o, REMAT__POFO_OFFLOAD_ONLY, extra, &best, &best_sim, err);
            pofo_free(&P);
        }
    }
    if (st != REMAT_OK) {
        remat_schedule_free(best);
        return st;
    }
    if (mode == REMAT__POFO_FULL) {
        /* Rotor's optimum is the no-offload corner of pofo's space, solved
         * with finer memory (500 slots): keep it when the coarse DP loses. */
        remat_solve_options oo = *o;
        oo.algorithm = REMAT_ALG_OPTIMAL;
        remat_schedule *s = NULL;
        remat_error e;
        remat_status s2 = remat__solve_optimal(c, &oo, &s, &e);
        if (s2 == REMAT_OK && (!best || s->time < best_sim)) {
            remat_schedule_free(best);
            best = s;
            best_sim = s->time;
            s = NULL;
        }
        remat_schedule_free(s);
        if (s2 != REMAT_OK && s2 != REMAT_E_INFEASIBLE) {
            remat_schedule_free(best);
            if (err) *err = e;
            return s2;
        }
    }
    if (!best)
        return remat__fail(err, REMAT_E_INFEASIBLE, "%s: no schedule fits in %llu bytes",
                           o->algorithm == REMAT_ALG_POFO ? "pofo" : "offload-only",
                           (unsigned long long)o->memory);
    /* time: the DP's prediction for a strict plan (>= its simulated time), the
     * simulated time for a repaired relaxed one */
    best->memory_limit = o->memory;
    *out = best;
    return REMAT_OK;
}
