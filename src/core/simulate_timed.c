/* The timed simulator for a host link (SPEC section 2, Offloading).
 *
 * One compute stream runs the compute ops in list order; one copy engine per
 * direction runs copies in the order issued, each starting once the compute op
 * before it in the list has ended and its lane is free. Memory is tracked over
 * time in two parts so that the compute rules stay in remat__sim_apply():
 *   memory(t) = compute-side bytes (st.mem, changed only by compute ops and Del)
 *             + copy deltas up to t (-size when an offload releases X,
 *                                    +size when a prefetch of X starts).
 * A released value stays counted in st.mem (only its held flag is cleared), so
 * recomputing or freeing it later keeps the two parts consistent.
 *
 * Pass 1 replays the ops, fixes every start/end time and checks validity.
 * Pass 2 sorts the copy deltas and takes the peak of memory over time.
 *
 * Per-op figures: for a compute op, mem_during is the largest memory in use
 * while it runs and mem_after the memory in use when it ends; for Off/Pre/Wait
 * both are the memory in use at the compute clock when the op is reached. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_core.h"

enum { CP_NONE = 0, CP_OFFLOADING, CP_HOST, CP_PREFETCHING };

typedef struct copy_state {
    uint8_t state;     /* CP_* */
    uint8_t kind;      /* REMAT__HELD_A / _ABAR of the copy */
    uint8_t option;    /* for abar: the option that made the copied value */
    uint8_t copied;    /* 1 once any copy was issued (for Wait) */
    size_t off_op;     /* op index of the Off */
    double off_end;    /* end of the offload copy */
    double read_end;   /* end of the last op that read X during the offload */
    size_t read_op;
    double release;    /* when the device copy was released */
    double pre_end;    /* end of the prefetch copy */
    double last_end;   /* end of the latest copy of X */
} copy_state;

typedef struct delta {
    double time;
    size_t seq; /* op index that orders deltas at equal times */
    int64_t bytes;
} delta;

typedef struct timing {
    double start, end;
    double at;       /* the compute clock when the op is reached */
    uint64_t during; /* compute-side bytes while the op runs */
    uint64_t after;  /* compute-side bytes after it */
    int compute;     /* 1 for F/B (lane 0), 2 for Del */
} timing;

typedef struct timed {
    const remat_chain *c;
    const remat_schedule *s;
    double bw;
    remat__sim_state st;
    copy_state *cp;  /* [n+1] */
    timing *tm;      /* [n_ops] */
    delta *dl;       /* copy deltas */
    size_t n_dl, cap_dl;
    size_t *pending; /* indices with an offload in flight */
    size_t n_pending;
    remat__timed_op *trace; /* NULL, or [n_ops] for execution plans */
    size_t cur;             /* the op being run (n_ops after the last) */
    double t_c, d2h_free, h2d_free, busy_c, busy_d2h, busy_h2d;
    char why[256];
} timed;

/* Bytes of the value copy x of index i. */
static uint64_t copy_bytes(const remat_chain *c, size_t i, const copy_state *x) {
    return remat__value_bytes(c, i, x->kind, x->option);
}

static const char *kind_name(uint8_t kind) { return kind == REMAT__HELD_ABAR ? "abar" : "a"; }

static int push_delta(timed *T, double time, size_t seq, int64_t bytes) {
    if (T->n_dl == T->cap_dl) {
        size_t cap = T->cap_dl ? 2 * T->cap_dl : 16;
        delta *d = remat__calloc(cap, sizeof *d);
        if (!d) return 0;
        if (T->n_dl) memcpy(d, T->dl, T->n_dl * sizeof *d);
        free(T->dl);
        T->dl = d;
        T->cap_dl = cap;
    }
    T->dl[T->n_dl].time = time;
    T->dl[T->n_dl].seq = seq;
    T->dl[T->n_dl].bytes = bytes;
    T->n_dl++;
    return 1;
}

static void drop_pending(timed *T, size_t i) {
    for (size_t k = 0; k < T->n_pending; k++)
        if (T->pending[k] == i) {
            T->pending[k] = T->pending[--T->n_pending];
            return;
        }
}

/* The offload of value i is over: its device copy is released. */
static int release(timed *T, size_t i) {
    copy_state *x = &T->cp[i];
    double when = x->off_end;
    size_t seq = x->off_op;
    if (x->read_end > when) {
        when = x->read_end;
        seq = x->read_op;
    }
    x->state = CP_HOST;
    x->release = when;
    if (T->trace) T->trace[x->off_op].at = T->cur;
    T->st.val[i] = REMAT__HELD_NONE; /* st.mem keeps the bytes: see the header */
    drop_pending(T, i);
    return push_delta(T, when, seq, -(int64_t)copy_bytes(T->c, i, x));
}

