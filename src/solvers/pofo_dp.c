/* pofo: recomputation combined with offloading (the NeurIPS 2021 paper,
 * Section 4 and Appendix B), made valid under SPEC section 2's copy rules.
 * This file holds its dynamic program: the tables C and OC and the one
 * transition of OC; pofo_emit.c turns a solved OC into ops, pofo_search.c
 * runs the candidate plans and keeps the best.
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
 * waits for nothing. Memory is counted in `values` units of memory/values
 * bytes, rounded up for held values and exact for transients.
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
 * Carry mode (FK > 1 dF levels): f levels of fq bytes still to offload are
 * carried from segment to segment; they drain at the link's speed during
 * forwards and count as held memory (the paper's gradual release, rounded up
 * to a level). A segment may first wait for the link to drain (Lemma 1's
 * idle, taken whole), and the loss waits for every offload (B.2's junction
 * idle). Such plans are emitted without the per-segment Waits and made valid
 * by pofo_search.c's repair(). Its OC is a hash table of the reachable
 * states, so it runs on chains of any length. */
#include <math.h>
#include <string.h>

#include "pofo_impl.h"

static uint64_t D_(const pofo_shared *P, size_t i) { return P->sizes[2 * (P->n + 1) + i]; }
static uint64_t UA(const pofo_shared *P, size_t i) { return P->sizes[3 * (P->n + 1) + i]; }
static uint64_t UAB(const pofo_shared *P, size_t i) { return P->sizes[4 * (P->n + 1) + i]; }
static const remat_stage *ST(const pofo_shared *P, size_t i) { return &P->c->stages[i - 1]; }
static size_t oidx(const pofo_shared *P, oc_state s) {
    return ((((s.i - 1) * 2 + (size_t)s.x) * P->W + s.a) * P->W + s.b) * P->FK + s.f;
}

/* The DP's inner calls, inlined: they run once per choice tried. */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

/* Packed as (j - i) << 4 | push << 3 | drain << 2 | off << 1 | fck. */
HOT int32_t pack(pofo_choice ch) {
    return (int32_t)((uint32_t)ch.len << 4 | (uint32_t)ch.push << 3 | (uint32_t)ch.drain << 2 |
                     (uint32_t)ch.off << 1 | ch.fck);
}

int32_t pofo_choice_pack(pofo_choice ch) { return pack(ch); }

pofo_choice pofo_choice_unpack(int32_t v) {
    pofo_choice ch = {(unsigned char)(v & 1), (unsigned char)((v >> 1) & 1),
                      (unsigned char)((v >> 2) & 1), (unsigned char)((v >> 3) & 1),
                      (uint32_t)v >> 4};
    return ch;
}

/* ---- C: persistent rematerialization of stages i..j from a held input,
 * with d[j] held and m units for everything but the input. ---- */

