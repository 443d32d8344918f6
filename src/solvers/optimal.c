/* optimal: rotor's optimal persistent schedule (Theorem 1, Algorithms 1-2),
 * with the memory terms re-derived from SPEC section 2 (docs/optimal.md).
 *
 * C(s, t, m) is the best time to turn d[t] into d[s-1] for stages s..t when
 * a[s-1] (plain or abar) is held outside the budget m and d[t] inside it.
 * The table stores, for each pair (s, t), only the budgets between the
 * sub-chain's smallest need lo(s,t) and its store-all need g(s,t): below lo
 * it is infinite, from g on it is the plain forward+backward time. A solve
 * keeps only the budgets at which some path from C(1, n, M) reads the row,
 * and a large one only those that can lie on a best schedule (the bounds).
 * Rows are float, filled by blocks of columns on pipelined workers; the
 * schedule is rebuilt from the table and its time and peak recomputed
 * exactly. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../core/parallel.h"
#include "solvers_internal.h"

/* Sizes are saturated here so sums of a few of them never wrap. */
#define OPT_LIM ((uint64_t)1 << 60)

static uint64_t sat(uint64_t x) { return x > OPT_LIM ? OPT_LIM : x; }
static uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min2(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t max3(uint64_t a, uint64_t b, uint64_t c) { return max2(max2(a, b), c); }

typedef size_t (*opt_kernel)(float *, const float *, const float *, float, float, float, size_t,
                             float);

/* Sizes in table units (bytes, or slots rounded up) and per-pair bounds. */
typedef struct opt_ctx {
    const remat_chain *c;
    size_t n;
    uint64_t *a, *ab, *d, *of, *ob; /* [n+1], index = stage or value */
    uint64_t *fnp;                  /* [n+1] a[j-1] + a[j] + of[j]: an Fn j's need */
    const struct opt_ctx *held_in; /* a lower bound table's fine table, whose needs its
                                    * choices check and whose held sizes and budget its
                                    * query ranges use (NULL: not a bound table) */
    uint64_t unit;                  /* bytes per unit: 1, or the slot (a power of two) */
    uint64_t budget;                /* inside budget at the top (units) */
    /* Pairs s <= t use one triangle of an n x n array and the transposed
     * copies (t, s) the other, so each pair of names shares one array. */
    uint64_t *lo, *lot;             /* [n*n] the need lo(s, t), and at (t, s) */
    uint64_t *g, *off;              /* [n*n] store-all need, and at (t, s) the row offset */
    float *tab;
    size_t cells;      /* floats in tab */
    const char *label; /* for progress: the table, or a bound table */
    double *pf, *pfb; /* [n+1] prefix sums of fwd and fwd+bwd times, scaled */
    double scale;     /* times * scale keep float tables well inside range */
    struct opt_view *vw, *vwt; /* [n*n] rows as views, by (s,t) and at (t,s) */
    opt_kernel kern[6]; /* relax loops: [row,row], [row,const], [const,row], [const,const];
                         * then the bounds pass's [row,row], [row,const] */
} opt_ctx;

#define IDX(x, s, t) (((s) - 1) * (x)->n + ((t) - 1))

static void ctx_free(opt_ctx *x) {
    free(x->a); free(x->ab); free(x->d); free(x->of); free(x->ob); free(x->fnp);
    free(x->lo); free(x->g); free(x->tab); /* lot, off and vwt share lo, g and vw */
    free(x->pf); free(x->pfb); free(x->vw);
    memset(x, 0, sizeof *x);
}

/* The Fall s / B s needs with d[t] held: m_all(s, t) of the paper, derived. */
static uint64_t m_all(const opt_ctx *x, size_t s, size_t t) {
    return max2(sat(x->d[t] + x->ab[s] + x->of[s]),
                sat(x->ab[s] + x->d[s] + x->d[s - 1] + x->ob[s]));
}

/* Slots are powers of two: a finer slot divides a coarser one, so whatever
 * fits at a coarser slot also fits at a finer one, with the same or a larger
 * budget (docs/optimal.md). The slot for limit mem is the largest power of
 * two not above mem/S, so a table has between S and 2S slots: `--slots S`
 * promises at least S. unit_step(u) is the smallest limit whose slot is 2u. */
static uint64_t unit_step(uint64_t slots, uint64_t u) {
    return u > UINT64_MAX / 2 / slots ? UINT64_MAX : 2 * slots * u;
}

static uint64_t unit_of(uint64_t slots, uint64_t mem) {
    uint64_t u = 1;
    while (u < OPT_LIM && mem >= unit_step(slots, u)) u *= 2;
    return u;
}

/* The smallest and the largest limit whose slot is u (0 for u = 1). */
static uint64_t unit_floor(uint64_t slots, uint64_t u) {
    return u > 1 ? unit_step(slots, u / 2) : 0;
}
static uint64_t unit_top(uint64_t slots, uint64_t u) { return unit_step(slots, u) - 1; }

/* fnp[j] = a[j-1] + a[j] + of[j] from the sizes in units. */
static void fnp_of_sizes(opt_ctx *x) {
    for (size_t j = 1; j <= x->n; j++) x->fnp[j] = sat(x->a[j - 1] + x->a[j] + x->of[j]);
}

/* Converts sizes into units: bytes when slots == 0, else ceil(bytes / u)
 * with u = unit_of(slots, mem); the budget is floor((mem - a[0]) / u). */
static void ctx_units(opt_ctx *x, uint64_t slots, uint64_t mem) {
    const remat_chain *c = x->c;
    uint64_t u = slots ? unit_of(slots, mem) : 1;
    x->unit = u;
    for (size_t i = 0; i <= x->n; i++) {
        uint64_t v[5] = {remat_chain_a_bytes(c, i), i ? remat_chain_abar_bytes(c, i) : 0,
                         remat_chain_d_bytes(c, i), i ? c->stages[i - 1].fwd_overhead : 0,
                         i ? c->stages[i - 1].bwd_overhead : 0};
        for (int k = 0; k < 5; k++) v[k] = sat(v[k] / u + (v[k] % u != 0));
        x->a[i] = v[0]; x->ab[i] = v[1]; x->d[i] = v[2]; x->of[i] = v[3]; x->ob[i] = v[4];
    }
    fnp_of_sizes(x);
    uint64_t in = remat_chain_a_bytes(c, 0);
    x->budget = mem < in ? 0 : (mem - in) / u;
}

/* lo(s, t): the smallest budget any schedule of the recurrence fits in.
 *
 * lo is the min over choices of the recurrence's needs, O(n^3) as written.
 * Two exact shortcuts make it about O(n^2) on real chains (docs/optimal.md):
 * the choice s' = t gives an upper bound, and
 *   lo(s, t) >= max(lo(s+1, t), B s's need, d[t] + run(s, t))
 * (a longer prefix never needs less; B s runs once; every stage s..t-1 runs
 * forward once while d[t] is held), so when the two meet no other choice is
 * tried. Otherwise the choices are scanned with two cut-offs: the Fck/Fn
 * need d[t] + run(s, s') rises with s', and a[s'-1] + lo(s', t) >= lo(s', t)
 * rises as s' falls. */
static uint64_t lo_of(const opt_ctx *x, size_t s, size_t t, const uint64_t *run) {
    const uint64_t *lo_s = x->lo + IDX(x, s, 1);  /* lo_s[u-1] = lo(s, u) */
    const uint64_t *lo_t = x->lot + IDX(x, t, 1); /* lo_t[u-1] = lo(u, t) */
    uint64_t best = max2(m_all(x, s, t), sat(x->ab[s] + lo_t[s]));
    uint64_t last = max3(x->d[t] + run[t], x->a[t - 1] + lo_t[t - 1], lo_s[t - 2]);
    if (last < best) best = last;
    uint64_t bneed = sat(x->ab[s] + x->d[s] + x->d[s - 1] + x->ob[s]);
    if (max3(lo_t[s], bneed, x->d[t] + run[t]) >= best) return best;
    size_t a0 = s + 1, b0 = t; /* the largest s' < t with d[t] + run(s, s') < best */
    while (a0 < b0) {
        size_t mid = a0 + (b0 - a0) / 2;
        if (x->d[t] + run[mid] < best) a0 = mid + 1;
        else b0 = mid;
    }
    for (size_t sp = a0 - 1; sp > s && lo_t[sp - 1] < best; sp--) {
        uint64_t v = max3(x->d[t] + run[sp], x->a[sp - 1] + lo_t[sp - 1], lo_s[sp - 2]);
        if (v < best) best = v;
    }
    return best;
}

static remat_status ctx_bounds(opt_ctx *x, remat_error *err) {
    size_t n = x->n;
    uint64_t *run = remat__calloc(n + 2, sizeof *run);
    REMAT__RETURN_IF(!run, err, REMAT_E_NOMEM, "optimal: out of memory");
    for (size_t s = n; s >= 1; s--) {
        size_t ss = IDX(x, s, s);
        x->lo[ss] = m_all(x, s, s);
        x->lot[ss] = x->lo[ss];
        /* run[s'] = the need of Fck s, Fn s+1..s'-1 (without d[t]), rising in s' */
        uint64_t r = sat(x->a[s] + x->of[s]);
        for (size_t sp = s + 1; sp <= n; sp++) {
            if (sp > s + 1 && x->fnp[sp - 1] > r) r = x->fnp[sp - 1];
            run[sp] = r;
        }
        for (size_t t = s + 1; t <= n; t++) {
            uint64_t v = sat(lo_of(x, s, t, run));
            x->lo[IDX(x, s, t)] = v;
            x->lot[IDX(x, t, s)] = v;
        }
    }
    free(run);
    return REMAT_OK;
}

static remat_status ctx_init(opt_ctx *x, const remat_chain *c, uint64_t max_work,
                             remat_error *err) {
    memset(x, 0, sizeof *x);
    x->c = c;
    x->n = c->n;
    x->label = "optimal: table";
    size_t n1 = c->n + 1, nn;
    REMAT__RETURN_IF(!remat__mul_size(c->n, c->n, &nn), err, REMAT_E_TOO_LARGE,
                     "optimal: chain of %zu stages is too long", c->n);
    uint64_t **v1[6] = {&x->a, &x->ab, &x->d, &x->of, &x->ob, &x->fnp};
    for (int k = 0; k < 6; k++) {
        *v1[k] = remat__calloc(n1, sizeof(uint64_t));
        if (!*v1[k]) return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    }
    x->pf = remat__calloc(n1, sizeof(double));
    x->pfb = remat__calloc(n1, sizeof(double));
    if (!x->pf || !x->pfb) return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    uint64_t cap = max_work ? max_work : REMAT_DEFAULT_MAX_WORK_BYTES;
    uint64_t per = (uint64_t)nn * 8;
    REMAT__RETURN_IF(per / 8 != nn || per > cap / 2, err, REMAT_E_TOO_LARGE,
                     "optimal: the per-pair bounds of %zu stages would need %llu bytes, more "
                     "than the work limit of %llu bytes",
                     c->n, (unsigned long long)(per * 2), (unsigned long long)cap);
    REMAT__FORWARD(remat__alloc_table((void **)&x->lo, nn, 8, cap, "optimal per-pair bounds", err));
    x->lot = x->lo; /* g and off come with the table (build_table) */
    /* Scale times by a power of two so the float table keeps its precision. */
    long double total = 0; /* long double: no overflow for any finite times */
    for (size_t i = 1; i <= c->n; i++)
        total += (long double)c->stages[i - 1].fwd_time + c->stages[i - 1].bwd_time;
    int e = 0;
    if (total > 0) frexpl(total, &e);
    if (e > 1000) e = 1000;
    if (e < -1000) e = -1000;
    x->scale = ldexp(1.0, 20 - e);
    for (size_t i = 1; i <= c->n; i++) {
        x->pf[i] = x->pf[i - 1] + c->stages[i - 1].fwd_time * x->scale;
        x->pfb[i] = x->pfb[i - 1] +
                    (c->stages[i - 1].fwd_time + c->stages[i - 1].bwd_time) * x->scale;
    }
    return REMAT_OK;
}

/* ---- table rows ---- */

static float tmin_f(const opt_ctx *x, size_t s, size_t t) {
    return (float)(x->pfb[t] - x->pfb[s - 1]);
}

/* C(s, t, .) as a row: k < lo is infinite, lo <= k < hi reads row, else tail.
 * A row cut short by the bounds (cut) gets its last value as its tail once
 * filled: a schedule that fits a budget fits any larger one. */
typedef struct opt_view {
    const float *row;
    uint64_t lo, hi;
    float tail;
    int cut;
} opt_view;

static opt_view view_of(const opt_ctx *x, size_t s, size_t t) { return x->vw[IDX(x, s, t)]; }

static float view_at(const opt_view *v, uint64_t k) {
    if (k < v->lo) return INFINITY;
    return k < v->hi ? v->row[k - v->lo] : v->tail;
}

/* out[i] = min(out[i], (c + a[i]) + b[i]), with a or b a row or a constant,
 * until out[i] <= stop: out falls with i and no candidate is below stop, so
 * nothing from there on improves. Returns where it stopped (len if it did
 * not). The check is per vector, so up to a vector's width more cells are
 * relaxed, which changes nothing. The scalar rebuild adds in the same order,
 * so it finds the stored values again. On x86 the loops use SSE, or AVX when
 * the processor has it. */
#define OPT_SCALAR(A, B)                                        \
    for (; i < len; i++) {                                      \
        if (o[i] <= stop) return i;                             \
        float v = (c + (A ? a[i] : ca)) + (B ? b[i] : cb);      \
        if (v < o[i]) o[i] = v;                                 \
    }                                                           \
    return len;

/* At the start of each block of OPT_SKIP cells: when o[i] is already at most
 * the candidate at the block's last cell, no cell of the block improves (o
 * and the candidate fall with i; float sums are monotone), so the block is
 * skipped, leaving i at its last vector (the loop adds the vector width W). */
#define OPT_SKIP 32
#define OPT_SKIPS(A, B, W, SKIP)                                                           \
    (SKIP && (A || B) && i % OPT_SKIP == 0 && len - i >= OPT_SKIP &&                       \
     o[i] <= (c + (A ? a[i + OPT_SKIP - 1] : ca)) + (B ? b[i + OPT_SKIP - 1] : cb) &&        \
     (i += OPT_SKIP - W, 1))

#if defined(__GNUC__) && !defined(REMAT_NO_SIMD) && \
    (defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__)))