#define FAIL(...)                                        \
    do {                                                 \
        snprintf(T->why, sizeof T->why, __VA_ARGS__);    \
        return 0;                                        \
    } while (0)

/* Values a compute op touches: its input i-1, and i (B reads abar[i]; a
 * forward writes a[i] or abar[i]). */
static int compute_op(timed *T, size_t k, remat_op op) {
    const remat_chain *c = T->c;
    size_t i = op.index;
    if (i < 1 || i > c->n) FAIL("stage %zu is not in 1..%zu", i, c->n);
    int is_b = op.kind == REMAT_OP_B;
    double s = T->t_c;
    /* An op that needs a value still being prefetched waits for it. */
    for (size_t j = i - 1; j <= i; j++)
        if (T->cp[j].state == CP_PREFETCHING) {
            if (j == i && !is_b)
                FAIL("%s[%zu] is being prefetched: a forward may not recompute it",
                     kind_name(T->cp[j].kind), j);
            if (T->cp[j].pre_end > s) s = T->cp[j].pre_end;
            T->cp[j].state = CP_NONE;
        }
    /* A value on the host must come back first. */
    if (T->cp[i - 1].state == CP_HOST && T->st.val[i - 1] == REMAT__HELD_NONE)
        FAIL("needs %s[%zu], which was offloaded (op %zu) and is on the host: Pre it first",
             kind_name(T->cp[i - 1].kind), i - 1, T->cp[i - 1].off_op);
    if (is_b && T->cp[i].state == CP_HOST && T->st.val[i] == REMAT__HELD_NONE)
        FAIL("needs %s[%zu], which was offloaded (op %zu) and is on the host: Pre it first",
             kind_name(T->cp[i].kind), i, T->cp[i].off_op);
    /* Offloads in flight: release those that ended before this op starts;
     * an op may read a value whose copy has not ended yet. */
    for (size_t p = 0; p < T->n_pending;) {
        size_t j = T->pending[p];
        copy_state *x = &T->cp[j];
        int reads = j == i - 1 || (is_b && j == i);
        int writes = j == i && !is_b;
        if ((reads || writes) && s <= x->off_end) {
            if (writes)
                FAIL("forward %zu would rewrite %s[%zu] while it is being offloaded", i,
                     kind_name(x->kind), j);
            int frees = is_b || (op.kind == REMAT_OP_FN && x->kind == REMAT__HELD_A);
            if (frees)
                FAIL("would free %s[%zu] while it is being offloaded (op %zu): Wait it first",
                     kind_name(x->kind), j, x->off_op);
            p++;
            continue;
        }
        if (x->off_end <= s || reads || writes) {
            if (!release(T, j)) FAIL("out of memory");
            if (reads)
                FAIL("needs %s[%zu], whose offload (op %zu) ended at %.6g before this op "
                     "starts at %.6g: Pre it first",
                     kind_name(x->kind), j, x->off_op, x->off_end, s);
            continue; /* release() moved another index into slot p */
        }
        p++;
    }
    uint64_t during;
    double dt;
    char why[256];
    if (!remat__sim_apply(c, &T->st, op, remat__next_op(T->s, k), &during, &dt, why,
                          sizeof why))
        FAIL("%s", why);
    double e = s + dt;
    for (size_t p = 0; p < T->n_pending; p++) {
        size_t j = T->pending[p];
        if (j == i - 1 && T->cp[j].read_end < e) {
            T->cp[j].read_end = e;
            T->cp[j].read_op = k;
        }
    }
    T->tm[k].start = T->tm[k].at = s;
    T->tm[k].end = e;
    T->tm[k].during = during;
    T->tm[k].after = T->st.mem;
    T->tm[k].compute = 1;
    T->busy_c += dt;
    T->t_c = e;
    return 1;
}

/* Checks that X names a value of the chain and returns its index. */
static int value_ok(timed *T, remat_op op, uint8_t *kind) {
    *kind = op.value == REMAT_VALUE_ABAR ? REMAT__HELD_ABAR : REMAT__HELD_A;
    if (op.index > T->c->n || (*kind == REMAT__HELD_ABAR && op.index == 0))
        FAIL("%s[%u] is not a value of this chain", kind_name(*kind), op.index);
    return 1;
}

