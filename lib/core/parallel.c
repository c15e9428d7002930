/* parallel.c - a parallel for over a pool of pthreads that sleep between
 * bursts, and the thread count of the arithmetic.
 *
 * The workers are started on first use and kept: starting threads for each
 * burst cost a thread start and, in the codec, fresh zlib states (a few
 * hundred KiB of first-touched memory) per thread per batch of chunks.
 * Between bursts they wait on a condition variable, so a stage waiting on
 * its pipe still costs no CPU.  But where bursts come close together (the
 * products of a decoding step, tens of microseconds apart) a wake-up from
 * the condition variable takes about as long as a burst in a virtual
 * machine, and the caller had done the products of an andrea-120m
 * decoding step nearly alone.  So in a stretch of close bursts
 * (at_parallel_close) a worker whose last wait was shorter than SPIN_NS
 * watches for the next burst for up to SPIN_NS before it sleeps, and the
 * caller watches for the workers to leave its burst before it sleeps.
 * Elsewhere (training, the stages) nothing watches: on two busy cores the
 * watching made a tiny training run slower than one thread.
 */
#include "core/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
/* The longest a worker watches for the next burst before it sleeps,
 * and the longest wait between bursts after which it watches at all. */
#define SPIN_NS 200000L

typedef struct {
	void (*fn)(void *ctx, int i, int tid);
	void *ctx;
	int n, threads;
	atomic_int next;
	atomic_int busy; /* workers inside this job, changed under pool.lock */
	int close;       /* one of a stretch of close bursts */
} job;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	job *cur;          /* the burst workers may join; NULL between bursts */
	atomic_ulong gen;  /* bumped (under lock) for each burst */
	int started;       /* workers 1..started exist */
	atomic_int close;  /* at_parallel_close's setting */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	  PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0};

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void drain(job *j, int tid)
{
	int i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(j->ctx, i, tid);
}

/* Waits, without the lock, until fn(arg) or `until`; 1 if fn(arg).  It
 * yields the processor as it goes, so that on a busy machine the watch
 * takes little from the threads that have work. */
static int watch(int (*fn)(const void *arg), const void *arg, long until)
{
	for (int i = 1; !fn(arg); i++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (i % 16 == 0) {
			if (now_ns() > until)
				return 0;
			sched_yield();
		}
	}
	return 1;
}

/* A burst after *seen has begun. */
static int gen_moved(const void *seen)
{
	return atomic_load_explicit(&pool.gen, memory_order_relaxed) !=
	       *(const unsigned long *)seen;
}

/* No worker is inside job j. */
static int job_left(const void *j)
{
	return atomic_load(&((const job *)j)->busy) == 0;
}

/* What /proc/PID/task/TID/comm and top -H show for a worker (at most 15
 * bytes); tests/test_threads.py tells the pool's threads by it. */
#define WORKER_NAME "andrea-pool"

static void *run_worker(void *arg)
{
	int tid = (int)(long)arg;
	unsigned long seen = 0;
	long waited = SPIN_NS; /* the last wait between bursts, ns */
	int close = 0;         /* the last burst was a close one */
	pthread_setname_np(pthread_self(), WORKER_NAME);
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		long idle = now_ns();
		if (pool.gen == seen && close && waited < SPIN_NS) {
			pthread_mutex_unlock(&pool.lock);
			watch(gen_moved, &seen, idle + SPIN_NS);
			pthread_mutex_lock(&pool.lock);
		}
		while (pool.gen == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		waited = now_ns() - idle;
		seen = pool.gen;
		job *j = pool.cur;
		if (!j || tid >= j->threads)
			continue;
		close = j->close;
		atomic_fetch_add(&j->busy, 1);
		pthread_mutex_unlock(&pool.lock);
		drain(j, tid);
		pthread_mutex_lock(&pool.lock);
		/* every caller waits on idle for its own job: wake them all */
		if (atomic_fetch_sub(&j->busy, 1) == 1)
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
	job j = {.fn = fn, .ctx = ctx, .n = n, .threads = threads,
		 .close = atomic_load(&pool.close)};
	atomic_init(&j.next, 0);
	atomic_init(&j.busy, 0);
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
		/* no worker may enter j after this; wait for those inside,
		 * watching first: their last items end within microseconds */
		pthread_mutex_lock(&pool.lock);
		pool.cur = NULL;
		pthread_mutex_unlock(&pool.lock);
		if (!j.close || !watch(job_left, &j, now_ns() + SPIN_NS)) {
			pthread_mutex_lock(&pool.lock);
			while (atomic_load(&j.busy) > 0)
				pthread_cond_wait(&pool.idle, &pool.lock);
			pthread_mutex_unlock(&pool.lock);
		}
	}
}

int at_parallel_close(int on)
{
	return atomic_exchange(&pool.close, on);
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
