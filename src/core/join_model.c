/* Join problems and schedules: validation, JSON I/O and the Table 3 simulator. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_util.h"
#include "remat/join.h"

#define JOIN_FORMAT "remat-join-1"
#define JOIN_SCHEDULE_FORMAT "remat-join-schedule-1"
#define JOIN_HUGE 9007199254740992.0 /* 2^53 */

static remat_status check_time(double v, const char *src, const char *field, remat_error *err) {
    REMAT__RETURN_IF(!isfinite(v) || v < 0 || v >= JOIN_HUGE, err, REMAT_E_INPUT,
                     "%s: field \"%s\": must be a finite number >= 0 and < 2^53 (got %g)", src,
                     field, v);
    return REMAT_OK;
}

static remat_status problem_check(remat_join_problem *out, size_t k, const uint32_t *lengths,
                                  double uf, double ub, double ut, uint64_t slots,
                                  const char *src, remat_error *err) {
    REMAT__RETURN_IF(!out || (k && !lengths), err, REMAT_E_INPUT, "%s: NULL argument", src);
    REMAT__RETURN_IF(k == 0 || k > REMAT_JOIN_MAX_BRANCHES, err, REMAT_E_INPUT,
                     "%s: field \"branches\": needs 1 to %u branches (got %zu)", src,
                     REMAT_JOIN_MAX_BRANCHES, k);
    for (size_t j = 0; j < k; j++)
        REMAT__RETURN_IF(lengths[j] < 1 || lengths[j] > REMAT_JOIN_MAX_LENGTH, err, REMAT_E_INPUT,
                         "%s: field \"branches[%zu]\": a length must be 1 to %u (got %u)", src, j,
                         REMAT_JOIN_MAX_LENGTH, (unsigned)lengths[j]);
    REMAT__FORWARD(check_time(uf, src, "fwd_time", err));
    REMAT__FORWARD(check_time(ub, src, "bwd_time", err));
    REMAT__FORWARD(check_time(ut, src, "turn_time", err));
    REMAT__RETURN_IF(slots >= ((uint64_t)1 << 53), err, REMAT_E_INPUT,
                     "%s: field \"slots\": must be below 2^53", src);
    memset(out, 0, sizeof *out);
    out->k = k;
    memcpy(out->lengths, lengths, k * sizeof *lengths);
    out->fwd_time = uf;
    out->bwd_time = ub;
    out->turn_time = ut;
    out->slots = slots;
    return REMAT_OK;
}

remat_status remat__join_problem_validate(const void *problem, const char *who,
                                         remat_error *err) {
    const remat_join_problem *p = problem;
    REMAT__RETURN_IF(!p, err, REMAT_E_INPUT, "%s: the join problem is NULL", who);
    remat_join_problem copy;
    return problem_check(&copy, p->k, p->lengths, p->fwd_time, p->bwd_time, p->turn_time, p->slots,
                         who, err);
}

remat_status remat_join_problem_set(remat_join_problem *out, size_t k, const uint32_t *lengths,
                                    double fwd_time, double bwd_time, double turn_time,
                                    uint64_t slots, remat_error *err) {
    return problem_check(out, k, lengths, fwd_time, bwd_time, turn_time, slots, "join problem",
                         err);
}

/* The number v, an integer in [lo, hi]. */
static remat_status json_uint(const remat__jdoc *d, const cJSON *v, uint64_t lo, uint64_t hi,
                              const char *field, uint64_t *out) {
    const char *src = d->src;
    REMAT__RETURN_IF(!cJSON_IsNumber(v), d->err, REMAT_E_INPUT,
                     "%s: field \"%s\": must be a number", src, field);
    double x = 0;
    REMAT__FORWARD(remat__json_finite(d, v, "", field, &x));
    REMAT__RETURN_IF(x != floor(x), d->err, REMAT_E_INPUT,
                     "%s: field \"%s\": must be an integer (got %g)", src, field, x);
    REMAT__RETURN_IF(x < (double)lo || x > (double)hi, d->err, REMAT_E_INPUT,
                     "%s: field \"%s\": must be %llu to %llu (got %g)", src, field,
                     (unsigned long long)lo, (unsigned long long)hi, x);
    *out = (uint64_t)x;
    return REMAT_OK;
}

