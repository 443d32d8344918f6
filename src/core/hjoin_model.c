/* Heterogeneous join networks: validation, creation, the "remat-join-2"
 * document, op text and the "remat-join-schedule-2" document. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hjoin_internal.h"
#include "json_util.h"

#define HJOIN_FORMAT "remat-join-2"
#define HJOIN_SCHEDULE_FORMAT "remat-join-schedule-2"
#define HJOIN_SUM_CAP ((uint64_t)1 << 62)

static uint64_t sat_add(uint64_t a, uint64_t b) {
    return a > HJOIN_SUM_CAP - (b < HJOIN_SUM_CAP ? b : HJOIN_SUM_CAP) ? HJOIN_SUM_CAP : a + b;
}

/* ---- validation ---- */

static remat_status check_turn(const remat_stage *t, const char *who, remat_error *err) {
    const double times[2] = {t->fwd_time, t->bwd_time};
    const char *tn[2] = {"fwd_time", "bwd_time"};
    for (int i = 0; i < 2; i++)
        REMAT__RETURN_IF(!isfinite(times[i]) || times[i] < 0, err, REMAT_E_INPUT,
                         "%s: turn.%s: must be a finite number >= 0 (got %g)", who, tn[i],
                         times[i]);
    const uint64_t sizes[4] = {t->out_bytes, t->saved_bytes, t->fwd_overhead, t->bwd_overhead};
    const char *sn[4] = {"out_bytes", "saved_bytes", "fwd_overhead", "bwd_overhead"};
    for (int i = 0; i < 4; i++)
        REMAT__RETURN_IF(sizes[i] >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                         "%s: turn.%s: size %llu is 2^53 or more", who, sn[i],
                         (unsigned long long)sizes[i]);
    REMAT__RETURN_IF(t->saved_bytes < t->out_bytes, err, REMAT_E_INPUT,
                     "%s: turn.saved_bytes: %llu is less than out_bytes %llu", who,
                     (unsigned long long)t->saved_bytes, (unsigned long long)t->out_bytes);
    REMAT__RETURN_IF(!memchr(t->name, '\0', sizeof t->name), err, REMAT_E_INPUT,
                     "%s: turn.name is not terminated", who);
    /* T runs the turn's forward and backward as one op: it has no stopped Fall */
    const char *stop_field = t->has_stop_time          ? "stop_time"
                             : t->has_stop_saved_bytes ? "stop_saved_bytes"
                             : t->has_stop_overhead    ? "stop_overhead"
                                                       : NULL;
    REMAT__RETURN_IF(stop_field, err, REMAT_E_INPUT,
                     "%s: turn.%s: the turn has no stopped Fall", who, stop_field);
    return REMAT_OK;
}

/* dst[0..n) = src[0..n) with their own copies of the options; on failure
 * nothing is left allocated (dst's options are NULL). */
static remat_status copy_stages(remat_stage *dst, const remat_stage *src, size_t n,
                                remat_error *err) {
    memcpy(dst, src, n * sizeof *dst);
    for (size_t i = 0; i < n; i++) dst[i].options = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!src[i].n_options || !src[i].options) continue;
        dst[i].options = remat__calloc(src[i].n_options, sizeof *dst[i].options);
        if (!dst[i].options) {
            for (size_t q = 0; q < i; q++) {
                free(dst[q].options);
                dst[q].options = NULL;
            }
            return remat__fail(err, REMAT_E_NOMEM, "join: out of memory for the options of "
                               "stage %zu", i + 1);
        }
        memcpy(dst[i].options, src[i].options, src[i].n_options * sizeof *dst[i].options);
    }
    return REMAT_OK;
}

