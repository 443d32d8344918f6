/* Join networks (papers/join-networks.md): Opt_0 (Theorem 1), c_min (Lemma 4),
 * Opt_b-multi (Theorem 3), the canonical optimal schedule and the EQUIV-CHAIN
 * baseline of section 6.
 *
 * Table layout. In PROB_b-multi reached from (l, b), a branch is marked (b = 1)
 * exactly when it has been cut (its length is below the original) or was
 * marked to begin with. So b is a function of the lengths and the table is
 * indexed by the lengths alone, Prod(l_j + 1) states per memory size. This is
 * the paper's remark (keep b sorted so few b patterns occur) taken one step
 * further: work O(c k max(l)^(k+1)). */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "remat/join.h"

struct remat_join_plan {
    remat_join_problem p;
    unsigned char keep[REMAT_JOIN_MAX_BRANCHES];
    int any_keep;
    uint64_t top_c;      /* the table covers c = 0..top_c */
    size_t ns;           /* states: Prod(l_j + 1) */
    size_t stride[REMAT_JOIN_MAX_BRANCHES];
    uint32_t lmax;       /* longest branch; Opt_0 is needed for l < lmax */
    double *t;           /* t[c * ns + s] = Opt_b-multi */
    double *o0;          /* o0[c * lmax + l] = Opt_0(l, c) */
    uint32_t *cmin;      /* c_min per state */
    uint8_t *nkeep;      /* number of marked branches per state */
};

