/* parallel.c - a parallel for over a pool of pthreads that sleep between
 * bursts, and the thread count of the arithmetic.
 *
 * The workers are started on first use and kept: starting threads for each
 * burst cost a thread start and, in the codec, fresh zlib states (a few
 * hundred KiB of first-touched memory) per thread per batch of chunks.
 * Between bursts they wait on a condition variable, so a stage waiting on
 * its pipe still costs no CPU; first they watch for the next burst for
 * SPIN_NS, since the ops of a layer come microseconds apart and a wake-up
 * from the condition variable takes longer than a decoding step's product
 * (tens of microseconds in a virtual machine): without the watch the
 * caller had done the products of an andrea-120m decoding step alone
 * before a worker woke.  A burst never waits for a worker to wake:
 * the caller drains the items itself, and a worker that wakes after the
 * last item was taken finds nothing to do.  A call made while the pool
 * serves another (from a worker, or from a second thread) runs on its
 * caller alone.
 */
#include "core/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
/* How long a worker watches for the next burst before it sleeps. */
#define SPIN_NS 20000L

typedef struct {
	void (*fn)(void *ctx, int i, int tid);
	void *ctx;
	int n, threads;
	atomic_int next;
	int busy; /* workers inside this job, under pool.lock */
} job;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	job *cur;          /* the burst workers may join; NULL between bursts */
	atomic_ulong gen;  /* bumped (under lock) for each burst */
	int started;       /* workers 1..started exist */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	  PTHREAD_COND_INITIALIZER, NULL, 0, 0};

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Watches, without the lock, for a burst after `seen` for SPIN_NS. */
static void watch_for_burst(unsigned long seen)
{
	long until = now_ns() + SPIN_NS;
	for (int i = 1; atomic_load_explicit(&pool.gen, memory_order_relaxed) == seen;
	     i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (i % 64 == 0 && now_ns() > until)
			return;
	}
}

static void drain(job *j, int tid)
{
	int i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(j->ctx, i, tid);
}

/* What /proc/PID/task/TID/comm and top -H show for a worker (at most 15
 * bytes); tests/test_threads.py tells the pool's threads by it. */
#define WORKER_NAME "andrea-pool"

static void *run_worker(void *arg)
{
	int tid = (int)(long)arg;
	unsigned long seen = 0;
	pthread_setname_np(pthread_self(), WORKER_NAME);
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		if (pool.gen == seen) {
			pthread_mutex_unlock(&pool.lock);
			watch_for_burst(seen);
			pthread_mutex_lock(&pool.lock);
		}
		while (pool.gen == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		seen = pool.gen;
		job *j = pool.cur;
		if (!j || tid >= j->threads)
			continue;
		j->busy++;
		pthread_mutex_unlock(&pool.lock);
		drain(j, tid);
		pthread_mutex_lock(&pool.lock);
		/* every caller waits on idle for its own job: wake them all */
		if (--j->busy == 0)
			pthread_cond_broadcast(&pool.idle);
	}
	return NULL;
}

/* Starts workers up to threads - 1 of them; returns how many exist.
 * Called with the lock held. */
static int grow_pool(int threads)
{
	while (pool.started < threads - 1) {
		pthread_t t;
		if (pthread_create(&t, NULL, run_worker,
				   (void *)(long)(pool.started + 1)) != 0)
			break;
		pthread_detach(t);
		pool.started++;
	}
	return pool.started;
}

void at_parallel_for(int n, int threads, void (*fn)(void *ctx, int i, int tid),
		     void *ctx)
{
	job j = {.fn = fn, .ctx = ctx, .n = n, .threads = threads};
	atomic_init(&j.next, 0);
	if (j.threads > n)
		j.threads = n;
	if (j.threads > MAX_THREADS)
		j.threads = MAX_THREADS;
	int shared = 0; /* the pool works on j (not when busy elsewhere) */
	if (j.threads > 1) {
		pthread_mutex_lock(&pool.lock);
		if (!pool.cur && grow_pool(j.threads) > 0) {
			pool.cur = &j;
			pool.gen++;
			pthread_cond_broadcast(&pool.wake);
			shared = 1;
		}
		pthread_mutex_unlock(&pool.lock);
	}
	drain(&j, 0);
	if (shared) {
		/* no worker may enter j after this; wait for those inside */
		pthread_mutex_lock(&pool.lock);
		pool.cur = NULL;
		while (j.busy > 0)
			pthread_cond_wait(&pool.idle, &pool.lock);
		pthread_mutex_unlock(&pool.lock);
	}
}

static atomic_int arith_threads; /* 0: not set, the online processors */

int at_threads(void)
{
	int n = atomic_load(&arith_threads);
	if (n > 0)
		return n;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
}

int at_set_threads(int n)
{
	int before = at_threads();
	atomic_store(&arith_threads, n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n);
	return before;
}

typedef struct {
	void (*fn)(void *ctx, size_t lo, size_t hi);
	void *ctx;
	size_t n, pieces;
} range_job;

static void range_piece(void *ctx, int i, int tid)
{
	const range_job *r = ctx;
	(void)tid;
	r->fn(r->ctx, r->n * (size_t)i / r->pieces,
	      r->n * ((size_t)i + 1) / r->pieces);
}

/* Pieces per thread at most: enough that a thread which falls behind
 * (descheduled, or sharing its core) holds back only a small piece. */
#define PIECES_PER_THREAD 8

void at_parallel_range(size_t n, double ns,
		       void (*fn)(void *ctx, size_t lo, size_t hi), void *ctx)
{
	int threads = at_threads();
	double by_work = (double)n * ns / AT_PIECE_NS;
	size_t pieces = (size_t)threads * PIECES_PER_THREAD;
	if (by_work < (double)pieces)
		pieces = (size_t)by_work;
	if (pieces > n)
		pieces = n;
	if (threads < 2 || pieces < 2) {
		if (n)
			fn(ctx, 0, n);
		return;
	}
	range_job r = {fn, ctx, n, pieces};
	at_parallel_for((int)pieces, threads, range_piece, &r);
}
