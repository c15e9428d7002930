/* train_cuda_none.c - the entry points of train_cuda.h in a build without
 * CUDA, so that andrea-train links everywhere.  stage_device never picks
 * the GPU in such a build, so the stubs are not reached. */
#include "train/train_cuda.h"

#ifndef ANDREA_CUDA
int tr_cuda_gpus(void)
{
	return 0;
}

int tr_cuda_use_gpu(int gpu)
{
	return -1;
}

int tr_cuda_comm_id(unsigned char id[TR_ID_BYTES])
{
	return -1;
}

tr_cuda *tr_cuda_new(const tr_model *m, const float *mom1, const float *mom2,
		     int B, int T, int precision, int attention,
		     const tr_cuda_ranks *ranks)
{
	return NULL;
}

void tr_cuda_free(tr_cuda *d)
{
}

void tr_cuda_batch(tr_cuda *d, int slot, int32_t **inputs, int32_t **targets)
{
	*inputs = *targets = NULL;
}

void tr_cuda_prepare(tr_cuda *d, int slot)
{
}

int tr_cuda_forward(tr_cuda *d, int slot, int backward)
{
	return -1;
}

int tr_cuda_update(tr_cuda *d, const tr_hparams *h, double lr, long t)
{
	return -1;
}

int tr_cuda_results(tr_cuda *d, int stop)
{
	return -1;
}

int tr_cuda_finish(tr_cuda *d, double *loss, double *norm, int *stop)
{
	return -1;
}

int tr_cuda_barrier(tr_cuda *d, double timeout_s)
{
	return -1;
}

int tr_cuda_download(tr_cuda *d, float *p, float *g, float *mom1, float *mom2)
{
	return -1;
}

void tr_cuda_memory(const tr_cuda *d, size_t *buffers, size_t *peak_in_use)
{
	*buffers = *peak_in_use = 0;
}

int tr_cuda_gelu_fused(const tr_cuda *d)
{
	return 0;
}

int tr_cuda_head_parts(const tr_cuda *d)
{
	return 1;
}

int tr_cuda_attention_fused(const tr_cuda *d)
{
	return 0;
}

int tr_cuda_graphed(const tr_cuda *d)
{
	return 0;
}

#endif
