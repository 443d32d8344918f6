/* The heterogeneous join solver (docs/join.md): the recurrence of Theorem 3
 * of papers/join-networks.md over byte-sized branches, with rotor's chain
 * tables (optimal.c) for the segments back-propagated after the turn.
 *
 * J(sigma, m) is the best time to finish the join from state sigma with m
 * units of memory. In sigma, branch j has run its stages before s_j and holds
 * their last output a[j.s_j-1], plainly (p_j = 0, counted inside m: a B or T
 * inside frees it) or as abar (p_j = 1, counted outside: it waits for a B of
 * an outer level). At the end every branch holds d[j.s_j-1]. A choice cuts
 * one branch m at its start s:
 *   Fall s/k, for every save k of the stage (SPEC section 1's options, 0 the
 *      full save): abar[s] of save k is the start of the rest; B s follows.
 *   Fck s, Fn s+1..s'-1: a[s'-1] is the start of the rest; then C_m(s, s'-1)
 *      back-propagates the segment with what the rest leaves (the other
 *      branches' d[j.s_j-1] are held then).
 * With every branch at its end, the turn. Memory is in units: sizes rounded
 * up to the slot, as optimal does. */
#include <math.h>
#include <string.h>

#include "../core/hjoin_internal.h"
#include "../core/parallel.h"
#include "solvers_internal.h"

#define HJ_LIM ((uint64_t)1 << 60)
#define HJ_MAXB REMAT_HJOIN_MAX_BRANCHES
/* Seconds per inner step of the fill (one candidate at one budget), measured
 * on the development machine (docs/join.md). */
#define HJ_SEC_PER_STEP 4.0e-9
/* Seconds per choice of the bounds pass (no budget dimension). */
#define HJ_SEC_PER_BOUND 1.0e-8