static remat_status json_time(const remat__jdoc *d, const cJSON *v, const char *field,
                              double *out) {
    REMAT__RETURN_IF(!cJSON_IsNumber(v), d->err, REMAT_E_INPUT,
                     "%s: field \"%s\": must be a number", d->src, field);
    REMAT__FORWARD(remat__json_finite(d, v, "", field, out));
    return check_time(*out, d->src, field, d->err);
}

/* The branches array v into lengths (*count of them). */
static remat_status read_branches(const remat__jdoc *d, const cJSON *v, uint32_t *lengths,
                                  size_t *count) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: field \"branches\": must be an array of lengths", d->src);
    size_t k = remat__json_count(v);
    REMAT__RETURN_IF(k < 1 || k > REMAT_JOIN_MAX_BRANCHES, d->err, REMAT_E_INPUT,
                     "%s: field \"branches\": needs 1 to %u branches (got %zu)", d->src,
                     REMAT_JOIN_MAX_BRANCHES, k);
    char field[48];
    size_t j = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        uint64_t x;
        snprintf(field, sizeof field, "branches[%zu]", j);
        REMAT__FORWARD(json_uint(d, b, 1, REMAT_JOIN_MAX_LENGTH, field, &x));
        lengths[j++] = (uint32_t)x;
    }
    *count = k;
    return REMAT_OK;
}

enum { P_BRANCHES, P_FWD, P_BWD, P_TURN, P_SLOTS, P_COUNT };
static const char *const problem_keys[P_COUNT] = {"branches", "fwd_time", "bwd_time",
                                                  "turn_time", "slots"};

static remat_status problem_from_doc(remat__jdoc *d, remat_join_problem *out) {
    uint32_t lengths[REMAT_JOIN_MAX_BRANCHES];
    double t[3] = {0, 0, 0};
    uint64_t slots = 0;
    size_t count = 0;
    unsigned seen = 0;
    remat_status st = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        int f = remat__json_member(problem_keys, P_COUNT, key, &seen);
        if (f == P_BRANCHES) st = read_branches(d, m, lengths, &count);
        else if (f >= P_FWD && f <= P_TURN) st = json_time(d, m, key, &t[f - P_FWD]);
        else if (f == P_SLOTS) st = json_uint(d, m, 1, ((uint64_t)1 << 53) - 1, key, &slots);
        if (st != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    REMAT__FORWARD(st);
    for (int f = 0; f < P_SLOTS; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), d->err, REMAT_E_INPUT,
                         "%s: field \"%s\" is missing", d->src, problem_keys[f]);
    return problem_check(out, count, lengths, t[0], t[1], t[2], slots, d->src, d->err);
}

remat_status remat_join_problem_from_json(const char *text, size_t len, const char *source,
                                          remat_join_problem *out, remat_error *err) {
    remat__clear(err);
    const char *src = source ? source : "<string>";
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "%s: NULL argument", src);
    remat__jdoc d;
    REMAT__FORWARD(remat__json_parse(&d, text, len, src, JOIN_FORMAT, err));
    return problem_from_doc(&d, out);
}

remat_status remat_join_problem_load(const char *path, remat_join_problem *out, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_join_problem_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, JOIN_FORMAT, err));
    return problem_from_doc(&d, out);
}

int remat_join_is_problem_json(const char *text, size_t len) {
    return text && remat__json_has_format(text, len, JOIN_FORMAT);
}

remat_status remat_join_problem_to_json(const remat_join_problem *p, char **out,
                                        remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_join_problem_to_json: NULL argument");
    REMAT__FORWARD(remat__join_problem_validate(p, "remat_join_problem_to_json", err));
    remat__buf b = {0};
    remat__buf_printf(&b, "{\"format\": \"%s\", \"branches\": [", JOIN_FORMAT);
    for (size_t j = 0; j < p->k; j++)
        remat__buf_printf(&b, "%s%u", j ? ", " : "", (unsigned)p->lengths[j]);
    remat__buf_printf(&b, "], \"fwd_time\": ");
    remat__json_number(&b, p->fwd_time);
    remat__buf_printf(&b, ", \"bwd_time\": ");
    remat__json_number(&b, p->bwd_time);
    remat__buf_printf(&b, ", \"turn_time\": ");
    remat__json_number(&b, p->turn_time);
    if (p->slots) remat__buf_printf(&b, ", \"slots\": %llu", (unsigned long long)p->slots);
    remat__buf_printf(&b, "}\n");
    return remat__buf_finish(&b, out, err);
}

