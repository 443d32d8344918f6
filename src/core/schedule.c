/* Schedules: the op array, op text and algorithm names. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

remat_status remat_schedule_create(const char *algorithm, remat_schedule **out, remat_error *err) {
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_schedule_create: out is NULL");
    *out = NULL;
    /* copied into a fixed field: refused, never cut short */
    REMAT__RETURN_IF(algorithm && strlen(algorithm) >= REMAT_ALGORITHM_MAX, err, REMAT_E_INPUT,
                     "remat_schedule_create: algorithm: %zu bytes long, more than the limit of %d",
                     strlen(algorithm), REMAT_ALGORITHM_MAX - 1);
    *out = calloc(1, sizeof **out);
    REMAT__RETURN_IF(!*out, err, REMAT_E_NOMEM, "schedule: out of memory");
    remat__strlcpy((*out)->algorithm, algorithm ? algorithm : "", REMAT_ALGORITHM_MAX);
    return REMAT_OK;
}

remat_status remat__schedule_validate(const remat_schedule *s, const char *who,
                                      remat_error *err) {
    REMAT__RETURN_IF(!s, err, REMAT_E_INPUT, "%s: the schedule is NULL", who);
    REMAT__RETURN_IF(s->n_ops && !s->ops, err, REMAT_E_INPUT, "%s: the schedule has %zu ops but no "
                     "op array", who, s->n_ops);
    REMAT__RETURN_IF(s->cap && s->n_ops > s->cap, err, REMAT_E_INPUT,
                     "%s: the schedule has %zu ops, more than its capacity %zu", who, s->n_ops,
                     s->cap);
    REMAT__RETURN_IF(!memchr(s->algorithm, '\0', sizeof s->algorithm), err, REMAT_E_INPUT,
                     "%s: the schedule's algorithm is not terminated", who);
    return REMAT_OK;
}

remat_status remat_schedule_push(remat_schedule *s, remat_op op, remat_error *err) {
    REMAT__RETURN_IF(!s, err, REMAT_E_INPUT, "remat_schedule_push: schedule is NULL");
    /* only ops that have a text: the writer and the reader must agree */
    REMAT__RETURN_IF(op.kind > REMAT_OP_WAIT, err, REMAT_E_INPUT,
                     "remat_schedule_push: op kind %u is not a remat_op_kind (0..%d)",
                     (unsigned)op.kind, (int)REMAT_OP_WAIT);
    REMAT__RETURN_IF(op.value > REMAT_VALUE_ABAR, err, REMAT_E_INPUT,
                     "remat_schedule_push: op value %u is not a remat_value_kind (0..%d)",
                     (unsigned)op.value, (int)REMAT_VALUE_ABAR);
    /* Only schedules grown here (cap set by this function) can grow. */
    REMAT__RETURN_IF(s->n_ops > s->cap || (s->cap && !s->ops), err, REMAT_E_INPUT,
                     "remat_schedule_push: the schedule's n_ops/cap/ops are inconsistent");
    if (s->n_ops == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        remat_op *nd = NULL;
        size_t bytes;
        if (remat__mul_size(ncap, sizeof *nd, &bytes)) nd = realloc(s->ops, bytes);
        REMAT__RETURN_IF(!nd, err, REMAT_E_NOMEM, "schedule: out of memory at %zu ops", s->n_ops);
        s->ops = nd;
        s->cap = ncap;
    }
    s->ops[s->n_ops++] = op;
    return REMAT_OK;
}

void remat_schedule_free(remat_schedule *s) {
    if (!s) return;
    free(s->ops);
    free(s);
}

static const char *const op_names[] = {"Fn", "Fck", "Fall", "B", "Del", "Off", "Pre", "Wait"};

void remat_op_format(remat_op op, char out[REMAT_OP_TEXT_MAX]) {
    if (!out) return;
    if (op.kind > REMAT_OP_WAIT) {
        snprintf(out, REMAT_OP_TEXT_MAX, "?");
    } else if (op.kind <= REMAT_OP_B && op.option) {
        snprintf(out, REMAT_OP_TEXT_MAX, "%s %u/%u", op_names[op.kind], (unsigned)op.index,
                 (unsigned)op.option);
    } else if (op.kind <= REMAT_OP_B) {
        snprintf(out, REMAT_OP_TEXT_MAX, "%s %u", op_names[op.kind], (unsigned)op.index);
    } else {
        snprintf(out, REMAT_OP_TEXT_MAX, "%s %s[%u]", op_names[op.kind],
                 op.value == REMAT_VALUE_ABAR ? "abar" : "a", (unsigned)op.index);
    }
}

/* Parses a decimal index with no sign, no leading junk, below 2^32. */
static int parse_index(const char *p, const char **end, uint32_t *out) {
    uint64_t v = 0;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX) return 0;
        p++;
    }
    *out = (uint32_t)v;
    *end = p;
    return 1;
}

remat_status remat_op_parse(const char *text, remat_op *out, remat_error *err) {
    REMAT__RETURN_IF(!text || !out, err, REMAT_E_INPUT, "remat_op_parse: NULL argument");
    const char *sp = strchr(text, ' ');
    REMAT__RETURN_IF(!sp, err, REMAT_E_INPUT, "op \"%.40s\": expected \"KIND ARG\"", text);
    size_t klen = (size_t)(sp - text);
    int kind = -1;
    for (int k = 0; k <= REMAT_OP_WAIT; k++)
        if (strlen(op_names[k]) == klen && memcmp(op_names[k], text, klen) == 0) kind = k;
    REMAT__RETURN_IF(kind < 0, err, REMAT_E_INPUT, "op \"%.40s\": unknown op kind", text);
    const char *p = sp + 1, *end = NULL;
    remat_op op = {(uint8_t)kind, 0, 0, 0};
    if (kind <= REMAT_OP_B) {
        REMAT__RETURN_IF(!parse_index(p, &end, &op.index) || (*end && *end != '/'), err,
                         REMAT_E_INPUT, "op \"%.40s\": expected a stage number", text);
        if (*end == '/') {
            uint32_t k = 0;
            REMAT__RETURN_IF(kind != REMAT_OP_FALL, err, REMAT_E_INPUT,
                             "op \"%.40s\": only Fall takes an option (\"Fall i/k\")", text);
            REMAT__RETURN_IF(!parse_index(end + 1, &end, &k) || *end || k > UINT8_MAX, err,
                             REMAT_E_INPUT, "op \"%.40s\": expected an option number 0..%d "
                             "after the '/'", text, UINT8_MAX);
            op.option = (uint8_t)k;
        }
    } else {
        if (strncmp(p, "abar[", 5) == 0) {
            op.value = REMAT_VALUE_ABAR;
            p += 5;
        } else if (strncmp(p, "a[", 2) == 0) {
            op.value = REMAT_VALUE_A;
            p += 2;
        } else {
            return remat__fail(err, REMAT_E_INPUT, "op \"%.40s\": expected a[i] or abar[i]", text);
        }
        REMAT__RETURN_IF(!parse_index(p, &end, &op.index) || end[0] != ']' || end[1], err,
                         REMAT_E_INPUT, "op \"%.40s\": expected a[i] or abar[i]", text);
    }
    *out = op;
    return REMAT_OK;
}