void remat_join_options_init(remat_join_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

/* 1 when p is a problem remat_join_problem_set would accept. */
static int problem_ok(const remat_join_problem *p) {
    return remat__join_problem_validate(p, "join problem", NULL) == REMAT_OK;
}

uint64_t remat_join_full_slots(const remat_join_problem *p) {
    if (!problem_ok(p)) return 0;
    uint64_t n = 0;
    for (size_t j = 0; j < p->k; j++) n += (uint64_t)p->lengths[j] + 1;
    return n;
}

double remat_join_span_star(const remat_join_problem *p) {
    if (!problem_ok(p)) return NAN;
    uint64_t n = 0;
    for (size_t j = 0; j < p->k; j++) n += p->lengths[j];
    return (double)n * p->fwd_time + (double)n * p->bwd_time + p->turn_time;
}

/* Lemma 4 for lengths d and marks b. */
static uint64_t cmin_of(size_t k, const uint32_t *d, const unsigned char *b) {
    uint64_t nz = 0;
    int relief = 0; /* a branch of length 1, or a finished unmarked one, frees a slot early */
    for (size_t j = 0; j < k; j++) {
        nz += d[j] != 0;
        if (d[j] == 1 || (d[j] == 0 && !b[j])) relief = 1;
    }
    if (nz == 0) return k;
    return k + nz + (relief ? 0 : 1);
}

uint64_t remat_join_min_slots(const remat_join_problem *p) {
    unsigned char b[REMAT_JOIN_MAX_BRANCHES] = {0};
    if (!problem_ok(p)) return 0;
    return cmin_of(p->k, p->lengths, b);
}

/* Opt_0 for l < nl and c < nc into t[c * nl + l] (Theorem 1, with the
 * checkpoint position i running over 1..l so that l = 1 is covered). */
static void opt0_fill(double *t, uint32_t nl, uint64_t nc, double uf, double ub) {
    for (uint64_t c = 0; c < nc; c++) {
        double *row = t + c * nl;
        const double *below = c ? t + (c - 1) * nl : NULL;
        for (uint32_t l = 0; l < nl; l++) {
            if (c < 2 || (l > 0 && c < 3)) {
                row[l] = INFINITY;
                continue;
            }
            if (l == 0) {
                row[l] = ub;
                continue;
            }
            double best = INFINITY;
            for (uint32_t i = 1; i <= l; i++) {
                double v = i * uf + below[l - i] + row[i - 1];
                if (v < best) best = v;
            }
            row[l] = best;
        }
    }
}

/* The argmin i of row (l, c) of an Opt_0 table. */
static uint32_t opt0_argmin(const double *t, uint32_t nl, uint64_t c, uint32_t l, double uf) {
    const double *row = t + c * nl, *below = t + (c - 1) * nl;
    double best = INFINITY;
    uint32_t arg = l;
    for (uint32_t i = 1; i <= l; i++) {
        double v = i * uf + below[l - i] + row[i - 1];
        if (v < best) {
            best = v;
            arg = i;
        }
    }
    return arg;
}

remat_status remat_join_opt0(uint32_t l, uint64_t c, double fwd_time, double bwd_time,
                             double *out, remat_error *err) {
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_join_opt0: out is NULL");
    REMAT__RETURN_IF(l > REMAT_JOIN_MAX_LENGTH, err, REMAT_E_TOO_LARGE,
                     "remat_join_opt0: l = %u is above %u", (unsigned)l, REMAT_JOIN_MAX_LENGTH);
    REMAT__RETURN_IF(!isfinite(fwd_time) || !isfinite(bwd_time) || fwd_time < 0 || bwd_time < 0,
                     err, REMAT_E_INPUT, "remat_join_opt0: times must be finite and >= 0");
    /* l + 2 slots store everything; more never helps. */
    uint64_t cc = c < (uint64_t)l + 2 ? c : (uint64_t)l + 2;
    uint64_t steps = (cc + 1) * ((uint64_t)l + 1) * ((uint64_t)l + 1) / 2;
    REMAT__RETURN_IF(steps > REMAT_JOIN_DEFAULT_MAX_STEPS, err, REMAT_E_TOO_LARGE,
                     "remat_join_opt0: (%u, %llu) needs about %llu steps, too many", (unsigned)l,
                     (unsigned long long)c, (unsigned long long)steps);
    double *t = NULL;
    REMAT__FORWARD(remat__alloc_table((void **)&t, (size_t)(cc + 1), ((size_t)l + 1) * sizeof *t,
                                      0, "Opt_0 table", err));
    opt0_fill(t, l + 1, cc + 1, fwd_time, bwd_time);
    *out = t[cc * (l + 1) + l];
    free(t);
    return REMAT_OK;
}

/* ---- the Theorem 3 table ---- */

/* Cost of cutting i steps off branch m of state s at memory c (Eq. 5). */
static inline double move_cost(const remat_join_plan *pl, size_t s, uint64_t c, size_t m,
                               uint32_t i, uint64_t cb) {
    return i * pl->p.fwd_time + pl->t[(c - 1) * pl->ns + s - i * pl->stride[m]] +
           pl->o0[cb * pl->lmax + (i - 1)];
}

/* Marks of the branches in state d. */
static unsigned marks(const remat_join_plan *pl, const uint32_t *d, unsigned char *b) {
    unsigned n = 0;
    for (size_t j = 0; j < pl->p.k; j++) {
        b[j] = pl->keep[j] || d[j] < pl->p.lengths[j];
        n += b[j];
    }
    return n;
}

/* The best move at (state s with lengths d, c); INFINITY when none. */
static double best_move(const remat_join_plan *pl, size_t s, const uint32_t *d, uint64_t c,
                        size_t *bm, uint32_t *bi) {
    unsigned char b[REMAT_JOIN_MAX_BRANCHES];
    unsigned nb = marks(pl, d, b);
    double best = INFINITY;
    for (size_t m = 0; m < pl->p.k; m++) {
        uint64_t cb = c - (nb - b[m]); /* slots left for Opt_0 on m: marked others hold xbar_0 */
        for (uint32_t i = 1; i <= d[m]; i++) {
            double v = move_cost(pl, s, c, m, i, cb);
            if (v < best) {
                best = v;
                *bm = m;
                *bi = i;
            }
        }
    }
    return best;
}

static void plan_fill(remat_join_plan *pl) {
    size_t k = pl->p.k, ns = pl->ns;
    uint32_t d[REMAT_JOIN_MAX_BRANCHES];
    unsigned char b[REMAT_JOIN_MAX_BRANCHES];
    memset(d, 0, sizeof d);
    for (size_t s = 0; s < ns; s++) { /* per-state c_min and marks, odometer order */
        pl->nkeep[s] = (uint8_t)marks(pl, d, b);
        pl->cmin[s] = (uint32_t)cmin_of(k, d, b);
        for (size_t j = 0; j < k && ++d[j] > pl->p.lengths[j]; j++) d[j] = 0;
    }
    for (uint64_t c = 0; c <= pl->top_c; c++) {
        double *row = pl->t + c * ns;
        memset(d, 0, sizeof d);
        for (size_t s = 0; s < ns; s++) {
            if (c < pl->cmin[s]) {
                row[s] = INFINITY;
            } else if (s == 0) {
                row[s] = pl->p.turn_time;
            } else {
                size_t m;
                uint32_t i;
                row[s] = best_move(pl, s, d, c, &m, &i);
            }
            for (size_t j = 0; j < k && ++d[j] > pl->p.lengths[j]; j++) d[j] = 0;
        }
    }
}

void remat_join_plan_free(remat_join_plan *pl) {
    if (!pl) return;
    free(pl->t);
    free(pl->o0);
    free(pl->cmin);
    free(pl->nkeep);
    free(pl);
}

/* Checks the table sizes and the work against the limits before allocating. */
static remat_status plan_budget(const remat_join_plan *pl, const remat_join_options *o,
                                remat_error *err) {
    uint64_t max_bytes = o && o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    uint64_t max_steps = o && o->max_steps ? o->max_steps : REMAT_JOIN_DEFAULT_MAX_STEPS;
    uint64_t rows = pl->top_c + 1, sum = 0;
    for (size_t j = 0; j < pl->p.k; j++) sum += pl->p.lengths[j];
    size_t cells, bytes, o0cells, steps, o0steps;
    int ok = remat__mul_size(pl->ns, (size_t)rows, &cells) &&
             remat__mul_size(cells, sizeof(double) + 1, &bytes) &&
             remat__mul_size((size_t)rows, pl->lmax, &o0cells) &&
             remat__mul_size(cells, (size_t)sum, &steps) &&
             remat__mul_size(o0cells, pl->lmax, &o0steps);
    REMAT__RETURN_IF(!ok || bytes > max_bytes || o0cells > max_bytes / sizeof(double), err,
                     REMAT_E_TOO_LARGE,
                     "join problem too large: the tables for %zu branches and %llu slots would "
                     "need more than %llu bytes; use shorter branches, fewer branches or fewer "
                     "slots",
                     pl->p.k, (unsigned long long)pl->top_c, (unsigned long long)max_bytes);
    REMAT__RETURN_IF(steps > max_steps || o0steps > max_steps, err, REMAT_E_TOO_LARGE,
                     "join problem too large: about %zu dynamic-programming steps for %zu "
                     "branches and %llu slots, more than the limit of %llu",
                     steps > o0steps ? steps : o0steps, pl->p.k,
                     (unsigned long long)pl->top_c, (unsigned long long)max_steps);
    return REMAT_OK;
}

static remat_status plan_alloc(remat_join_plan *pl, const remat_join_options *o,
                               remat_error *err) {
    uint64_t mb = o && o->max_work_bytes ? o->max_work_bytes : REMAT_DEFAULT_MAX_WORK_BYTES;
    size_t rows = (size_t)pl->top_c + 1;
    REMAT__FORWARD(remat__alloc_table((void **)&pl->t, rows * pl->ns, sizeof(double), mb,
                                      "join table", err));
    REMAT__FORWARD(remat__alloc_table((void **)&pl->o0, rows * pl->lmax, sizeof(double), mb,
                                      "Opt_0 table", err));
    REMAT__FORWARD(remat__alloc_table((void **)&pl->cmin, pl->ns, sizeof(uint32_t), mb,
                                      "join c_min table", err));
    REMAT__FORWARD(
        remat__alloc_table((void **)&pl->nkeep, pl->ns, 1, mb, "join mark table", err));
    return REMAT_OK;
}

remat_status remat_join_plan_create(const remat_join_problem *p, const unsigned char *keep,
                                    uint64_t max_slots, const remat_join_options *o,
                                    remat_join_plan **out, remat_error *err) {
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!p || !out, err, REMAT_E_INPUT, "remat_join_plan_create: NULL argument");
    remat_join_problem chk;
    REMAT__FORWARD(remat_join_problem_set(&chk, p->k, p->lengths, p->fwd_time, p->bwd_time,
                                          p->turn_time, p->slots, err));
    remat_join_plan *pl = calloc(1, sizeof *pl);
    REMAT__RETURN_IF(!pl, err, REMAT_E_NOMEM, "join plan: out of memory");
    pl->p = chk;
    pl->ns = 1;
    int ok = 1;
    for (size_t j = 0; j < p->k; j++) {
        pl->keep[j] = keep ? keep[j] != 0 : 0;
        pl->any_keep |= pl->keep[j];
        pl->stride[j] = pl->ns;
        ok = ok && remat__mul_size(pl->ns, (size_t)p->lengths[j] + 1, &pl->ns);
        if (p->lengths[j] > pl->lmax) pl->lmax = p->lengths[j];
    }
    uint64_t full = remat_join_full_slots(p);
    pl->top_c = max_slots && max_slots < full ? max_slots : full;
    remat_status s = ok ? plan_budget(pl, o, err)
                        : remat__fail(err, REMAT_E_TOO_LARGE,
                                      "join problem too large: the number of states overflows");
    if (s == REMAT_OK) s = plan_alloc(pl, o, err);
    if (s != REMAT_OK) {
        remat_join_plan_free(pl);
        return s;
    }
    opt0_fill(pl->o0, pl->lmax, pl->top_c + 1, p->fwd_time, p->bwd_time);
    plan_fill(pl);
    *out = pl;
    return REMAT_OK;
}

