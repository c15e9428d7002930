/* parallel.h - the chunk codec's threads.
 *
 * The codec runs in short bursts between blocking reads and writes on a
 * pipe.  OpenMP's idle workers spin between parallel regions, and in a
 * pipeline of six processes on two cores that spinning takes the cores the
 * other stages need.  These threads sleep on a condition variable between
 * bursts, so a stage waiting on its pipe costs no CPU at all.
 */
#ifndef ANDREA_PARALLEL_H
#define ANDREA_PARALLEL_H

/* Runs fn(ctx, i, tid) for every i in [0, n) on up to `threads` threads,
 * the caller being thread 0; items go one at a time to whichever thread is
 * free.  Falls back to the caller alone if a thread cannot start. */
void at_parallel_for(int n, int threads, void (*fn)(void *ctx, int i, int tid),
		     void *ctx);

#endif
