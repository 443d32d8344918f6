/* optimal's context (optimal_internal.h): the chain's sizes in table units,
 * the needs lo(s, t) of the min-peak recurrence, the smallest limit that
 * works, and the coarser sizes of the bound tables. */
#include <string.h>

#include "optimal_internal.h"

void remat__opt_ctx_free(opt_ctx *x) {
    free(x->a); free(x->ab); free(x->d); free(x->of); free(x->ob); free(x->fnp);
    free(x->lo); free(x->g); free(x->tab); /* lot, off and vwt share lo, g and vw */
    free(x->pf); free(x->pfb); free(x->vw); free(x->dtab);
    free(x->sv0); free(x->sab); free(x->sof); free(x->sob); free(x->sub); free(x->pl);
    free(x->abx);
    free(x->dstop); free(x->dpl); free(x->dsab); free(x->dsof); free(x->dc); free(x->dgain);
    memset(x, 0, sizeof *x);
}

/* ab, ob (the plain save's) and abx (the largest abar) from the saves. */
static void plain_sizes(opt_ctx *x) {
    for (size_t s = 1; s <= x->n; s++) {
        size_t p = sv(x, s, x->pl[s]);
        x->ab[s] = x->sab[p];
        x->ob[s] = x->sob[p];
        x->abx[s] = 0;
        for (size_t j = 0; j < nsaves(x, s); j++) x->abx[s] = max2(x->abx[s], x->sab[sv(x, s, j)]);
    }
}

int remat__opt_full_is_plain(const remat_chain *c) {
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < c->stages[i].n_options; k++)
            if (c->stages[i].options[k].bwd_time < c->stages[i].bwd_time) return 0;
    return 1;
}

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
        uint64_t v[3] = {remat_chain_a_bytes(c, i), remat_chain_d_bytes(c, i),
                         i ? c->stages[i - 1].fwd_overhead : 0};
        for (int k = 0; k < 3; k++) v[k] = sat(v[k] / u + (v[k] % u != 0));
        x->a[i] = v[0]; x->d[i] = v[1]; x->of[i] = v[2];
    }
    for (size_t s = 1; s <= x->n; s++)
        for (size_t j = 0; j < nsaves(x, s); j++) {
            remat__save v = remat__stage_save(&c->stages[s - 1], (unsigned)j);
            size_t i = sv(x, s, j);
            x->sab[i] = sat(v.saved_bytes / u + (v.saved_bytes % u != 0));
            x->sof[i] = sat(v.fall_overhead / u + (v.fall_overhead % u != 0));
            x->sob[i] = sat(v.bwd_overhead / u + (v.bwd_overhead % u != 0));
        }
    for (size_t s = 1; s <= x->n; s++) {
        uint64_t v[2] = {remat__stop_saved(&c->stages[s - 1]),
                         remat__stop_overhead(&c->stages[s - 1])};
        x->dsab[s] = sat(v[0] / u + (v[0] % u != 0));
        x->dsof[s] = sat(v[1] / u + (v[1] % u != 0));
    }
    plain_sizes(x);
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
    uint64_t best = UINT64_MAX, bneed = UINT64_MAX;
    for (size_t j = 0; j < nsaves(x, s); j++) {
        size_t i = sv(x, s, j);
        best = min2(best, max2(m_all_j(x, s, t, j), sat(x->sab[i] + lo_t[s])));
        bneed = min2(bneed, sat(x->sab[i] + x->d[s] + x->d[s - 1] + x->sob[i]));
    }
    if (x->dstop[s]) /* B s may consume the abar of a stopped Fall (base case (s, s)) */
        bneed = min2(bneed, sat(x->dsab[s] + x->d[s] + x->d[s - 1] + x->sob[sv(x, s, 0)]));
    uint64_t last = max3(x->d[t] + run[t], x->a[t - 1] + lo_t[t - 1], lo_s[t - 2]);
    if (last < best) best = last;
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
        x->lo[ss] = UINT64_MAX;
        for (size_t j = 0; j < nsaves(x, s); j++) x->lo[ss] = min2(x->lo[ss], m_all_j(x, s, s, j));
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