#include <immintrin.h>
#define OPT_X86 1
#define OPT_KERNEL(name, A, B, SKIP)                                                       \
    static size_t name(float *o, const float *a, const float *b, float ca, float cb, float c, \
                       size_t len, float stop) {                                           \
        __m128 vc = _mm_set1_ps(c), vca = _mm_set1_ps(ca), vcb = _mm_set1_ps(cb);         \
        size_t i = 0;                                                                      \
        if (len < 4) { OPT_SCALAR(A, B) }                                                  \
        for (;; i += 4) {                                                                  \
            if (i >= len) return len;                                                      \
            if (o[i] <= stop) return i; /* before this call relaxes o[i] */                \
            if (i + 4 > len) i = len - 4; /* redo an overlap: min is idempotent */         \
            else if (OPT_SKIPS(A, B, 4, SKIP)) continue;                                         \
            __m128 va = A ? _mm_loadu_ps(a + i) : vca, vb = B ? _mm_loadu_ps(b + i) : vcb; \
            __m128 v = _mm_add_ps(_mm_add_ps(vc, va), vb);                                 \
            _mm_storeu_ps(o + i, _mm_min_ps(v, _mm_loadu_ps(o + i)));                      \
        }                                                                                  \
    }                                                                                      \
    __attribute__((target("avx"))) static size_t name##_avx(                              \
        float *o, const float *a, const float *b, float ca, float cb, float c, size_t len, \
        float stop) {                                                                      \
        __m256 vc = _mm256_set1_ps(c), vca = _mm256_set1_ps(ca), vcb = _mm256_set1_ps(cb); \
        size_t i = 0;                                                                      \
        if (len < 8) { OPT_SCALAR(A, B) }                                                  \
        for (;; i += 8) {                                                                  \
            if (i >= len) return len;                                                      \
            if (o[i] <= stop) return i;                                                    \
            if (i + 8 > len) i = len - 8;                                                  \
            else if (OPT_SKIPS(A, B, 8, SKIP)) continue;                                         \
            __m256 va = A ? _mm256_loadu_ps(a + i) : vca;                                  \
            __m256 vb = B ? _mm256_loadu_ps(b + i) : vcb;                                  \
            __m256 v = _mm256_add_ps(_mm256_add_ps(vc, va), vb);                           \
            _mm256_storeu_ps(o + i, _mm256_min_ps(v, _mm256_loadu_ps(o + i)));            \
        }                                                                                  \
    }
#else
#define OPT_KERNEL(name, A, B, SKIP)                                                       \
    static size_t name(float *o, const float *a, const float *b, float ca, float cb, float c, \
                       size_t len, float stop) {                                           \
        size_t i = 0;                                                                      \
        OPT_SCALAR(A, B)                                                                   \
    }
#endif
OPT_KERNEL(kern_rr, 1, 1, 1)
OPT_KERNEL(kern_rc, 1, 0, 1)
OPT_KERNEL(kern_cr, 0, 1, 1)
OPT_KERNEL(kern_cc, 0, 0, 1)
/* The bounds pass pushes along rows that do not fall: no skipping. */
OPT_KERNEL(kern_push_rr, 1, 1, 0)
OPT_KERNEL(kern_push_rc, 1, 0, 0)

static void pick_kernels(opt_kernel *k) {
    k[0] = kern_rr; k[1] = kern_rc; k[2] = kern_cr; k[3] = kern_cc;
    k[4] = kern_push_rr; k[5] = kern_push_rc;
#ifdef OPT_X86
    if (__builtin_cpu_supports("avx")) {
        k[0] = kern_rr_avx; k[1] = kern_rc_avx; k[2] = kern_cr_avx; k[3] = kern_cc_avx;
        k[4] = kern_push_rr_avx; k[5] = kern_push_rc_avx;
    }
#endif
}

/* row[m - rlo] = min(row, (c + A(m - w)) + B(m)) for m in [m0, m1), split into
 * stretches where A and B are each either a row or their constant tail, until
 * the row is at most stop (see the kernels). */
