/* The chain model: creation, validation and size accessors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The accessors answer 0 for a NULL chain or an index past n. */
uint64_t remat_chain_a_bytes(const remat_chain *c, size_t i) {
    if (!c || i > c->n || c->n > REMAT_MAX_STAGES || (i && !c->stages)) return 0;
    return i == 0 ? c->input_bytes : c->stages[i - 1].out_bytes;
}

uint64_t remat_chain_abar_bytes(const remat_chain *c, size_t i) {
    if (!c || i > c->n || c->n > REMAT_MAX_STAGES || (i && !c->stages)) return 0;
    return i == 0 ? c->input_bytes : c->stages[i - 1].saved_bytes;
}

uint64_t remat_chain_d_bytes(const remat_chain *c, size_t i) {
    if (!c) return 0;
    if (i == 0) return c->input_grad_bytes;
    return i >= c->n || c->n > REMAT_MAX_STAGES || !c->stages ? 0 : c->stages[i - 1].grad_bytes;
}

static remat_status check_time(double v, const char *src, size_t i, const char *field,
                               remat_error *err) {
    REMAT__RETURN_IF(!isfinite(v), err, REMAT_E_INPUT, "%s: stages[%zu].%s: not a finite number",
                     src, i, field);
    REMAT__RETURN_IF(v < 0, err, REMAT_E_INPUT, "%s: stages[%zu].%s: negative time %g", src, i,
                     field, v);
    return REMAT_OK;
}

static remat_status check_bytes(uint64_t v, const char *src, size_t i, const char *field,
                                remat_error *err) {
    REMAT__RETURN_IF(v >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: stages[%zu].%s: size %llu is 2^53 or more", src, i, field,
                     (unsigned long long)v);
    return REMAT_OK;
}

/* "options[k].field", the name of a field of option k + 1 in messages. */
static const char *option_field(char *buf, size_t cap, size_t k, const char *field) {
    snprintf(buf, cap, "options[%zu].%s", k, field);
    return buf;
}

/* Validates option k (index k counts from 0, as in the JSON array: it is
 * option k + 1) of stage i. */
static remat_status check_option(const remat_stage *s, const char *src, size_t i, size_t k,
                                 remat_error *err) {
    const remat_stage_option *o = &s->options[k];
    char f[64];
    REMAT__RETURN_IF(!memchr(o->name, '\0', sizeof o->name), err, REMAT_E_INPUT,
                     "%s: stages[%zu].options[%zu].name: not terminated within %d bytes", src, i,
                     k, REMAT_OPTION_NAME_MAX);
    size_t bad = remat__utf8_invalid_at(o->name);
    REMAT__RETURN_IF(bad != SIZE_MAX, err, REMAT_E_INPUT,
                     "%s: stages[%zu].options[%zu].name: not valid UTF-8 (byte %zu is 0x%02X)", src,
                     i, k, bad, (unsigned)(unsigned char)o->name[bad]);
    REMAT__FORWARD(check_time(o->bwd_time, src, i, option_field(f, sizeof f, k, "bwd_time"), err));
    REMAT__FORWARD(
        check_bytes(o->saved_bytes, src, i, option_field(f, sizeof f, k, "saved_bytes"), err));
    REMAT__FORWARD(
        check_bytes(o->fall_overhead, src, i, option_field(f, sizeof f, k, "fall_overhead"), err));
    REMAT__FORWARD(
        check_bytes(o->bwd_overhead, src, i, option_field(f, sizeof f, k, "bwd_overhead"), err));
    REMAT__RETURN_IF(o->saved_bytes < s->out_bytes, err, REMAT_E_INPUT,
                     "%s: stages[%zu].options[%zu].saved_bytes: %llu is less than out_bytes %llu",
                     src, i, k, (unsigned long long)o->saved_bytes,
                     (unsigned long long)s->out_bytes);
    return REMAT_OK;
}

/* A name as the writer will put it in JSON: NUL-terminated within
 * REMAT_NAME_MAX bytes (never cut short) and valid UTF-8. */
static remat_status check_name(const char *name, const char *src, const char *field,
                               remat_error *err) {
    REMAT__RETURN_IF(!memchr(name, '\0', REMAT_NAME_MAX), err, REMAT_E_INPUT,
                     "%s: %s: longer than the limit of %d bytes", src, field,
                     REMAT_NAME_MAX - 1);
    size_t bad = remat__utf8_invalid_at(name);
    REMAT__RETURN_IF(bad != SIZE_MAX, err, REMAT_E_INPUT,
                     "%s: %s: not valid UTF-8 (byte %zu is 0x%02X)", src, field, bad,
                     (unsigned)(unsigned char)name[bad]);
    return REMAT_OK;
}