/* Branch b of j as a chain with the empty end stage, checked on the way. */
static remat_status branch_chain(const remat_hjoin_branch *br, size_t b, const char *who,
                                 remat_chain **out, remat_error *err) {
    char src[REMAT_MESSAGE_MAX / 2];
    snprintf(src, sizeof src, "%s: branches[%zu]", who, b);
    REMAT__RETURN_IF(!memchr(br->name, '\0', sizeof br->name), err, REMAT_E_INPUT,
                     "%s: name is not terminated", src);
    REMAT__RETURN_IF(br->n < 1 || br->n >= REMAT_MAX_STAGES || !br->stages, err, REMAT_E_INPUT,
                     "%s: stages: a branch needs 1 to %u stages (got %zu%s)", src,
                     REMAT_MAX_STAGES - 1, br->n, br->stages ? "" : ", no stage array");
    for (size_t i = 0; i < br->n; i++)
        REMAT__RETURN_IF(!memchr(br->stages[i].name, '\0', REMAT_NAME_MAX), err, REMAT_E_INPUT,
                         "%s: stages[%zu].name is not terminated", src, i);
    for (size_t i = 0; i < br->n; i++) /* before copying: the count bounds the copy */
        REMAT__RETURN_IF(br->stages[i].n_options > REMAT_MAX_OPTIONS ||
                             (br->stages[i].n_options && !br->stages[i].options),
                         err, REMAT_E_INPUT, "%s: stages[%zu].options: %zu options%s", src, i,
                         br->stages[i].n_options,
                         br->stages[i].options ? ", more than the limit" : " but no option array");
    remat_stage *st = remat__calloc(br->n + 1, sizeof *st);
    REMAT__RETURN_IF(!st, err, REMAT_E_NOMEM, "%s: out of memory for %zu stages", src, br->n);
    if (copy_stages(st, br->stages, br->n, err) != REMAT_OK) {
        free(st);
        return REMAT_E_NOMEM;
    }
    remat__strlcpy(st[br->n].name, "(turn)", sizeof st[br->n].name);
    return remat__chain_adopt(src, br->name, br->input_bytes, br->input_grad_bytes, st,
                              br->n + 1, out, err);
}

static uint64_t chain_total(const remat_chain *c) {
    uint64_t t = sat_add(c->input_bytes, c->input_grad_bytes);
    for (size_t i = 0; i < c->n; i++) {
        const remat_stage *s = &c->stages[i];
        t = sat_add(t, sat_add(sat_add(s->saved_bytes, s->grad_bytes),
                               sat_add(s->fwd_overhead, s->bwd_overhead)));
    }
    return t;
}

remat_status remat__hjoin_net_init(remat__hjoin_net *net, const remat_hjoin *j, const char *who,
                                   remat_error *err) {
    memset(net, 0, sizeof *net);
    REMAT__RETURN_IF(!j, err, REMAT_E_INPUT, "%s: the join network is NULL", who);
    REMAT__RETURN_IF(j->k < 1 || j->k > REMAT_HJOIN_MAX_BRANCHES, err, REMAT_E_INPUT,
                     "%s: branches: a join needs 1 to %u branches (got %zu)", who,
                     REMAT_HJOIN_MAX_BRANCHES, j->k);
    REMAT__RETURN_IF(!memchr(j->name, '\0', sizeof j->name) ||
                         !memchr(j->time_unit, '\0', sizeof j->time_unit),
                     err, REMAT_E_INPUT, "%s: the name or time_unit is not terminated", who);
    REMAT__FORWARD(check_turn(&j->turn, who, err));
    net->turn = j->turn;
    net->turn.n_options = 0; /* the turn's Fall and B are one op: no partial saves */
    net->turn.options = NULL;
    net->ordered = j->ordered != 0;
    uint64_t total = sat_add(sat_add(j->turn.saved_bytes, j->turn.fwd_overhead),
                             j->turn.bwd_overhead);
    double time = j->turn.fwd_time + j->turn.bwd_time;
    for (size_t b = 0; b < j->k; b++) {
        REMAT__FORWARD(branch_chain(&j->branches[b], b, who, &net->c[b], err));
        net->k = b + 1;
        net->n[b] = (uint32_t)(net->c[b]->n - 1);
        total = sat_add(total, chain_total(net->c[b]));
        for (size_t i = 0; i < net->c[b]->n; i++)
            time += net->c[b]->stages[i].fwd_time + net->c[b]->stages[i].bwd_time;
    }
    REMAT__RETURN_IF(total >= HJOIN_SUM_CAP, err, REMAT_E_INPUT,
                     "%s: the sizes of all branches and the turn add up to 2^62 bytes or more",
                     who);
    REMAT__RETURN_IF(!isfinite(time), err, REMAT_E_INPUT,
                     "%s: the times add up to more than the largest finite number", who);
    return REMAT_OK;
}

void remat__hjoin_net_free(remat__hjoin_net *net) {
    for (size_t b = 0; b < REMAT_HJOIN_MAX_BRANCHES; b++) remat_chain_free(net->c[b]);
    memset(net, 0, sizeof *net);
}

uint64_t remat__hjoin_turn_need(const remat__hjoin_net *net) {
    uint64_t d = 0;
    for (size_t b = 0; b < net->k; b++) d += remat_chain_d_bytes(net->c[b], net->n[b]);
    uint64_t bwd = d + net->turn.bwd_overhead;
    return net->turn.saved_bytes + (bwd > net->turn.fwd_overhead ? bwd : net->turn.fwd_overhead);
}

/* ---- creation ---- */