static uint64_t sat(uint64_t x) { return x > HJ_LIM ? HJ_LIM : x; }
static uint64_t max2(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* A row: J(sigma, b) for b in [lo, hi) at tab[off + b - lo]; from hi on the
 * value at hi - 1 (the all-Fall schedule fits there); below lo infinite. */
typedef struct hj_view {
    uint64_t lo, hi;
    size_t off;
} hj_view;

/* One save of a stage (its full save or a partial one) in units: the abar
 * it makes, Fall's overhead, the overhead and time of the B consuming it. */
typedef struct hj_save {
    uint64_t ab, ofa, ob;
    double t; /* fwd_time + the save's bwd_time */
} hj_save;

typedef struct hj_ctx {
    const remat__hjoin_net *net;
    size_t k;
    uint32_t L[HJ_MAXB];
    uint64_t unit, budget;
    /* sizes in units by value index 0..L (of by stage; index 0 unused); ab is
     * the least abar over the stage's saves (what an abar start holds at least) */
    uint64_t *a[HJ_MAXB], *ab[HJ_MAXB], *d[HJ_MAXB], *of[HJ_MAXB];
    double *pf[HJ_MAXB]; /* prefix sums of fwd times */
    /* the saves of stage i: sv[so[i] .. so[i+1]), option k at sv[so[i] + k];
     * plain[i]: the save with the least B time (all-Fall with it is fastest) */
    hj_save *sv[HJ_MAXB];
    uint32_t *so[HJ_MAXB];
    uint8_t *plain[HJ_MAXB];
    uint32_t nsave[HJ_MAXB]; /* the most saves of one stage */
    uint64_t tneed;                     /* the turn's need beyond what is held */
    double ttime;
    size_t ns, stride[HJ_MAXB];
    uint64_t *lo, *g; /* [ns] the smallest budget, and one at which all-Fall fits */
    hj_view *vw;      /* [ns] */
    double *tab;
    size_t cells;
    remat__chain_table *ct[HJ_MAXB];
} hj_ctx;

/* A state decoded: per branch its start s (1..L+1) and whether the start is
 * an abar; P the plain starts' units, D the gradients d[j.s_j-1] held at
 * the end. Branch code: 0 for s = 1, else 2(s-1) - 1 + p. */
typedef struct hj_state {
    uint32_t s[HJ_MAXB];
    uint8_t p[HJ_MAXB];
    uint32_t code[HJ_MAXB];
    uint64_t P, D;
    uint64_t A; /* the abar starts, held outside the budget */
    int done;   /* every branch at its end */
} hj_state;

static uint32_t code_of(uint32_t s, int abar) { return s == 1 ? 0 : 2 * (s - 1) - 1 + (abar != 0); }

static void decode(const hj_ctx *x, size_t id, hj_state *st) {
    st->P = st->D = st->A = 0;
    st->done = 1;
    for (size_t j = 0; j < x->k; j++) {
        uint32_t c = (uint32_t)(id / x->stride[j] % (2 * x->L[j] + 1));
        st->code[j] = c;
        st->s[j] = (c + 1) / 2 + 1;
        st->p[j] = c > 0 && c % 2 == 0;
        if (!st->p[j]) st->P += x->a[j][st->s[j] - 1];
        else st->A += x->ab[j][st->s[j] - 1];
        st->D += x->d[j][st->s[j] - 1];
        if (st->s[j] <= x->L[j]) st->done = 0;
    }
}

/* One choice at a state (see the top of the file). */
typedef struct hj_choice {
    uint32_t m;     /* branch, 0-based */
    uint32_t sp;    /* 0: Fall s/opt; else Fck s, Fn .. s'-1 and the rest from s' */
    uint8_t opt;    /* Fall: the save */
    uint8_t plain;  /* Fall: opt is the stage's plain save */
    size_t sub;     /* the rest's state */
    uint64_t w;     /* the rest's budget is b - w */
    uint64_t need;  /* what the ops of this level need */
    uint64_t cw;    /* Fck: C_m(s, s'-1) runs at b - cw */
    double c;       /* time of the ops of this level */
} hj_choice;

static size_t max_choices(const hj_ctx *x) {
    size_t n = 0;
    for (size_t j = 0; j < x->k; j++) n += x->L[j] + x->nsave[j];
    return n;
}

/* The choices at st (id), in a fixed order: by branch, Fall by save, then s'.
 * An ordered network cuts only its first unfinished branch: the forward runs
 * the branches in order, and the backward, last in first out, in reverse. */
static size_t choices(const hj_ctx *x, size_t id, const hj_state *st, hj_choice *out) {
    size_t n = 0;
    for (uint32_t m = 0; m < x->k; m++) {
        uint32_t s = st->s[m];
        if (s > x->L[m]) continue;
        if (x->net->ordered && n > 0) break;
        uint64_t start = st->p[m] ? 0 : x->a[m][s - 1]; /* the start inside the budget */
        uint64_t others = st->D - x->d[m][s - 1];
        for (uint32_t q = x->so[m][s]; q < x->so[m][s + 1]; q++) {
            const hj_save *v = &x->sv[m][q];
            hj_choice f;
            f.m = m;
            f.sp = 0;
            f.opt = (uint8_t)(q - x->so[m][s]);
            f.plain = f.opt == x->plain[m][s];
            f.sub = id + (size_t)(code_of(s + 1, 1) - st->code[m]) * x->stride[m];
            f.w = start + v->ab;
            uint64_t bneed = start + v->ab + others + x->d[m][s] + x->d[m][s - 1] + v->ob;
            f.need = max2(st->P + v->ab + v->ofa, bneed);
            f.cw = 0;
            f.c = v->t;
            out[n++] = f;
        }
        uint64_t run = x->a[m][s] + x->of[m][s];
        for (uint32_t sp = s + 1; sp <= x->L[m] + 1; sp++) {
            if (sp > s + 1) run = max2(run, x->a[m][sp - 2] + x->a[m][sp - 1] + x->of[m][sp - 1]);
            hj_choice c;
            c.m = m;
            c.sp = sp;
            c.opt = 0;
            c.plain = 0;
            c.sub = id + (size_t)(code_of(sp, 0) - st->code[m]) * x->stride[m];
            c.w = start;
            c.need = st->P + run;
            c.cw = start + others;
            c.c = x->pf[m][sp - 1] - x->pf[m][s - 1];
            out[n++] = c;
        }
    }
    return n;
}

/* ---- sizes ---- */

static void ctx_free(hj_ctx *x) {
    for (size_t j = 0; j < HJ_MAXB; j++) {
        free(x->a[j]); free(x->ab[j]); free(x->d[j]); free(x->of[j]);
        free(x->pf[j]); free(x->sv[j]); free(x->so[j]); free(x->plain[j]);
        remat__chain_table_free(x->ct[j]);
    }
    free(x->lo); free(x->g); free(x->vw); free(x->tab);
    memset(x, 0, sizeof *x);
}

static uint64_t in_units(uint64_t bytes, uint64_t u) { return sat(bytes / u + (bytes % u != 0)); }

/* Stage i of branch j: its forward sizes and times, and its saves. */
static void save_sizes(hj_ctx *x, size_t j, uint32_t i, uint64_t u) {
    const remat_stage *sg = &x->net->c[j]->stages[i - 1];
    x->of[j][i] = in_units(sg->fwd_overhead, u);
    x->pf[j][i] = x->pf[j][i - 1] + sg->fwd_time;
    uint32_t at = x->so[j][i];
    x->so[j][i + 1] = at + (uint32_t)sg->n_options + 1;
    if (sg->n_options + 1 > x->nsave[j]) x->nsave[j] = (uint32_t)sg->n_options + 1;
    uint64_t least = HJ_LIM;
    for (unsigned k = 0; k <= sg->n_options; k++) {
        remat__save v = remat__stage_save(sg, k);
        hj_save *h = &x->sv[j][at + k];
        h->ab = in_units(v.saved_bytes, u);
        h->ofa = in_units(v.fall_overhead, u);
        h->ob = in_units(v.bwd_overhead, u);
        h->t = sg->fwd_time + v.bwd_time;
        if (h->ab < least) least = h->ab;
        if (v.bwd_time < remat__stage_save(sg, x->plain[j][i]).bwd_time)
            x->plain[j][i] = (uint8_t)k;
    }
    x->ab[j][i] = least;
}

/* Sizes of net in units of u. */
static remat_status ctx_init(hj_ctx *x, const remat__hjoin_net *net, uint64_t u,
                             remat_error *err) {
    memset(x, 0, sizeof *x);
    x->net = net;
    x->k = net->k;
    x->unit = u;
    x->ns = 1;
    for (size_t j = 0; j < x->k; j++) {
        const remat_chain *c = net->c[j];
        uint32_t L = net->n[j];
        x->L[j] = L;
        uint64_t **v[4] = {&x->a[j], &x->ab[j], &x->d[j], &x->of[j]};
        for (int q = 0; q < 4; q++) *v[q] = remat__calloc((size_t)L + 1, sizeof(uint64_t));
        x->pf[j] = remat__calloc((size_t)L + 1, sizeof(double));
        x->so[j] = remat__calloc((size_t)L + 2, sizeof(uint32_t));
        x->plain[j] = remat__calloc((size_t)L + 1, 1);
        size_t saves = 0;
        for (uint32_t i = 1; i <= L; i++) saves += c->stages[i - 1].n_options + 1;
        x->sv[j] = remat__calloc(saves, sizeof(hj_save));
        if (!x->a[j] || !x->ab[j] || !x->d[j] || !x->of[j] || !x->pf[j] || !x->so[j] ||
            !x->plain[j] || !x->sv[j])
            return remat__fail(err, REMAT_E_NOMEM, "join: out of memory");
        x->nsave[j] = 1;
        for (uint32_t i = 0; i <= L; i++) {
            x->a[j][i] = in_units(remat_chain_a_bytes(c, i), u);
            x->ab[j][i] = x->a[j][i];
            x->d[j][i] = in_units(remat_chain_d_bytes(c, i), u);
            if (i == 0) continue;
            save_sizes(x, j, i, u);
        }
        x->stride[j] = x->ns;
        REMAT__RETURN_IF(!remat__mul_size(x->ns, 2 * (size_t)L + 1, &x->ns), err,
                         REMAT_E_TOO_LARGE, "join: too many states");
    }
    uint64_t d = 0;
    for (size_t j = 0; j < x->k; j++) d += x->d[j][x->L[j]];
    const remat_stage *t = &net->turn;
    x->tneed = in_units(t->saved_bytes, u) +
               max2(in_units(t->fwd_overhead, u), d + in_units(t->bwd_overhead, u));
    x->ttime = t->fwd_time + t->bwd_time;
    return REMAT_OK;
}

/* ---- bounds: the smallest budget of each state, and one where all-Fall fits ---- */

static uint64_t chain_need(const hj_ctx *x, uint32_t m, uint32_t s, uint32_t e) {
    return remat__chain_table_need(x->ct[m], s, e);
}

/* Chain tables for each branch (needs only when budget is 0). */
static remat_status chain_tables(hj_ctx *x, const remat_solve_options *o, remat_error *err) {
    for (size_t j = 0; j < x->k; j++)
        REMAT__FORWARD(
            remat__chain_table_create(x->net->c[j], x->unit, x->budget, o, &x->ct[j], err));
    return REMAT_OK;
}

static uint64_t work_cap(const remat_solve_options *o) {
    return o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
}

/* Refuses, before the bounds pass, a state space too large for the limits. */
static remat_status check_states(const hj_ctx *x, const remat_solve_options *o,
                                 remat_error *err) {
    uint64_t cap = work_cap(o), per = 2 * sizeof(uint64_t) + sizeof(hj_view) + sizeof(size_t);
    REMAT__RETURN_IF(x->ns > cap / per, err, REMAT_E_TOO_LARGE,
                     "join: %zu states would need %.3g bytes, more than the work limit of %llu "
                     "bytes; use shorter or fewer branches, or a larger work limit",
                     x->ns, (double)x->ns * (double)per, (unsigned long long)cap);
    double steps = (double)x->ns * (double)max_choices(x) / 2; /* half on average */
    return remat__check_time(o, steps * HJ_SEC_PER_BOUND, "join",
                             "use shorter or fewer branches", err);
}

static remat_status bounds(hj_ctx *x, const remat_solve_options *o, remat_error *err) {
    REMAT__FORWARD(check_states(x, o, err));
    REMAT__FORWARD(remat__alloc_table((void **)&x->lo, x->ns, sizeof *x->lo, work_cap(o),
                                      "join bounds", err));
    REMAT__FORWARD(remat__alloc_table((void **)&x->g, x->ns, sizeof *x->g, work_cap(o),
                                      "join bounds", err));
    hj_choice *ch = remat__calloc(max_choices(x), sizeof *ch);
    REMAT__RETURN_IF(!ch, err, REMAT_E_NOMEM, "join: out of memory");
    hj_state st;
    for (size_t id = x->ns; id-- > 0;) {
        decode(x, id, &st);
        if (st.done) {
            x->lo[id] = x->g[id] = sat(st.P + x->tneed);
            continue;
        }
        uint64_t lo = HJ_LIM, g = HJ_LIM;
        size_t n = choices(x, id, &st, ch);
        for (size_t q = 0; q < n; q++) {
            const hj_choice *c = &ch[q];
            uint64_t v = max2(c->need, sat(x->lo[c->sub] + c->w));
            if (c->sp) {
                uint64_t cn = chain_need(x, c->m, st.s[c->m], c->sp - 1);
                v = max2(v, sat(cn + c->cw));
            } else if (c->plain) { /* all-Fall from here: Fall s, all-Fall in the rest */
                uint64_t all = max2(c->need, sat(x->g[c->sub] + c->w));
                if (all < g) g = all;
            }
            if (v < lo) lo = v;
        }
        x->lo[id] = sat(lo);
        x->g[id] = sat(g > lo ? g : lo);
    }
    free(ch);
    return REMAT_OK;
}

/* ---- the table ---- */

static double view_at(const hj_ctx *x, size_t id, uint64_t b) {
    const hj_view *v = &x->vw[id];
    if (b < v->lo || v->hi <= v->lo) return INFINITY;
    return x->tab[v->off + (b < v->hi ? b : v->hi - 1) - v->lo];
}

/* Rows [lo, min(g, top) + 1), where top is the budget less the abar starts
 * (held outside by every path to the state, so no larger budget is read);
 * the cells and the inner steps they take. */
static remat_status layout(hj_ctx *x, const remat_solve_options *o, remat_error *err) {
    uint64_t cap = work_cap(o);
    REMAT__FORWARD(remat__alloc_table((void **)&x->vw, x->ns, sizeof *x->vw, cap, "join rows",
                                      err));
    size_t total = 0;
    double steps = 0;
    size_t nch = max_choices(x);
    hj_state st;
    for (size_t id = 0; id < x->ns; id++) {
        hj_view *v = &x->vw[id];
        decode(x, id, &st);
        v->lo = x->lo[id];
        uint64_t top = x->budget >= st.A ? x->budget - st.A : 0;
        if (x->g[id] < top) top = x->g[id];
        v->hi = v->lo <= top && st.A <= x->budget ? top + 1 : v->lo;
        v->off = total;
        size_t len = (size_t)(v->hi - v->lo);
        REMAT__RETURN_IF(len > SIZE_MAX - total, err, REMAT_E_TOO_LARGE,
                         "join: the table is too large for this machine");
        total += len;
        size_t n = 0;
        for (size_t j = 0; j < x->k; j++)
            n += st.s[j] <= x->L[j] ? x->L[j] - st.s[j] + 1 + x->nsave[j] : 0;
        steps += (double)len * (double)(n < nch ? n : nch);
    }
    x->cells = total;
    uint64_t bytes = (uint64_t)total * sizeof(double);
    REMAT__RETURN_IF(total > cap / sizeof(double), err, REMAT_E_TOO_LARGE,
                     "join: the table would need %llu bytes, more than the work limit of %llu "
                     "bytes; use fewer slots (--slots) or a larger work limit",
                     (unsigned long long)bytes, (unsigned long long)cap);
    REMAT__FORWARD(remat__check_time(o, remat__parallel_seconds(o, steps * HJ_SEC_PER_STEP),
                                     "join", "use fewer slots (--slots)", err));
    return remat__alloc_table((void **)&x->tab, total ? total : 1, sizeof(double), cap,
                              "join table", err);
}

/* row[b - lo] = min(row, c + J(sub, b - w) [+ C(s, e, b - cw)]) for b in
 * [b0, hi): the arithmetic of pick(), with the reads inlined. */
static void relax(const hj_ctx *x, double *row, uint64_t lo, uint64_t b0, uint64_t hi,
                  const hj_choice *c, const remat__chain_row *cr) {
    const hj_view *sv = &x->vw[c->sub];
    const double *sub = x->tab + sv->off;
    uint64_t slast = sv->hi - 1; /* from there on the sub-row's last value */
    for (uint64_t b = b0; b < hi; b++) {
        uint64_t xs = b - c->w < slast ? b - c->w : slast;
        double t = c->c + sub[xs - sv->lo];
        if (cr) {
            uint64_t y = b - c->cw;
            t += (double)(y < cr->hi ? cr->row[y - cr->lo] : cr->tail) / cr->scale;
        }
        if (t < row[b - lo]) row[b - lo] = t;
    }
}

/* The row of id: min over the choices. */
static void fill_row(const hj_ctx *x, size_t id, hj_choice *ch) {
    const hj_view *v = &x->vw[id];
    if (v->hi <= v->lo) return;
    double *row = x->tab + v->off;
    hj_state st;
    decode(x, id, &st);
    if (st.done) {
        row[0] = x->ttime;
        return;
    }
    for (uint64_t b = v->lo; b < v->hi; b++) row[b - v->lo] = INFINITY;
    size_t n = choices(x, id, &st, ch);
    for (size_t q = 0; q < n; q++) {
        const hj_choice *c = &ch[q];
        const hj_view *sv = &x->vw[c->sub];
        if (sv->hi <= sv->lo) continue; /* the rest never fits */
        uint64_t b0 = max2(v->lo, max2(c->need, sat(sv->lo + c->w)));
        remat__chain_row cr;
        if (c->sp) {
            uint32_t s = st.s[c->m];
            remat__chain_table_row(x->ct[c->m], s, c->sp - 1, &cr);
            b0 = max2(b0, sat(chain_need(x, c->m, s, c->sp - 1) + c->cw));
            b0 = max2(b0, sat(cr.lo + c->cw));
        }
        if (b0 < v->hi) relax(x, row, v->lo, b0, v->hi, c, c->sp ? &cr : NULL);
    }
}

/* The rows of one level (states whose codes add up to the same sum) depend
 * only on higher levels, so a level is filled by parallel workers. */
typedef struct hj_fill {
    const hj_ctx *x;
    const size_t *ids; /* this level's states */
    hj_choice *ch;     /* one buffer of max_choices per worker */
    size_t nch;
} hj_fill;

static void fill_item(const void *arg, size_t i, unsigned worker) {
    const hj_fill *f = arg;
    fill_row(f->x, f->ids[i], f->ch + (size_t)worker * f->nch);
}

static size_t level_of(const hj_ctx *x, size_t id) {
    size_t sum = 0;
    for (size_t j = 0; j < x->k; j++) sum += id / x->stride[j] % (2 * x->L[j] + 1);
    return sum;
}

/* States by level, highest first: order[start[l] .. start[l+1]) is the
 * l-th level from the top. */
static remat_status levels(const hj_ctx *x, size_t **order, size_t **start, size_t *nl,
                           remat_error *err) {
    size_t top = 0;
    for (size_t j = 0; j < x->k; j++) top += 2 * (size_t)x->L[j];
    *nl = top + 1;
    *order = remat__calloc(x->ns, sizeof **order);
    *start = remat__calloc(*nl + 1, sizeof **start);
    size_t *next = remat__calloc(*nl, sizeof *next);
    if (!*order || !*start || !next) {
        free(next);
        return remat__fail(err, REMAT_E_NOMEM, "join: out of memory");
    }
    for (size_t id = 0; id < x->ns; id++) (*start)[top - level_of(x, id) + 1]++;
    for (size_t l = 1; l <= *nl; l++) (*start)[l] += (*start)[l - 1];
    memcpy(next, *start, *nl * sizeof *next);
    for (size_t id = 0; id < x->ns; id++) (*order)[next[top - level_of(x, id)]++] = id;
    free(next);
    return REMAT_OK;
}

static remat_status fill(hj_ctx *x, const remat_solve_options *o, remat_error *err) {
    unsigned threads = x->cells < ((size_t)1 << 16) ? 1 : remat__threads(o->threads);
    if (threads > 64) threads = 64;
    size_t *order = NULL, *start = NULL, nl = 0;
    hj_fill f = {x, NULL, NULL, max_choices(x)};
    remat_status st = levels(x, &order, &start, &nl, err);
    if (st == REMAT_OK) {
        f.ch = remat__calloc((size_t)threads * f.nch, sizeof *f.ch);
        if (!f.ch) st = remat__fail(err, REMAT_E_NOMEM, "join: out of memory");
    }
    for (size_t l = 0; st == REMAT_OK && l < nl; l++) {
        f.ids = order + start[l];
        remat__parallel_for(threads, start[l + 1] - start[l], fill_item, &f);
        remat__progress(o, (double)start[l + 1] / (double)x->ns, "join: table");
    }
    free(f.ch);
    free(order);
    free(start);
    return st;
}

/* ---- the schedule ---- */

enum { TASK_SOLVE, TASK_B, TASK_CHAIN };
typedef struct hj_task {
    int kind;
    size_t id;       /* SOLVE: the state */
    uint32_t m, s, e;
    uint64_t b;      /* SOLVE, CHAIN: the budget */
} hj_task;

/* The choice the table took at (id, b), b within the row. */
static remat_status pick(const hj_ctx *x, size_t id, uint64_t b, hj_choice *ch, hj_choice *out,
                         remat_error *err) {
    hj_state st;
    decode(x, id, &st);
    double want = view_at(x, id, b);
    size_t n = choices(x, id, &st, ch);
    for (size_t q = 0; q < n; q++) {
        const hj_choice *c = &ch[q];
        if (b < c->need || b < c->w || (c->sp && b < c->cw)) continue;
        if (c->sp && b - c->cw < chain_need(x, c->m, st.s[c->m], c->sp - 1)) continue;
        double t = c->c + view_at(x, c->sub, b - c->w);
        if (c->sp) t += remat__chain_table_time(x->ct[c->m], st.s[c->m], c->sp - 1, b - c->cw);
        if (t == want) {
            *out = *c;
            return REMAT_OK;
        }
    }
    return remat__fail(err, REMAT_E_INTERNAL, "join: no choice at state %zu, budget %llu "
                       "matches the table", id, (unsigned long long)b);
}

static remat_status push_task(hj_task *stack, size_t *top, size_t cap, hj_task t,
                              remat_error *err) {
    REMAT__RETURN_IF(*top >= cap, err, REMAT_E_INTERNAL, "join: rebuild stack overflow");
    stack[(*top)++] = t;
    return REMAT_OK;
}

static remat_status emit_chain(const hj_ctx *x, const hj_task *t, remat_schedule *tmp,
                               remat_hjoin_schedule *out, remat_error *err) {
    tmp->n_ops = 0;
    REMAT__FORWARD(remat__chain_table_ops(x->ct[t->m], t->s, t->e, t->b, tmp, err));
    for (size_t q = 0; q < tmp->n_ops; q++)
        REMAT__FORWARD(remat__hjoin_push(out, tmp->ops[q].kind, t->m + 1, tmp->ops[q].index,
                                         tmp->ops[q].option, err));
    return REMAT_OK;
}

/* One SOLVE task: the ops of its level, and the tasks that follow them. */
static remat_status solve_step(const hj_ctx *x, const hj_task *t, hj_choice *ch,
                               hj_task *stack, size_t *top, size_t cap,
                               remat_hjoin_schedule *out, remat_error *err) {
    hj_state st;
    decode(x, t->id, &st);
    if (st.done) return remat__hjoin_push(out, REMAT_HJOIN_OP_T, 0, 0, 0, err);
    const hj_view *v = &x->vw[t->id];
    uint64_t b = t->b < v->hi ? t->b : v->hi - 1; /* from hi on, the row's last schedule */
    hj_choice c;
    memset(&c, 0, sizeof c);
    REMAT__FORWARD(pick(x, t->id, b, ch, &c, err));
    uint32_t s = st.s[c.m];
    size_t br = c.m + 1;
    if (!c.sp) {
        REMAT__FORWARD(remat__hjoin_push(out, REMAT_HJOIN_OP_FALL, br, s, c.opt, err));
        REMAT__FORWARD(push_task(stack, top, cap, (hj_task){TASK_B, 0, c.m, s, s, 0}, err));
    } else {
        REMAT__FORWARD(remat__hjoin_push(out, REMAT_HJOIN_OP_FCK, br, s, 0, err));
        for (uint32_t i = s + 1; i < c.sp; i++)
            REMAT__FORWARD(remat__hjoin_push(out, REMAT_HJOIN_OP_FN, br, i, 0, err));
        hj_task ct = {TASK_CHAIN, 0, c.m, s, c.sp - 1, b - c.cw};
        REMAT__FORWARD(push_task(stack, top, cap, ct, err));
    }
    return push_task(stack, top, cap, (hj_task){TASK_SOLVE, c.sub, 0, 0, 0, b - c.w}, err);
}

static remat_status rebuild(const hj_ctx *x, size_t root, uint64_t b, remat_hjoin_schedule *out,
                            remat_error *err) {
    size_t cap = 2 * max_choices(x) + 4;
    hj_task *stack = remat__calloc(cap, sizeof *stack);
    hj_choice *ch = remat__calloc(max_choices(x), sizeof *ch);
    remat_schedule *tmp = NULL;
    remat_status st = stack && ch ? remat_schedule_create("optimal", &tmp, err)
                                  : remat__fail(err, REMAT_E_NOMEM, "join: out of memory");
    size_t top = 0;
    if (st == REMAT_OK) st = push_task(stack, &top, cap, (hj_task){TASK_SOLVE, root, 0, 0, 0, b},
                                       err);
    while (st == REMAT_OK && top > 0) {
        hj_task t = stack[--top];
        if (t.kind == TASK_SOLVE) st = solve_step(x, &t, ch, stack, &top, cap, out, err);
        else if (t.kind == TASK_B)
            st = remat__hjoin_push(out, REMAT_HJOIN_OP_B, t.m + 1, t.s, 0, err);
        else st = emit_chain(x, &t, tmp, out, err);
    }
    remat_schedule_free(tmp);
    free(stack);
    free(ch);
    return st;
}

/* ---- store-all ---- */

static remat_status store_all_schedule(const remat__hjoin_net *net, remat_hjoin_schedule **out,
                                       remat_error *err) {
    REMAT__FORWARD(remat_hjoin_schedule_create("store-all", out, err));
    remat_status st = REMAT_OK;
    for (size_t b = 0; b < net->k && st == REMAT_OK; b++)
        for (uint32_t i = 1; i <= net->n[b] && st == REMAT_OK; i++)
            st = remat__hjoin_push(*out, REMAT_HJOIN_OP_FALL, b + 1, i, 0, err);
    if (st == REMAT_OK) st = remat__hjoin_push(*out, REMAT_HJOIN_OP_T, 0, 0, 0, err);
    for (size_t b = net->k; b-- > 0 && st == REMAT_OK;)
        for (uint32_t i = net->n[b]; i >= 1 && st == REMAT_OK; i--)
            st = remat__hjoin_push(*out, REMAT_HJOIN_OP_B, b + 1, i, 0, err);
    if (st != REMAT_OK) {
        remat_hjoin_schedule_free(*out);
        *out = NULL;
    }
    return st;
}

/* Replays s on net and fills its time and peak; a failure is a bug. */
static remat_status measure(const remat__hjoin_net *net, remat_hjoin_schedule *s,
                            remat_error *err) {
    remat__hjoin_state st;
    REMAT__FORWARD(remat__hjoin_state_init(net, &st, err));
    char why[256];
    int ok = 1;
    s->time = 0;
    s->peak_bytes = st.mem;
    for (size_t k = 0; k < s->n_ops && ok; k++) {
        uint64_t during;
        double t;
        ok = remat__hjoin_apply(net, &st, s->ops[k], remat__hjoin_next_op(s, k), &during, &t, why, sizeof why);
        if (during > s->peak_bytes) s->peak_bytes = during;
        s->time += t;
    }
    if (ok) ok = remat__hjoin_done(net, &st, why, sizeof why);
    remat__hjoin_state_free(&st);
    REMAT__RETURN_IF(!ok, err, REMAT_E_INTERNAL,
                     "join: the schedule fails the simulator (a bug in remat): %s", why);
    return REMAT_OK;
}

/* 1 when no partial save has a faster B than its stage's full save: then
 * store-all (every full save) is the fastest schedule, as in optimal. */
static int full_is_plain(const remat__hjoin_net *net) {
    for (size_t b = 0; b < net->k; b++)
        for (size_t i = 0; i < net->c[b]->n; i++) {
            const remat_stage *sg = &net->c[b]->stages[i];
            for (size_t k = 0; k < sg->n_options; k++)
                if (sg->options[k].bwd_time < sg->bwd_time) return 0;
        }
    return 1;
}

static remat_status store_all(const remat__hjoin_net *net, uint64_t *peak, double *time,
                              remat_error *err) {
    remat_hjoin_schedule *s = NULL;
    REMAT__FORWARD(store_all_schedule(net, &s, err));
    remat_status st = measure(net, s, err);
    if (peak) *peak = s->peak_bytes;
    if (time) *time = s->time;
    remat_hjoin_schedule_free(s);
    return st;
}

remat_status remat_hjoin_store_all_cost(const remat_hjoin *j, uint64_t *peak_bytes, double *time,
                                        remat_error *err) {
    remat__clear(err);
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_store_all_cost", err);
    if (st == REMAT_OK) st = store_all(&net, peak_bytes, time, err);
    remat__hjoin_net_free(&net);
    return st;
}

/* ---- slots (as optimal.c: powers of two, between S and 2S per limit) ---- */

static uint64_t slots_of(const remat_solve_options *o) {
    return o->slots < 0 ? REMAT_DEFAULT_SLOTS : (uint64_t)o->slots;
}
static uint64_t unit_for(uint64_t slots, uint64_t mem) {
    return slots ? remat__optimal_slot(slots, mem) : 1;
}
/* The smallest and the largest limit whose slot is u. */
static uint64_t unit_floor(uint64_t slots, uint64_t u) {
    if (u <= 1) return 0;
    return u > UINT64_MAX / slots ? UINT64_MAX : slots * u;
}
static uint64_t unit_top(uint64_t slots, uint64_t u) {
    return u > UINT64_MAX / 2 / slots ? UINT64_MAX : 2 * slots * u - 1;
}

/* The root's smallest budget at unit u (no table). */
static remat_status need_at(const remat__hjoin_net *net, const remat_solve_options *o, uint64_t u,
                            uint64_t *need, remat_error *err) {
    hj_ctx x;
    remat_status st = ctx_init(&x, net, u, err);
    if (st == REMAT_OK) st = chain_tables(&x, o, err); /* budget 0: needs only */
    if (st == REMAT_OK) st = bounds(&x, o, err);
    if (st == REMAT_OK) *need = x.lo[0];
    ctx_free(&x);
    return st;
}

/* The smallest limit a solve meets (store_peak at most). Feasibility is
 * monotone among the limits of one slot, and rounding only adds. */
static remat_status min_memory(const remat__hjoin_net *net, const remat_solve_options *o,
                               uint64_t store_peak, uint64_t *out, remat_error *err) {
    uint64_t slots = slots_of(o), need;
    REMAT__FORWARD(need_at(net, o, 1, &need, err));
    *out = store_peak;
    if (need >= store_peak) return REMAT_OK;
    if (slots == 0) {
        *out = need;
        return REMAT_OK;
    }
    for (uint64_t u = unit_for(slots, need); unit_floor(slots, u) < store_peak && u < HJ_LIM;
         u *= 2) {
        uint64_t top = unit_top(slots, u), nu;
        REMAT__FORWARD(need_at(net, o, u, &nu, err));
        uint64_t cand = max2(sat(nu * u), unit_floor(slots, u));
        if (cand <= top) {
            *out = cand < store_peak ? cand : store_peak;
            return REMAT_OK;
        }
    }
    return REMAT_OK;
}

static remat_status infeasible(uint64_t limit, uint64_t mm, remat_error *err) {
    remat_status st = remat__fail(err, REMAT_E_INFEASIBLE,
                                  "join: no persistent nested schedule fits %llu bytes; the "
                                  "smallest limit that works is %llu bytes",
                                  (unsigned long long)limit, (unsigned long long)mm);
    if (err) err->min_memory = mm;
    return st;
}

/* The table at limit mem, unit u: x is ready to read (*fits: the root fits). */
static remat_status table_at_unit(hj_ctx *x, const remat__hjoin_net *net,
                                  const remat_solve_options *o, uint64_t mem, uint64_t u,
                                  int *fits, remat_error *err) {
    REMAT__FORWARD(ctx_init(x, net, u, err));
    x->budget = mem / u;
    REMAT__FORWARD(chain_tables(x, o, err));
    REMAT__FORWARD(bounds(x, o, err));
    *fits = x->lo[0] <= x->budget;
    if (!*fits) return REMAT_OK;
    REMAT__FORWARD(layout(x, o, err));
    return fill(x, o, err);
}

/* The table for limit mem: at its slot, or a finer one where rounding at
 * its own slot leaves nothing (then every limit from the smallest works). */
static remat_status table_for(hj_ctx *x, const remat__hjoin_net *net, const remat_solve_options *o,
                              uint64_t mem, uint64_t store_peak, int *fits, remat_error *err) {
    uint64_t slots = slots_of(o), u = unit_for(slots, mem), mm = 0;
    REMAT__FORWARD(table_at_unit(x, net, o, mem, u, fits, err));
    if (*fits || slots == 0 || u == 1) return REMAT_OK;
    REMAT__FORWARD(min_memory(net, o, store_peak, &mm, err));
    if (mem < mm) return REMAT_OK;
    uint64_t u0 = unit_for(slots, mm);
    for (u /= 2; !*fits && u >= u0 && u >= 1; u /= 2) {
        ctx_free(x);
        REMAT__FORWARD(table_at_unit(x, net, o, mem, u, fits, err));
        if (u == 1) break;
    }
    return REMAT_OK;
}

static remat_status solve(const remat__hjoin_net *net, const remat_solve_options *o,
                          remat_hjoin_schedule **out, remat_error *err) {
    uint64_t store_peak;
    double store_time;
    REMAT__FORWARD(store_all(net, &store_peak, &store_time, err));
    hj_ctx x;
    int fits = 0;
    remat_status st = REMAT_OK;
    /* a partial save with a faster B: the table may beat store-all there too */
    if (o->memory < store_peak || !full_is_plain(net))
        st = table_for(&x, net, o, o->memory, store_peak, &fits, err);
    else
        memset(&x, 0, sizeof x);
    /* store-all fits: it wins where the table's rounding does worse */
    if (st == REMAT_OK && o->memory >= store_peak &&
        (!fits || !(view_at(&x, 0, x.budget) < store_time))) {
        ctx_free(&x);
        REMAT__FORWARD(store_all_schedule(net, out, err));
        (*out)->memory_limit = o->memory;
        return measure(net, *out, err);
    }
    if (st == REMAT_OK && !fits) {
        uint64_t mm = 0;
        st = min_memory(net, o, store_peak, &mm, err);
        if (st == REMAT_OK) st = infeasible(o->memory, mm, err);
    }
    remat_hjoin_schedule *s = NULL;
    if (st == REMAT_OK) st = remat_hjoin_schedule_create("join-optimal", &s, err);
    if (st == REMAT_OK) st = rebuild(&x, 0, x.budget, s, err);
    if (st == REMAT_OK) st = measure(net, s, err);
    if (st == REMAT_OK && s->peak_bytes > o->memory)
        st = remat__fail(err, REMAT_E_INTERNAL,
                         "join: the schedule peaks at %llu bytes, over the limit %llu (a bug in "
                         "remat)", (unsigned long long)s->peak_bytes,
                         (unsigned long long)o->memory);
    ctx_free(&x);
    if (st != REMAT_OK) {
        remat_hjoin_schedule_free(s);
        return st;
    }
    s->memory_limit = o->memory;
    *out = s;
    return REMAT_OK;
}

static remat_status check_options(const remat_solve_options *o, const char *who,
                                  remat_error *err) {
    REMAT__RETURN_IF(!o, err, REMAT_E_INPUT, "%s: options are NULL", who);
    REMAT__RETURN_IF(o->memory >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: memory: %llu is 2^53 or more", who, (unsigned long long)o->memory);
    REMAT__RETURN_IF(o->threads > REMAT_MAX_THREADS, err, REMAT_E_INPUT,
                     "%s: threads: %u is more than %u", who, o->threads, REMAT_MAX_THREADS);
    REMAT__RETURN_IF(o->slots > 1000000, err, REMAT_E_INPUT,
                     "%s: slots: %lld is more than 1000000", who, (long long)o->slots);
    REMAT__RETURN_IF(isnan(o->max_seconds), err, REMAT_E_INPUT, "%s: max_seconds is NaN", who);
    return REMAT_OK;
}

remat_status remat_hjoin_solve(const remat_hjoin *j, const remat_solve_options *o,
                               remat_hjoin_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_solve: NULL argument");
    REMAT__FORWARD(check_options(o, "remat_hjoin_solve", err));
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_solve", err);
    if (st == REMAT_OK) st = solve(&net, o, out, err);
    remat__hjoin_net_free(&net);
    return st;
}

remat_status remat_hjoin_min_memory(const remat_hjoin *j, const remat_solve_options *o,
                                    uint64_t *out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_min_memory: NULL argument");
    REMAT__FORWARD(check_options(o, "remat_hjoin_min_memory", err));
    remat__hjoin_net net;
    uint64_t store_peak = 0;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_min_memory", err);
    if (st == REMAT_OK) st = store_all(&net, &store_peak, NULL, err);
    if (st == REMAT_OK) st = min_memory(&net, o, store_peak, out, err);
    remat__hjoin_net_free(&net);
    return st;
}

/* ---- the curve ---- */

/* Keeps first and last, and for evenly spread memories the point in force. */
static size_t thin(remat_curve_point *p, size_t k, size_t want) {
    if (want == 0 || k <= want) return k;
    if (want == 1) {
        p[0] = p[k - 1];
        return 1;
    }
    size_t out = 1, last = 0;
    uint64_t m0 = p[0].memory, m1 = p[k - 1].memory;
    for (size_t q = 1; q + 1 < want; q++) {
        double target = (double)m0 + (double)(m1 - m0) * (double)q / (double)(want - 1);
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

static void add_point(remat_curve *cv, uint64_t mem, double t) {
    if (cv->n > 0 && cv->points[cv->n - 1].memory == mem) cv->points[cv->n - 1].time = t;
    else cv->points[cv->n++] = (remat_curve_point){mem, t};
}

/* The time a solve at limit mem finds (mem at least the smallest limit). */
static remat_status value_at(const remat__hjoin_net *net, const remat_solve_options *o,
                             uint64_t mem, uint64_t store_peak, double *t, remat_error *err) {
    hj_ctx x;
    int fits = 0;
    remat_status st = table_for(&x, net, o, mem, store_peak, &fits, err);
    if (st == REMAT_OK && !fits && mem < store_peak)
        st = remat__fail(err, REMAT_E_INTERNAL, "join curve: the smallest limit does not fit");
    if (st == REMAT_OK && fits) *t = view_at(&x, 0, x.budget);
    double t_all = INFINITY;
    if (st == REMAT_OK && mem >= store_peak) /* as solve(): store-all fits there */
        st = store_all(net, NULL, &t_all, err);
    if (st == REMAT_OK && (!fits || t_all <= *t)) *t = t_all;
    ctx_free(&x);
    return st;
}

static remat_status curve_points(const remat__hjoin_net *net, const remat_solve_options *o,
                                 uint64_t top, uint64_t mm, uint64_t store_peak, double store_time,
                                 remat_curve *cv, remat_error *err) {
    hj_ctx x;
    int fits = 0;
    remat_status st = mm < store_peak ? table_for(&x, net, o, top, store_peak, &fits, err)
                                      : REMAT_OK;
    if (mm >= store_peak) memset(&x, 0, sizeof x);
    uint64_t budgets = fits ? x.budget - x.vw[0].lo + 1 : 0;
    if (st == REMAT_OK)
        st = remat__alloc_table((void **)&cv->points, (size_t)budgets + 3, sizeof *cv->points,
                                o->max_work_bytes, "join curve", err);
    double prev = INFINITY;
    uint64_t first = fits ? sat(x.vw[0].lo * x.unit) : top;
    if (st == REMAT_OK && mm < store_peak && mm < first) { /* the table's slot cannot reach mm */
        double t = 0;
        st = value_at(net, o, mm, store_peak, &t, err);
        if (st == REMAT_OK) add_point(cv, mm, t);
        prev = t;
    }
    uint64_t last = fits && x.vw[0].hi > x.vw[0].lo ? x.vw[0].hi - 1 : 0; /* then constant */
    for (uint64_t b = fits ? x.vw[0].lo : 1; fits && st == REMAT_OK && b <= last; b++) {
        double t = view_at(&x, 0, b);
        uint64_t mem = sat(b * x.unit);
        if (!(t < prev)) continue;
        if (mem >= store_peak && top >= store_peak) break; /* as optimal's curve */
        prev = t;
        add_point(cv, mem, t);
    }
    ctx_free(&x);
    if (st == REMAT_OK && top >= store_peak && !full_is_plain(net)) {
        /* a faster partial save: the table may still gain at the store-all peak */
        double t = 0;
        st = value_at(net, o, store_peak, store_peak, &t, err);
        if (st == REMAT_OK && t < prev) add_point(cv, store_peak, t);
    } else if (st == REMAT_OK && top >= store_peak) {
        if (cv->n > 0 && cv->points[cv->n - 1].time <= store_time * (1 + 1e-9))
            cv->points[cv->n - 1].time = store_time;
        else
            add_point(cv, store_peak, store_time);
    }
    return st;
}

remat_status remat_hjoin_curve(const remat_hjoin *j, const remat_solve_options *o,
                               size_t max_points, remat_curve **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_curve: NULL argument");
    REMAT__FORWARD(check_options(o, "remat_hjoin_curve", err));
    remat__hjoin_net net;
    uint64_t store_peak = 0, mm = 0;
    double store_time = 0;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_curve", err);
    if (st == REMAT_OK) st = store_all(&net, &store_peak, &store_time, err);
    if (st == REMAT_OK) st = min_memory(&net, o, store_peak, &mm, err);
    uint64_t top = o->memory ? o->memory : store_peak;
    if (st == REMAT_OK && top < mm) st = infeasible(top, mm, err);
    remat_curve *cv = st == REMAT_OK ? calloc(1, sizeof *cv) : NULL;
    if (st == REMAT_OK && !cv) st = remat__fail(err, REMAT_E_NOMEM, "join curve: out of memory");
    if (st == REMAT_OK) {
        remat__strlcpy(cv->algorithm, "join-optimal", sizeof cv->algorithm);
        st = curve_points(&net, o, top, mm, store_peak, store_time, cv, err);
    }
    remat__hjoin_net_free(&net);
    if (st != REMAT_OK) {
        remat_curve_free(cv);
        return st;
    }
    cv->n = thin(cv->points, cv->n, max_points);
    *out = cv;
    return REMAT_OK;
}
