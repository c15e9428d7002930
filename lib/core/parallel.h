/* parallel.h - the threads of the codec and of the CPU arithmetic.
 *
 * The codec runs in short bursts between blocking reads and writes on a
 * pipe, and the arithmetic in bursts between the ops of a layer.  Workers
 * that spin between bursts (as OpenMP's and OpenBLAS's do) take the cores
 * that the other stages of a pipeline, or other jobs of a busy machine,
 * need; and a burst that waits for every worker to arrive (an OpenMP
 * barrier) waits for each one whose core is busy elsewhere.  These workers
 * sleep on a condition variable between bursts, and a burst never waits
 * for one to wake: the caller takes the items no worker has taken.
 */
#ifndef ANDREA_PARALLEL_H
#define ANDREA_PARALLEL_H

#include <stddef.h>

/* Runs fn(ctx, i, tid) for every i in [0, n) on up to `threads` threads,
 * the caller being thread 0; items go one at a time to whichever thread is
 * free.  Falls back to the caller alone if a thread cannot start. */
void at_parallel_for(int n, int threads, void (*fn)(void *ctx, int i, int tid),
		     void *ctx);

/* Marks the bursts that follow as close together (on != 0: a decoding
 * step's products, some tens of microseconds apart), where the workers
 * and the caller watch for each other a little before they sleep; returns
 * the setting before. */
int at_parallel_close(int on);

/* The threads of the CPU arithmetic (the ops, the trainer, the seeded
 * model's draws): the online processors, at most 64, until
 * at_set_threads(n) (n >= 1) sets it; that returns the count before.
 * The command line sets it from --threads (lib/cli). */
int at_threads(void);
int at_set_threads(int n);

/* Runs fn(ctx, lo, hi) over consecutive pieces [lo, hi) that cover
 * [0, n), on up to at_threads() threads through at_parallel_for.  `ns` is
 * about the nanoseconds one unit takes on one core: a piece holds at least
 * AT_PIECE_NS of work, so that it outweighs a worker's wake-up, and work
 * of less than two pieces runs on the caller alone, the pool untouched.
 * The pieces depend on n, ns and the thread count only; fn must give the
 * same result whichever way [0, n) is cut (independent outputs). */
#define AT_PIECE_NS 20000.0
void at_parallel_range(size_t n, double ns,
		       void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx);

#endif
