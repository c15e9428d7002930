/* parallel.c - a parallel for over a pool of pthreads that sleep between
 * bursts.
 *
 * The workers are started on first use and kept: starting threads for each
 * burst cost a thread start and, in the codec, fresh zlib states (a few
 * hundred KiB of first-touched memory) per thread per batch of chunks.
 * Between bursts they wait on a condition variable, so a stage waiting on
 * its pipe still costs no CPU.  A burst never waits for a worker to wake:
 * the caller drains the items itself, and a worker that wakes after the
 * last item was taken finds nothing to do.  A call made while the pool
 * serves another (from a worker, or from a second thread) runs on its
 * caller alone.
 */
#include "core/parallel.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_THREADS 256

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
	unsigned long gen; /* bumped for each burst */
	int started;       /* workers 1..started exist */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	  PTHREAD_COND_INITIALIZER, NULL, 0, 0};

static void drain(job *j, int tid)
{
	int i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(j->ctx, i, tid);
}

static void *run_worker(void *arg)
{
	int tid = (int)(long)arg;
	unsigned long seen = 0;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
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