/* Validates one stage (index i counts from 0, as in the JSON array). */
remat_status remat__stage_validate(const remat_stage *s, const char *src, size_t i,
                                   remat_error *err) {
    char field[48];
    snprintf(field, sizeof field, "stages[%zu].name", i);
    REMAT__FORWARD(check_name(s->name, src, field, err));
    REMAT__FORWARD(check_time(s->fwd_time, src, i, "fwd_time", err));
    REMAT__FORWARD(check_time(s->bwd_time, src, i, "bwd_time", err));
    REMAT__FORWARD(check_bytes(s->out_bytes, src, i, "out_bytes", err));
    REMAT__FORWARD(check_bytes(s->saved_bytes, src, i, "saved_bytes", err));
    REMAT__FORWARD(check_bytes(s->grad_bytes, src, i, "grad_bytes", err));
    REMAT__FORWARD(check_bytes(s->fwd_overhead, src, i, "fwd_overhead", err));
    REMAT__FORWARD(check_bytes(s->bwd_overhead, src, i, "bwd_overhead", err));
    if (s->has_fall_overhead)
        REMAT__FORWARD(check_bytes(s->fall_overhead, src, i, "fall_overhead", err));
    REMAT__RETURN_IF(s->saved_bytes < s->out_bytes, err, REMAT_E_INPUT,
                     "%s: stages[%zu].saved_bytes: %llu is less than out_bytes %llu", src, i,
                     (unsigned long long)s->saved_bytes, (unsigned long long)s->out_bytes);
    if (s->has_stop_time) {
        REMAT__FORWARD(check_time(s->stop_time, src, i, "stop_time", err));
        REMAT__RETURN_IF(s->stop_time > s->fwd_time, err, REMAT_E_INPUT,
                         "%s: stages[%zu].stop_time: %g is more than fwd_time %g", src, i,
                         s->stop_time, s->fwd_time);
    }
    if (s->has_stop_saved_bytes) {
        REMAT__FORWARD(check_bytes(s->stop_saved_bytes, src, i, "stop_saved_bytes", err));
        REMAT__RETURN_IF(s->stop_saved_bytes > s->saved_bytes, err, REMAT_E_INPUT,
                         "%s: stages[%zu].stop_saved_bytes: %llu is more than saved_bytes %llu",
                         src, i, (unsigned long long)s->stop_saved_bytes,
                         (unsigned long long)s->saved_bytes);
    }
    if (s->has_stop_overhead)
        REMAT__FORWARD(check_bytes(s->stop_overhead, src, i, "stop_overhead", err));
    REMAT__RETURN_IF(s->n_options > REMAT_MAX_OPTIONS, err, REMAT_E_INPUT,
                     "%s: stages[%zu].options: %zu options, more than the limit of %u", src, i,
                     s->n_options, REMAT_MAX_OPTIONS);
    REMAT__RETURN_IF(s->n_options && !s->options, err, REMAT_E_INPUT,
                     "%s: stages[%zu].options: %zu options but no option array", src, i,
                     s->n_options);
    for (size_t k = 0; k < s->n_options; k++) REMAT__FORWARD(check_option(s, src, i, k, err));
    return REMAT_OK;
}

/* Every byte count the simulator and the solvers add up (values held, plus
 * overheads, plus a limit below 2^53) stays below this sum; capping it at 2^62
 * keeps all of that arithmetic inside 64 bits without checks on each add. */
static int total_fits(uint64_t input_bytes, uint64_t input_grad_bytes, const remat_stage *stages,
                      size_t n) {
    const uint64_t cap = (uint64_t)1 << 62;
    uint64_t total = input_bytes + input_grad_bytes; /* each < 2^53 */
    for (size_t i = 0; i < n && total < cap; i++) {
        const remat_stage *s = &stages[i];
        total += s->saved_bytes + s->grad_bytes + s->fwd_overhead + s->bwd_overhead;
        if (s->has_fall_overhead) total += s->fall_overhead;
        if (s->has_stop_overhead) total += s->stop_overhead; /* stop_saved <= saved */
        /* each option's sizes, so that any choice of options stays in the bound */
        for (size_t k = 0; k < s->n_options && total < cap; k++)
            total += s->options[k].saved_bytes + s->options[k].fall_overhead +
                     s->options[k].bwd_overhead;
    }
    return total < cap;
}