void remat_hjoin_free(remat_hjoin *j) {
    if (!j) return;
    for (size_t b = 0; b < REMAT_HJOIN_MAX_BRANCHES; b++)
        remat__stages_free(j->branches[b].stages, j->branches[b].stages ? j->branches[b].n : 0);
    free(j);
}

/* A new network from a checked net (its chains' stages, less the end stage). */
static remat_status from_net(const remat__hjoin_net *net, const char *name, const char *unit,
                             remat_hjoin **out, remat_error *err) {
    remat_hjoin *j = calloc(1, sizeof *j);
    REMAT__RETURN_IF(!j, err, REMAT_E_NOMEM, "join: out of memory");
    remat__strlcpy(j->name, name ? name : "", sizeof j->name);
    remat__strlcpy(j->time_unit, unit ? unit : "", sizeof j->time_unit);
    j->k = net->k;
    j->turn = net->turn;
    j->ordered = net->ordered;
    for (size_t b = 0; b < net->k; b++) {
        const remat_chain *c = net->c[b];
        remat_hjoin_branch *br = &j->branches[b];
        remat__strlcpy(br->name, c->name, sizeof br->name);
        br->input_bytes = c->input_bytes;
        br->input_grad_bytes = c->input_grad_bytes;
        br->n = net->n[b];
        br->stages = remat__calloc(br->n, sizeof *br->stages);
        if (!br->stages) {
            remat_hjoin_free(j);
            return remat__fail(err, REMAT_E_NOMEM, "join: out of memory for %zu stages", br->n);
        }
        if (copy_stages(br->stages, c->stages, br->n, err) != REMAT_OK) {
            remat_hjoin_free(j);
            return REMAT_E_NOMEM;
        }
    }
    *out = j;
    return REMAT_OK;
}

remat_status remat_hjoin_create(const char *name, const char *time_unit, size_t k,
                                const remat_hjoin_branch *branches, const remat_stage *turn,
                                remat_hjoin **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out || !turn || (k && !branches), err, REMAT_E_INPUT,
                     "remat_hjoin_create: NULL argument");
    REMAT__RETURN_IF(k < 1 || k > REMAT_HJOIN_MAX_BRANCHES, err, REMAT_E_INPUT,
                     "join: branches: a join needs 1 to %u branches (got %zu)",
                     REMAT_HJOIN_MAX_BRANCHES, k);
    remat_hjoin tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.k = k;
    memcpy(tmp.branches, branches, k * sizeof *branches);
    tmp.turn = *turn;
    tmp.turn.name[REMAT_NAME_MAX - 1] = '\0';
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, &tmp, "join", err);
    if (st == REMAT_OK) st = from_net(&net, name, time_unit, out, err);
    remat__hjoin_net_free(&net);
    return st;
}

void remat_hjoin_set_ordered(remat_hjoin *j, int ordered) {
    if (j) j->ordered = ordered != 0;
}

/* ---- the "remat-join-2" document ---- */

/* A branch being read: its fields and its stages table. */
typedef struct branch_doc {
    remat_hjoin_branch br;
    int have_input, have_grad, have_stages;
} branch_doc;

static remat_status read_stages(const remat__jdoc *d, const cJSON *v, const char *outer,
                                remat_hjoin_branch *br) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: %sstages: expected an array, got %s", d->src, outer,
                     remat__json_type_name(v));
    size_t n = remat__json_count(v);
    REMAT__RETURN_IF(n < 1 || n >= REMAT_MAX_STAGES, d->err, REMAT_E_INPUT,
                     "%s: %sstages: a branch needs 1 to %u stages (got %zu)", d->src, outer,
                     REMAT_MAX_STAGES - 1, n);
    br->stages = remat__calloc(n, sizeof *br->stages);
    REMAT__RETURN_IF(!br->stages, d->err, REMAT_E_NOMEM, "%s: out of memory for %zu stages",
                     d->src, n);
    br->n = n;
    size_t i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        REMAT__FORWARD(remat__json_stage(d, s, outer, i, &br->stages[i]));
        i++;
    }
    return REMAT_OK;
}

enum { B_NAME, B_INPUT, B_INPUT_GRAD, B_STAGES, B_COUNT };
static const char *const branch_keys[B_COUNT] = {"name", "input_bytes", "input_grad_bytes",
                                                 "stages"};