static int del_op(timed *T, size_t k, remat_op op) {
    uint8_t kind;
    if (!value_ok(T, op, &kind)) return 0;
    copy_state *x = &T->cp[op.index];
    if (x->state == CP_OFFLOADING || x->state == CP_PREFETCHING)
        FAIL("%s[%u] is being copied: Wait it before deleting it", kind_name(kind), op.index);
    uint64_t during;
    double dt;
    char why[256];
    if (!remat__sim_apply(T->c, &T->st, op, NULL, &during, &dt, why, sizeof why)) FAIL("%s", why);
    T->tm[k].start = T->tm[k].end = T->tm[k].at = T->t_c;
    T->tm[k].during = during;
    T->tm[k].after = T->st.mem;
    T->tm[k].compute = 2;
    return 1;
}

static int off_op(timed *T, size_t k, remat_op op) {
    uint8_t kind;
    if (!value_ok(T, op, &kind)) return 0;
    size_t i = op.index;
    copy_state *x = &T->cp[i];
    if (x->state == CP_OFFLOADING || x->state == CP_PREFETCHING)
        FAIL("%s[%zu] is already being copied", kind_name(kind), i);
    if (T->st.val[i] != kind) FAIL("%s[%zu] is not held on the device", kind_name(kind), i);
    double start = T->t_c > T->d2h_free ? T->t_c : T->d2h_free;
    x->state = CP_OFFLOADING;
    x->kind = kind;
    x->option = kind == REMAT__HELD_ABAR ? T->st.opt[i] : 0;
    double dur = (double)copy_bytes(T->c, i, x) / T->bw;
    x->copied = 1;
    x->off_op = k;
    x->off_end = start + dur;
    x->read_end = 0;
    x->read_op = k;
    x->last_end = x->off_end;
    T->pending[T->n_pending++] = i;
    T->tm[k].at = T->t_c;
    T->d2h_free = x->off_end;
    T->busy_d2h += dur;
    T->tm[k].start = start;
    T->tm[k].end = x->off_end;
    return 1;
}

static int pre_op(timed *T, size_t k, remat_op op) {
    uint8_t kind;
    if (!value_ok(T, op, &kind)) return 0;
    size_t i = op.index;
    copy_state *x = &T->cp[i];
    if (x->state == CP_OFFLOADING && x->kind == kind && !release(T, i)) FAIL("out of memory");
    if (x->state != CP_HOST || x->kind != kind)
        FAIL("%s[%zu] was not offloaded", kind_name(kind), i);
    if (T->st.val[i] != REMAT__HELD_NONE)
        FAIL("%s[%zu] is already on the device", kind_name(kind), i);
    double start = T->t_c > T->h2d_free ? T->t_c : T->h2d_free;
    if (x->release > start) start = x->release;
    double dur = (double)copy_bytes(T->c, i, x) / T->bw;
    x->state = CP_PREFETCHING;
    x->pre_end = start + dur;
    x->last_end = x->pre_end;
    T->st.val[i] = kind; /* usable once the copy ends: compute_op() waits */
    T->st.opt[i] = x->option;
    T->tm[k].at = T->t_c;
    T->h2d_free = x->pre_end;
    T->busy_h2d += dur;
    T->tm[k].start = start;
    T->tm[k].end = x->pre_end;
    if (!push_delta(T, start, k, (int64_t)copy_bytes(T->c, i, x))) FAIL("out of memory");
    return 1;
}

static int wait_op(timed *T, size_t k, remat_op op) {
    uint8_t kind;
    if (!value_ok(T, op, &kind)) return 0;
    size_t i = op.index;
    copy_state *x = &T->cp[i];
    if (!x->copied) FAIL("%s[%zu] has no copy to wait for", kind_name(kind), i);
    double until = x->last_end;
    if (x->state == CP_OFFLOADING) {
        if (!release(T, i)) FAIL("out of memory");
        until = x->release;
    } else if (x->state == CP_PREFETCHING) {
        x->state = CP_NONE;
    }
    if (until > T->t_c) T->t_c = until;
    T->tm[k].start = T->tm[k].end = T->tm[k].at = T->t_c;
    return 1;
}
#undef FAIL

