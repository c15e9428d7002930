/* parallel.c - a parallel for over pthreads, joined at its end. */
#include "parallel.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_THREADS 256

typedef struct {
	void (*fn)(void *ctx, int i, int tid);
	void *ctx;
	int n;
	atomic_int next;
} job;

typedef struct {
	job *j;
	int tid;
} worker;

static void drain(job *j, int tid)
{
	int i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(j->ctx, i, tid);
}

static void *run_worker(void *arg)
{
	worker *w = arg;
	drain(w->j, w->tid);
	return NULL;
}

void at_parallel_for(int n, int threads, void (*fn)(void *ctx, int i, int tid),
		     void *ctx)
{
	job j = {.fn = fn, .ctx = ctx, .n = n};
	atomic_init(&j.next, 0);
	if (threads > n)
		threads = n;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	pthread_t tids[MAX_THREADS];
	worker ws[MAX_THREADS];
	int started = 0;
	for (int t = 1; t < threads; t++) {
		ws[t] = (worker){&j, t};
		if (pthread_create(&tids[started + 1], NULL, run_worker, &ws[t]) != 0)
			break;
		started++;
	}
	drain(&j, 0);
	for (int t = 1; t <= started; t++)
		pthread_join(tids[t], NULL);
}