static void c_cell(pofo_shared *P, size_t i, size_t j, size_t m) {
    uint64_t mb = (uint64_t)m * P->q;
    const remat_stage *si = ST(P, i);
    double best = INFINITY;
    int32_t choice = -1;
    uint64_t bneed = pofo_abar(P, i) + D_(P, i) + D_(P, i - 1) + si->bwd_overhead;
    if (D_(P, j) + pofo_abar(P, i) + remat__fall_overhead_bound(si) <= mb && bneed <= mb) {
        if (i == j) {
            best = si->fwd_time + si->bwd_time;
            choice = 0;
        } else {
            uint64_t u = UAB(P, i);
            if (u <= m) {
                double sub = P->ctab[pofo_cidx(P, i + 1, j, m - u)];
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
        uint64_t need = (k == i ? 0 : pofo_a(P, k - 1)) + pofo_a(P, k) + sk->fwd_overhead;
        if (need > fmax) fmax = need;
        if (D_(P, j) + fmax > mb) break;
        fsum += sk->fwd_time;
        uint64_t u = UA(P, k);
        if (u > m) continue;
        double t1 = P->ctab[pofo_cidx(P, k + 1, j, m - u)];
        double t2 = P->ctab[pofo_cidx(P, i, k, m)];
        double t = fsum + t1 + t2;
        if (t < best) {
            best = t;
            choice = (int32_t)(k - i + 1);
        }
    }
    P->ctab[pofo_cidx(P, i, j, m)] = best;
    P->cchoice[pofo_cidx(P, i, j, m)] = choice;
}

static void fill_c(pofo_shared *P) {
    for (size_t len = 0; len < P->L; len++)
        for (size_t i = 1; i + len <= P->L; i++)
            for (size_t m = 0; m < P->W; m++) c_cell(P, i, i + len, m);
}

/* ---- OC storage: a dense table, or in carry mode a sparse one ---- */

/* Carry mode's OC is sparse: a dense table of its states would take
 * n x 2 x W^2 x FK cells (1 GiB at L = 340), of which few are reachable
 * from (1, 0, 0, 0, 0). Open addressing, key = the dense index + 1. */
struct oc_entry {
    uint64_t key;
    double val;
    int32_t choice;
};

#define OC_TODO (-2)
#define OC_HASH_START ((size_t)1 << 14)

static size_t oc_slot(const pofo_run *r, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (r->hcap - 1);
}

static oc_entry *oc_find(const pofo_run *r, uint64_t key) {
    for (size_t k = oc_slot(r, key);; k = (k + 1) & (r->hcap - 1)) {
        if (r->hash[k].key == key) return &r->hash[k];
        if (r->hash[k].key == 0) return NULL;
    }
}

static int oc_grow(pofo_run *r) {
    size_t ncap = r->hcap * 2;
    if (ncap < r->hcap || (uint64_t)ncap > r->hmax / sizeof(oc_entry)) return 0;
    oc_entry *old = r->hash, *nh = remat__calloc(ncap, sizeof *nh);
    if (!nh) return 0;
    size_t ocap = r->hcap;
    r->hash = nh;
    r->hcap = ncap;
    for (size_t k = 0; k < ocap; k++) {
        if (!old[k].key) continue;
        size_t s = oc_slot(r, old[k].key);
        while (nh[s].key) s = (s + 1) & (ncap - 1);
        nh[s] = old[k];
    }
    free(old);
    return 1;
}

/* Stores a state's value; sets hfull when the sparse table is full. */
static void oc_store(pofo_run *r, oc_state st, double val, int32_t choice) {
    size_t idx = oidx(r->sh, st);
    if (!pofo_carry(r->sh)) {
        r->otab[idx] = val;
        r->ochoice[idx] = choice;
        return;
    }
    if (2 * (r->hcount + 1) > r->hcap && !oc_grow(r)) {
        r->hfull = 1;
        return;
    }
    uint64_t key = (uint64_t)idx + 1;
    size_t s = oc_slot(r, key);
    while (r->hash[s].key && r->hash[s].key != key) s = (s + 1) & (r->hcap - 1);
    if (!r->hash[s].key) r->hcount++;
    r->hash[s] = (oc_entry){key, val, choice};
}

/* ---- OC: from segment i to the end of B i ---- */

static double prefetch_idle(const pofo_run *r, size_t b, double overlap) {
    double t = (double)b * (double)r->sh->q / r->bw - overlap;
    return b && t > 0 ? t : 0;
}

static double drain_time(const pofo_run *r, size_t f) {
    return f ? (double)f * (double)r->sh->fq / r->bw : 0; /* no link when nothing is pending */
}

/* the dF level after `span` time units of copying `pend` bytes; FK when out
 * of range */
static size_t f_after(const pofo_run *r, double pend, double span) {
    const pofo_shared *P = r->sh;
    double rem = pend - span * r->bw;
    if (!(rem > 0)) return 0;
    double lv = ceil(rem / (double)P->fq);
    return lv >= (double)P->FK ? P->FK : (size_t)lv;
}

/* pofo_next_state() with the input's bytes and units already known. */
HOT int next_of(const pofo_run *r, oc_state s, pofo_choice ch, double span, uint64_t in,
                uint64_t ui, oc_state *next) {
    const pofo_shared *P = r->sh;
    next->i = s.i + (ch.fck ? ch.len : 0) + 1;
    next->x = !ch.fck; /* Fall i hands abar[i] on, Fn j hands a[j] */
    next->a = s.a + (ch.off ? 0 : ui);
    next->b = (ch.off ? ui : 0) + (ch.push ? s.b : 0);
    next->f = 0;
    if (!pofo_carry(P)) return 1;
    double pend = (double)(ch.drain ? 0 : (uint64_t)s.f * P->fq) + (ch.off ? (double)in : 0);
    next->f = f_after(r, pend, span);
    return next->f < P->FK;
}

int pofo_next_state(const pofo_run *r, oc_state s, pofo_choice ch, double span, oc_state *next) {
    uint64_t in = pofo_input_bytes(r->sh, s.i, s.x);
    return next_of(r, s, ch, span, in, pofo_units(r->sh, in), next);
}

/* The best so far at one state, while its choices are tried. */
typedef struct oc_best {
    double time;
    int32_t choice;
} oc_best;

/* What try_choice() needs of the state, computed once per state. */
typedef struct oc_here {
    oc_state s;
    uint64_t in, ui; /* the input's bytes and units */
    double idle;     /* carry mode's drain before the segment */
    int carry;
} oc_here;

/* One choice at h: its forward time `span`, its backward time `back` (B i,
 * or C's rematerialization). */
static double oc_get(pofo_run *r, oc_state s);

HOT void try_choice(pofo_run *r, const oc_here *h, pofo_choice ch, double span, double back,
                    oc_best *best) {
    double pidle = prefetch_idle(r, h->s.b, back);
    /* Without carry, pushing dB on when its prefetch waits for nothing
     * never beats not pushing: skipped. */
    if (!h->carry && ch.push && !(pidle > 0)) return;
    oc_state next;
    if (!next_of(r, h->s, ch, span, h->in, h->ui, &next)) return;
    double sub = oc_get(r, next);
    double copy = 0; /* without carry the segment waits for its offload (Lemma 1) */
    if (!h->carry && ch.off) {
        double c = (double)h->in / r->bw;
        copy = c > span ? c - span : 0;
    }
    double idle = h->idle;
    double t = idle + span + copy + sub + back + (ch.push ? 0 : pidle);
    if (t < best->time) {
        best->time = t;
        best->choice = pack(ch);
    }
}

/* OC at state s: every choice (drain first or not, offload the input or not,
 * carry dB on or not; Fall i, or Fck i and Fn up to j), in a fixed order,
 * strictly better ones win. */
static void oc_solve(pofo_run *r, oc_state s) {
    const pofo_shared *P = r->sh;
    oc_best best = {INFINITY, -1};
    uint64_t in = pofo_input_bytes(P, s.i, s.x), ui = pofo_units(P, in);
    const remat_stage *si = ST(P, s.i);
    uint64_t abar = pofo_abar(P, s.i), fb = 0;
    if (s.a + ui + s.b > r->cap) goto done;
    fb = (r->cap - s.a - ui - s.b) * P->q; /* bytes for backward transients */
    if (s.i == P->n) { /* the loss: every offload has ended (B.2) */
        uint64_t ff = (r->cap - s.a - ui) * P->q;
        if (abar + remat__fall_overhead_bound(si) <= ff &&
            abar + D_(P, s.i - 1) + si->bwd_overhead <= fb) {
            best.time = drain_time(r, s.f) + si->fwd_time + si->bwd_time +
                        prefetch_idle(r, s.b, si->bwd_time);
            best.choice = 0;
        }
        goto done;
    }
    int max_off = r->mode != REMAT__POFO_REMAT_ONLY && r->bw > 0 ? 1 : 0;
    unsigned drains = s.f > 0 ? 1u : 0u; /* with carried offloads: also try draining them */
    for (unsigned drain = 0; drain <= drains; drain++) {
        uint64_t fbytes = drain ? 0 : (uint64_t)s.f * P->fq, fu = pofo_units(P, fbytes);
        if (s.a + ui + fu > r->cap) continue;
        oc_here h = {s, in, ui, drain ? drain_time(r, s.f) : 0, pofo_carry(P)};
        uint64_t ff = (r->cap - s.a - ui - fu) * P->q; /* bytes for forward transients */
        for (unsigned pc = 0; pc <= 2u * (unsigned)max_off + 1; pc++) {
            pofo_choice ch = {0, pc & 1, drain, pc >> 1, 0};
            if (ch.push && !(s.b && r->carry_b)) continue;
            /* Fall i: the next segment's input is abar[i]. */
            if (abar + remat__fall_overhead_bound(si) <= ff &&
                abar + D_(P, s.i) + D_(P, s.i - 1) + si->bwd_overhead <= fb)
                try_choice(r, &h, ch, si->fwd_time, si->bwd_time, &best);
            if (r->mode == REMAT__POFO_OFFLOAD_ONLY) continue;
            /* Fck i, Fn up to j: the next segment's input is a[j]. */
            ch.fck = 1;
            uint64_t fmax = 0;
            double fsum = 0;
            size_t mb = r->cap - s.a - ui - s.b;
            for (size_t j = s.i; j < P->n; j++) {
                const remat_stage *sj = ST(P, j);
                uint64_t need = (j == s.i ? 0 : pofo_a(P, j - 1)) + pofo_a(P, j) + sj->fwd_overhead;
                if (need > fmax) fmax = need;
                if (fmax > ff) break;
                fsum += sj->fwd_time;
                double cb = P->ctab[pofo_cidx(P, s.i, j, mb)];
                if (!(cb < INFINITY)) continue;
                ch.len = (uint32_t)(j - s.i);
                try_choice(r, &h, ch, fsum, cb, &best);
            }
        }
    }
done:
    oc_store(r, s, best.time, best.choice);
}

/* Top-down: only the states reachable from (1, 0, 0, 0, 0) are solved, and
 * few dB values are (0 or the size of some input). Depth <= n. */
static double oc_get(pofo_run *r, oc_state s) {
    size_t k = oidx(r->sh, s);
    if (pofo_carry(r->sh)) {
        if (r->hfull) return INFINITY;
        const oc_entry *e = oc_find(r, (uint64_t)k + 1);
        if (e) return e->val;
        oc_solve(r, s);
        e = oc_find(r, (uint64_t)k + 1);
        return e ? e->val : INFINITY;
    }
    if (r->ochoice[k] == OC_TODO) oc_solve(r, s);
    return r->otab[k];
}

double pofo_oc_value(pofo_run *r, oc_state s) { return oc_get(r, s); }

int32_t pofo_oc_choice(const pofo_run *r, oc_state s) {
    size_t k = oidx(r->sh, s);
    if (!pofo_carry(r->sh)) return r->ochoice[k];
    const oc_entry *e = oc_find(r, (uint64_t)k + 1);
    return e ? e->choice : -1;
}

/* ---- set-up ---- */

static size_t oc_cells(const pofo_shared *P) {
    return P->n * 2 * P->W * P->W * P->FK; /* checked in pofo_shared_init */
}

uint64_t pofo_oc_bytes(const pofo_shared *P) {
    return pofo_carry(P) ? 0 : (uint64_t)oc_cells(P) * (sizeof(double) + sizeof(int32_t));
}

void pofo_shared_free(pofo_shared *P) {
    free(P->ctab);
    free(P->cchoice);
    free(P->sizes);
    memset(P, 0, sizeof *P);
}

/* Checks the tables' sizes (C, and one dense OC unless in carry mode) against
 * max_work and allocates C. */
static remat_status alloc_c(pofo_shared *P, uint64_t max_work, remat_error *err) {
    size_t nc, no;
    REMAT__RETURN_IF(!remat__mul_size(P->L, P->L, &nc) || !remat__mul_size(nc, P->W, &nc) ||
                         !remat__mul_size(P->n * 2, P->W, &no) || !remat__mul_size(no, P->W, &no) ||
                         !remat__mul_size(no, P->FK, &no),
                     err, REMAT_E_TOO_LARGE, "pofo: tables too large for this chain and values");
    size_t per = sizeof(double) + sizeof(int32_t), total;
    REMAT__RETURN_IF(!remat__mul_size(pofo_carry(P) ? nc : nc + no, per, &total) ||
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
    if (pofo_carry(P)) { /* each run's sparse OC grows on demand up to max_work minus C */
        size_t cbytes = nc * per;
        P->hmax = max_work > cbytes ? max_work - cbytes : 0;
        REMAT__RETURN_IF(OC_HASH_START * sizeof(oc_entry) > P->hmax, err, REMAT_E_TOO_LARGE,
                         "pofo carry OC table would need more than max_work_bytes");
    }
    return REMAT_OK;
}

remat_status pofo_shared_init(pofo_shared *P, const remat_chain *c, uint64_t memory,
                              uint32_t values, uint32_t extra, size_t fk, uint64_t max_work,
                              remat_error *err) {
    memset(P, 0, sizeof *P);
    P->FK = fk;
    REMAT__RETURN_IF(values == 0 || values > 100000, err, REMAT_E_INPUT,
                     "offload values: %u is not in 1..100000", values);
    P->c = c;
    P->n = c->n;
    P->L = c->n - 1;
    P->q = memory / values ? memory / values : 1;
    P->base_cap = (uint32_t)(memory / P->q > values * 2u ? values * 2u : memory / P->q);
    P->W = (size_t)P->base_cap + extra + 1; /* C serves every cap up to cap + extra */
    if (pofo_carry(P)) { /* FK - 1 levels span the W - 1 units */
        uint64_t span = (uint64_t)(P->W - 1) * P->q;
        P->fq = span / (fk - 1) + (span % (fk - 1) != 0);
        if (P->fq == 0) P->fq = 1;
    }
    if (max_work == 0) max_work = REMAT_DEFAULT_MAX_WORK_BYTES;
    remat_status st = alloc_c(P, max_work, err);
    if (st == REMAT_OK) {
        P->sizes = remat__calloc(5 * (P->n + 1), sizeof *P->sizes);
        if (!P->sizes) st = remat__fail(err, REMAT_E_NOMEM, "pofo: out of memory");
    }
    for (size_t i = 0; st == REMAT_OK && i <= P->n; i++) {
        size_t w = P->n + 1;
        P->sizes[i] = remat_chain_a_bytes(c, i);
        P->sizes[w + i] = i ? remat_chain_abar_bytes(c, i) : 0;
        P->sizes[2 * w + i] = remat_chain_d_bytes(c, i);
        P->sizes[3 * w + i] = pofo_units(P, P->sizes[i]);
        P->sizes[4 * w + i] = pofo_units(P, P->sizes[w + i]);
    }
    if (st != REMAT_OK) {
        pofo_shared_free(P);
        return st;
    }
    fill_c(P);
    return REMAT_OK;
}

remat_status pofo_run_init(pofo_run *r, const pofo_shared *P, uint64_t hmax, remat_error *err) {
    memset(r, 0, sizeof *r);
    r->sh = P;
    if (pofo_carry(P)) { /* no room is no error: the run reports TOO_LARGE */
        r->hmax = hmax;
        r->hcap = OC_HASH_START;
        if ((uint64_t)r->hcap * sizeof(oc_entry) <= hmax)
            r->hash = remat__calloc(r->hcap, sizeof *r->hash);
        return REMAT_OK;
    }
    size_t no = oc_cells(P);
    remat_status st = remat__alloc_table((void **)&r->otab, no, sizeof(double), 0,
                                         "pofo OC table", err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&r->ochoice, no, sizeof(int32_t), 0, "pofo OC choices",
                                err);
    if (st != REMAT_OK) pofo_run_free(r);
    return st;
}

void pofo_run_free(pofo_run *r) {
    free(r->otab);
    free(r->ochoice);
    free(r->hash);
    r->otab = NULL;
    r->ochoice = NULL;
    r->hash = NULL;
}

void pofo_run_reset(pofo_run *r, uint32_t cap, double bw, remat__pofo_mode mode, int relaxed,
                    int carry_b) {
    r->cap = cap;
    r->bw = bw;
    r->mode = mode;
    r->relaxed = relaxed;
    r->carry_b = carry_b;
    r->s = NULL;
    r->has_last = 0;
    if (pofo_carry(r->sh)) {
        if (r->hash) memset(r->hash, 0, r->hcap * sizeof *r->hash);
        r->hcount = 0;
        r->hfull = 0;
        return;
    }
    size_t no = oc_cells(r->sh);
    for (size_t k = 0; k < no; k++) r->ochoice[k] = OC_TODO;
}