static remat_status read_branch(const remat__jdoc *d, const cJSON *v, size_t b,
                                remat_hjoin_branch *br) {
    char outer[32];
    snprintf(outer, sizeof outer, "branches[%zu].", b);
    REMAT__RETURN_IF(!cJSON_IsObject(v), d->err, REMAT_E_INPUT,
                     "%s: branches[%zu]: expected an object, got %s", d->src, b,
                     remat__json_type_name(v));
    unsigned seen = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const char *key = m->string;
        remat_status s = REMAT_OK;
        switch (remat__json_member(branch_keys, B_COUNT, key, &seen)) {
        case B_NAME: s = remat__json_string(d, m, outer, key, br->name, sizeof br->name); break;
        case B_INPUT: s = remat__json_bytes(d, m, outer, key, &br->input_bytes); break;
        case B_INPUT_GRAD: s = remat__json_bytes(d, m, outer, key, &br->input_grad_bytes); break;
        case B_STAGES: s = read_stages(d, m, outer, br); break;
        default: break; /* ignored, or a repeat */
        }
        REMAT__FORWARD(s);
    }
    const int need[2] = {B_INPUT, B_STAGES};
    for (int f = 0; f < 2; f++)
        REMAT__RETURN_IF(!(seen & (1u << need[f])), d->err, REMAT_E_INPUT,
                         "%s: %s%s: missing required field", d->src, outer,
                         branch_keys[need[f]]);
    if (!(seen & (1u << B_INPUT_GRAD))) br->input_grad_bytes = br->input_bytes;
    return REMAT_OK;
}

static remat_status read_branches(const remat__jdoc *d, const cJSON *v, remat_hjoin *j) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: branches: expected an array, got %s", d->src, remat__json_type_name(v));
    size_t k = remat__json_count(v);
    REMAT__RETURN_IF(k < 1 || k > REMAT_HJOIN_MAX_BRANCHES, d->err, REMAT_E_INPUT,
                     "%s: branches: a join needs 1 to %u branches (got %zu)", d->src,
                     REMAT_HJOIN_MAX_BRANCHES, k);
    size_t b = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        j->k = b + 1; /* so that a failure frees what was read */
        REMAT__FORWARD(read_branch(d, m, b, &j->branches[b]));
        b++;
    }
    return REMAT_OK;
}

enum { R_NAME, R_FWD, R_BWD, R_OUT, R_SAVED, R_FWD_OV, R_BWD_OV, R_STOP_TIME, R_STOP_SAVED,
       R_STOP_OV, R_COUNT };
static const char *const turn_keys[R_COUNT] = {
    "name", "fwd_time", "bwd_time", "out_bytes", "saved_bytes", "fwd_overhead", "bwd_overhead",
    "stop_time", "stop_saved_bytes", "stop_overhead"};

static remat_status read_turn(const remat__jdoc *d, const cJSON *v, remat_stage *t) {
    REMAT__RETURN_IF(!cJSON_IsObject(v), d->err, REMAT_E_INPUT,
                     "%s: turn: expected an object, got %s", d->src, remat__json_type_name(v));
    const char *p = "turn.";
    unsigned seen = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, v) {
        const char *key = m->string;
        remat_status s = REMAT_OK;
        switch (remat__json_member(turn_keys, R_COUNT, key, &seen)) {
        case R_NAME: s = remat__json_string(d, m, p, key, t->name, sizeof t->name); break;
        case R_FWD: s = remat__json_time(d, m, p, key, &t->fwd_time); break;
        case R_BWD: s = remat__json_time(d, m, p, key, &t->bwd_time); break;
        case R_OUT: s = remat__json_bytes(d, m, p, key, &t->out_bytes); break;
        case R_SAVED: s = remat__json_bytes(d, m, p, key, &t->saved_bytes); break;
        case R_FWD_OV: s = remat__json_bytes(d, m, p, key, &t->fwd_overhead); break;
        case R_BWD_OV: s = remat__json_bytes(d, m, p, key, &t->bwd_overhead); break;
        case R_STOP_TIME:
        case R_STOP_SAVED:
        case R_STOP_OV: /* refused rather than ignored: the turn has no stopped Fall */
            s = remat__fail(d->err, REMAT_E_INPUT, "%s: turn.%s: the turn has no stopped Fall",
                            d->src, key);
            break;
        default: break;
        }
        REMAT__FORWARD(s);
    }
    for (int f = R_FWD; f <= R_BWD; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), d->err, REMAT_E_INPUT,
                         "%s: turn.%s: missing required field", d->src, turn_keys[f]);
    if (!(seen & (1u << R_SAVED))) t->saved_bytes = t->out_bytes;
    return REMAT_OK;
}

enum { T_NAME, T_UNIT, T_BRANCHES, T_TURN, T_ORDERED, T_COUNT };
static const char *const top_keys[T_COUNT] = {"name", "time_unit", "branches", "turn",
                                              "ordered"};

/* The fields of a parsed document into j (stage tables malloc'd); the tree
 * is freed here. */
