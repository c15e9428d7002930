// in_flight.cu - records of blocks in flight on the GPU
// (at_cuda_fwd_blocks_begin / _end, lib/ops/forward_cuda.h): a worker
// thread launches each record's blocks and waits for them while the
// caller reads the next record and writes the last.
#include <cstring>

#include "forward/engine.cuh"

using namespace fwd_engine;

// Grows slot sl to hold `bytes` both ways (the worker idle).
static int slot_room(blocks_slot *sl, size_t bytes)
{
	if (bytes <= sl->cap)
		return 0;
	cudaFree(sl->dx);
	cudaFreeHost(sl->h_in);
	cudaFreeHost(sl->h_out);
	sl->dx = sl->h_in = sl->h_out = NULL;
	sl->cap = 0;
	TRY(dalloc(&sl->dx, bytes, "the residual stream"));
	CU_CHECK(cudaMallocHost((void **)&sl->h_in, bytes), "pinned memory");
	CU_CHECK(cudaMallocHost((void **)&sl->h_out, bytes), "pinned memory");
	sl->cap = bytes;
	return 0;
}

// The blocks over one slot's x, on the worker's thread: 0 or -1.
static int run_slot(at_cuda_fwd *g, blocks_slot *sl)
{
	size_t N = (size_t)sl->B * sl->T, bytes = N * g->C * 4;
	TRY(make_bufs(g, &g->big, N, scores_room(g, NULL, sl->B, sl->T)));
	CU_CHECK(cudaMemcpyAsync(sl->dx, sl->h_in, bytes, cudaMemcpyHostToDevice,
				 at_cu_stream), "copying x to the GPU");
	for (int i = 0; i < sl->n; i++)
		TRY(block(g, &g->big, NULL, sl->layers[i], NULL, NULL, NULL, sl->dx,
			  sl->B, sl->T));
	CU_CHECK(cudaMemcpyAsync(sl->h_out, sl->dx, bytes, cudaMemcpyDeviceToHost,
				 at_cu_stream), "running the blocks");
	CU_CHECK(cudaStreamSynchronize(at_cu_stream), "running the blocks");
	return 0;
}

static void *worker_main(void *arg)
{
	at_cuda_fwd *g = (at_cuda_fwd *)arg;
	blocks_worker *w = &g->work;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		if (w->run == w->queued) {
			if (w->stop)
				break;
			pthread_cond_wait(&w->changed, &w->lock);
			continue;
		}
		// the slot of record number w->run: the one begun after the
		// oldest not yet ended, or the oldest
		blocks_slot *sl = &g->slot[(g->first + (w->run - w->taken)) % 2];
		pthread_mutex_unlock(&w->lock);
		int rc = run_slot(g, sl);
		pthread_mutex_lock(&w->lock);
		sl->rc = rc;
		w->run++;
		pthread_cond_broadcast(&w->changed);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void fwd_engine::free_in_flight(at_cuda_fwd *g)
{
	blocks_worker *w = &g->work;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = 1;
		pthread_cond_broadcast(&w->changed);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
		pthread_cond_destroy(&w->changed);
		pthread_mutex_destroy(&w->lock);
		w->started = 0;
	}
	for (int i = 0; i < 2; i++) {
		blocks_slot *sl = &g->slot[i];
		cudaFree(sl->dx);
		cudaFreeHost(sl->h_in);
		cudaFreeHost(sl->h_out);
	}
}

extern "C" int at_cuda_fwd_blocks_begin(at_cuda_fwd *g, const float *x, int B,
					int T, const int *layers, int n)
{
	blocks_worker *w = &g->work;
	if (!w->started) {
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->changed, NULL);
		if (pthread_create(&w->thread, NULL, worker_main, g) != 0)
			return at_cu_failf("cannot start a thread");
		w->started = 1;
	}
	pthread_mutex_lock(&w->lock);
	long in_flight = w->queued - w->taken;
	blocks_slot *sl = &g->slot[(g->first + in_flight) % 2];
	size_t bytes = (size_t)B * T * g->C * 4;
	int rc = 0;
	if (in_flight == 2) {
		rc = at_cu_failf("internal error: a third record of blocks begun "
				 "before the first ended");
	} else if (bytes > sl->cap) { // CUDA calls here once the worker is idle
		while (w->run < w->queued)
			pthread_cond_wait(&w->changed, &w->lock);
		rc = slot_room(sl, bytes);
	}
	pthread_mutex_unlock(&w->lock);
	if (rc < 0)
		return rc;
	memcpy(sl->h_in, x, bytes); // the worker is not on this slot
	pthread_mutex_lock(&w->lock);
	sl->layers = layers;
	sl->n = n;
	sl->B = B;
	sl->T = T;
	w->queued++;
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

extern "C" const float *at_cuda_fwd_blocks_end(at_cuda_fwd *g)
{
	blocks_worker *w = &g->work;
	if (!w->started || w->queued == w->taken) {
		at_cu_failf("internal error: no record of blocks in flight");
		return NULL;
	}
	pthread_mutex_lock(&w->lock);
	while (w->run == w->taken)
		pthread_cond_wait(&w->changed, &w->lock);
	blocks_slot *sl = &g->slot[g->first];
	g->first ^= 1;
	w->taken++;
	pthread_mutex_unlock(&w->lock);
	// the worker's reason is in at_cuda_error(); the result stays until
	// this slot is begun again
	return sl->rc < 0 ? NULL : sl->h_out;
}