uint64_t remat_join_plan_min_slots(const remat_join_plan *pl) {
    return pl ? pl->cmin[pl->ns - 1] : 0;
}

double remat_join_plan_makespan(const remat_join_plan *pl, uint64_t c) {
    if (!pl) return NAN;
    uint64_t cc = c < pl->top_c ? c : pl->top_c;
    return pl->t[cc * pl->ns + pl->ns - 1];
}

/* ---- schedules ---- */

static remat_status push(remat_join_schedule *s, uint8_t kind, size_t branch, uint32_t index,
                         remat_error *err) {
    if (s->n_ops == s->cap) {
        REMAT__RETURN_IF(s->cap >= REMAT_JOIN_MAX_OPS, err, REMAT_E_TOO_LARGE,
                         "join schedule would have more than %zu ops; use more slots",
                         REMAT_JOIN_MAX_OPS);
        size_t ncap = s->cap ? s->cap * 2 : 256;
        remat_join_op *nd = realloc(s->ops, ncap * sizeof *nd);
        REMAT__RETURN_IF(!nd, err, REMAT_E_NOMEM, "join schedule: out of memory at %zu ops",
                         s->n_ops);
        s->ops = nd;
        s->cap = ncap;
    }
    s->ops[s->n_ops++] = (remat_join_op){kind, (uint32_t)branch, index};
    return REMAT_OK;
}