static remat_status fields_of(remat__jdoc *d, remat_hjoin *j) {
    unsigned seen = 0;
    remat_status s = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        switch (remat__json_member(top_keys, T_COUNT, key, &seen)) {
        case T_NAME: s = remat__json_string(d, m, "", key, j->name, sizeof j->name); break;
        case T_UNIT:
            s = remat__json_string(d, m, "", key, j->time_unit, sizeof j->time_unit);
            break;
        case T_BRANCHES: s = read_branches(d, m, j); break;
        case T_TURN: s = read_turn(d, m, &j->turn); break;
        case T_ORDERED:
            if (!cJSON_IsBool(m))
                s = remat__fail(d->err, REMAT_E_INPUT, "%s: ordered: expected true or false, "
                                "got %s", d->src, remat__json_type_name(m));
            else
                j->ordered = cJSON_IsTrue(m);
            break;
        default: break;
        }
        if (s != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    REMAT__FORWARD(s);
    for (int f = T_BRANCHES; f <= T_TURN; f++)
        REMAT__RETURN_IF(!(seen & (1u << f)), d->err, REMAT_E_INPUT,
                         "%s: %s: missing required field", d->src, top_keys[f]);
    return REMAT_OK;
}

/* The network of a parsed document (consumed). */
static remat_status hjoin_of(remat__jdoc *d, remat_hjoin **out) {
    remat_hjoin *j = calloc(1, sizeof *j);
    remat_status s = j ? fields_of(d, j)
                       : remat__fail(d->err, REMAT_E_NOMEM, "%s: out of memory", d->src);
    remat__jdoc_free(d);
    remat__hjoin_net net;
    memset(&net, 0, sizeof net);
    if (s == REMAT_OK) s = remat__hjoin_net_init(&net, j, d->src, d->err);
    remat__hjoin_net_free(&net);
    if (s != REMAT_OK) {
        remat_hjoin_free(j);
        return s;
    }
    *out = j;
    return REMAT_OK;
}

remat_status remat_hjoin_from_json(const char *text, size_t len, const char *source,
                                   remat_hjoin **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_from_json: out is NULL");
    remat__jdoc d;
    REMAT__FORWARD(
        remat__json_parse(&d, text, len, source ? source : "<string>", HJOIN_FORMAT, err));
    return hjoin_of(&d, out);
}

remat_status remat_hjoin_load(const char *path, remat_hjoin **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_hjoin_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, HJOIN_FORMAT, err));
    return hjoin_of(&d, out);
}

int remat_hjoin_is_json(const char *text, size_t len) {
    return text && remat__json_has_format(text, len, HJOIN_FORMAT);
}

static void put_text(remat__buf *b, const char *key, const char *v) {
    remat__buf_printf(b, "\"%s\": \"", key);
    remat__buf_json_string(b, v);
    remat__buf_printf(b, "\"");
}

static void put_turn(remat__buf *b, const remat_stage *t) {
    remat__buf_printf(b, "  \"turn\": {");
    put_text(b, "name", t->name);
    remat__buf_printf(b, ", \"fwd_time\": ");
    remat__json_number(b, t->fwd_time);
    remat__buf_printf(b, ", \"bwd_time\": ");
    remat__json_number(b, t->bwd_time);
    remat__buf_printf(b,
                      ", \"out_bytes\": %llu, \"saved_bytes\": %llu, \"fwd_overhead\": %llu, "
                      "\"bwd_overhead\": %llu}\n",
                      (unsigned long long)t->out_bytes, (unsigned long long)t->saved_bytes,
                      (unsigned long long)t->fwd_overhead, (unsigned long long)t->bwd_overhead);
}

remat_status remat_hjoin_to_json(const remat_hjoin *j, char **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_to_json: NULL argument");
    remat__hjoin_net net;
    remat_status st = remat__hjoin_net_init(&net, j, "remat_hjoin_to_json", err);
    remat__hjoin_net_free(&net);
    REMAT__FORWARD(st);
    remat__buf b = {0};
    remat__buf_printf(&b, "{\n  \"format\": \"%s\",\n  ", HJOIN_FORMAT);
    put_text(&b, "name", j->name);
    remat__buf_printf(&b, ",\n  ");
    put_text(&b, "time_unit", j->time_unit);
    remat__buf_printf(&b, ",\n  \"branches\": [\n");
    for (size_t k = 0; k < j->k; k++) {
        const remat_hjoin_branch *br = &j->branches[k];
        remat__buf_printf(&b, "   {");
        put_text(&b, "name", br->name);
        remat__buf_printf(&b, ", \"input_bytes\": %llu, \"input_grad_bytes\": %llu,\n",
                          (unsigned long long)br->input_bytes,
                          (unsigned long long)br->input_grad_bytes);
        remat__buf_printf(&b, "    \"stages\": [\n");
        for (size_t i = 0; i < br->n; i++) {
            remat__json_put_stage(&b, &br->stages[i]);
            remat__buf_printf(&b, i + 1 < br->n ? ",\n" : "\n");
        }
        remat__buf_printf(&b, "    ]}%s\n", k + 1 < j->k ? "," : "");
    }
    remat__buf_printf(&b, "  ],\n");
    if (j->ordered) remat__buf_printf(&b, "  \"ordered\": true,\n");
    put_turn(&b, &j->turn);
    remat__buf_printf(&b, "}\n");
    return remat__buf_finish(&b, out, err);
}