static remat_status check_chain(const char *src, uint64_t input_bytes, uint64_t input_grad_bytes,
                                const remat_stage *stages, size_t n, remat_error *err) {
    REMAT__RETURN_IF(n == 0, err, REMAT_E_INPUT,
                     "%s: stages: empty; a chain needs at least the loss stage", src);
    REMAT__RETURN_IF(n > REMAT_MAX_STAGES, err, REMAT_E_INPUT,
                     "%s: stages: %zu stages, more than the limit of %u", src, n,
                     REMAT_MAX_STAGES);
    REMAT__RETURN_IF(!stages, err, REMAT_E_INPUT, "remat_chain_create: stages is NULL");
    REMAT__RETURN_IF(input_bytes >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: input_bytes: size %llu is 2^53 or more", src,
                     (unsigned long long)input_bytes);
    REMAT__RETURN_IF(input_grad_bytes >= REMAT_MAX_BYTES, err, REMAT_E_INPUT,
                     "%s: input_grad_bytes: size %llu is 2^53 or more", src,
                     (unsigned long long)input_grad_bytes);
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        REMAT__FORWARD(remat__stage_validate(&stages[i], src, i, err));
        total += stages[i].fwd_time + stages[i].bwd_time;
        for (size_t k = 0; k < stages[i].n_options; k++) total += stages[i].options[k].bwd_time;
    }
    /* The loss' Fall is always followed by its B: it has no stopped form. */
    const remat_stage *loss = &stages[n - 1];
    const char *stop_field = loss->has_stop_time          ? "stop_time"
                             : loss->has_stop_saved_bytes ? "stop_saved_bytes"
                             : loss->has_stop_overhead    ? "stop_overhead"
                                                          : NULL;
    REMAT__RETURN_IF(stop_field, err, REMAT_E_INPUT,
                     "%s: stages[%zu].%s: the loss stage (the last) has no stopped Fall", src,
                     n - 1, stop_field);
    /* Each time is finite, but a schedule's sum may not be: a solver may run
     * each forward up to n times (the quadratic plan), so every time a
     * schedule can take is at most n x total. Half the largest double leaves
     * room for rounding in any order of summation. */
    REMAT__RETURN_IF(!(total * (double)n <= REMAT__MAX_CHAIN_TIME), err, REMAT_E_INPUT,
                     "%s: stages: the times (fwd_time + bwd_time) add up to %g; times %zu "
                     "stages (a schedule may run each forward that often) that passes %g, half "
                     "the largest double",
                     src, total, n, REMAT__MAX_CHAIN_TIME);
    REMAT__RETURN_IF(!total_fits(input_bytes, input_grad_bytes, stages, n), err, REMAT_E_INPUT,
                     "%s: stages: the sizes add up to 2^62 bytes or more", src);
    return REMAT_OK;
}

remat_status remat__chain_validate(const remat_chain *c, const char *who, remat_error *err) {
    REMAT__RETURN_IF(!c, err, REMAT_E_INPUT, "%s: the chain is NULL", who);
    REMAT__RETURN_IF(c->n == 0 || c->n > REMAT_MAX_STAGES || !c->stages, err, REMAT_E_INPUT,
                     "%s: the chain has %zu stages%s", who, c->n,
                     c->stages ? "" : " and no stage array");
    REMAT__RETURN_IF(
        !memchr(c->name, '\0', sizeof c->name) || !memchr(c->time_unit, '\0', sizeof c->time_unit),
        err, REMAT_E_INPUT, "%s: the chain's name or time_unit is not terminated", who);
    for (size_t i = 0; i < c->n; i++)
        REMAT__RETURN_IF(!memchr(c->stages[i].name, '\0', REMAT_NAME_MAX), err, REMAT_E_INPUT,
                         "%s: stages[%zu].name is not terminated", who, i);
    REMAT__FORWARD(check_name(c->name, who, "name", err));
    REMAT__FORWARD(check_chain(who, c->input_bytes, c->input_grad_bytes, c->stages, c->n, err));
    REMAT__RETURN_IF(c->stages[c->n - 1].grad_bytes != 0, err, REMAT_E_INPUT,
                     "%s: stages[%zu].grad_bytes: the loss' gradient (the seed) must be 0", who,
                     c->n - 1);
    return REMAT_OK;
}

