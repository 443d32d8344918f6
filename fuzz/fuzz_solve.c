/* libFuzzer target: the solvers on small chains decoded from the bytes, with
 * extreme sizes and times and any memory limit. Every schedule remat_solve()
 * returns must replay valid with peak <= the limit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

static const uint64_t sizes[] = {0, 1, 2, 3, 7, 10, 100, 1000, 4096, 1u << 20,
                                 (uint64_t)1 << 40, (uint64_t)1 << 52,
                                 ((uint64_t)1 << 53) - 1, ((uint64_t)1 << 53) - 2, 5, 64};
static const double times[] = {0, 1, 2, 0.5, 3, 1e300, 1e-300, 100, 1e-9, 7, 1e15, 1.5};
static const double bandwidths[] = {1, 1e300, 1e-300, 1e6, 0.25, 100, 3, 1e-6};

static uint64_t size_of(reader *r) {
    unsigned b = byte(r);
    if (b < 0xf0) return sizes[b % 16];
    return byte(r) | (uint64_t)byte(r) << 8; /* a small arbitrary size */
}

static double time_of(reader *r) { return times[byte(r) % 12]; }

/* Partial saves and fall_overhead of stage s, when the bytes ask for them. */
static void decode_options(reader *r, remat_stage *s, remat_stage_option *opts) {
    if (byte(r) & 1) {
        s->has_fall_overhead = 1;
        s->fall_overhead = size_of(r);
    }
    s->n_options = byte(r) % 3;
    s->options = opts;
    for (size_t k = 0; k < s->n_options; k++) {
        opts[k].saved_bytes = s->out_bytes;
        uint64_t extra = size_of(r);
        if (extra < ((uint64_t)1 << 53) - s->out_bytes) opts[k].saved_bytes += extra;
        opts[k].bwd_time = time_of(r);
        opts[k].fall_overhead = byte(r) & 1 ? size_of(r) : 0;
        opts[k].bwd_overhead = byte(r) & 1 ? size_of(r) : 0;
    }
}

/* with_options: stages may have partial saves and a fall_overhead. */
static remat_chain *decode_chain(reader *r, int with_options) {
    size_t n = 1 + byte(r) % 6;
    remat_stage st[6];
    remat_stage_option opts[6][2];
    memset(st, 0, sizeof st);
    memset(opts, 0, sizeof opts);
    uint64_t in = size_of(r), ing = size_of(r);
    for (size_t i = 0; i < n; i++) {
        st[i].fwd_time = time_of(r);
        st[i].bwd_time = time_of(r);
        st[i].out_bytes = size_of(r);
        st[i].saved_bytes = st[i].out_bytes;
        uint64_t extra = size_of(r);
        if (extra < ((uint64_t)1 << 53) - st[i].saved_bytes) st[i].saved_bytes += extra;
        st[i].grad_bytes = byte(r) & 1 ? st[i].out_bytes : size_of(r);
        st[i].fwd_overhead = byte(r) & 1 ? size_of(r) : 0;
        st[i].bwd_overhead = byte(r) & 1 ? size_of(r) : 0;
        if (with_options) decode_options(r, &st[i], opts[i]);
    }
    remat_chain *c = NULL;
    remat_error e;
    if (remat_chain_create("fuzz", in, ing, st, n, &c, &e) != REMAT_OK) {
        CHECK(e.message[0]);
        return NULL;
    }
    return c;
}

static void check_schedule(const remat_chain *c, const remat_schedule *s, uint64_t limit,
                           double bandwidth) {
    remat_sim_options so;
    remat_sim_options_init(&so);
    so.bandwidth = bandwidth;
    remat_sim_result *r = NULL;
    remat_error e;
    CHECK(remat_simulate(c, s, &so, &r, &e) == REMAT_OK);
    if (!r->valid) fprintf(stderr, "%s: invalid at op %zu: %s\n", s->algorithm, r->failed_op, r->reason);
    CHECK(r->valid);
    if (r->peak_bytes > limit)
        fprintf(stderr, "%s: peak %llu > limit %llu\n", s->algorithm,
                (unsigned long long)r->peak_bytes, (unsigned long long)limit);
    CHECK(r->peak_bytes <= limit);
    remat_sim_result_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader rd = {data, size};
    remat_solve_options o;
    remat_solve_options_init(&o);
    unsigned a = byte(&rd) % 10;
    o.algorithm = a == 9 ? REMAT_ALG_OPTIMAL : (remat_algorithm)a;
    if (a == 0) o.slots = 0;
    if (a == 9) o.slots = byte(&rd) & 1 ? -1 : (int64_t)(1 + byte(&rd) % 50);
    o.threads = 1;
    o.max_work_bytes = 64u << 20;
    o.segments = byte(&rd) % 4;
    o.revolve_mode = (remat_revolve_mode)(byte(&rd) % 3);
    o.exact_no_del = byte(&rd) & 1;
    o.offload_values = byte(&rd) % 8;
    if (remat_algorithm_is_offload(o.algorithm)) o.bandwidth = bandwidths[byte(&rd) % 8];
    /* FUZZ_SKIP=pofo,exact leaves out algorithms with a known open finding. */
    const char *skip = getenv("FUZZ_SKIP");
    if (skip && strstr(skip, remat_algorithm_name(o.algorithm))) return 0;
    unsigned lim = byte(&rd);
    remat_chain *c = decode_chain(&rd, 1); /* with partial saves and fall_overhead */
    if (!c) return 0;
    if (o.algorithm == REMAT_ALG_EXACT && c->n > 4) {
        remat_chain_free(c);
        return 0;
    }

    uint64_t peak = 0;
    double t = 0;
    remat_error e;
    remat_status st = remat_store_all_cost(c, &peak, &t, &e);
    if (st != REMAT_OK) {
        CHECK(e.message[0]);
        remat_chain_free(c);
        return 0;
    }
    switch (lim % 8) {
    case 0: o.memory = 0; break;
    case 1: o.memory = ((uint64_t)1 << 53) - 1; break;
    case 2: o.memory = peak; break;
    case 3: o.memory = peak ? peak - 1 : 0; break;
    case 4: o.memory = peak / 2; break;
    case 5: o.memory = peak - peak / 4; break;
    case 6: o.memory = peak + (byte(&rd) | (uint64_t)byte(&rd) << 8); break;
    default: o.memory = size_of(&rd); break;
    }

    if (getenv("FUZZ_SOLVE_PRINT")) { /* to turn a finding into a CLI reproducer */
        char *json = NULL;
        if (remat_chain_to_json(c, &json, &e) == REMAT_OK) fprintf(stderr, "%s", json);
        remat_free(json);
        fprintf(stderr, "algorithm %s memory %llu slots %lld segments %u mode %d no_del %d "
                "bandwidth %g offload_values %u\n", remat_algorithm_name(o.algorithm),
                (unsigned long long)o.memory, (long long)o.slots, o.segments,
                (int)o.revolve_mode, o.exact_no_del, o.bandwidth, o.offload_values);
    }
    remat_schedule *s = NULL;
    st = remat_solve(c, &o, &s, &e);
    if (st == REMAT_OK) {
        CHECK(s != NULL);
        check_schedule(c, s, o.memory, o.bandwidth);
        remat_schedule_free(s);
    } else {
        CHECK(s == NULL);
        CHECK(e.status == st && e.message[0]);
        if (st == REMAT_E_INTERNAL) {
            fprintf(stderr, "internal error: %s\n", e.message);
            abort();
        }
    }
    remat_chain_free(c);
    return 0;
}