/* Copy x_o, then i forward steps: the copy becomes x_{o+i}. */
static remat_status push_advance(remat_join_schedule *s, size_t branch, uint32_t o, uint32_t i,
                                 remat_error *err) {
    REMAT__FORWARD(push(s, REMAT_JOIN_OP_S, branch, o, err));
    for (uint32_t t = 0; t < i; t++) REMAT__FORWARD(push(s, REMAT_JOIN_OP_F, branch, o + t, err));
    return REMAT_OK;
}

typedef struct opt0_task {
    uint32_t o, l;
    uint64_t c;
} opt0_task;

/* PROB(l, c) on branch from {x_o, xbar_{o+l+1}}: checkpoint x_{o+i}, reverse the
 * part after it with one slot less, then the part before it. */
static remat_status push_opt0(const remat_join_plan *pl, remat_join_schedule *s, size_t branch,
                              uint32_t o, uint32_t l, uint64_t c, remat_error *err) {
    opt0_task *stack = remat__calloc((size_t)l + 1, sizeof *stack);
    REMAT__RETURN_IF(!stack, err, REMAT_E_NOMEM, "join schedule: out of memory");
    size_t n = 0;
    stack[n++] = (opt0_task){o, l, c};
    remat_status st = REMAT_OK;
    while (n && st == REMAT_OK) {
        opt0_task t = stack[--n];
        if (t.l == 0) {
            st = push(s, REMAT_JOIN_OP_FB, branch, t.o, err);
            continue;
        }
        if (t.c < 3 || t.l >= pl->lmax) {
            st = remat__fail(err, REMAT_E_INTERNAL, "join schedule: Opt_0(%u, %llu) has no move",
                             (unsigned)t.l, (unsigned long long)t.c);
            break;
        }
        uint32_t i = opt0_argmin(pl->o0, pl->lmax, t.c, t.l, pl->p.fwd_time);
        st = push_advance(s, branch, t.o, i, err);
        stack[n++] = (opt0_task){t.o, i - 1, t.c};             /* done second */
        stack[n++] = (opt0_task){t.o + i, t.l - i, t.c - 1};   /* done first */
    }
    free(stack);
    return st;
}