static int run_op(timed *T, size_t k) {
    remat_op op = T->s->ops[k];
    if (op.option && op.kind != REMAT_OP_FALL) {
        snprintf(T->why, sizeof T->why, "only Fall takes an option");
        return 0;
    }
    switch (op.kind) {
    case REMAT_OP_FN:
    case REMAT_OP_FCK:
    case REMAT_OP_FALL:
    case REMAT_OP_B: return compute_op(T, k, op);
    case REMAT_OP_DEL: return del_op(T, k, op);
    case REMAT_OP_OFF:
    case REMAT_OP_PRE:
    case REMAT_OP_WAIT:
        if (!(T->bw > 0)) {
            snprintf(T->why, sizeof T->why, "offload ops need a host link: simulate with a "
                                            "bandwidth > 0");
            return 0;
        }
        if (op.kind == REMAT_OP_OFF) return off_op(T, k, op);
        if (op.kind == REMAT_OP_PRE) return pre_op(T, k, op);
        return wait_op(T, k, op);
    default:
        snprintf(T->why, sizeof T->why, "unknown op kind %u", (unsigned)op.kind);
        return 0;
    }
}

static int delta_cmp(const void *pa, const void *pb) {
    const delta *a = pa, *b = pb;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    return (a->bytes > b->bytes) - (a->bytes < b->bytes);
}

static uint64_t add_signed(uint64_t base, int64_t d) {
    if (d < 0 && (uint64_t)(-d) > base) return 0; /* cannot happen: deltas follow holds */
    return d < 0 ? base - (uint64_t)(-d) : base + (uint64_t)d;
}

static int add_point(remat_sim_result *r, size_t *cap, double time, uint64_t bytes) {
    if (r->n_mem_points && r->mem_points[r->n_mem_points - 1].bytes == bytes) return 1;
    if (r->n_mem_points == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        remat_sim_mem_point *p = remat__calloc(nc, sizeof *p);
        if (!p) return 0;
        if (r->n_mem_points) memcpy(p, r->mem_points, r->n_mem_points * sizeof *p);
        free(r->mem_points);
        r->mem_points = p;
        *cap = nc;
    }
    r->mem_points[r->n_mem_points].time = time;
    r->mem_points[r->n_mem_points].bytes = bytes;
    r->n_mem_points++;
    return 1;
}

/* Pass 2: memory over time. `ops` is how many ops ran (all when valid). */
static int memory_sweep(timed *T, remat_sim_result *r, size_t ops, int record) {
    if (T->n_dl) qsort(T->dl, T->n_dl, sizeof *T->dl, delta_cmp);
    size_t j = 0, cap = 0;
    int64_t dsum = 0;
    uint64_t base = T->c->input_bytes; /* compute-side bytes between compute ops */
    r->peak_bytes = T->c->input_bytes;
    if (record && !add_point(r, &cap, 0, base)) return 0;
    for (size_t k = 0; k < ops; k++) {
        timing *tm = &T->tm[k];
        double at = tm->compute == 1 ? tm->start : tm->at;
        /* Copy deltas before this op (the gap since the last compute op). */
        while (j < T->n_dl && (T->dl[j].time < at || (T->dl[j].time == at && T->dl[j].seq < k))) {
            dsum += T->dl[j].bytes;
            uint64_t m = add_signed(base, dsum);
            if (m > r->peak_bytes) r->peak_bytes = m;
            if (record && !add_point(r, &cap, T->dl[j].time, m)) return 0;
            j++;
        }
        if (!tm->compute) {
            r->mem_during[k] = r->mem_after[k] = add_signed(base, dsum);
            continue;
        }
        int64_t dmax = dsum;
        if (record && !add_point(r, &cap, tm->start, add_signed(tm->during, dsum))) return 0;
        while (j < T->n_dl && T->dl[j].time < tm->end) {
            dsum += T->dl[j].bytes;
            if (dsum > dmax) dmax = dsum;
            if (record && !add_point(r, &cap, T->dl[j].time, add_signed(tm->during, dsum)))
                return 0;
            j++;
        }
        r->mem_during[k] = add_signed(tm->during, dmax);
        if (r->mem_during[k] > r->peak_bytes) r->peak_bytes = r->mem_during[k];
        base = tm->after;
        r->mem_after[k] = add_signed(base, dsum);
        if (record && !add_point(r, &cap, tm->end, r->mem_after[k])) return 0;
    }
    for (; j < T->n_dl; j++) {
        dsum += T->dl[j].bytes;
        uint64_t m = add_signed(base, dsum);
        if (m > r->peak_bytes) r->peak_bytes = m;
        if (record && !add_point(r, &cap, T->dl[j].time, m)) return 0;
    }
    return 1;
}