static void relax(const opt_ctx *x, float *row, uint64_t rlo, uint64_t m0, uint64_t m1, float c,
                  const opt_view *A, uint64_t w, const opt_view *B, float stop) {
    uint64_t m = m0;
    while (m < m1) {
        int ar = m - w < A->hi, br = m < B->hi;
        uint64_t end = m1;
        if (ar && A->hi + w < end) end = A->hi + w;
        if (br && B->hi < end) end = B->hi;
        size_t len = (size_t)(end - m);
        float *o = row + (m - rlo);
        const float *pa = ar ? A->row + (m - w - A->lo) : NULL;
        const float *pb = br ? B->row + (m - B->lo) : NULL;
        size_t done = x->kern[(ar ? 0 : 2) + (br ? 0 : 1)](o, pa, pb, A->tail, B->tail, c, len,
                                                           stop);
        if (done < len) return;
        m = end;
    }
}

static const opt_view opt_zero = {NULL, 0, 0, 0.0f, 0};

static uint64_t ceil_div(uint64_t a, uint64_t k) { return a / k + (a % k != 0); }

/* A bound table's unit is this many of its fine table's (see "pruning by
 * bounds" below). */
#define OPT_BOUND_K ((uint64_t)8)

/* The needs a choice checks. A lower bound table (held_in) checks the fine
 * table's, rounded up to its units, which every fine schedule passes: much
 * tighter than its own rounded-down sizes. fall(): Fall s of (s, t); run
 * is the Fck need less d[t], as fill_row builds it, in the fine units. */
static uint64_t need_fall(const opt_ctx *x, size_t s, size_t t) {
    const opt_ctx *f = x->held_in;
    return f ? ceil_div(m_all(f, s, t), OPT_BOUND_K) : m_all(x, s, t);
}
static uint64_t need_fck(const opt_ctx *x, size_t t, uint64_t run) {
    const opt_ctx *f = x->held_in;
    return f ? ceil_div(sat(f->d[t] + run), OPT_BOUND_K) : x->d[t] + run;
}
/* The run of Fck s, Fn s+1..sp-1 (without d[t]) in the units needs use. */
static uint64_t run_first(const opt_ctx *x, size_t s) {
    const opt_ctx *f = x->held_in ? x->held_in : x;
    return sat(f->a[s] + f->of[s]);
}
static uint64_t run_next(const opt_ctx *x, size_t s, size_t sp, uint64_t run) {
    const opt_ctx *f = x->held_in ? x->held_in : x;
    return sp > s + 1 && f->fnp[sp - 1] > run ? f->fnp[sp - 1] : run;
}

/* Fills the row of (s, t), t > s, from rows of shorter sub-chains. */
static void fill_row(const opt_ctx *x, size_t s, size_t t) {
    const opt_view *me = &x->vw[IDX(x, s, t)];
    uint64_t lo = me->lo, hi = me->hi;
    if (hi <= lo) return;
    float *row = (float *)me->row; /* this worker's own row */
    for (size_t i = 0; i < hi - lo; i++) row[i] = INFINITY;
    /* Fall s; (s+1, t) with abar[s] held outside its budget; B s. */
    opt_view A = view_of(x, s + 1, t);
    uint64_t m0 = max3(lo, need_fall(x, s, t), A.lo + x->ab[s]);
    float cf = (float)((x->pfb[s] - x->pfb[s - 1]));
    if (m0 < hi) relax(x, row, lo, m0, hi, cf, &A, x->ab[s], &opt_zero, -INFINITY);
    /* Fck s, Fn s+1..s'-1; (s', t) with a[s'-1] held outside; then (s, s'-1). */
    uint64_t run = run_first(x, s);
    for (size_t sp = s + 1; sp <= t; sp++) {
        run = run_next(x, s, sp, run);
        uint64_t need = need_fck(x, t, run);
        if (need >= hi) break; /* the need only rises with s' */
        A = x->vwt[IDX(x, t, sp)];
        opt_view B = x->vw[IDX(x, s, sp - 1)];
        m0 = max3(max2(lo, need), A.lo + x->a[sp - 1], B.lo);
        if (m0 >= hi) continue;
        float c = (float)(x->pf[sp - 1] - x->pf[s - 1]);
        /* Rows and candidates fall with m, so this candidate is never below its
         * value at hi-1: it cannot help where the row is already that low. */
        float floor_v = (c + view_at(&A, hi - 1 - x->a[sp - 1])) + view_at(&B, hi - 1);
        relax(x, row, lo, m0, hi, c, &A, x->a[sp - 1], &B, floor_v);
    }
    if (me->cut) { /* readers come after this row's gate */
        x->vw[IDX(x, s, t)].tail = row[hi - lo - 1];
        x->vw[IDX(x, t, s)].tail = row[hi - lo - 1];
    }
}

/* C(s, t, m) for any pair, including the diagonal (which has no row). */
static float table_at(const opt_ctx *x, size_t s, size_t t, uint64_t m) {
    opt_view v = view_of(x, s, t);
    return view_at(&v, m);
}

/* ---- the fill: blocks of columns on pipelined workers ---- */

/* Column t (rows s = t-1 down to 1) reads the rows below it in the same
 * column and row s of earlier columns. A work item is a block of
 * OPT_BLOCK columns filled row by row, so row s of those columns and the
 * rows they read stay in cache; row s of block b waits until block b-1 has
 * done row s, a staggered pipeline (the results do not depend on it). */
#define OPT_BLOCK 8

typedef struct opt_fill {
    const opt_ctx *x;
    remat__gates *rows_done;        /* block b: rows finished, from its top row down */
    const uint64_t *block_work;     /* each block's weight, for progress */
    atomic_uint_fast64_t *work_done;
    double total_work;
    const remat_solve_options *o;
} opt_fill;

static size_t block_first(size_t b) { return 2 + b * OPT_BLOCK; }
static size_t block_last(const opt_ctx *x, size_t b) {
    size_t t = block_first(b) + OPT_BLOCK - 1;
    return t < x->n ? t : x->n;
}
static size_t block_count(const opt_ctx *x) { return x->n < 2 ? 0 : (x->n - 2) / OPT_BLOCK + 1; }

static void fill_block(const void *arg, size_t b, unsigned worker) {
    const opt_fill *f = arg;
    const opt_ctx *x = f->x;
    size_t t1 = block_first(b), t2 = block_last(x, b);
    for (size_t s = t2 - 1; s >= 1; s--) {
        if (b > 0 && s + 2 <= t1) remat__gate_wait(f->rows_done, b - 1, t1 - 1 - s);
        for (size_t t = t1 > s + 1 ? t1 : s + 1; t <= t2; t++) fill_row(x, s, t);
        remat__gate_raise(f->rows_done, b, t2 - s);
    }
    uint64_t done = atomic_fetch_add(f->work_done, f->block_work[b]) + f->block_work[b];
    if (worker == 0) remat__progress(f->o, (double)done / f->total_work, x->label);
}

