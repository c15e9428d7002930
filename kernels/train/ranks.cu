// ranks.cu - data-parallel training in the GPU engine (engine.cuh; issue
// 21): the communicator, the gradients' sums in buckets on a side stream
// while the backward pass goes on, the sharded update's sums and gathers,
// and the waits that watch the other ranks.
//
// Every rank holds the whole model and takes its rows of each global
// batch (dist.h); its loss is scaled by the global batch's count, so the
// sum of the ranks' gradients is the global batch's.  Alone (no ranks)
// every function here leaves the engine as it was.
#include <ctime>

#include <sched.h>

#include "train/engine.cuh"

// The most floats in one bucket (64 MiB over 4 bytes: PyTorch DDP's
// buckets are 25 MB; one layer of andrea-120m, 7.1 M floats, is one).
#define BUCKET_FLOATS ((size_t)1 << 24)
// Shards start 256 bytes apart.
#define SHARD_ALIGN 64

extern "C" int tr_cuda_gpus(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); // no driver, no device: none
		return 0;
	}
	return n;
}

extern "C" int tr_cuda_use_gpu(int gpu)
{
	int n = 0;
	CU_CHECK(cudaGetDeviceCount(&n), "counting the GPUs");
	CU_CHECK(cudaSetDevice(gpu % n), "choosing the GPU");
	return 0;
}

extern "C" int tr_cuda_comm_id(unsigned char id[TR_ID_BYTES])
{
	static_assert(TR_ID_BYTES == AT_COMM_ID_BYTES, "NCCL's id");
	return at_comm_id(id);
}

void tr_ranks_plan(tr_cuda *d, const tr_model *m, const tr_cuda_ranks *r)
{
	d->world = r ? r->world : 1;
	d->rank = r ? r->rank : 0;
	d->shard = r && r->shard;
	d->timeout_s = r ? r->timeout_s : 0;
	d->shard_len = d->padded = d->total;
	d->base = 0;
	if (d->shard) {
		tr_shards s = tr_dist_shards(d->total, d->world, SHARD_ALIGN);
		d->shard_len = s.len;
		d->padded = s.padded;
		d->base = (size_t)d->rank * s.len;
	}
	d->lo = d->base < d->total ? d->base : d->total;
	d->hi = d->base + d->shard_len < d->total ? d->base + d->shard_len
						  : d->total;
}

int tr_ranks_join(tr_cuda *d, const tr_model *m, const tr_cuda_ranks *r)
{
	if (!r)
		return 0;
	CU_CHECK(cudaStreamCreateWithFlags(&d->side, cudaStreamNonBlocking),
		 "making the gradients' stream");
	CU_CHECK(cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming),
		 "making the gradients' events");
	CU_CHECK(cudaEventCreateWithFlags(&d->summed, cudaEventDisableTiming),
		 "making the gradients' events");
	if (tr_dist_buckets(m, BUCKET_FLOATS, &d->buckets, &d->nbuckets) < 0)
		return at_cu_failf("out of host memory");
	d->comm = at_comm_join(r->id, r->rank, r->world);
	return d->comm ? 0 : -1;
}

void tr_ranks_free(tr_cuda *d)
{
	at_comm_free(d->comm, 0);
	if (d->side)
		cudaStreamDestroy(d->side);
	if (d->ready)
		cudaEventDestroy(d->ready);
	if (d->summed)
		cudaEventDestroy(d->summed);
	free(d->buckets);
}

int tr_ranks_stage_done(tr_cuda *d, int stage)
{
	int k = d->next_bucket;
	if (!d->comm || d->shard || k == d->nbuckets ||
	    d->buckets[k].stage > stage)
		return 0;
	CU_CHECK(cudaEventRecord(d->ready, 0), "marking the gradients");
	CU_CHECK(cudaStreamWaitEvent(d->side, d->ready, 0),
		 "ordering the gradients' sums");
	for (; k < d->nbuckets && d->buckets[k].stage <= stage; k++)
		TRY(at_comm_sum(d->comm, d->g + d->buckets[k].start,
				d->buckets[k].len, AT_COMM_FLOAT, d->side));
	d->next_bucket = k;
	return 0;
}

int tr_ranks_grads(tr_cuda *d)
{
	if (d->comm && !d->shard) { // every bucket is on its way
		CU_CHECK(cudaEventRecord(d->summed, d->side),
			 "marking the gradients' sums");
		CU_CHECK(cudaStreamWaitEvent(0, d->summed, 0),
			 "waiting for the gradients' sums");
		d->next_bucket = 0;
	}
	if (d->shard) // this rank's shard of the sum, in place
		TRY(at_comm_sum_scatter(d->comm, d->g, d->g + d->base,
					d->shard_len, 0));
	TRY(GRAD_CALL(d, tr_sumsq, d->lo, d->hi - d->lo, d->res + RES_NORMSQ,
		      d->norm_part));
	if (d->shard)
		TRY(at_comm_sum(d->comm, d->res + RES_NORMSQ, 1, AT_COMM_DOUBLE,
				0));
	return 0;
}

int tr_ranks_params(tr_cuda *d)
{
	if (!d->shard)
		return 0;
	TRY(at_comm_gather(d->comm, d->p + d->base, d->p,
			   d->shard_len * sizeof(float), 0));
	return d->p16 ? at_cu_to_bf16(d->p16, d->p, d->total) : 0;
}

static double seconds(void)
{
	timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// Ends the communicator after a rank failed: its work in flight dropped,
// the reason (already in at_cuda_error()) kept.
static int drop_comm(tr_cuda *d)
{
	at_cu_kept_error kept;
	at_comm_free(d->comm, 1);
	d->comm = NULL;
	kept.restore();
	return -1;
}

int tr_ranks_wait(tr_cuda *d, cudaEvent_t ev, double timeout_s,
		  const char *what)
{
	if (!d->comm) {
		CU_CHECK(cudaEventSynchronize(ev), what);
		return 0;
	}
	// a sum waits for every rank: poll, and ask NCCL every 10 ms
	// whether one has failed
	double start = seconds(), asked = start;
	for (;;) {
		cudaError_t e = cudaEventQuery(ev);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return at_cu_fail(e, what, __FILE__, __LINE__);
		double t = seconds();
		if (t - asked >= 0.01) {
			asked = t;
			if (at_comm_check(d->comm) < 0)
				return drop_comm(d);
			if (timeout_s > 0 && t - start > timeout_s) {
				at_cu_failf("%s: no word from the other %d "
					    "rank%s in %g s (has one stopped?)",
					    what, d->world - 1,
					    d->world > 2 ? "s" : "", timeout_s);
				return drop_comm(d);
			}
		}
		sched_yield();
	}
}
