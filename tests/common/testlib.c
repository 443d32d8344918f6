#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

uint64_t test_rng_next(test_rng *r) {
    /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t test_rng_range(test_rng *r, uint64_t lo, uint64_t hi) {
    if (hi <= lo) return lo;
    return lo + test_rng_next(r) % (hi - lo + 1);
}

double test_rng_unit(test_rng *r) { return (double)(test_rng_next(r) >> 11) / 9007199254740992.0; }

remat_stage test_stage_full(double fwd, double bwd, uint64_t out, uint64_t saved, uint64_t grad,
                            uint64_t fwd_overhead, uint64_t bwd_overhead) {
    remat_stage s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "s");
    s.fwd_time = fwd;
    s.bwd_time = bwd;
    s.out_bytes = out;
    s.saved_bytes = saved;
    s.grad_bytes = grad;
    s.fwd_overhead = fwd_overhead;
    s.bwd_overhead = bwd_overhead;
    return s;
}

remat_stage test_stage(double fwd, double bwd, uint64_t out, uint64_t saved) {
    return test_stage_full(fwd, bwd, out, saved, out, 0, 0);
}

/* Partial saves of stage s: each keeps between out_bytes and a little more
 * than the full save, and its backward takes longer by up to a forward. */
static void random_options(test_rng *r, const test_chain_spec *spec, size_t most, remat_stage *s,
                           uint64_t lo, uint64_t mx) {
    size_t k = (size_t)test_rng_range(r, 0, most);
    if (k == 0) return;
    s->options = calloc(k, sizeof *s->options);
    if (!s->options) { fprintf(stderr, "OOM\n"); exit(3); }
    s->n_options = k;
    for (size_t j = 0; j < k; j++) {
        remat_stage_option *o = &s->options[j];
        snprintf(o->name, sizeof o->name, "o%zu", j + 1);
        o->saved_bytes = test_rng_range(r, s->out_bytes, s->saved_bytes + (lo ? 1 : 0));
        o->bwd_time = s->bwd_time + (spec->int_times ? (double)test_rng_range(r, 0, 10)
                                                     : s->fwd_time * test_rng_unit(r));
        o->fall_overhead = test_rng_range(r, 0, mx);
        o->bwd_overhead = test_rng_range(r, 0, mx);
    }
}

remat_chain *test_random_chain(test_rng *r, const test_chain_spec *spec) {
    return test_random_chain_with(r, spec, NULL);
}

remat_chain *test_random_chain_with(test_rng *r, const test_chain_spec *spec,
                                    const test_option_spec *x) {
    remat_stage *st = calloc(spec->n, sizeof *st);
    if (!st) { fprintf(stderr, "OOM\n"); exit(3); }
    uint64_t lo = spec->zero_sizes ? 0 : 1, mx = spec->max_bytes ? spec->max_bytes : 10;
    for (size_t i = 0; i < spec->n; i++) {
        remat_stage *s = &st[i];
        snprintf(s->name, sizeof s->name, "s%zu", i + 1);
        if (spec->int_times) {
            s->fwd_time = (double)test_rng_range(r, 0, 10);
            s->bwd_time = (double)test_rng_range(r, 0, 10);
        } else {
            s->fwd_time = 0.1 + 10 * test_rng_unit(r);
            s->bwd_time = 0.1 + 20 * test_rng_unit(r);
        }
        s->out_bytes = test_rng_range(r, lo, mx);
        s->saved_bytes = s->out_bytes + test_rng_range(r, 0, 2 * mx);
        s->grad_bytes = spec->grad_sizes ? test_rng_range(r, lo, mx) : s->out_bytes;
        if (spec->overheads) {
            s->fwd_overhead = test_rng_range(r, 0, mx);
            s->bwd_overhead = test_rng_range(r, 0, mx);
        }
        if (x && x->fall_overheads && test_rng_range(r, 0, 1)) {
            s->has_fall_overhead = 1;
            s->fall_overhead = test_rng_range(r, 0, mx);
        }
        if (x && x->options) random_options(r, spec, x->options, s, lo, mx);
    }
    uint64_t in = test_rng_range(r, lo, mx);
    uint64_t ing = spec->grad_sizes ? test_rng_range(r, lo, mx) : in;
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("random", in, ing, st, spec->n, &c, &e) != REMAT_OK) {
        fprintf(stderr, "test_random_chain: %s\n", e.message);
        exit(3);
    }
    for (size_t i = 0; i < spec->n; i++) free(st[i].options); /* the chain has its own copy */
    free(st);
    return c;
}