static remat_status fill_table(const opt_ctx *x, const remat_solve_options *o, size_t cells,
                               const uint64_t *block_work, double total_work, remat_error *err) {
    unsigned threads = remat__threads(o->threads);
    if (x->n < 8 || cells < ((size_t)1 << 16)) threads = 1; /* not worth the threads */
    atomic_uint_fast64_t done;
    atomic_init(&done, 0);
    opt_fill f = {x, remat__gates_new(block_count(x)), block_work, &done,
                  total_work > 0 ? total_work : 1, o};
    REMAT__RETURN_IF(!f.rows_done, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat__parallel_for(threads, block_count(x), fill_block, &f);
    remat__progress(o, 1, x->label);
    remat__gates_free(f.rows_done);
    return REMAT_OK;
}

/* One past the largest budget at which rows (s, .) are read: every path to
 * them holds their input a[s-1] outside (s >= 2). */
static uint64_t row_top(const opt_ctx *x, size_t s) {
    if (s < 2) return x->budget + 1;
    return x->budget >= x->a[s - 1] ? x->budget - x->a[s - 1] + 1 : 0;
}

/* The budgets at which row (s, t) is read: from the top budget less the
 * most that any path from the root holds outside (s, t), up to the top
 * budget less its input a[s-1] (rows s >= 2), within [lo, g). held(1, n) =
 * root_span: the root is read at budgets from budget - root_span up (0 for a
 * plain solve, the whole budget for a curve). held(s, t) is the max over the sub-problems that read (s, t):
 * (s, t') for t' > t at the same budget, (s0, t) for s0 < s after Fck s0 with
 * s' = s (a[s-1] more), and (s-1, t) after Fall s-1 (abar[s-1] more). */
static remat_status query_ranges(opt_ctx *x, uint64_t root_span, remat_error *err) {
    /* held is counted in the units of hx, at hx's budget, and divided by hk */
    const opt_ctx *hx = x->held_in ? x->held_in : x;
    uint64_t hk = x->held_in ? OPT_BOUND_K : 1, hbud = hx->budget;
    size_t n = x->n;
    uint64_t *ha = remat__calloc(n + 1, sizeof *ha), *hp = remat__calloc(n + 1, sizeof *hp);
    if (!ha || !hp) {
        free(ha);
        free(hp);
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    }
    /* ha[t]: max held(s0, t) over s0 < s; hp[t]: held(s-1, t) */
    const uint64_t *sa = hx->a, *sab = hx->ab;
    for (size_t s = 1; s <= n; s++) {
        uint64_t hb = s == 1 ? root_span : 0, top = row_top(x, s);
        for (size_t t = n; t >= s; t--) {
            uint64_t h = hb;
            if (s >= 2) h = max3(h, sat(ha[t] + sa[s - 1]), sat(hp[t] + sab[s - 1]));
            hb = h; /* (s, t-1) is read by (s, t) at the same budget */
            size_t id = IDX(x, s, t);
            opt_view *v = &x->vw[id];
            v->lo = t == s ? max2(x->lo[id], need_fall(x, s, s))
                           : max2(x->lo[id], hbud > h ? (hbud - h) / hk : 0);
            v->hi = t > s && x->g[id] < top ? x->g[id] : top;
            if (x->held_in && t > s) { /* what the fine row maps to, and up to g */
                const opt_view *f = &hx->vw[id];
                uint64_t fh = f->hi > f->lo ? ceil_div(f->hi - 1, hk) + 1 : 0;
                v->hi = min2(top, max2(fh, x->g[id]));
            }
            if (t == s || v->hi < v->lo) v->hi = v->lo;
            v->tail = tmin_f(x, s, t);
            v->cut = 0;
            hp[t] = h;
            if (h > ha[t]) ha[t] = h;
        }
    }
    free(ha);
    free(hp);
    return REMAT_OK;
}

/* Seconds per unit of work() on one core, measured on the development
 * machine (docs/optimal.md), and what a second core adds. */
#define OPT_SEC_PER_WORK 2.5e-10

static uint64_t work_cap(const remat_solve_options *o) {
    return o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
}

/* g(s, t) and the budgets each row covers (query_ranges). */
static remat_status layout_rows(opt_ctx *x, const remat_solve_options *o, uint64_t root_span,
                                remat_error *err) {
    size_t n = x->n, nn = n * n;
    uint64_t cap = work_cap(o);
    REMAT__FORWARD(remat__alloc_table((void **)&x->vw, nn, sizeof(opt_view), cap, "optimal rows",
                                      err));
    x->vwt = x->vw;
    REMAT__FORWARD(remat__alloc_table((void **)&x->g, nn, 8, cap, "optimal per-pair bounds", err));
    x->off = x->g;
    /* g(s, t): the need of Fall s..t, B t..s; from it on C is the plain time */
    for (size_t s = n; s >= 1; s--) {
        x->g[IDX(x, s, s)] = need_fall(x, s, s);
        for (size_t t = s + 1; t <= n; t++)
            x->g[IDX(x, s, t)] = max2(need_fall(x, s, t), sat(x->ab[s] + x->g[IDX(x, s + 1, t)]));
    }
    return query_ranges(x, root_span, err);
}

/* Row offsets from the views' ranges, the cells and the work they take
 * (block_work may be NULL). */
static remat_status plan_rows(opt_ctx *x, uint64_t *block_work, size_t *cells, double *work_out,
                              remat_error *err) {
    size_t n = x->n, total = 0;
    double work = 0; /* candidate cells: sum over pairs of (t - s) x row length */
    for (size_t t = 2; t <= n; t++)
        for (size_t s = 1; s < t; s++) {
            const opt_view *v = &x->vw[IDX(x, s, t)];
            size_t len = (size_t)(v->hi - v->lo);
            x->off[IDX(x, t, s)] = total;
            REMAT__RETURN_IF(len > SIZE_MAX - total, err, REMAT_E_TOO_LARGE,
                             "optimal: the table is too large for this machine");
            total += len;
            work += (double)len * (double)(t - s);
            if (block_work) block_work[(t - 2) / OPT_BLOCK] += (uint64_t)len * (t - s);
        }
    *cells = total;
    *work_out = work;
    return REMAT_OK;
}

static remat_status size_limit(const remat_solve_options *o, int exact, size_t cells,
                               remat_error *err) {
    uint64_t cap = work_cap(o);
    if (cells <= cap / sizeof(float)) return REMAT_OK;
    return remat__fail(err, REMAT_E_TOO_LARGE,
                       "optimal: the table would need %llu bytes, more than the work limit of "
                       "%llu bytes; %s",
                       (unsigned long long)cells * sizeof(float), (unsigned long long)cap,
                       exact ? "exact-bytes mode (slots 0) suits small memories only: use "
                               "--slots N (e.g. 500)"
                             : "use fewer slots (--slots) or a larger work limit");
}

static remat_status time_limit(const remat_solve_options *o, double work, remat_error *err) {
    return remat__check_time(o, remat__parallel_seconds(o, work * OPT_SEC_PER_WORK), "optimal",
                             "use fewer slots (--slots)", err);
}

static void free_table(opt_ctx *x) {
    free(x->tab);
    x->tab = NULL;
    x->cells = 0;
}

/* Allocates the rows the views describe and fills them. */
static remat_status fill_rows(opt_ctx *x, const remat_solve_options *o, remat_error *err) {
    size_t n = x->n, nb = block_count(x), total = 0;
    double work = 0;
    free_table(x);
    uint64_t *block_work = remat__calloc(nb ? nb : 1, sizeof *block_work);
    REMAT__RETURN_IF(!block_work, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat_status st = plan_rows(x, block_work, &total, &work, err);
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&x->tab, total ? total : 1, sizeof(float), work_cap(o),
                                "optimal table", err);
    x->cells = total;
    if (st == REMAT_OK) {
        for (size_t s = 1; s <= n; s++)
            for (size_t t = s; t <= n; t++) {
                opt_view *v = &x->vw[IDX(x, s, t)];
                if (t > s) v->row = x->tab + x->off[IDX(x, t, s)];
                x->vwt[IDX(x, t, s)] = *v;
            }
        pick_kernels(x->kern);
        st = fill_table(x, o, total, block_work, work, err);
    }
    free(block_work);
    return st;
}

/* Lays the rows out, checks the work against the limits, allocates and
 * fills the table. */
static remat_status build_table(opt_ctx *x, const remat_solve_options *o, int exact,
                                uint64_t root_span, remat_error *err) {
    size_t cells;
    double work;
    REMAT__FORWARD(layout_rows(x, o, root_span, err));
    REMAT__FORWARD(plan_rows(x, NULL, &cells, &work, err));
    REMAT__FORWARD(size_limit(o, exact, cells, err));
    REMAT__FORWARD(time_limit(o, work, err));
    return fill_rows(x, o, err);
}

/* ---- rebuilding the schedule ---- */

enum { TASK_SOLVE = 0, TASK_B = 1 };
typedef struct opt_task {
    int kind;
    uint32_t s, t;
    uint64_t m;    /* budget (units) */
    uint64_t base; /* bytes held outside the sub-chain's budget, its input included */
} opt_task;

typedef struct opt_rebuild {
    const opt_ctx *x;
    remat_schedule *sch; /* NULL: only follow the choices */
    double time;
    uint64_t peak;
    opt_task *stack;
    size_t top, cap;
} opt_rebuild;

static uint64_t byte_a(const remat_chain *c, size_t i) { return remat_chain_a_bytes(c, i); }

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

/* Algorithm 2 with an explicit stack from (s0, t0) at budget m (the whole
 * chain: (1, n)); tracks time and the peak in bytes. */
static remat_status rebuild(opt_rebuild *r, size_t s0, size_t t0_, uint64_t m, remat_error *err) {
    const opt_ctx *x = r->x;
    const remat_chain *c = x->c;
    size_t n = x->n;
    r->cap = 2 * n + 2;
    r->stack = remat__calloc(r->cap, sizeof *r->stack);
    REMAT__RETURN_IF(!r->stack, err, REMAT_E_NOMEM, "optimal: out of memory");
    r->top = 0;
    r->time = 0;
    r->peak = byte_a(c, s0 - 1);
    opt_task t0 = {TASK_SOLVE, (uint32_t)s0, (uint32_t)t0_, m, byte_a(c, s0 - 1)};
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

/* ---- smallest feasible memory ---- */

/* need(1, n) in the units of limit `mem`: lo(1, n) of the min-peak recurrence. */
static remat_status need_at(opt_ctx *x, uint64_t slots, uint64_t mem, uint64_t *need,
                            remat_error *err) {
    ctx_units(x, slots, mem);
    REMAT__FORWARD(ctx_bounds(x, err));
    *need = x->lo[IDX(x, 1, x->n)];
    return REMAT_OK;
}

/* The smallest limit at which solving succeeds, capped at the store-all peak
 * (from there the solver returns store-all). Exact bytes: a[0] + lo(1, n),
 * since feasibility is monotone in the budget. Slots: feasibility is
 * monotone within the limits sharing one slot u, so the smallest limit for u
 * is max(a[0] + lo_u * u, unit_floor(u)) if that still has slot u. Rounding
 * only adds, so no slot beats exact bytes: try u = unit_of(exact) upwards. */
static remat_status find_min_memory(opt_ctx *x, uint64_t slots, uint64_t store_peak,
                                    uint64_t *out, remat_error *err) {
    uint64_t in = byte_a(x->c, 0), need;
    REMAT__FORWARD(need_at(x, 0, REMAT_MAX_BYTES, &need, err));
    need = sat(in + need);
    *out = store_peak;
    if (need >= store_peak) return REMAT_OK;
    if (slots == 0) {
        *out = need;
        return REMAT_OK;
    }
    for (uint64_t u = unit_of(slots, need); unit_floor(slots, u) < store_peak; u *= 2) {
        uint64_t top = unit_top(slots, u), nu;
        REMAT__FORWARD(need_at(x, slots, top, &nu, err));
        uint64_t cand = sat(in + sat(nu * u));
        if (cand < unit_floor(slots, u)) cand = unit_floor(slots, u);
        if (cand <= top) {
            *out = cand < store_peak ? cand : store_peak;
            return REMAT_OK;
        }
    }
    return REMAT_OK;
}

static uint64_t slots_of(const remat_solve_options *o) {
    return o->slots < 0 ? REMAT_DEFAULT_SLOTS : (uint64_t)o->slots;
}

static remat_status infeasible(opt_ctx *x, const remat_solve_options *o, uint64_t store_peak,
                               uint64_t limit, remat_error *err) {
    uint64_t mm;
    REMAT__FORWARD(find_min_memory(x, slots_of(o), store_peak, &mm, err));
    remat_status st = remat__fail(err, REMAT_E_INFEASIBLE,
                                  "optimal: no persistent schedule fits %llu bytes; the "
                                  "smallest limit that works is %llu bytes",
                                  (unsigned long long)limit, (unsigned long long)mm);
    if (err) err->min_memory = mm;
    return st;
}

/* Sets up units and bounds at memory `mem`; *fits says whether lo(1,n) fits. */
static remat_status prepare(opt_ctx *x, const remat_chain *c, const remat_solve_options *o,
                            uint64_t mem, int *fits, remat_error *err) {
    REMAT__FORWARD(ctx_init(x, c, o->max_work_bytes, err));
    uint64_t slots = slots_of(o);
    *fits = 0;
    if (slots && mem == 0) return REMAT_OK;
    ctx_units(x, slots, mem);
    REMAT__FORWARD(ctx_bounds(x, err));
    *fits = mem >= byte_a(c, 0) && x->lo[IDX(x, 1, x->n)] <= x->budget;
    /* Rounding to slot u may fail where a finer slot fits: halve it until
     * lo(1, n) fits or the slot is that of the smallest limit (past which
     * nothing finer helps). So every limit from the smallest one works. */
    if (!*fits && slots && mem >= byte_a(c, 0)) {
        uint64_t store_peak, mm = 0;
        REMAT__FORWARD(remat_store_all_cost(c, &store_peak, NULL, err));
        opt_ctx y;
        remat_status st = ctx_init(&y, c, o->max_work_bytes, err);
        if (st == REMAT_OK) st = find_min_memory(&y, slots, store_peak, &mm, err);
        ctx_free(&y);
        REMAT__FORWARD(st);
        if (mem < mm) return REMAT_OK;
        uint64_t u0 = unit_of(slots, mm), in = byte_a(c, 0);
        for (uint64_t u = x->unit / 2; !*fits && u >= u0 && u >= 1; u /= 2) {
            ctx_units(x, slots, slots * u); /* sizes in slot u */
            x->budget = (mem - in) / u;
            REMAT__FORWARD(ctx_bounds(x, err));
            *fits = x->lo[IDX(x, 1, x->n)] <= x->budget;
        }
    }
    return REMAT_OK;
}

uint64_t remat__optimal_slot(uint64_t slots, uint64_t mem) {
    return slots ? unit_of(slots, mem) : 1;
}

remat_status remat__optimal_needs(const remat_chain *c, uint64_t **out, remat_error *err) {
    opt_ctx x;
    *out = NULL;
    remat_status st = ctx_init(&x, c, 0, err);
    if (st == REMAT_OK) {
        ctx_units(&x, 0, REMAT_MAX_BYTES);
        st = ctx_bounds(&x, err);
    }
    if (st == REMAT_OK) {
        *out = x.lo; /* the caller frees it */
        x.lo = x.lot = NULL;
    }
    ctx_free(&x);
    return st;
}

remat_status remat__min_memory_optimal(const remat_chain *c, const remat_solve_options *o,
                                       uint64_t *out, remat_error *err) {
    uint64_t store_peak;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, NULL, err));
    opt_ctx x;
    remat_status st = ctx_init(&x, c, o->max_work_bytes, err);
    if (st == REMAT_OK) st = find_min_memory(&x, slots_of(o), store_peak, out, err);
    ctx_free(&x);
    return st;
}