remat_status remat_hjoin_save(const remat_hjoin *j, const char *path, remat_error *err) {
    REMAT__RETURN_IF(!path, err, REMAT_E_INPUT, "remat_hjoin_save: path is NULL");
    char *text;
    REMAT__FORWARD(remat_hjoin_to_json(j, &text, err));
    remat_status st = remat_write_file(path, text, strlen(text), err);
    remat_free(text);
    return st;
}

/* ---- ops ---- */

static const char *const op_names[] = {"Fn", "Fck", "Fall", "B", "T"};

void remat_hjoin_op_format(remat_hjoin_op op, char out[REMAT_HJOIN_OP_TEXT_MAX]) {
    if (!out) return;
    if (op.kind > REMAT_HJOIN_OP_T)
        snprintf(out, REMAT_HJOIN_OP_TEXT_MAX, "?");
    else if (op.kind == REMAT_HJOIN_OP_T)
        snprintf(out, REMAT_HJOIN_OP_TEXT_MAX, "T");
    else if (op.option)
        snprintf(out, REMAT_HJOIN_OP_TEXT_MAX, "%s %u.%u/%u", op_names[op.kind],
                 (unsigned)op.branch, (unsigned)op.index, (unsigned)op.option);
    else
        snprintf(out, REMAT_HJOIN_OP_TEXT_MAX, "%s %u.%u", op_names[op.kind],
                 (unsigned)op.branch, (unsigned)op.index);
}

/* Digits into a number up to max; advances *p. 0 when there are none or too many. */
static int parse_number(const char **p, uint64_t max, uint64_t *out) {
    const char *q = *p;
    uint64_t v = 0;
    if (*q < '0' || *q > '9') return 0;
    while (*q >= '0' && *q <= '9') {
        v = v * 10 + (uint64_t)(*q++ - '0');
        if (v > max) return 0;
    }
    *out = v;
    *p = q;
    return 1;
}

remat_status remat_hjoin_op_parse(const char *text, remat_hjoin_op *out, remat_error *err) {
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "op: NULL argument");
    size_t n = strcspn(text, " ");
    int kind = -1;
    for (int k = 0; k <= REMAT_HJOIN_OP_T; k++)
        if (strlen(op_names[k]) == n && strncmp(text, op_names[k], n) == 0) kind = k;
    REMAT__RETURN_IF(kind < 0, err, REMAT_E_INPUT,
                     "unknown op \"%.32s\" (expected Fn, Fck, Fall, B or T)", text);
    remat_hjoin_op op = {(uint8_t)kind, 0, 0, 0};
    const char *p = text + n;
    if (kind != REMAT_HJOIN_OP_T) {
        uint64_t b = 0, i = 0, k = 0;
        int ok = *p++ == ' ' && parse_number(&p, REMAT_HJOIN_MAX_BRANCHES, &b) && b >= 1 &&
                 *p++ == '.' && parse_number(&p, UINT32_MAX, &i) && i >= 1;
        if (ok && *p == '/') { /* "Fall j.i/k": partial save k */
            p++;
            ok = parse_number(&p, UINT8_MAX, &k);
        }
        REMAT__RETURN_IF(!ok || *p != '\0', err, REMAT_E_INPUT,
                         "op \"%.32s\": expected \"%s j.i\" or \"%s j.i/k\", branch j from 1 "
                         "to %u, stage i from 1, option k from 0 to 255",
                         text, op_names[kind], op_names[kind], REMAT_HJOIN_MAX_BRANCHES);
        op.branch = (uint8_t)b;
        op.index = (uint32_t)i;
        op.option = (uint8_t)k;
    } else {
        REMAT__RETURN_IF(*p != '\0', err, REMAT_E_INPUT, "op \"%.32s\": expected \"T\"", text);
    }
    *out = op;
    return REMAT_OK;
}

/* ---- schedules ---- */