typedef struct join_level {
    size_t m;      /* branch cut (0-based) */
    uint32_t off;  /* its x_off was the start of the cut */
    uint32_t i;    /* steps cut */
    uint64_t cb;   /* slots for Opt_0 on the cut part */
    int marked;    /* branch was marked before the cut: keep xbar_off */
} join_level;

static remat_status plan_emit(const remat_join_plan *pl, uint64_t c, remat_join_schedule *s,
                              remat_error *err) {
    size_t k = pl->p.k, total = 0;
    for (size_t j = 0; j < k; j++) total += pl->p.lengths[j];
    join_level *lv = remat__calloc(total + 1, sizeof *lv);
    REMAT__RETURN_IF(!lv, err, REMAT_E_NOMEM, "join schedule: out of memory");
    uint32_t d[REMAT_JOIN_MAX_BRANCHES], off[REMAT_JOIN_MAX_BRANCHES] = {0};
    unsigned char b[REMAT_JOIN_MAX_BRANCHES];
    memcpy(d, pl->p.lengths, k * sizeof *d);
    size_t st_idx = pl->ns - 1, nl = 0;
    remat_status st = REMAT_OK;
    while (st_idx != 0 && st == REMAT_OK) { /* forward phase: one cut per level */
        size_t m = 0;
        uint32_t i = 0;
        double v = best_move(pl, st_idx, d, c, &m, &i);
        if (!isfinite(v) || i == 0) {
            st = remat__fail(err, REMAT_E_INTERNAL, "join schedule: no move at level %zu", nl);
            break;
        }
        unsigned nb = marks(pl, d, b);
        lv[nl++] = (join_level){m, off[m], i, c - (nb - b[m]), b[m]};
        st = push_advance(s, m + 1, off[m], i, err);
        off[m] += i;
        d[m] -= i;
        st_idx -= i * pl->stride[m];
        c--;
    }
    if (st == REMAT_OK) st = push(s, REMAT_JOIN_OP_T, 0, 0, err);
    marks(pl, d, b);
    for (size_t j = 0; j < k && st == REMAT_OK; j++)
        if (!b[j]) st = push(s, REMAT_JOIN_OP_DB, j + 1, 0, err);
    while (nl && st == REMAT_OK) { /* backward phase: innermost cut first */
        const join_level *L = &lv[--nl];
        st = push_opt0(pl, s, L->m + 1, L->off, L->i - 1, L->cb, err);
        if (st == REMAT_OK && !L->marked) st = push(s, REMAT_JOIN_OP_DB, L->m + 1, 0, err);
    }
    free(lv);
    return st;
}

