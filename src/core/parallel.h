/* The one thread pool of the solvers: a parallel for over items taken in
 * increasing order, and counters that pipelined dynamic programs wait on.
 * Private (remat__ names); solvers include it beside internal.h. */
#ifndef REMAT_PARALLEL_H
#define REMAT_PARALLEL_H

#include <stddef.h>

/* Work on item `item` as worker `worker` (0 .. workers-1). Everything the
 * workers share comes through `ctx`, read-only; what they write goes through
 * pointers in it, to memory no other worker writes at the same time. */
typedef void (*remat__par_fn)(const void *ctx, size_t item, unsigned worker);

/* Runs fn(ctx, i, w) once for every i in [0, n) on up to `threads` workers
 * (at most 64 and at most n; the caller is worker 0). Items are handed out in
 * increasing order, so an item may wait (remat__gate_wait) for a smaller one.
 * A thread that fails to start is no error: the others take its share.
 * Returns the number of workers that ran. */
unsigned remat__parallel_for(unsigned threads, size_t n, remat__par_fn fn, const void *ctx);

/* Monotone counters, one per slot, that workers raise and wait on. */
typedef struct remat__gates remat__gates;

/* n counters at 0; NULL when out of memory. Free with remat__gates_free(). */
remat__gates *remat__gates_new(size_t n);
void remat__gates_free(remat__gates *g);
/* Counter i becomes v (v never below its current value); wakes waiters. */
void remat__gate_raise(remat__gates *g, size_t i, size_t v);
/* Counter i grows by v; wakes waiters. */
void remat__gate_add(remat__gates *g, size_t i, size_t v);
/* Returns once counter i is at least v. */
void remat__gate_wait(remat__gates *g, size_t i, size_t v);

#endif