/* The table for root budgets budget - root_span .. budget (prepare() must
 * have said the lowest fits). */
static remat_status solve_table(opt_ctx *x, const remat_solve_options *o, uint64_t root_span,
                                remat_error *err) {
    return build_table(x, o, slots_of(o) == 0, root_span, err);
}

/* Time and exact peak of the schedule the table gives at budget b. */
static remat_status follow(const opt_ctx *x, uint64_t b, double *time, uint64_t *peak,
                           remat_error *err) {
    opt_rebuild r = {x, NULL, 0, 0, NULL, 0, 0};
    REMAT__FORWARD(rebuild(&r, 1, x->n, b, err));
    *time = r.time;
    *peak = r.peak;
    return REMAT_OK;
}

/* Rounding every size up to whole slots leaves the schedule at the limit's
 * budget under the limit in bytes, by about the rounding's share of the
 * sizes. So the table also covers budgets that much above it (headroom()),
 * and the largest budget whose schedule still fits the limit in bytes (exact
 * peak, by bisection) is taken; the limit's own budget always fits, so this
 * never does worse. */
static uint64_t headroom(const opt_ctx *x, uint64_t base) {
    if (x->unit <= 1) return 0;
    long double bytes = 0, rounded = 0;
    for (size_t i = 1; i <= x->n; i++) {
        bytes += (long double)remat_chain_a_bytes(x->c, i) + remat_chain_abar_bytes(x->c, i);
        rounded += ((long double)x->a[i] + x->ab[i]) * x->unit;
    }
    if (!(bytes > 0) || rounded <= bytes) return 0;
    long double extra = (long double)base * (rounded / bytes - 1);
    return extra > base / 2 ? base / 2 : (uint64_t)extra;
}

static remat_status pick_budget(const opt_ctx *x, uint64_t base, uint64_t mem, uint64_t *out,
                                remat_error *err) {
    double t;
    uint64_t peak, lo = base, hi = x->budget + 1; /* lo fits; hi is past the table */
    *out = base;
    if (x->budget == base) return REMAT_OK;
    REMAT__FORWARD(follow(x, x->budget, &t, &peak, err));
    if (peak <= mem) {
        *out = x->budget;
        return REMAT_OK;
    }
    hi = x->budget;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        REMAT__FORWARD(follow(x, mid, &t, &peak, err));
        if (peak <= mem) lo = mid;
        else hi = mid;
    }
    *out = lo;
    return REMAT_OK;
}


/* ---- narrowing by bounds (docs/optimal.md) ----
 *
 * Few cells of a solve's table lie on a schedule near the best one. A table
 * OPT_BOUND_K times coarser, with sizes rounded down and budgets up, bounds
 * C from below: Clo(s, t, ceil(m/K)) <= C(s, t, m). Each root budget R gets
 * an upper bound U(R) >= C(1, n, R): guessed from Clo, or from an upper
 * table (sizes up, budget down: its schedules fit the fine table). A pass
 * down the lower table gives O(s, t, M): a lower bound on the time of
 * everything outside (s, t) on any path from a root to it, less that root's
 * U. A fine cell with Clo + O above 0 lies on no schedule within U, so each
 * row stores only its budgets from the first kept one to the last; reads
 * below them are infinite, above them the row's last value (a real
 * schedule, and rows still fall). Where U holds, every cell of a best
 * schedule is kept, so the values along it and the schedule are those of
 * the whole table; the root values tell whether it held. */

/* y: x's sizes in units K times larger, rounded up (up) or down, at `budget`. */
static remat_status ctx_scaled(opt_ctx *y, const opt_ctx *x, int up, uint64_t budget,
                               const remat_solve_options *o, remat_error *err) {
    const uint64_t K = OPT_BOUND_K;
    REMAT__FORWARD(ctx_init(y, x->c, o->max_work_bytes, err));
    y->label = "optimal: bounds";
    y->unit = sat(x->unit * K);
    const uint64_t *from[5] = {x->a, x->ab, x->d, x->of, x->ob};
    uint64_t *to[5] = {y->a, y->ab, y->d, y->of, y->ob};
    for (int k = 0; k < 5; k++)
        for (size_t i = 0; i <= x->n; i++) to[k][i] = from[k][i] / K + (up && from[k][i] % K);
    if (!up) y->held_in = x; /* rows cover what the fine rows map to */
    fnp_of_sizes(y);
    y->budget = budget;
    return ctx_bounds(y, err);
}

static float *orow(const opt_ctx *y, float *O, size_t s, size_t t) {
    return O + (view_of(y, s, t).row - y->tab);
}

/* out[m - d] = min(out[m - d], (c + o[m]) + S(m - w)) for m in [m0, m1), where
 * out covers budgets [olo, ohi) and o starts at budget plo; past ohi, otail
 * takes a bound of them all: the least o there (omin[m - plo], the least of
 * o from m to m1) plus S's last value (S falls with m). */