static remat_status new_schedule(const char *alg, uint64_t slots, remat_join_schedule **out,
                                 remat_error *err) {
    *out = calloc(1, sizeof **out);
    REMAT__RETURN_IF(!*out, err, REMAT_E_NOMEM, "join schedule: out of memory");
    remat__strlcpy((*out)->algorithm, alg, sizeof (*out)->algorithm);
    (*out)->slots = slots;
    return REMAT_OK;
}

/* Replays s on p to fill peak_slots; a solver's schedule that fails is a bug. */
static remat_status measure(const remat_join_problem *p, remat_join_schedule *s, uint64_t limit,
                            double *time, remat_error *err) {
    remat_join_sim_result *r = NULL;
    REMAT__FORWARD(remat_join_simulate(p, s->ops, s->n_ops, limit, &r, err));
    remat_status st = REMAT_OK;
    if (!r->valid)
        st = remat__fail(err, REMAT_E_INTERNAL,
                         "join schedule fails the simulator (a bug in remat): %s", r->reason);
    s->peak_slots = r->peak_slots;
    if (time) *time = r->time;
    remat_join_sim_result_free(r);
    return st;
}

static remat_status infeasible(remat_error *err, uint64_t c, uint64_t cmin, const char *what) {
    remat_status s = remat__fail(err, REMAT_E_INFEASIBLE,
                                 "%s needs at least %llu slots (c_min), has %llu", what,
                                 (unsigned long long)cmin, (unsigned long long)c);
    if (err) err->min_memory = cmin;
    return s;
}

remat_status remat_join_plan_schedule(const remat_join_plan *pl, uint64_t c,
                                      remat_join_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!pl || !out, err, REMAT_E_INPUT, "remat_join_plan_schedule: NULL argument");
    REMAT__RETURN_IF(pl->any_keep, err, REMAT_E_INPUT,
                     "remat_join_plan_schedule: schedules are for plans with no kept branch");
    uint64_t cmin = remat_join_plan_min_slots(pl);
    if (c < cmin) return infeasible(err, c, cmin, "join problem");
    uint64_t cc = c < pl->top_c ? c : pl->top_c;
    remat_join_schedule *s = NULL;
    REMAT__FORWARD(new_schedule("join-optimal", c, &s, err));
    s->time = remat_join_plan_makespan(pl, cc);
    remat_status st = plan_emit(pl, cc, s, err);
    if (st == REMAT_OK) st = measure(&pl->p, s, c, NULL, err);
    if (st != REMAT_OK) {
        remat_join_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

static uint64_t slots_or_default(const remat_join_problem *p, uint64_t slots) {
    return slots ? slots : p->slots;
}

remat_status remat_join_solve(const remat_join_problem *p, uint64_t slots,
                              const remat_join_options *o, remat_join_schedule **out,
                              remat_error *err) {
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!p || !out, err, REMAT_E_INPUT, "remat_join_solve: NULL argument");
    REMAT__FORWARD(remat__join_problem_validate(p, "remat_join_solve", err));
    uint64_t c = slots_or_default(p, slots);
    REMAT__RETURN_IF(c == 0, err, REMAT_E_INPUT,
                     "join problem: field \"slots\" is missing (give the memory in slots)");
    uint64_t cmin = remat_join_min_slots(p);
    if (c < cmin) return infeasible(err, c, cmin, "join problem");
    remat_join_plan *pl = NULL;
    REMAT__FORWARD(remat_join_plan_create(p, NULL, c, o, &pl, err));
    remat_status st = remat_join_plan_schedule(pl, c, out, err);
    remat_join_plan_free(pl);
    return st;
}