remat_status remat__opt_ctx_init(opt_ctx *x, const remat_chain *c, uint64_t max_work,
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
    x->sv0 = remat__calloc(n1 + 1, sizeof(size_t));
    x->pl = remat__calloc(n1, 1);
    x->abx = remat__calloc(n1, sizeof(uint64_t));
    x->dstop = remat__calloc(n1, 1);
    x->dpl = remat__calloc(n1, 1);
    x->dsab = remat__calloc(n1, sizeof(uint64_t));
    x->dsof = remat__calloc(n1, sizeof(uint64_t));
    x->dc = remat__calloc(n1, sizeof(double));
    x->dgain = remat__calloc(n1, sizeof(double));
    if (!x->pf || !x->pfb || !x->sv0 || !x->pl || !x->abx || !x->dstop || !x->dpl || !x->dsab ||
        !x->dsof || !x->dc || !x->dgain)
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
    x->sv0[1] = 0;
    for (size_t s = 1; s <= c->n; s++) x->sv0[s + 1] = x->sv0[s] + 1 + c->stages[s - 1].n_options;
    size_t saves = x->sv0[c->n + 1];
    x->sab = remat__calloc(saves, sizeof(uint64_t));
    x->sof = remat__calloc(saves, sizeof(uint64_t));
    x->sob = remat__calloc(saves, sizeof(uint64_t));
    x->sub = remat__calloc(saves, sizeof(double));
    if (!x->sab || !x->sof || !x->sob || !x->sub)
        return remat__fail(err, REMAT_E_NOMEM, "optimal: out of memory");
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
    for (size_t i = 1; i <= c->n; i++) { /* every save's B time: any one may be chosen */
        const remat_stage *sg = &c->stages[i - 1];
        total += sg->fwd_time;
        for (size_t j = 0; j < nsaves(x, i); j++)
            total += remat__stage_save(sg, (unsigned)j).bwd_time;
    }
    int e = 0;
    if (total > 0) frexpl(total, &e);
    if (e > 1000) e = 1000;
    if (e < -1000) e = -1000;
    x->scale = ldexp(1.0, 20 - e);
    x->plain_all_full = 1;
    for (size_t i = 1; i <= c->n; i++) {
        const remat_stage *sg = &c->stages[i - 1];
        for (size_t j = 0; j < nsaves(x, i); j++) { /* the plain save: the least B time */
            double ub = remat__stage_save(sg, (unsigned)j).bwd_time;
            x->sub[sv(x, i, j)] = ub * x->scale;
            if (ub < remat__stage_save(sg, x->pl[i]).bwd_time) x->pl[i] = (uint8_t)j;
        }
        if (x->pl[i]) x->plain_all_full = 0;
        double ub = remat__stage_save(sg, x->pl[i]).bwd_time;
        x->pf[i] = x->pf[i - 1] + sg->fwd_time * x->scale;
        x->pfb[i] = x->pfb[i - 1] + (sg->fwd_time + ub) * x->scale;
        /* the base case's stopped Fall, where its figures differ from the plain Fall's */
        x->dpl[i] = x->pl[i];
        x->dstop[i] = i < c->n && (remat__stop_time(sg) != sg->fwd_time ||
                                   remat__stop_saved(sg) != sg->saved_bytes ||
                                   remat__stop_overhead(sg) != remat__fall_overhead(sg));
        if (!x->dstop[i]) continue;
        x->dc[i] = (remat__stop_time(sg) + sg->bwd_time) * x->scale;
        double plain = x->pfb[i] - x->pfb[i - 1];
        if (x->dc[i] < plain) {
            x->dpl[i] = 0;
            x->dgain[i] = plain - x->dc[i];
        }
    }
    return REMAT_OK;
}

/* ---- the smallest feasible memory ---- */

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

remat_status remat__opt_infeasible(opt_ctx *x, const remat_solve_options *o, uint64_t store_peak,
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

remat_status remat__opt_ctx_at(opt_ctx *x, uint64_t unit, uint64_t budget, remat_error *err) {
    ctx_units(x, 1, unit); /* with one slot per limit, the slot of `unit` is unit */
    x->budget = budget;
    return ctx_bounds(x, err);
}

/* Sets up units and bounds at memory `mem`; *fits says whether lo(1,n) fits. */
remat_status remat__opt_prepare(opt_ctx *x, const remat_chain *c, const remat_solve_options *o,
                                uint64_t mem, int *fits, remat_error *err) {
    REMAT__FORWARD(remat__opt_ctx_init(x, c, o->max_work_bytes, err));
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
        remat_status st = remat__opt_ctx_init(&y, c, o->max_work_bytes, err);
        if (st == REMAT_OK) st = find_min_memory(&y, slots, store_peak, &mm, err);
        remat__opt_ctx_free(&y);
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
    remat_status st = remat__opt_ctx_init(&x, c, 0, err);
    if (st == REMAT_OK) {
        ctx_units(&x, 0, REMAT_MAX_BYTES);
        st = ctx_bounds(&x, err);
    }
    if (st == REMAT_OK) {
        *out = x.lo; /* the caller frees it */
        x.lo = x.lot = NULL;
    }
    remat__opt_ctx_free(&x);
    return st;
}

remat_status remat__min_memory_optimal(const remat_chain *c, const remat_solve_options *o,
                                       uint64_t *out, remat_error *err) {
    uint64_t store_peak;
    REMAT__FORWARD(remat_store_all_cost(c, &store_peak, NULL, err));
    opt_ctx x;
    remat_status st = remat__opt_ctx_init(&x, c, o->max_work_bytes, err);
    if (st == REMAT_OK) st = find_min_memory(&x, slots_of(o), store_peak, out, err);
    remat__opt_ctx_free(&x);
    return st;
}

/* y: x's sizes in units K times larger, rounded up (up) or down, at `budget`. */
remat_status remat__opt_ctx_scaled(opt_ctx *y, const opt_ctx *x, int up, uint64_t budget,
                                   const remat_solve_options *o, remat_error *err) {
    const uint64_t K = OPT_BOUND_K;
    REMAT__FORWARD(remat__opt_ctx_init(y, x->c, o->max_work_bytes, err));
    y->label = "optimal: bounds";
    y->unit = sat(x->unit * K);
    const uint64_t *from[3] = {x->a, x->d, x->of};
    uint64_t *to[3] = {y->a, y->d, y->of};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i <= x->n; i++) to[k][i] = from[k][i] / K + (up && from[k][i] % K);
    const uint64_t *sfrom[3] = {x->sab, x->sof, x->sob};
    uint64_t *sto[3] = {y->sab, y->sof, y->sob};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < x->sv0[x->n + 1]; i++)
            sto[k][i] = sfrom[k][i] / K + (up && sfrom[k][i] % K);
    for (size_t i = 0; i <= x->n; i++) {
        y->dsab[i] = x->dsab[i] / K + (up && x->dsab[i] % K);
        y->dsof[i] = x->dsof[i] / K + (up && x->dsof[i] % K);
    }
    if (!up) y->held_in = x; /* rows cover what the fine rows map to */
    plain_sizes(y);
    fnp_of_sizes(y);
    y->budget = budget;
    return ctx_bounds(y, err);
}
