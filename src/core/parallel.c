/* remat__parallel_for and the gates of pipelined DPs (parallel.h). */
#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

#define PAR_MAX_THREADS REMAT__MAX_WORKERS

typedef struct par_run {
    remat__par_fn fn;
    const void *ctx;
    size_t n;
    atomic_size_t next;
} par_run;

typedef struct par_worker {
    par_run *run;
    unsigned id;
} par_worker;

static void *par_loop(void *arg) {
    const par_worker *w = arg;
    par_run *r = w->run;
    size_t i;
    while ((i = atomic_fetch_add(&r->next, 1)) < r->n) r->fn(r->ctx, i, w->id);
    return NULL;
}

unsigned remat__parallel_for(unsigned threads, size_t n, remat__par_fn fn, const void *ctx) {
    if (threads > PAR_MAX_THREADS) threads = PAR_MAX_THREADS;
    if ((size_t)threads > n) threads = (unsigned)n;
    if (threads <= 1) {
        for (size_t i = 0; i < n; i++) fn(ctx, i, 0);
        return 1;
    }
    par_run r = {fn, ctx, n, 0};
    atomic_init(&r.next, 0);
    pthread_t tid[PAR_MAX_THREADS];
    par_worker w[PAR_MAX_THREADS];
    unsigned started = 0;
    for (unsigned k = 1; k < threads; k++) {
        w[started + 1] = (par_worker){&r, started + 1};
        if (pthread_create(&tid[started], NULL, par_loop, &w[started + 1]) != 0) break;
        started++;
    }
    w[0] = (par_worker){&r, 0};
    par_loop(&w[0]);
    for (unsigned k = 0; k < started; k++) pthread_join(tid[k], NULL);
    return started + 1;
}

struct remat__gates {
    size_t n;
    atomic_size_t *v;
    atomic_uint waiters; /* the lock is only taken when someone really waits */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

remat__gates *remat__gates_new(size_t n) {
    remat__gates *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->v = remat__calloc(n ? n : 1, sizeof *g->v);
    if (!g->v) {
        free(g);
        return NULL;
    }
    g->n = n;
    for (size_t i = 0; i < n; i++) atomic_init(&g->v[i], 0);
    atomic_init(&g->waiters, 0);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    return g;
}

void remat__gates_free(remat__gates *g) {
    if (!g) return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->v);
    free(g);
}

static void wake(remat__gates *g) {
    if (atomic_load(&g->waiters) > 0) {
        pthread_mutex_lock(&g->mu);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
}

void remat__gate_raise(remat__gates *g, size_t i, size_t v) {
    atomic_store(&g->v[i], v);
    wake(g);
}

void remat__gate_add(remat__gates *g, size_t i, size_t v) {
    atomic_fetch_add(&g->v[i], v);
    wake(g);
}

void remat__gate_wait(remat__gates *g, size_t i, size_t v) {
    if (atomic_load(&g->v[i]) >= v) return;
    pthread_mutex_lock(&g->mu);
    atomic_fetch_add(&g->waiters, 1);
    while (atomic_load(&g->v[i]) < v) pthread_cond_wait(&g->cv, &g->mu);
    atomic_fetch_sub(&g->waiters, 1);
    pthread_mutex_unlock(&g->mu);
}
