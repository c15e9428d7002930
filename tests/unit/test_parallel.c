/* test_parallel.c - unit test of at_parallel_for (lib/core/parallel.h): every
 * item runs exactly once, tids stay below the thread count asked for,
 * bursts of changing sizes reuse the pool, a call from inside a burst
 * (also one made after the burst's caller has run out of items) runs on
 * its caller alone, and several threads may call at once, also in a
 * stretch of close bursts (at_parallel_close); and of
 * at_parallel_range: its pieces cover the range once, in more than one
 * piece only where the work is worth it and threads are set, and
 * at_set_threads returns the count before.
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/parallel.h"


#define MAX_ITEMS 5000

typedef struct {
	atomic_int runs[MAX_ITEMS];
	atomic_int bad_tid;
	int threads;
} tally;

static void count(void *ctx, int i, int tid)
{
	tally *t = ctx;
	atomic_fetch_add(&t->runs[i], 1);
	if (tid < 0 || tid >= t->threads)
		atomic_fetch_add(&t->bad_tid, 1);
}

/* One burst of n items on threads threads: each ran once, tids in range. */
static void burst(int n, int threads)
{
	static tally t;
	memset(&t, 0, sizeof t);
	t.threads = threads;
	at_parallel_for(n, threads, count, &t);
	int once = 1;
	for (int i = 0; i < n; i++)
		once &= atomic_load(&t.runs[i]) == 1;
	CHECK(once);
	CHECK(atomic_load(&t.bad_tid) == 0);
}

/* Counts its items in the atomic_int ctx points to. */
static void bump(void *ctx, int i, int tid)
{
	(void)i;
	(void)tid;
	atomic_fetch_add((atomic_int *)ctx, 1);
}

static atomic_int inner_items;

/* Each outer item runs a burst of its own while the pool is busy. */
static void outer(void *ctx, int i, int tid)
{
	(void)ctx;
	(void)i;
	(void)tid;
	at_parallel_for(7, 4, bump, &inner_items);
}

/* Item 0 nests at once; item 1 first lets the caller run out of items,
 * so that its nested burst starts while the outer one is winding up. */
static void nest_late(void *ctx, int i, int tid)
{
	(void)ctx;
	(void)tid;
	if (i == 1)
		usleep(20000);
	at_parallel_for(5, 3, bump, &inner_items);
}

static atomic_int concurrent_items;

static void *call_many(void *arg)
{
	(void)arg;
	for (int r = 0; r < 300; r++)
		at_parallel_for(8, 4, bump, &concurrent_items);
	return NULL;
}

#define RANGE_N 100000

static struct {
	atomic_int runs[RANGE_N];
	atomic_int pieces;
	atomic_int off_caller; /* pieces run by another thread */
	pthread_t caller;
} cover;

static void mark(void *ctx, size_t lo, size_t hi)
{
	(void)ctx;
	for (size_t i = lo; i < hi; i++)
		atomic_fetch_add(&cover.runs[i], 1);
	atomic_fetch_add(&cover.pieces, 1);
	if (!pthread_equal(pthread_self(), cover.caller))
		atomic_fetch_add(&cover.off_caller, 1);
}

/* at_parallel_range over n units of ns each: every unit once; returns
 * the number of pieces. */
static int range(size_t n, double ns)
{
	memset(&cover, 0, sizeof cover);
	cover.caller = pthread_self();
	at_parallel_range(n, ns, mark, NULL);
	int once = 1;
	for (size_t i = 0; i < n; i++)
		once &= atomic_load(&cover.runs[i]) == 1;
	CHECK(once);
	return atomic_load(&cover.pieces);
}

static void ranges(void)
{
	int before = at_set_threads(4);
	CHECK(before >= 1);
	CHECK(at_threads() == 4);
	CHECK(range(0, 1e6) == 0);
	CHECK(range(1, 1e9) == 1);                 /* one unit: one piece */
	CHECK(range(RANGE_N, 0.1) == 1);           /* 10 us of work */
	CHECK(range(RANGE_N, AT_PIECE_NS * 3 / RANGE_N) == 3);
	CHECK(range(RANGE_N, 100.0) == 4 * 8);     /* at most 8 a thread */
	CHECK(range(7, 1e9) == 7);                 /* at most one a unit */
	/* a burst hands pieces to the workers (the caller may take all of
	 * them only if no worker ever wakes: try a few times) */
	int shared = 0;
	for (int r = 0; r < 50 && !shared; r++) {
		range(RANGE_N, 1000.0);
		shared = atomic_load(&cover.off_caller) > 0;
	}
	CHECK(shared);
	CHECK(at_set_threads(1) == 4);
	CHECK(range(RANGE_N, 1000.0) == 1);        /* on the caller alone */
	CHECK(atomic_load(&cover.off_caller) == 0);
	at_set_threads(before);
}

/* Every kind of burst, nesting and concurrent callers; run as usual and
 * again in a stretch of close bursts, where the threads watch for each
 * other before they sleep. */
static void bursts(void)
{
	burst(0, 4);
	burst(1, 1);
	burst(1, 8);
	burst(3, 8);       /* more threads than items */
	burst(MAX_ITEMS, 2);
	/* sizes and thread counts that change from burst to burst */
	for (int r = 0; r < 300; r++)
		burst(1 + (r * 37) % MAX_ITEMS, 1 + r % 6);
	burst(MAX_ITEMS, 300); /* beyond the pool's cap */

	atomic_store(&inner_items, 0);
	at_parallel_for(16, 4, outer, NULL);
	CHECK(atomic_load(&inner_items) == 16 * 7);
	atomic_store(&inner_items, 0);
	for (int r = 0; r < 10; r++)
		at_parallel_for(2, 2, nest_late, NULL);
	CHECK(atomic_load(&inner_items) == 10 * 2 * 5);

	/* three threads calling at once, each to completion */
	atomic_store(&concurrent_items, 0);
	pthread_t callers[3];
	int started = 0;
	for (int t = 0; t < 3; t++)
		started += pthread_create(&callers[t], NULL, call_many, NULL) == 0;
	CHECK(started == 3);
	for (int t = 0; t < started; t++)
		pthread_join(callers[t], NULL);
	CHECK(atomic_load(&concurrent_items) == started * 300 * 8);
}

int main(void)
{
	ranges();
	bursts();
	CHECK(at_parallel_close(1) == 0);
	bursts();
	usleep(1000); /* past the workers' watch: they sleep, then wake */
	bursts();
	CHECK(at_parallel_close(0) == 1);
	return check_finish("test_parallel");
}