static remat_status record_events(timed *T, remat_sim_result *r, size_t ops, remat_error *err) {
    size_t n = 0;
    for (size_t k = 0; k < ops; k++) {
        uint8_t kd = T->s->ops[k].kind;
        if (T->tm[k].compute == 1 || kd == REMAT_OP_OFF || kd == REMAT_OP_PRE) n++;
    }
    r->events = remat__calloc(n ? n : 1, sizeof *r->events);
    REMAT__RETURN_IF(!r->events, err, REMAT_E_NOMEM, "simulate: out of memory");
    for (size_t k = 0; k < ops; k++) {
        uint8_t kd = T->s->ops[k].kind;
        int lane = T->tm[k].compute == 1 ? 0 : kd == REMAT_OP_OFF ? 1 : kd == REMAT_OP_PRE ? 2 : -1;
        if (lane < 0) continue;
        remat_sim_event *ev = &r->events[r->n_events++];
        ev->op = k;
        ev->lane = lane;
        ev->start = T->tm[k].start;
        ev->end = T->tm[k].end;
    }
    return REMAT_OK;
}

/* The first op after Pre k that starts at or after the prefetch's start (ops:
 * how many ran). An executor that takes the prefetch's memory before that op
 * holds at every op start a subset of what the simulator holds then. */
static size_t prefetch_start_op(const timed *T, size_t k, double start, size_t ops) {
    for (size_t m = k + 1; m < ops; m++)
        if (start <= T->tm[m].at) return m;
    return T->s->n_ops;
}

/* Times and op indices of the trace, after pass 1 (release() set the Offs'). */
static void fill_trace(timed *T, size_t ops) {
    for (size_t k = 0; k < ops; k++) {
        remat__timed_op *t = &T->trace[k];
        uint8_t kind = T->s->ops[k].kind;
        t->start = T->tm[k].start;
        t->end = T->tm[k].end;
        if (kind == REMAT_OP_PRE)
            t->at = prefetch_start_op(T, k, T->tm[k].start, ops);
        else if (kind != REMAT_OP_OFF)
            t->at = k;
    }
}

static void timed_free(timed *T) {
    remat__sim_state_free(&T->st);
    free(T->cp);
    free(T->tm);
    free(T->dl);
    free(T->pending);
}

remat_status remat__simulate_timed(const remat_chain *c, const remat_schedule *s,
                                   const remat_sim_options *opt, remat_sim_result *r,
                                   remat__timed_op *trace, remat_error *err) {
    REMAT__RETURN_IF(!isfinite(opt->bandwidth) || opt->bandwidth < 0, err, REMAT_E_INPUT,
                     "bandwidth: must be a finite number >= 0");
    timed T;
    memset(&T, 0, sizeof T);
    T.c = c;
    T.s = s;
    T.bw = opt->bandwidth;
    T.trace = trace;
    REMAT__FORWARD(remat__sim_state_init(c, &T.st, err));
    T.cp = remat__calloc(c->n + 1, sizeof *T.cp);
    T.pending = remat__calloc(c->n + 1, sizeof *T.pending);
    T.tm = remat__calloc(s->n_ops ? s->n_ops : 1, sizeof *T.tm);
    if (!T.cp || !T.pending || !T.tm) {
        timed_free(&T);
        return remat__fail(err, REMAT_E_NOMEM, "simulate: out of memory");
    }
    r->valid = 1;
    size_t ran = 0;
    for (; ran < s->n_ops; ran++) {
        T.cur = ran;
        if (!run_op(&T, ran)) {
            remat__sim_fail(r, s, ran, T.why);
            break;
        }
    }
    if (r->valid && T.st.next_b != 0) {
        snprintf(T.why, sizeof T.why, "the schedule ends before B %u", T.st.next_b);
        remat__sim_fail(r, s, s->n_ops, T.why);
    }
    int ok = 1;
    T.cur = s->n_ops;
    while (ok && T.n_pending) ok = release(&T, T.pending[0]);
    double end = T.t_c;
    if (T.d2h_free > end) end = T.d2h_free;
    if (T.h2d_free > end) end = T.h2d_free;
    remat_status st = REMAT_OK;
    if (ok) ok = memory_sweep(&T, r, ran, opt->record_timeline);
    if (!ok) st = remat__fail(err, REMAT_E_NOMEM, "simulate: out of memory");
    if (st == REMAT_OK && opt->record_timeline) st = record_events(&T, r, ran, err);
    if (st == REMAT_OK && trace) fill_trace(&T, ran);
    if (st == REMAT_OK && r->valid) {
        r->time = end;
        r->compute_idle = end - T.busy_c;
        r->d2h_idle = end - T.busy_d2h;
        r->h2d_idle = end - T.busy_h2d;
    }
    timed_free(&T);
    return st;
}