/* ---- EQUIV-CHAIN ---- */

/* The single chain of the grouped steps: max l steps, each k times the costs. */
static void equiv_problem(const remat_join_problem *p, remat_join_problem *q) {
    memset(q, 0, sizeof *q);
    q->k = 1;
    for (size_t j = 0; j < p->k; j++)
        if (p->lengths[j] > q->lengths[0]) q->lengths[0] = p->lengths[j];
    q->fwd_time = p->fwd_time * (double)p->k;
    q->bwd_time = p->bwd_time * (double)p->k;
    q->turn_time = p->turn_time;
}

/* Plays a chain op back on every branch. Chain step t is step t - (n - l_j) of
 * branch j; before that branch j is still at x_0 (a shorter branch starts later). */
static remat_status expand_op(const remat_join_problem *p, uint32_t n, remat_join_op op,
                              remat_join_schedule *s, remat_error *err) {
    if (op.kind == REMAT_JOIN_OP_T) return push(s, REMAT_JOIN_OP_T, 0, 0, err);
    for (size_t j = 0; j < p->k; j++) {
        uint32_t pad = n - p->lengths[j], t = op.index;
        uint32_t pos = t >= pad ? t - pad : 0;
        int real = t >= pad;
        switch (op.kind) {
        case REMAT_JOIN_OP_F:
            if (real) REMAT__FORWARD(push(s, REMAT_JOIN_OP_F, j + 1, pos, err));
            break;
        case REMAT_JOIN_OP_FB: /* before branch j starts, consume the copy of x_0 */
            REMAT__FORWARD(push(s, real ? REMAT_JOIN_OP_FB : REMAT_JOIN_OP_D, j + 1, pos, err));
            break;
        case REMAT_JOIN_OP_DB:
            REMAT__FORWARD(push(s, REMAT_JOIN_OP_DB, j + 1, 0, err));
            break;
        default: /* S and D act on every component */
            REMAT__FORWARD(push(s, op.kind, j + 1, pos, err));
            break;
        }
    }
    return REMAT_OK;
}