/* ---- ops ---- */

static const char *const op_names[] = {"F", "Fb", "T", "S", "D", "Db"};

void remat_join_op_format(remat_join_op op, char out[REMAT_JOIN_OP_TEXT_MAX]) {
    if (!out) return;
    if (op.kind > REMAT_JOIN_OP_DB)
        snprintf(out, REMAT_JOIN_OP_TEXT_MAX, "?");
    else if (op.kind == REMAT_JOIN_OP_T)
        snprintf(out, REMAT_JOIN_OP_TEXT_MAX, "T");
    else if (op.kind == REMAT_JOIN_OP_DB)
        snprintf(out, REMAT_JOIN_OP_TEXT_MAX, "Db %u", (unsigned)op.branch);
    else
        snprintf(out, REMAT_JOIN_OP_TEXT_MAX, "%s %u %u", op_names[op.kind],
                 (unsigned)op.branch, (unsigned)op.index);
}

/* A space then a decimal below 2^32; advances *p. */
static int parse_arg(const char **p, uint32_t *out) {
    const char *q = *p;
    uint64_t v = 0;
    if (*q++ != ' ' || *q < '0' || *q > '9') return 0;
    while (*q >= '0' && *q <= '9') {
        v = v * 10 + (uint64_t)(*q++ - '0');
        if (v > UINT32_MAX) return 0;
    }
    *out = (uint32_t)v;
    *p = q;
    return 1;
}

remat_status remat_join_op_parse(const char *text, remat_join_op *out, remat_error *err) {
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "op: NULL argument");
    size_t n = strcspn(text, " ");
    int kind = -1;
    for (int k = 0; k <= REMAT_JOIN_OP_DB; k++)
        if (strlen(op_names[k]) == n && strncmp(text, op_names[k], n) == 0) kind = k;
    REMAT__RETURN_IF(kind < 0, err, REMAT_E_INPUT,
                     "unknown op \"%.32s\" (expected F, Fb, T, S, D or Db)", text);
    remat_join_op op = {(uint8_t)kind, 0, 0};
    const char *p = text + n;
    int args = kind == REMAT_JOIN_OP_T ? 0 : kind == REMAT_JOIN_OP_DB ? 1 : 2;
    int ok = 1;
    if (args >= 1) ok = parse_arg(&p, &op.branch) && op.branch >= 1;
    if (ok && args == 2) ok = parse_arg(&p, &op.index);
    REMAT__RETURN_IF(!ok || *p != '\0', err, REMAT_E_INPUT,
                     "op \"%.32s\": expected \"%s%s\" with a branch from 1", text, op_names[kind],
                     args == 2 ? " j i" : args == 1 ? " j" : "");
    *out = op;
    return REMAT_OK;
}

/* ---- schedules ---- */

void remat_join_schedule_free(remat_join_schedule *s) {
    if (!s) return;
    free(s->ops);
    free(s);
}

remat_status remat_join_schedule_to_json(const remat_join_schedule *s, char **out,
                                         remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!s || !out, err, REMAT_E_INPUT, "remat_join_schedule_to_json: NULL argument");
    REMAT__RETURN_IF(s->n_ops && !s->ops, err, REMAT_E_INPUT,
                     "remat_join_schedule_to_json: %zu ops but no op array", s->n_ops);
    REMAT__RETURN_IF(!memchr(s->algorithm, '\0', sizeof s->algorithm), err, REMAT_E_INPUT,
                     "remat_join_schedule_to_json: the algorithm is not terminated");
    remat__buf b = {0};
    remat__buf_printf(&b, "{\n  \"format\": \"%s\",\n  \"algorithm\": \"", JOIN_SCHEDULE_FORMAT);
    remat__buf_json_string(&b, s->algorithm);
    remat__buf_printf(&b, "\",\n  \"slots\": %llu,\n  \"time\": ", (unsigned long long)s->slots);
    remat__json_number(&b, s->time);
    remat__buf_printf(&b, ",\n  \"peak_slots\": %llu,\n  \"ops\": [",
                      (unsigned long long)s->peak_slots);
    char t[REMAT_JOIN_OP_TEXT_MAX];
    for (size_t i = 0; i < s->n_ops; i++) {
        remat_join_op_format(s->ops[i], t);
        remat__buf_printf(&b, "%s\"%s\"", i == 0 ? "" : (i % 12 == 0 ? ",\n    " : ", "), t);
    }
    remat__buf_printf(&b, "]\n}\n");
    return remat__buf_finish(&b, out, err);
}

