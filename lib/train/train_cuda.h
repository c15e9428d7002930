/* train_cuda.h - the training engine on a CUDA GPU (the files of kernels/train/).
 *
 * The device holds the parameters, gradients, both AdamW moments and every
 * activation of a step; the host sends a batch (double-buffered in pinned
 * memory, so the next one is drawn while the GPU works) and receives two
 * numbers per step, the loss and the gradient norm.  Parameters and
 * moments come back to the host only to be saved.  The layout of the flat
 * buffers is the CPU engine's (train.h), so checkpoints and model files do
 * not depend on where a run computed.
 *
 * Precision (ops/precision.h): AT_PREC_FP32 computes every product in
 * full fp32; AT_PREC_TF32 lets cuBLAS round the operands of products to TF32;
 * AT_PREC_BF16 feeds products bf16 operands (bf16 copies of the fp32 master
 * weights, bf16 activations where they only feed products) and accumulates
 * in fp32.  LayerNorm statistics, softmax, the loss, the gradients and
 * AdamW are fp32 (double for the reductions of the loss and the norm) in
 * every mode.
 *
 * Every call launches on the default stream and returns without waiting,
 * except tr_cuda_finish and tr_cuda_download.  Every function returns 0,
 * or -1 with a one-line reason in at_cuda_error().
 */
#ifndef ANDREA_TRAIN_CUDA_H
#define ANDREA_TRAIN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "train/rendezvous.h"
#include "train/train.h"

typedef struct tr_cuda tr_cuda;

/* A rank of data-parallel training (issue 21; dist.h): this process is
 * rank `rank` of `world`, each with a GPU of its own and the same number
 * of rows of every global batch; id (made by rank 0 with tr_cuda_comm_id,
 * handed on by rendezvous.h) joins them into one NCCL communicator.
 * With shard, each rank keeps the AdamW moments of its shard only (ZeRO
 * stage 1).  No wait on the other ranks lasts longer than timeout_s. */
typedef struct {
	int rank, world, shard;
	double timeout_s;
	unsigned char id[TR_ID_BYTES];
} tr_cuda_ranks;

/* The GPUs this process sees (no context is made; 0 on any error). */
int tr_cuda_gpus(void);
/* This process's CUDA work goes to GPU gpu (modulo the GPUs it sees);
 * before any other call. */
int tr_cuda_use_gpu(int gpu);
/* A fresh communicator id into id. */
int tr_cuda_comm_id(unsigned char id[TR_ID_BYTES]);

/* Copies m's parameters (and mom1, mom2; zeros where NULL) to the device
 * and makes every buffer of a step over B rows of T positions, with the
 * attention as asked (train.h's TR_ATTN_*); with ranks (NULL: alone),
 * B is this rank's rows, the gradients are summed over the ranks in
 * buckets while the backward pass runs and the loss is the mean over
 * them (returns once every rank has joined).  NULL on failure, with the
 * reason in at_cuda_error(): a fused attention asked for that cannot be
 * had, or running out of device memory ("CUDA: out of memory allocating
 * 9.4 GiB for the attention weights"). */
tr_cuda *tr_cuda_new(const tr_model *m, const float *mom1, const float *mom2,
		     int B, int T, int precision, int attention,
		     const tr_cuda_ranks *ranks);
void tr_cuda_free(tr_cuda *d);

/* The pinned host buffers of batch slot 0 or 1: inputs and targets, B*T
 * ids each.  Fill one, then tr_cuda_prepare it. */
void tr_cuda_batch(tr_cuda *d, int slot, int32_t **inputs, int32_t **targets);
/* Host work on a filled slot (the embedding gradient's index, built here
 * so that it overlaps with the device's work on the other slot). */
void tr_cuda_prepare(tr_cuda *d, int slot);

/* Sends slot's batch and runs the forward pass; with backward, also the
 * backward pass and the global gradient norm.  Not waiting. */
int tr_cuda_forward(tr_cuda *d, int slot, int backward);
/* One AdamW update (step t counts from 1) at learning rate lr, the
 * gradients scaled by clip / norm when clip > 0 and the norm exceeds it
 * (decided on the device from the norm of the last backward). */
int tr_cuda_update(tr_cuda *d, const tr_hparams *h, double lr, long t);
/* Queues the copy of the last forward's mean loss and the last backward's
 * gradient norm to the host, with ranks their sums and this rank's wish
 * to stop (stop).  Work queued after it (the next step's forward and
 * backward) is not waited for by tr_cuda_finish. */
int tr_cuda_results(tr_cuda *d, int stop);
/* Waits for the results that tr_cuda_results queued (queuing them first
 * when it was not called): *loss is the mean loss of the last forward,
 * *norm (when not NULL) the gradient norm of the last backward.  With
 * stop (not NULL), *stop is this rank's wish to end the run on entry and
 * whether any rank has it on return, so that every rank ends after the
 * same step.  With ranks, every rank calls it after each forward. */
int tr_cuda_finish(tr_cuda *d, double *loss, double *norm, int *stop);

/* With ranks: returns once every rank has called it (or after
 * timeout_s, failing); alone: at once. */
int tr_cuda_barrier(tr_cuda *d, double timeout_s);

/* Copies the parameters, gradients and moments back (NULL skips one);
 * waits.  With sharded moments every rank calls it with the same
 * buffers given, and the gradients' buffer is used to gather the
 * moments: its contents are the gradients only until then. */
int tr_cuda_download(tr_cuda *d, float *p, float *g, float *mom1,
		     float *mom2);

/* Bytes of the engine's device buffers, and the most device memory seen
 * in use (total minus free, so the CUDA context and cuBLAS's workspace
 * count too) at any tr_cuda_finish so far. */
void tr_cuda_memory(const tr_cuda *d, size_t *buffers, size_t *peak_in_use);

/* 1 when the MLP's first product applies the GELU in its epilogue
 * (cuBLASLt), forward and backward; 0 when a kernel apart does. */
int tr_cuda_gelu_fused(const tr_cuda *d);

/* How many parts of rows the head and the loss take a step (head.cu):
 * 1 where the batch's logits fit 80 MiB. */
int tr_cuda_head_parts(const tr_cuda *d);

/* 1 when the attention is fused (train.h's TR_ATTN_*: no T x T weights;
 * cuDNN's in bf16, andrea's fp32 kernels otherwise); 0 when explicit. */
int tr_cuda_attention_fused(const tr_cuda *d);

/* 1 when the training steps are replayed as one CUDA graph (from the
 * second step on; ANDREA_CUDA_GRAPHS=0 and several GPUs keep them
 * eager). */
int tr_cuda_graphed(const tr_cuda *d);


#endif