static remat_status equiv_from_plan(const remat_join_problem *p, const remat_join_plan *cp,
                                    uint64_t slots, remat_join_schedule **out, remat_error *err) {
    *out = NULL;
    uint64_t cslots = slots / p->k;
    uint64_t cmin = remat_join_plan_min_slots(cp);
    if (cslots < cmin)
        return infeasible(err, slots, cmin * p->k, "EQUIV-CHAIN (k slots per grouped value)");
    remat_join_schedule *chain = NULL, *s = NULL;
    REMAT__FORWARD(remat_join_plan_schedule(cp, cslots, &chain, err));
    remat_status st = new_schedule("equiv-chain", slots, &s, err);
    for (size_t i = 0; st == REMAT_OK && i < chain->n_ops; i++)
        st = expand_op(p, cp->p.lengths[0], chain->ops[i], s, err);
    if (st == REMAT_OK) st = measure(p, s, slots, &s->time, err);
    remat_join_schedule_free(chain);
    if (st != REMAT_OK) {
        remat_join_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

static remat_status equiv_plan(const remat_join_problem *p, uint64_t slots,
                               const remat_join_options *o, remat_join_plan **out,
                               remat_error *err) {
    remat_join_problem q;
    equiv_problem(p, &q);
    return remat_join_plan_create(&q, NULL, slots / p->k, o, out, err);
}

remat_status remat_join_equiv_chain(const remat_join_problem *p, uint64_t slots,
                                    const remat_join_options *o, remat_join_schedule **out,
                                    remat_error *err) {
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!p || !out, err, REMAT_E_INPUT, "remat_join_equiv_chain: NULL argument");
    REMAT__FORWARD(remat__join_problem_validate(p, "remat_join_equiv_chain", err));
    uint64_t c = slots_or_default(p, slots);
    REMAT__RETURN_IF(c == 0, err, REMAT_E_INPUT,
                     "join problem: field \"slots\" is missing (give the memory in slots)");
    REMAT__RETURN_IF(p->k == 0 || p->k > REMAT_JOIN_MAX_BRANCHES, err, REMAT_E_INPUT,
                     "join problem: bad branch count %zu", p->k);
    remat_join_plan *cp = NULL;
    REMAT__FORWARD(equiv_plan(p, c, o, &cp, err));
    remat_status st = equiv_from_plan(p, cp, c, out, err);
    remat_join_plan_free(cp);
    return st;
}

/* ---- curve ---- */

void remat_join_curve_free(remat_join_curve *c) {
    if (!c) return;
    free(c->points);
    free(c);
}

/* EQUIV-CHAIN makespans for every point; one chain plan serves them all. */
static remat_status curve_equiv(const remat_join_problem *p, const remat_join_options *o,
                                remat_join_curve *cv, remat_error *err) {
    remat_join_plan *cp = NULL;
    REMAT__FORWARD(equiv_plan(p, cv->points[cv->n - 1].slots, o, &cp, err));
    remat_status st = REMAT_OK;
    double last = INFINITY;
    uint64_t last_cs = UINT64_MAX;
    for (size_t i = 0; i < cv->n && st == REMAT_OK; i++) {
        uint64_t c = cv->points[i].slots, cs = c / p->k;
        if (cs != last_cs) { /* same chain slots, same schedule */
            remat_join_schedule *s = NULL;
            remat_error e;
            remat__clear(&e);
            st = equiv_from_plan(p, cp, c, &s, &e);
            if (st == REMAT_E_INFEASIBLE) st = REMAT_OK;
            else if (st != REMAT_OK && err) *err = e;
            last = s ? s->time : INFINITY;
            last_cs = cs;
            remat_join_schedule_free(s);
        }
        cv->points[i].equiv_chain = last;
    }
    remat_join_plan_free(cp);
    return st;
}

remat_status remat_join_curve_compute(const remat_join_problem *p, int with_equiv_chain,
                                      const remat_join_options *o, remat_join_curve **out,
                                      remat_error *err) {
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!p || !out, err, REMAT_E_INPUT, "remat_join_curve_compute: NULL argument");
    REMAT__FORWARD(remat__join_problem_validate(p, "remat_join_curve_compute", err));
    remat_join_plan *pl = NULL;
    REMAT__FORWARD(remat_join_plan_create(p, NULL, 0, o, &pl, err));
    uint64_t lo = remat_join_plan_min_slots(pl), hi = remat_join_full_slots(p);
    remat_join_curve *cv = calloc(1, sizeof *cv);
    if (cv) cv->points = remat__calloc((size_t)(hi - lo + 1), sizeof *cv->points);
    if (!cv || !cv->points) {
        remat_join_curve_free(cv);
        remat_join_plan_free(pl);
        return remat__fail(err, REMAT_E_NOMEM, "join curve: out of memory");
    }
    for (uint64_t c = lo; c <= hi; c++)
        cv->points[cv->n++] = (remat_join_curve_point){c, remat_join_plan_makespan(pl, c), NAN};
    remat_join_plan_free(pl);
    remat_status st = with_equiv_chain ? curve_equiv(p, o, cv, err) : REMAT_OK;
    if (st != REMAT_OK) {
        remat_join_curve_free(cv);
        return st;
    }
    *out = cv;
    return REMAT_OK;
}