remat_status remat__hjoin_schedule_validate(const remat_hjoin_schedule *s, const char *who,
                                            remat_error *err) {
    REMAT__RETURN_IF(!s, err, REMAT_E_INPUT, "%s: the schedule is NULL", who);
    REMAT__RETURN_IF(s->n_ops && !s->ops, err, REMAT_E_INPUT, "%s: %zu ops but no op array", who,
                     s->n_ops);
    REMAT__RETURN_IF(s->cap && s->n_ops > s->cap, err, REMAT_E_INPUT,
                     "%s: %zu ops, more than the capacity %zu", who, s->n_ops, s->cap);
    REMAT__RETURN_IF(!memchr(s->algorithm, '\0', sizeof s->algorithm), err, REMAT_E_INPUT,
                     "%s: the algorithm is not terminated", who);
    return REMAT_OK;
}

remat_status remat_hjoin_schedule_create(const char *algorithm, remat_hjoin_schedule **out,
                                         remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_schedule_create: out is NULL");
    remat_hjoin_schedule *s = calloc(1, sizeof *s);
    REMAT__RETURN_IF(!s, err, REMAT_E_NOMEM, "join schedule: out of memory");
    remat__strlcpy(s->algorithm, algorithm ? algorithm : "", sizeof s->algorithm);
    *out = s;
    return REMAT_OK;
}

remat_status remat__hjoin_push(remat_hjoin_schedule *s, uint8_t kind, size_t branch,
                               uint32_t index, uint8_t option, remat_error *err) {
    if (s->n_ops == s->cap) {
        REMAT__RETURN_IF(s->cap >= ((size_t)1 << 28), err, REMAT_E_TOO_LARGE,
                         "join schedule: more than %zu ops", (size_t)1 << 28);
        size_t ncap = s->cap ? s->cap * 2 : 64;
        remat_hjoin_op *nd = realloc(s->ops, ncap * sizeof *nd);
        REMAT__RETURN_IF(!nd, err, REMAT_E_NOMEM, "join schedule: out of memory at %zu ops",
                         s->n_ops);
        s->ops = nd;
        s->cap = ncap;
    }
    s->ops[s->n_ops++] = (remat_hjoin_op){kind, (uint8_t)branch, index, option};
    return REMAT_OK;
}

remat_status remat_hjoin_schedule_push(remat_hjoin_schedule *s, remat_hjoin_op op,
                                       remat_error *err) {
    REMAT__FORWARD(remat__hjoin_schedule_validate(s, "remat_hjoin_schedule_push", err));
    REMAT__RETURN_IF(s->n_ops > s->cap || (s->n_ops && !s->cap), err, REMAT_E_INPUT,
                     "remat_hjoin_schedule_push: the schedule was not made by the library");
    return remat__hjoin_push(s, op.kind, op.branch, op.index, op.option, err);
}

void remat_hjoin_schedule_free(remat_hjoin_schedule *s) {
    if (!s) return;
    free(s->ops);
    free(s);
}

#define OPS_PER_LINE 8
#define OP_TEXT_CAP 64

remat_status remat_hjoin_schedule_to_json(const remat_hjoin_schedule *s, char **out,
                                          remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_schedule_to_json: NULL argument");
    REMAT__FORWARD(remat__hjoin_schedule_validate(s, "remat_hjoin_schedule_to_json", err));
    REMAT__RETURN_IF(!isfinite(s->time) || s->time < 0, err, REMAT_E_INPUT,
                     "join schedule: time: %g is not a finite number >= 0", s->time);
    remat__buf b = {0};
    remat__buf_printf(&b, "{\n  \"format\": \"%s\",\n  ", HJOIN_SCHEDULE_FORMAT);
    put_text(&b, "algorithm", s->algorithm);
    remat__buf_printf(&b, ",\n  \"memory_limit\": %llu,\n  \"time\": ",
                      (unsigned long long)s->memory_limit);
    remat__json_number(&b, s->time);
    remat__buf_printf(&b, ",\n  \"peak_bytes\": %llu,\n  \"ops\": [",
                      (unsigned long long)s->peak_bytes);
    for (size_t k = 0; k < s->n_ops; k++) {
        char text[REMAT_HJOIN_OP_TEXT_MAX];
        remat_hjoin_op_format(s->ops[k], text);
        const char *sep = k == 0 ? "\n    " : k % OPS_PER_LINE == 0 ? ",\n    " : ", ";
        remat__buf_printf(&b, "%s\"%s\"", sep, text);
    }
    remat__buf_printf(&b, s->n_ops ? "\n  ]\n}\n" : "]\n}\n");
    return remat__buf_finish(&b, out, err);
}