remat_chain *test_with_stops(test_rng *r, const remat_chain *c, int mode, uint64_t max_bytes) {
    remat_stage *st = calloc(c->n, sizeof *st);
    if (!st) { fprintf(stderr, "OOM\n"); exit(3); }
    memcpy(st, c->stages, c->n * sizeof *st); /* options: the chain's, copied by create */
    for (size_t i = 0; i + 1 < c->n; i++) {
        remat_stage *s = &st[i];
        if (mode == TEST_STOPS_DEFAULTS) {
            s->stop_time = s->fwd_time;
            s->stop_saved_bytes = s->saved_bytes;
            s->stop_overhead = s->fall_overhead;
            s->has_stop_time = s->has_stop_saved_bytes = s->has_stop_overhead = 1;
            continue;
        }
        s->has_stop_time = (int)test_rng_range(r, 0, 1);
        s->has_stop_saved_bytes = (int)test_rng_range(r, 0, 1);
        s->has_stop_overhead = (int)test_rng_range(r, 0, 1);
        s->stop_time = s->fwd_time * test_rng_unit(r);
        s->stop_saved_bytes = test_rng_range(r, 0, s->saved_bytes);
        uint64_t saved = s->has_stop_saved_bytes ? s->stop_saved_bytes : s->saved_bytes;
        uint64_t room = s->saved_bytes + s->fall_overhead - saved; /* benign: at most this */
        s->stop_overhead = test_rng_range(r, 0, mode == TEST_STOPS_BENIGN
                                                    ? room
                                                    : s->fall_overhead + max_bytes);
    }
    remat_chain *v = test_chain_like(c, st);
    free(st);
    return v;
}

remat_chain *test_chain_like(const remat_chain *c, const remat_stage *st) {
    remat_chain *v = NULL;
    remat_error e;
    if (remat_chain_create(c->name, c->input_bytes, c->input_grad_bytes, st, c->n, &v, &e) !=
        REMAT_OK) {
        fprintf(stderr, "test_chain_like: %s\n", e.message);
        exit(3);
    }
    return v;
}

int test_same_ops(const remat_schedule *a, const remat_schedule *b) {
    if (!a || !b) return a == b;
    if (a->n_ops != b->n_ops) return 0;
    for (size_t k = 0; k < a->n_ops; k++) {
        remat_op x = a->ops[k], y = b->ops[k];
        if (x.kind != y.kind || x.value != y.value || x.index != y.index || x.option != y.option)
            return 0;
    }
    return 1;
}

void test_ops_text(const remat_schedule *s, const char *sep, char *out, size_t cap) {
    size_t len = 0;
    if (cap) out[0] = '\0';
    for (size_t k = 0; k < s->n_ops && len < cap; k++) {
        char t[REMAT_OP_TEXT_MAX];
        remat_op_format(s->ops[k], t);
        len += (size_t)snprintf(out + len, cap - len, "%s%s", k ? sep : "", t);
    }
}

int test_schedule_ok(const remat_chain *c, const remat_schedule *s, uint64_t limit) {
    remat_sim_result *r = NULL;
    remat_error e;
    if (remat_simulate(c, s, NULL, &r, &e) != REMAT_OK) {
        fprintf(stderr, "  simulate failed: %s\n", e.message);
        return 0;
    }
    int ok = 1;
    if (!r->valid) {
        fprintf(stderr, "  %s: invalid at op %zu (%s): %s\n", s->algorithm, r->failed_op,
                r->failed_op_text, r->reason);
        ok = 0;
    } else if (r->peak_bytes > limit) {
        fprintf(stderr, "  %s: peak %llu > limit %llu\n", s->algorithm,
                (unsigned long long)r->peak_bytes, (unsigned long long)limit);
        ok = 0;
    } else if (fabs(r->time - s->time) > 1e-9 * (1 + fabs(r->time))) {
        fprintf(stderr, "  %s: predicted time %.17g, simulated %.17g\n", s->algorithm, s->time,
                r->time);
        ok = 0;
    }
    remat_sim_result_free(r);
    return ok;
}