static void push(const opt_ctx *y, float *out, uint64_t olo, uint64_t ohi, float *otail,
                 uint64_t d, const float *o, const float *omin, uint64_t plo, uint64_t m0,
                 uint64_t m1, float c, const opt_view *S, uint64_t w) {
    m0 = max3(m0, olo + d, S->lo + w);
    uint64_t past = max2(m0, ohi + d);
    if (past < m1) {
        float v = (c + omin[past - plo]) + view_at(S, m1 - 1 - w);
        if (v < *otail) *otail = v;
    }
    if (m1 > ohi + d) m1 = ohi + d;
    while (m0 < m1) {
        int sr = m0 - w < S->hi;
        uint64_t end = sr && S->hi + w < m1 ? S->hi + w : m1;
        y->kern[sr ? 4 : 5](out + (m0 - d - olo), o + (m0 - plo),
                            sr ? S->row + (m0 - w - S->lo) : NULL, 0.0f, S->tail, c,
                            (size_t)(end - m0), -INFINITY);
        m0 = end;
    }
}

/* Pushes O(s, t, .) to the sub-problems (s, t) reads (fill_row's choices).
 * A child read at M - w may be at M - w - 1 in the fine table's terms when
 * the fine size had a remainder, so it gets both; a sibling is bounded at
 * its larger budget. Cells already above thr are dropped first. */
static void outside_row(const opt_ctx *y, const opt_ctx *x, size_t s, size_t t, float thr,
                        float *O, float *ot, float *omin) {
    const uint64_t K = OPT_BOUND_K;
    opt_view P = view_of(y, s, t);
    float *po = orow(y, O, s, t), cf = (float)(y->pfb[s] - y->pfb[s - 1]);
    /* past the row (C is the plain time there) a best schedule only Falls */
    if (ot[IDX(y, s, t)] + tmin_f(y, s, t) > thr) ot[IDX(y, s, t)] = INFINITY;
    if (s + 1 < t) {
        float v = ot[IDX(y, s, t)] + cf;
        if (v < ot[IDX(y, s + 1, t)]) ot[IDX(y, s + 1, t)] = v;
    }
    uint64_t a0 = P.hi, a1 = P.lo;
    for (uint64_t m = P.lo; m < P.hi; m++) {
        if (!(po[m - P.lo] + P.row[m - P.lo] <= thr)) {
            po[m - P.lo] = INFINITY;
            continue;
        }
        if (a0 == P.hi) a0 = m;
        a1 = m + 1;
    }
    if (a0 >= a1) return;
    float low = INFINITY;
    for (uint64_t m = a1; m-- > a0;) { /* suffix minima of O from a0 */
        if (po[m - P.lo] < low) low = po[m - P.lo];
        omin[m - a0] = low;
    }
    omin -= a0 - P.lo; /* omin[m - P.lo] for m in [a0, a1) */
    if (s + 1 < t) { /* Fall s */
        opt_view A = view_of(y, s + 1, t);
        float *ao = orow(y, O, s + 1, t);
        uint64_t m0 = max2(a0, need_fall(y, s, t));
        float *at = &ot[IDX(y, s + 1, t)];
        push(y, ao, A.lo, A.hi, at, y->ab[s], po, omin, P.lo, m0, a1, cf, &opt_zero, 0);
        if (x->ab[s] % K)
            push(y, ao, A.lo, A.hi, at, y->ab[s] + 1, po, omin, P.lo, m0, a1, cf, &opt_zero, 0);
    }
    uint64_t run = run_first(y, s);
    for (size_t sp = s + 1; sp <= t; sp++) { /* Fck s, Fn s+1..sp-1 */
        run = run_next(y, s, sp, run);
        uint64_t need = need_fck(y, t, run), w = y->a[sp - 1], m0 = max3(a0, need, w);
        if (need >= a1) break; /* run only rises */
        if (m0 >= a1) continue;
        float c = (float)(y->pf[sp - 1] - y->pf[s - 1]);
        opt_view A = view_of(y, sp, t), B = view_of(y, s, sp - 1);
        if (sp < t) {
            float *ao = orow(y, O, sp, t), *at = &ot[IDX(y, sp, t)];
            push(y, ao, A.lo, A.hi, at, w, po, omin, P.lo, m0, a1, c, &B, 0);
            if (x->a[sp - 1] % K)
                push(y, ao, A.lo, A.hi, at, w + 1, po, omin, P.lo, m0, a1, c, &B, 0);
        }
        if (sp - 1 > s)
            push(y, orow(y, O, s, sp - 1), B.lo, B.hi, &ot[IDX(y, s, sp - 1)], 0, po, omin,
                 P.lo, m0, a1, c, &A, w);
    }
}

/* O over the lower table, from the fine roots [base, x->budget] down; a
 * root starts at minus its upper bound u[R - base]. */
static remat_status outside_pass(const opt_ctx *y, const opt_ctx *x,
                                 const remat_solve_options *o, uint64_t base, const float *u,
                                 float thr, float **out, float **tail, remat_error *err) {
    const uint64_t K = OPT_BOUND_K;
    size_t n = y->n;
    float *O;
    REMAT__RETURN_IF(y->cells > SIZE_MAX - n * n, err, REMAT_E_TOO_LARGE,
                     "optimal: the bounds are too large for this machine");
    REMAT__FORWARD(remat__alloc_table((void **)&O, y->cells + n * n, sizeof *O, work_cap(o),
                                      "optimal bounds", err));
    float *ot = O + y->cells;
    for (size_t i = 0; i < y->cells + n * n; i++) O[i] = INFINITY;
    opt_view R = view_of(y, 1, n);
    float *ro = orow(y, O, 1, n);
    for (uint64_t r = base; r <= x->budget; r++) {
        uint64_t M = ceil_div(r, K);
        float *at = M < R.lo ? NULL : M < R.hi ? &ro[M - R.lo] : &ot[IDX(y, 1, n)];
        if (at && -u[r - base] < *at) *at = -u[r - base];
    }
    size_t longest = 1;
    for (size_t s = 1; s < n; s++)
        for (size_t t = s + 1; t <= n; t++) {
            opt_view v = view_of(y, s, t);
            if (v.hi - v.lo > longest) longest = (size_t)(v.hi - v.lo);
        }
    float *omin = remat__calloc(longest, sizeof *omin);
    if (!omin) {
        free(O);
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    }
    for (size_t s = 1; s < n; s++)
        for (size_t t = n; t > s; t--) outside_row(y, x, s, t, thr, O, ot, omin);
    free(omin);
    *out = O;
    *tail = ot;
    return REMAT_OK;
}

/* Is some fine cell of row (s, t) at lower-table budget M kept? Past the
 * row, C is the plain time and O the row's tail bound. */
static int kept_at(const opt_view *Y, const float *yo, float otail, uint64_t M, float thr) {
    if (M < Y->lo) return 0;
    if (M >= Y->hi) return Y->tail + otail <= thr;
    return Y->row[M - Y->lo] + yo[M - Y->lo] <= thr;
}

/* Narrows each fine row to its kept budgets (see above). */
static void keep_rows(opt_ctx *x, const opt_ctx *y, float *O, const float *ot, float thr) {
    const uint64_t K = OPT_BOUND_K;
    size_t n = x->n;
    for (size_t s = 1; s <= n; s++)
        for (size_t t = s + 1; t <= n; t++) {
            opt_view *v = &x->vw[IDX(x, s, t)];
            opt_view Y = view_of(y, s, t);
            const float *yo = orow(y, O, s, t);
            float otail = ot[IDX(y, s, t)];
            uint64_t top = row_top(x, s), first = UINT64_MAX, last = 0;
            int tail = 0; /* a budget past the row, where C is the plain time, kept */
            for (uint64_t M = ceil_div(v->hi, K); v->hi < top && M <= ceil_div(top - 1, K); M++)
                if ((tail = kept_at(&Y, yo, otail, M, thr))) break;
            for (uint64_t M = ceil_div(v->lo, K); v->lo < v->hi && M <= ceil_div(v->hi - 1, K);
                 M++) {
                if (!kept_at(&Y, yo, otail, M, thr)) continue;
                uint64_t m0 = M ? max2(v->lo, K * (M - 1) + 1) : v->lo;
                if (first == UINT64_MAX) first = m0;
                last = K * M < v->hi - 1 ? K * M : v->hi - 1;
            }
            if (first == UINT64_MAX) { /* nothing stored; the tail if that was kept */
                v->lo = v->hi;
                if (!tail) v->tail = INFINITY;
                continue;
            }
            v->lo = first;
            if (!tail && last + 1 < v->hi) {
                v->hi = last + 1;
                v->cut = 1;
            }
        }
}

/* Does the lower table bound anything at the root, budget M? Not when its
 * all-Fall plan fits: then it puts every root at the plain time. O(n). */
static int lower_informative(const opt_ctx *y, uint64_t M) {
    for (size_t s = 1; s <= y->n; s++) {
        if (M < need_fall(y, s, y->n)) return 1;
        if (s < y->n && M < y->ab[s]) return 1;
        if (s < y->n) M -= y->ab[s];
    }
    return 0;
}

/* u[r - base] for each root r in [base, x->budget]: the upper table's time
 * (*ok = 0 when it has no schedule there). */