/* The ops array v into an exact table. */
static remat_status read_join_ops(const remat__jdoc *d, const cJSON *v, remat_join_schedule *s) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: field \"ops\" is missing or not an array", d->src);
    size_t count = remat__json_count(v);
    REMAT__RETURN_IF(count > REMAT_JOIN_MAX_OPS, d->err, REMAT_E_TOO_LARGE,
                     "%s: field \"ops\": more than %zu ops", d->src, REMAT_JOIN_MAX_OPS);
    s->ops = remat__calloc(count, sizeof *s->ops);
    REMAT__RETURN_IF(!s->ops, d->err, REMAT_E_NOMEM, "%s: out of memory for %zu ops", d->src,
                     count);
    s->cap = count;
    char text[64], field[48];
    const cJSON *o;
    cJSON_ArrayForEach(o, v) {
        size_t i = s->n_ops;
        snprintf(field, sizeof field, "ops[%zu]", i);
        REMAT__RETURN_IF(!cJSON_IsString(o), d->err, REMAT_E_INPUT,
                         "%s: field \"%s\": must be a string", d->src, field);
        REMAT__FORWARD(remat__json_string(d, o, "", field, text, sizeof text));
        remat_error e;
        remat__clear(&e);
        REMAT__RETURN_IF(remat_join_op_parse(text, &s->ops[i], &e) != REMAT_OK, d->err,
                         REMAT_E_INPUT, "%s: field \"%s\": %s", d->src, field, e.message);
        s->n_ops = i + 1;
    }
    return REMAT_OK;
}

enum { S_ALGORITHM, S_SLOTS, S_PEAK, S_TIME, S_OPS, S_COUNT };
static const char *const schedule_keys[S_COUNT] = {"algorithm", "slots", "peak_slots", "time",
                                                   "ops"};

/* The fields of a parsed document into s; the tree is freed here. */
static remat_status schedule_from_doc(remat__jdoc *d, remat_join_schedule *s) {
    const uint64_t max = ((uint64_t)1 << 53) - 1;
    unsigned seen = 0;
    remat_status st = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        int f = remat__json_member(schedule_keys, S_COUNT, key, &seen);
        if (f == S_ALGORITHM && cJSON_IsString(m))
            st = remat__json_string(d, m, "", key, s->algorithm, sizeof s->algorithm);
        else if (f == S_SLOTS) st = json_uint(d, m, 0, max, key, &s->slots);
        else if (f == S_PEAK) st = json_uint(d, m, 0, max, key, &s->peak_slots);
        else if (f == S_TIME) st = json_time(d, m, key, &s->time);
        else if (f == S_OPS) st = read_join_ops(d, m, s);
        if (st != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    REMAT__FORWARD(st);
    REMAT__RETURN_IF(!(seen & (1u << S_OPS)), d->err, REMAT_E_INPUT,
                     "%s: field \"ops\" is missing or not an array", d->src);
    return REMAT_OK;
}

/* The schedule of a parsed document (consumed). */
static remat_status join_schedule_of(remat__jdoc *d, remat_join_schedule **out) {
    remat_join_schedule *s = calloc(1, sizeof *s);
    remat_status st = s ? schedule_from_doc(d, s)
                        : remat__fail(d->err, REMAT_E_NOMEM, "%s: out of memory", d->src);
    remat__jdoc_free(d);
    if (st != REMAT_OK) {
        remat_join_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_join_schedule_from_json(const char *text, size_t len, const char *source,
                                           remat_join_schedule **out, remat_error *err) {
    remat__clear(err);
    const char *src = source ? source : "<string>";
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "%s: NULL argument", src);
    remat__jdoc d;
    REMAT__FORWARD(remat__json_parse(&d, text, len, src, JOIN_SCHEDULE_FORMAT, err));
    return join_schedule_of(&d, out);
}

remat_status remat_join_schedule_load(const char *path, remat_join_schedule **out,
                                      remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_join_schedule_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, JOIN_SCHEDULE_FORMAT, err));
    return join_schedule_of(&d, out);
}