remat_status remat_hjoin_schedule_save(const remat_hjoin_schedule *s, const char *path,
                                       remat_error *err) {
    REMAT__RETURN_IF(!path, err, REMAT_E_INPUT, "remat_hjoin_schedule_save: path is NULL");
    char *text;
    REMAT__FORWARD(remat_hjoin_schedule_to_json(s, &text, err));
    remat_status st = remat_write_file(path, text, strlen(text), err);
    remat_free(text);
    return st;
}

static remat_status read_ops(const remat__jdoc *d, const cJSON *v, remat_hjoin_schedule *s) {
    REMAT__RETURN_IF(!cJSON_IsArray(v), d->err, REMAT_E_INPUT,
                     "%s: ops: expected an array, got %s", d->src, remat__json_type_name(v));
    size_t count = remat__json_count(v);
    s->ops = remat__calloc(count ? count : 1, sizeof *s->ops);
    REMAT__RETURN_IF(!s->ops, d->err, REMAT_E_NOMEM, "%s: out of memory for %zu ops", d->src,
                     count);
    s->cap = count ? count : 1;
    const cJSON *o;
    cJSON_ArrayForEach(o, v) {
        size_t k = s->n_ops;
        REMAT__RETURN_IF(!cJSON_IsString(o), d->err, REMAT_E_INPUT,
                         "%s: ops[%zu]: expected a string, got %s", d->src, k,
                         remat__json_type_name(o));
        char text[OP_TEXT_CAP], where[48];
        snprintf(where, sizeof where, "ops[%zu]", k);
        REMAT__FORWARD(remat__json_string(d, o, "", where, text, sizeof text));
        remat_error why;
        REMAT__RETURN_IF(remat_hjoin_op_parse(text, &s->ops[k], &why) != REMAT_OK, d->err,
                         REMAT_E_INPUT, "%s: ops[%zu]: %s", d->src, k, why.message);
        s->n_ops = k + 1;
    }
    return REMAT_OK;
}

enum { K_ALGORITHM, K_LIMIT, K_TIME, K_PEAK, K_OPS, K_COUNT };
static const char *const sched_keys[K_COUNT] = {"algorithm", "memory_limit", "time",
                                                "peak_bytes", "ops"};

static remat_status schedule_fields(remat__jdoc *d, remat_hjoin_schedule *s) {
    unsigned seen = 0;
    remat_status st = REMAT_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, d->root) {
        const char *key = m->string;
        switch (remat__json_member(sched_keys, K_COUNT, key, &seen)) {
        case K_ALGORITHM:
            st = remat__json_string(d, m, "", key, s->algorithm, sizeof s->algorithm);
            break;
        case K_LIMIT: st = remat__json_bytes(d, m, "", key, &s->memory_limit); break;
        case K_TIME: st = remat__json_time(d, m, "", key, &s->time); break;
        case K_PEAK: st = remat__json_bytes(d, m, "", key, &s->peak_bytes); break;
        case K_OPS: st = read_ops(d, m, s); break;
        default: break;
        }
        if (st != REMAT_OK) break;
    }
    remat__jdoc_free(d);
    REMAT__FORWARD(st);
    REMAT__RETURN_IF(!(seen & (1u << K_OPS)), d->err, REMAT_E_INPUT,
                     "%s: ops: missing required field", d->src);
    return REMAT_OK;
}

static remat_status schedule_of(remat__jdoc *d, remat_hjoin_schedule **out) {
    remat_hjoin_schedule *s = calloc(1, sizeof *s);
    remat_status st = s ? schedule_fields(d, s)
                        : remat__fail(d->err, REMAT_E_NOMEM, "%s: out of memory", d->src);
    remat__jdoc_free(d);
    if (st != REMAT_OK) {
        remat_hjoin_schedule_free(s);
        return st;
    }
    *out = s;
    return REMAT_OK;
}

remat_status remat_hjoin_schedule_from_json(const char *text, size_t len, const char *source,
                                            remat_hjoin_schedule **out, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_hjoin_schedule_from_json: out is NULL");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_parse(&d, text, len, source ? source : "<string>",
                                     HJOIN_SCHEDULE_FORMAT, err));
    return schedule_of(&d, out);
}

remat_status remat_hjoin_schedule_load(const char *path, remat_hjoin_schedule **out,
                                       remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT,
                     "remat_hjoin_schedule_load: NULL argument");
    remat__jdoc d;
    REMAT__FORWARD(remat__json_load(&d, path, HJOIN_SCHEDULE_FORMAT, err));
    return schedule_of(&d, out);
}

int remat_hjoin_schedule_is_json(const char *text, size_t len) {
    return text && remat__json_has_format(text, len, HJOIN_SCHEDULE_FORMAT);
}