static remat_status upper_bounds(const opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                 float *u, int *ok, remat_error *err) {
    const uint64_t K = OPT_BOUND_K, top = x->budget;
    size_t n = x->n;
    opt_ctx z;
    remat_status st = ctx_scaled(&z, x, 1, top / K, o, err);
    *ok = st == REMAT_OK && z.lo[IDX(&z, 1, n)] <= base / K;
    if (*ok) st = layout_rows(&z, o, top / K - base / K, err);
    if (*ok && st == REMAT_OK) st = fill_rows(&z, o, err);
    for (uint64_t r = base; *ok && st == REMAT_OK && r <= top; r++)
        u[r - base] = table_at(&z, 1, n, r / K);
    ctx_free(&z);
    return st;
}

/* The lower table for x's roots, filled (*ok = 0, unfilled, when `need_root`
 * and its all-Fall plan fits the lowest root, the limit's own budget: then
 * it bounds nothing there). */
static remat_status lower_table(const opt_ctx *x, const remat_solve_options *o, uint64_t base,
                                int need_root, opt_ctx *y, int *ok, remat_error *err) {
    const uint64_t K = OPT_BOUND_K, top = x->budget;
    REMAT__FORWARD(ctx_scaled(y, x, 0, ceil_div(top, K), o, err));
    *ok = !need_root || lower_informative(y, ceil_div(base, K));
    if (!*ok) return REMAT_OK;
    REMAT__FORWARD(layout_rows(y, o, top - base, err));
    return fill_rows(y, o, err);
}

/* Narrows x's rows to the cells within the upper bounds u of the roots
 * [base, x->budget] (*ok = 0, rows untouched, when a root has none). */
static remat_status narrow_rows(opt_ctx *x, const opt_ctx *y, const remat_solve_options *o,
                                uint64_t base, const float *u, int *ok, remat_error *err) {
    size_t n = x->n;
    float most = 0;
    *ok = 1;
    for (uint64_t r = base; *ok && r <= x->budget; r++) {
        if (!(u[r - base] < INFINITY)) *ok = 0;
        else if (u[r - base] > most) most = u[r - base];
    }
    if (!*ok) return REMAT_OK;
    /* float sums along a path differ from the bounds' by rounding only */
    float thr = most * (float)(n + 8) * 0x1p-22f, *O = NULL, *ot = NULL;
    REMAT__FORWARD(outside_pass(y, x, o, base, u, thr, &O, &ot, err));
    keep_rows(x, y, O, ot, thr);
    free(O);
    return REMAT_OK;
}

/* Whole tables from this many cells on are narrowed by default, with upper
 * bounds guessed from the lower table, when it bounds the recomputation at
 * the limit's budget to at least 1/OPT_NARROW_SHARE of the plain time: then
 * narrowing takes less time than it saves (measured on resnet1001-like and
 * a random chain, L = 339). A guess is the lower bound and 1/32 more. */
#define OPT_NARROW_CELLS ((size_t)1 << 23)
#define OPT_NARROW_SHARE 16

/* Guessed upper bounds from the lower table (*ok = 0 when too weak). */
static void guess_bounds(const opt_ctx *x, const opt_ctx *y, uint64_t base, float *u, int *ok) {
    const uint64_t K = OPT_BOUND_K;
    float tm = tmin_f(y, 1, y->n);
    *ok = table_at(y, 1, y->n, ceil_div(base, K)) - tm >= tm / OPT_NARROW_SHARE;
    for (uint64_t r = base; *ok && r <= x->budget; r++) {
        float lb = table_at(y, 1, y->n, ceil_div(r, K));
        u[r - base] = lb + lb * 0x1p-5f;
    }
}

/* Did every root come within its upper bound? Else u takes the narrowed
 * table's root values, which are real schedules' times and so upper bounds,
 * as is any smaller root's (a schedule fits any larger budget). */
static int roots_within(const opt_ctx *x, uint64_t base, float *u) {
    int within = 1;
    for (uint64_t r = base; r <= x->budget; r++) {
        float v = table_at(x, 1, x->n, r);
        if (!(v <= u[r - base])) within = 0;
    }
    float least = INFINITY;
    for (uint64_t r = base; !within && r <= x->budget; r++) {
        float v = table_at(x, 1, x->n, r);
        if (v < least) least = v;
        u[r - base] = least;
    }
    return within;
}

/* The table of a solve for root budgets [base, x->budget]. prune: 0 never
 * narrows it by the bounds; 1 (the default) narrows a table over the work
 * limit with both bound tables, and one of OPT_NARROW_CELLS or more with a
 * guess from the lower one when it bounds enough; 2 and 3 always narrow,
 * with a guess or with both tables (tests). A guess that misses a root is
 * followed by a second narrowing, bounded by what the first one found; if
 * that misses too (not expected), the whole table is filled. *cells (if not
 * NULL) gets the cells stored. */
static remat_status solve_rows(opt_ctx *x, const remat_solve_options *o, uint64_t base,
                               int prune, size_t *cells, remat_error *err) {
    int exact = slots_of(o) == 0;
    size_t n = x->n, whole, roots = (size_t)(x->budget - base + 1);
    double work;
    REMAT__FORWARD(layout_rows(x, o, x->budget - base, err));
    REMAT__FORWARD(plan_rows(x, NULL, &whole, &work, err));
    REMAT__FORWARD(time_limit(o, work, err));
    remat_status big = size_limit(o, exact, whole, err);
    if (big != REMAT_OK && (prune == 0 || n < 3)) return big;
    int guess = big == REMAT_OK && prune != 3, ok = 0, tries = 0;
    if (big == REMAT_OK && (prune == 0 || n < 3 || (prune == 1 && whole < OPT_NARROW_CELLS)))
        ok = -1; /* whole */
    float *u = NULL;
    remat_status st = REMAT_OK;
    if (ok == 0) {
        u = remat__calloc(roots, sizeof *u);
        if (!u) st = remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
        if (st == REMAT_OK && !guess) st = upper_bounds(x, o, base, u, &ok, err);
        if (guess) ok = 1;
    }
    /* Up to two narrowings. A guess keeps the lower table for the second; the
     * upper bounds free it before the fill, where memory is short. */
    opt_ctx y;
    memset(&y, 0, sizeof y);
    if (st == REMAT_OK && ok == 1) st = lower_table(x, o, base, guess, &y, &ok, err);
    if (st == REMAT_OK && ok == 1 && guess) guess_bounds(x, &y, base, u, &ok);
    while (st == REMAT_OK && ok == 1 && tries++ < 2) {
        free_table(x); /* a first narrowing's, read by roots_within */
        if (!y.tab) st = lower_table(x, o, base, 0, &y, &ok, err);
        if (st == REMAT_OK && ok) st = narrow_rows(x, &y, o, base, u, &ok, err);
        if (!guess || tries == 2) ctx_free(&y);
        if (st != REMAT_OK || !ok) break;
        size_t kept;
        double kwork;
        st = plan_rows(x, NULL, &kept, &kwork, err);
        if (st == REMAT_OK && big != REMAT_OK && size_limit(o, exact, kept, NULL) != REMAT_OK)
            st = remat__fail(err, REMAT_E_TOO_LARGE,
                             "optimal: the table would need %llu bytes, more than the work limit "
                             "of %llu bytes, and %llu even narrowed by the bounds; use fewer "
                             "slots (--slots) or a larger work limit",
                             (unsigned long long)whole * sizeof(float),
                             (unsigned long long)work_cap(o),
                             (unsigned long long)kept * sizeof(float));
        if (st == REMAT_OK) st = fill_rows(x, o, err);
        if (st == REMAT_OK && roots_within(x, base, u)) ok = 2; /* done */
        else if (st == REMAT_OK) st = query_ranges(x, x->budget - base, err); /* whole again */
    }
    ctx_free(&y);
    if (st == REMAT_OK && ok != 2) { /* the whole table; lo is no longer read */
        free(x->lo);
        x->lo = x->lot = NULL;
        if (big != REMAT_OK)
            st = remat__fail(err, REMAT_E_TOO_LARGE,
                             "optimal: the table would need %llu bytes, more than the work limit "
                             "of %llu bytes, and the bounds did not narrow it; use fewer slots "
                             "(--slots) or a larger work limit",
                             (unsigned long long)whole * sizeof(float),
                             (unsigned long long)work_cap(o));
        else
            st = fill_rows(x, o, err);
    }
    if (cells) *cells = x->cells;
    free(u);
    return st;
}