remat_status remat_chain_create(const char *name, uint64_t input_bytes, uint64_t input_grad_bytes,
                                const remat_stage *stages, size_t n, remat_chain **out,
                                remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!out, err, REMAT_E_INPUT, "remat_chain_create: out is NULL");
    REMAT__FORWARD(check_chain("chain", input_bytes, input_grad_bytes, stages, n, err));
    remat_stage *st = remat__calloc(n, sizeof *st);
    REMAT__RETURN_IF(!st, err, REMAT_E_NOMEM, "chain: out of memory for %zu stages", n);
    memcpy(st, stages, n * sizeof *st);
    for (size_t i = 0; i < n; i++) st[i].options = NULL; /* the caller's: copied below */
    for (size_t i = 0; i < n; i++) {
        if (!stages[i].n_options) continue;
        st[i].options = remat__calloc(stages[i].n_options, sizeof *st[i].options);
        if (!st[i].options) {
            remat__stages_free(st, n);
            return remat__fail(err, REMAT_E_NOMEM, "chain: out of memory for the options of "
                               "stages[%zu]", i);
        }
        memcpy(st[i].options, stages[i].options, stages[i].n_options * sizeof *st[i].options);
    }
    return remat__chain_adopt("chain", name, input_bytes, input_grad_bytes, st, n, out, err);
}

void remat__stages_free(remat_stage *stages, size_t n) {
    if (!stages) return;
    for (size_t i = 0; i < n; i++) free(stages[i].options);
    free(stages);
}

remat_status remat__chain_adopt(const char *src, const char *name, uint64_t input_bytes,
                                uint64_t input_grad_bytes, remat_stage *stages, size_t n,
                                remat_chain **out, remat_error *err) {
    *out = NULL;
    /* the name is copied into c->name: refused, never cut short */
    remat_status s = !name || strlen(name) < REMAT_NAME_MAX
                         ? REMAT_OK
                         : remat__fail(err, REMAT_E_INPUT,
                                       "%s: name: %zu bytes long, more than the limit of %d", src,
                                       strlen(name), REMAT_NAME_MAX - 1);
    if (s == REMAT_OK && name) s = check_name(name, src, "name", err);
    if (s == REMAT_OK) s = check_chain(src, input_bytes, input_grad_bytes, stages, n, err);
    remat_chain *c = s == REMAT_OK ? calloc(1, sizeof *c) : NULL;
    if (s == REMAT_OK && !c) s = remat__fail(err, REMAT_E_NOMEM, "chain: out of memory");
    if (s != REMAT_OK) {
        remat__stages_free(stages, n);
        return s;
    }
    for (size_t i = 0; i < n; i++) {
        if (!stages[i].has_fall_overhead) stages[i].fall_overhead = stages[i].fwd_overhead;
        stages[i].has_fall_overhead = stages[i].has_fall_overhead != 0;
        if (!stages[i].has_stop_time) stages[i].stop_time = stages[i].fwd_time;
        if (!stages[i].has_stop_saved_bytes) stages[i].stop_saved_bytes = stages[i].saved_bytes;
        if (!stages[i].has_stop_overhead) stages[i].stop_overhead = stages[i].fall_overhead;
        stages[i].has_stop_time = stages[i].has_stop_time != 0;
        stages[i].has_stop_saved_bytes = stages[i].has_stop_saved_bytes != 0;
        stages[i].has_stop_overhead = stages[i].has_stop_overhead != 0;
        if (!stages[i].n_options) {
            free(stages[i].options);
            stages[i].options = NULL;
        }
    }
    stages[n - 1].grad_bytes = 0; /* the seed d[n] counts 0 */
    remat__strlcpy(c->name, name ? name : "", sizeof c->name);
    remat__strlcpy(c->time_unit, "", sizeof c->time_unit);
    c->input_bytes = input_bytes;
    c->input_grad_bytes = input_grad_bytes;
    c->n = n;
    c->stages = stages;
    *out = c;
    return REMAT_OK;
}

int remat__chain_stops_differ(const remat_chain *c) {
    for (size_t i = 0; i + 1 < c->n; i++) {
        const remat_stage *s = &c->stages[i];
        if (remat__stop_time(s) != s->fwd_time || remat__stop_saved(s) != s->saved_bytes ||
            remat__stop_overhead(s) != remat__fall_overhead(s))
            return 1;
    }
    return 0;
}

void remat_chain_free(remat_chain *c) {
    if (!c) return;
    remat__stages_free(c->stages, c->n);
    free(c);
}