/* ---- the simulator ---- */

/* Memory: copies of each x_i per branch, and the one xbar per branch. */
typedef struct join_mem {
    const remat_join_problem *p;
    uint32_t *copies;              /* copies[base[j] + i]: copies of x_i on branch j */
    size_t base[REMAT_JOIN_MAX_BRANCHES + 1];
    int64_t bar[REMAT_JOIN_MAX_BRANCHES]; /* index i of the xbar_i held; -1 none yet */
    int done[REMAT_JOIN_MAX_BRANCHES];    /* xbar_0 dropped */
    int turned;
    uint64_t held;
    size_t nf, nb, nt;
} join_mem;

#define BAR_NONE (-1)

static int sim_fail(remat_join_sim_result *r, size_t at, remat_join_op op, const char *why) {
    char t[REMAT_JOIN_OP_TEXT_MAX];
    remat_join_op_format(op, t);
    r->valid = 0;
    r->failed_op = at;
    snprintf(r->reason, sizeof r->reason, "op %zu (\"%s\"): %s", at, t, why);
    return 0;
}

/* Applies one op; returns 0 and fills r when it cannot run. */
static int sim_apply(join_mem *m, remat_join_op op, size_t at, remat_join_sim_result *r) {
    const remat_join_problem *p = m->p;
    char why[160];
    if (op.kind == REMAT_JOIN_OP_T) {
        if (m->turned) return sim_fail(r, at, op, "the turn has already run");
        for (size_t j = 0; j < p->k; j++)
            if (m->copies[m->base[j] + p->lengths[j]] == 0) {
                snprintf(why, sizeof why, "needs x_%u of branch %zu, which is not in memory",
                         (unsigned)p->lengths[j], j + 1);
                return sim_fail(r, at, op, why);
            }
        for (size_t j = 0; j < p->k; j++) {
            m->copies[m->base[j] + p->lengths[j]]--;
            m->bar[j] = p->lengths[j];
        }
        m->turned = 1;
        m->nt++;
        return 1;
    }
    if (op.kind > REMAT_JOIN_OP_DB) return sim_fail(r, at, op, "unknown op");
    if (op.branch < 1 || op.branch > p->k) {
        snprintf(why, sizeof why, "branch %u does not exist (the problem has %zu)",
                 (unsigned)op.branch, p->k);
        return sim_fail(r, at, op, why);
    }
    size_t j = op.branch - 1;
    uint32_t len = p->lengths[j], i = op.index;
    if (op.kind == REMAT_JOIN_OP_DB) {
        if (m->bar[j] != 0 || m->done[j])
            return sim_fail(r, at, op, "xbar_0 of this branch is not in memory");
        m->done[j] = 1;
        m->bar[j] = BAR_NONE;
        m->held--;
        return 1;
    }
    int forward = op.kind == REMAT_JOIN_OP_F || op.kind == REMAT_JOIN_OP_FB;
    if (forward ? i >= len : i > len) {
        snprintf(why, sizeof why, "index %u is out of range for branch %zu of length %u",
                 (unsigned)i, j + 1, (unsigned)len);
        return sim_fail(r, at, op, why);
    }
    uint32_t *x = &m->copies[m->base[j] + i];
    if (*x == 0) {
        snprintf(why, sizeof why, "needs x_%u of branch %zu, which is not in memory", (unsigned)i,
                 j + 1);
        return sim_fail(r, at, op, why);
    }
    switch (op.kind) {
    case REMAT_JOIN_OP_F: /* in place: the input's slot takes the output */
        (*x)--;
        x[1]++;
        m->nf++;
        break;
    case REMAT_JOIN_OP_FB:
        if (m->bar[j] != (int64_t)i + 1) {
            snprintf(why, sizeof why, "needs xbar_%u of branch %zu, which is not in memory",
                     (unsigned)i + 1, j + 1);
            return sim_fail(r, at, op, why);
        }
        (*x)--;
        m->bar[j] = i;
        m->held--;
        m->nb++;
        break;
    case REMAT_JOIN_OP_S:
        (*x)++;
        m->held++;
        break;
    default: /* D */
        (*x)--;
        m->held--;
        break;
    }
    return 1;
}