static remat_status solve_optimal(const remat_chain *c, const remat_solve_options *o, int prune,
                                  size_t *cells, remat_schedule **out, remat_error *err) {
    uint64_t store_peak;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, NULL, err));
    /* Storing everything needs one forward and one backward per stage: optimal. */
    if (o->memory >= store_peak) return remat__solve_store_all(c, o, out, err);
    opt_ctx x;
    int fits = 0;
    remat_status st = prepare(&x, c, o, o->memory, &fits, err);
    if (st == REMAT_OK && !fits) st = infeasible(&x, o, store_peak, o->memory, err);
    uint64_t base = x.budget, b = base;
    if (st == REMAT_OK) x.budget = base + headroom(&x, base);
    if (st == REMAT_OK) st = solve_rows(&x, o, base, prune, cells, err);
    if (st == REMAT_OK) st = pick_budget(&x, base, o->memory, &b, err);
    remat_schedule *s = NULL;
    if (st == REMAT_OK) st = remat_schedule_create("optimal", &s, err);
    if (st == REMAT_OK) {
        opt_rebuild r = {&x, s, 0, 0, NULL, 0, 0};
        st = rebuild(&r, 1, x.n, b, err);
        s->time = r.time;
        s->peak_bytes = r.peak;
    }
    ctx_free(&x);
    if (st != REMAT_OK) {
        remat_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat__solve_optimal(const remat_chain *c, const remat_solve_options *o,
                                  remat_schedule **out, remat_error *err) {
    return solve_optimal(c, o, 1, NULL, out, err);
}

remat_status remat__solve_optimal_ex(const remat_chain *c, const remat_solve_options *o,
                                     int prune, size_t *cells, remat_schedule **out,
                                     remat_error *err) {
    return solve_optimal(c, o, prune, cells, out, err);
}

/* ---- the curve ---- */

/* Keeps first and last, and for evenly spread memories the step in force. */
static size_t thin(remat_curve_point *p, size_t k, size_t want) {
    if (want == 0 || k <= want) return k;
    if (want == 1) {
        p[0] = p[k - 1];
        return 1;
    }
    size_t out = 1, last = 0;
    uint64_t m0 = p[0].memory, m1 = p[k - 1].memory;
    for (size_t j = 1; j + 1 < want; j++) {
        double target = (double)m0 + (double)(m1 - m0) * (double)j / (double)(want - 1);
        size_t i = last;
        while (i + 1 < k - 1 && (double)p[i + 1].memory <= target) i++;
        if (i > last) {
            p[out++] = p[i];
            last = i;
        }
    }
    p[out++] = p[k - 1];
    return out;
}

/* Appends the steps of C(1, n, .) from the table (slot u): budget b is
 * reached from limit a[0] + b*u, whose slot is u or finer, so a solve there
 * does at least as well (powers of two nest). Keeps points whose time
 * strictly falls. */
static void table_points(const opt_ctx *x, uint64_t slots, uint64_t store_peak, int to_peak,
                         remat_curve *cv, float *prev) {
    uint64_t in = byte_a(x->c, 0), u = x->unit;
    /* a limit whose own slot is coarser than the table's is not covered (only
     * when prepare() had to refine the slot at the top) */
    uint64_t last = slots ? unit_top(slots, u) : UINT64_MAX;
    opt_view row = view_of(x, 1, x->n);
    /* past the row the value is its constant tail: one more step at most */
    uint64_t bmax = row.hi < x->budget ? row.hi : x->budget;
    for (uint64_t b = row.lo; b <= bmax; b++) {
        float v = table_at(x, 1, x->n, b);
        if (!(v < *prev)) continue;
        *prev = v;
        uint64_t mem = sat(in + sat(b * u));
        if ((to_peak && mem >= store_peak) || mem > last) break;
        remat_curve_point p = {mem, (double)v / x->scale};
        if (cv->n > 0 && cv->points[cv->n - 1].memory == mem) cv->points[cv->n - 1] = p;
        else cv->points[cv->n++] = p;
    }
}

/* C(1, n, budget) at limit `mem`, the value a solve there finds. */
static remat_status value_at(const remat_chain *c, const remat_solve_options *o, uint64_t mem,
                             double *time, remat_error *err) {
    opt_ctx x;
    int fits = 0;
    remat_status st = prepare(&x, c, o, mem, &fits, err);
    if (st == REMAT_OK && !fits)
        st = remat__fail(err, REMAT_E_INTERNAL, "optimal curve: the smallest limit does not fit");
    if (st == REMAT_OK) st = solve_table(&x, o, 0, err);
    if (st == REMAT_OK) *time = (double)table_at(&x, 1, x.n, x.budget) / x.scale;
    ctx_free(&x);
    return st;
}

/* The curve from the smallest feasible limit (what remat_min_memory says) to
 * the top, from one table at the top's slot (every budget), plus the
 * smallest limit itself when that table cannot reach it (a solve there, at
 * its finer slot). */
remat_status remat__curve_optimal(const remat_chain *c, const remat_solve_options *o,
                                  size_t max_points, remat_curve **out, remat_error *err) {
    uint64_t store_peak;
    double store_time;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, &store_time, err));
    uint64_t top = o->memory ? o->memory : store_peak;
    int to_peak = top >= store_peak;
    uint64_t mm = 0;
    REMAT__FORWARD(remat__min_memory_optimal(c, o, &mm, err));
    if (top < mm) {
        opt_ctx x;
        remat_status st = ctx_init(&x, c, o->max_work_bytes, err);
        if (st == REMAT_OK) st = infeasible(&x, o, store_peak, top, err);
        ctx_free(&x);
        return st;
    }
    remat_curve *cv = calloc(1, sizeof *cv);
    REMAT__RETURN_IF(!cv, err, REMAT_E_NOMEM, "optimal curve: out of memory");
    remat__strlcpy(cv->algorithm, "optimal", sizeof cv->algorithm);
    opt_ctx x;
    int fits = 0;
    remat_status st = REMAT_OK;
    if (mm < store_peak) st = prepare(&x, c, o, top, &fits, err);
    else memset(&x, 0, sizeof x);
    /* points: the smallest limit, every budget of the table, the store-all peak */
    uint64_t budgets = fits ? x.budget + 1 : 0;
    if (st == REMAT_OK && budgets > SIZE_MAX / sizeof *cv->points - 3)
        st = remat__fail(err, REMAT_E_TOO_LARGE, "optimal curve: too many points");
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&cv->points, (size_t)budgets + 3, sizeof *cv->points,
                                o->max_work_bytes, "optimal curve", err);
    if (st == REMAT_OK && fits) st = solve_table(&x, o, x.budget, err);
    float prev = INFINITY;
    if (st == REMAT_OK && mm < store_peak) {
        uint64_t first = fits ? sat(byte_a(c, 0) + sat(view_of(&x, 1, x.n).lo * x.unit)) : top;
        if (mm < first) { /* the table's slot is too coarse to reach mm */
            double t = 0;
            st = value_at(c, o, mm, &t, err);
            if (st == REMAT_OK) cv->points[cv->n++] = (remat_curve_point){mm, t};
            if (st == REMAT_OK && fits) prev = (float)(t * x.scale);
        }
        if (st == REMAT_OK && fits) table_points(&x, slots_of(o), store_peak, to_peak, cv, &prev);
    }
    if (mm < store_peak) ctx_free(&x);
    if (st == REMAT_OK && to_peak) {
        /* solving at the store-all peak gives store-all */
        if (cv->n > 0 && cv->points[cv->n - 1].time <= store_time * (1 + 1e-6))
            cv->points[cv->n - 1].time = store_time;
        else
            cv->points[cv->n++] = (remat_curve_point){store_peak, store_time};
    }
    if (st == REMAT_OK) cv->n = thin(cv->points, cv->n, max_points);
    if (st != REMAT_OK) {
        remat_curve_free(cv);
        return st;
    }
    *out = cv;
    return REMAT_OK;
}

/* ---- tables for the join solver (hjoin.c) ---- */

struct remat__chain_table {
    opt_ctx x;
};

remat_status remat__chain_table_create(const remat_chain *c, uint64_t unit, uint64_t budget,
                                       const remat_solve_options *o, remat__chain_table **out,
                                       remat_error *err) {
    *out = NULL;
    remat__chain_table *t = calloc(1, sizeof *t);
    REMAT__RETURN_IF(!t, err, REMAT_E_NOMEM, "optimal: out of memory");
    remat_status st = ctx_init(&t->x, c, o->max_work_bytes, err);
    if (st == REMAT_OK) {
        ctx_units(&t->x, 1, unit); /* with one slot per limit, the slot of `unit` is unit */
        t->x.budget = budget;
        st = ctx_bounds(&t->x, err);
    }
    if (st == REMAT_OK) st = build_table(&t->x, o, slots_of(o) == 0, budget, err);
    if (st != REMAT_OK) {
        remat__chain_table_free(t);
        return st;
    }
    *out = t;
    return REMAT_OK;
}

void remat__chain_table_free(remat__chain_table *t) {
    if (!t) return;
    ctx_free(&t->x);
    free(t);
}

double remat__chain_table_time(const remat__chain_table *t, size_t s, size_t e, uint64_t m) {
    return (double)table_at(&t->x, s, e, m) / t->x.scale;
}

void remat__chain_table_row(const remat__chain_table *t, size_t s, size_t e,
                            remat__chain_row *out) {
    opt_view v = view_of(&t->x, s, e);
    *out = (remat__chain_row){v.row, v.lo, v.hi, v.tail, t->x.scale};
}

uint64_t remat__chain_table_need(const remat__chain_table *t, size_t s, size_t e) {
    return t->x.lo[IDX(&t->x, s, e)];
}

remat_status remat__chain_table_ops(const remat__chain_table *t, size_t s, size_t e, uint64_t m,
                                    remat_schedule *out, remat_error *err) {
    opt_rebuild r = {&t->x, out, 0, 0, NULL, 0, 0};
    return rebuild(&r, s, e, m, err);
}