static void sim_end_check(const join_mem *m, size_t n, remat_join_sim_result *r) {
    const remat_join_problem *p = m->p;
    r->failed_op = n;
    if (!m->turned) {
        snprintf(r->reason, sizeof r->reason, "end: the turn never ran");
        return;
    }
    for (size_t j = 0; j < p->k; j++) {
        if (!m->done[j]) {
            if (m->bar[j] == 0)
                snprintf(r->reason, sizeof r->reason,
                         "end: xbar_0 of branch %zu is still in memory (missing \"Db %zu\")",
                         j + 1, j + 1);
            else
                snprintf(r->reason, sizeof r->reason,
                         "end: branch %zu is not back-propagated to xbar_0", j + 1);
            return;
        }
        for (uint32_t i = 0; i <= p->lengths[j]; i++)
            if (m->copies[m->base[j] + i]) {
                snprintf(r->reason, sizeof r->reason,
                         "end: x_%u of branch %zu is still in memory", (unsigned)i, j + 1);
                return;
            }
    }
    r->valid = 1;
    r->reason[0] = '\0';
}

/* Replays ops into res (already zeroed); REMAT_E_NOMEM when the copy counts
 * cannot be allocated. */
static remat_status join_replay(const remat_join_problem *p, const remat_join_op *ops, size_t n,
                                uint64_t limit, remat_join_sim_result *res, remat_error *err) {
    join_mem m;
    memset(&m, 0, sizeof m);
    m.p = p;
    for (size_t j = 0; j < p->k; j++) {
        m.base[j + 1] = m.base[j] + p->lengths[j] + 1;
        m.bar[j] = BAR_NONE;
    }
    m.copies = remat__calloc(m.base[p->k], sizeof *m.copies);
    REMAT__RETURN_IF(!m.copies, err, REMAT_E_NOMEM, "remat_join_simulate: out of memory");
    for (size_t j = 0; j < p->k; j++) m.copies[m.base[j]] = 1;
    m.held = p->k;
    res->peak_slots = m.held;
    int ok = 1;
    if (limit && m.held > limit) {
        res->failed_op = 0;
        snprintf(res->reason, sizeof res->reason,
                 "start: the %zu inputs need more than the %llu slots", p->k,
                 (unsigned long long)limit);
        ok = 0;
    }
    for (size_t i = 0; ok && i < n; i++) {
        ok = sim_apply(&m, ops[i], i, res);
        if (m.held > res->peak_slots) res->peak_slots = m.held;
        if (ok && limit && m.held > limit) {
            char why[96];
            snprintf(why, sizeof why, "needs %llu slots, more than the %llu available",
                     (unsigned long long)m.held, (unsigned long long)limit);
            ok = sim_fail(res, i, ops[i], why);
        }
    }
    res->time = (double)m.nf * p->fwd_time + (double)m.nb * p->bwd_time +
                (double)m.nt * p->turn_time;
    if (ok) sim_end_check(&m, n, res);
    free(m.copies);
    return REMAT_OK;
}

remat_status remat_join_simulate(const remat_join_problem *p, const remat_join_op *ops, size_t n,
                                 uint64_t limit, remat_join_sim_result **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!p || !out || (n && !ops), err, REMAT_E_INPUT,
                     "remat_join_simulate: NULL argument");
    REMAT__FORWARD(remat__join_problem_validate(p, "remat_join_simulate", err));
    /* no schedule has more ops (the reader and the solver refuse them): an n
     * past it is not an array of ops the caller holds */
    REMAT__RETURN_IF(n > REMAT_JOIN_MAX_OPS, err, REMAT_E_INPUT,
                     "remat_join_simulate: %zu ops, more than REMAT_JOIN_MAX_OPS (%zu)", n,
                     REMAT_JOIN_MAX_OPS);
    remat_join_sim_result *res = calloc(1, sizeof *res);
    REMAT__RETURN_IF(!res, err, REMAT_E_NOMEM, "remat_join_simulate: out of memory");
    remat_status st = join_replay(p, ops, n, limit, res, err);
    if (st != REMAT_OK) {
        free(res);
        return st;
    }
    *out = res;
    return REMAT_OK;
}

void remat_join_sim_result_free(remat_join_sim_result *r) { free(r); }
