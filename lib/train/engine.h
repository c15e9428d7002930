/* engine.h - the training engine: one object that owns where a run
 * computes (the CPU or a CUDA GPU), its precision, the buffers of a step
 * and the batches.
 *
 * The caller keeps the host side of the run: the model (parameters and
 * gradients, train.h), the two AdamW moments, the data and the resumable
 * state.  On the CPU the engine updates those host buffers in place; on
 * the GPU it works on device copies (train_cuda.h), drawing the next
 * training batch into a second pinned slot while the device works on the
 * current one and evaluating from a third, and tr_engine_pull brings the
 * buffers back when they are to be saved.  Either way the results are
 * laid out alike, so checkpoints do not depend on where a run computed.
 *
 * Every call returns 0, or a negative value with a one-line reason in err:
 * TR_ENGINE_NOMEM when the device ran out of memory (a smaller batch may
 * fit), -1 for any other failure.  Nothing here ends the process.
 */
#ifndef ANDREA_TRAIN_ENGINE_H
#define ANDREA_TRAIN_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "ops/device.h"
#include "train/train.h"

enum { TR_ENGINE_NOMEM = -2 };

/* What tr_engine_pull brings back to the host buffers. */
enum { TR_PULL_PARAMS = 1, TR_PULL_GRADS = 2, TR_PULL_MOMENTS = 4 };

typedef struct tr_engine tr_engine;

/* The numbers one step reports. */
typedef struct {
	double loss;  /* mean cross-entropy of the step's batch, nats */
	double norm;  /* global gradient norm, before clipping */
	double lr;    /* the learning rate of the update */
	int stop;     /* some rank asked to end the run after this step */
} tr_step_out;

/* This process as one rank of data-parallel training on GPUs (dist.h):
 * rank `rank` of `world`, on GPU `gpu` of its host, the ranks finding
 * each other at `init` (rendezvous.h); with shard, the AdamW moments
 * sharded (ZeRO stage 1).  A wait on the other ranks in a step lasts at
 * most timeout_s, in the rendezvous and tr_engine_barrier at most
 * TR_RANKS_PATIENCE_S. */
typedef struct {
	int rank, world, gpu, shard;
	const char *init;
	double timeout_s;
} tr_ranks;
#define TR_RANKS_PATIENCE_S 600.0

/* The GPUs this process sees, counted without making a CUDA context (0
 * without CUDA): what a launcher of ranks may ask. */
int tr_engine_gpus(void);
/* Makes GPU gpu (modulo the GPUs seen) this process's: a rank calls it
 * before anything else touches CUDA, so that it makes no context on
 * another rank's GPU.  -1 where there is none. */
int tr_engine_use_gpu(int gpu);

/* 1 when dev computes products in precision (every device does fp32;
 * tf32 and bf16 need the GPU), else 0. */
int tr_engine_precision_ok(at_device dev, int precision);

/* Makes *e, the engine for steps over batches of B rows of T positions
 * drawn from data, computing on dev in precision with the attention as
 * asked (train.h's TR_ATTN_*), from m's parameters and
 * the moments mom1, mom2 (m->total floats each).  m, mom1, mom2 and data
 * must outlive the engine.  With ranks (NULL: alone; the GPU only), B is
 * the global batch, of which this rank takes its rows; every rank makes
 * its engine, and from then on calls step, eval, pull and barrier at the
 * same points of the run.  On the CPU, running out of memory reads "out
 * of memory (batch 8 x 1024 positions)". */
int tr_engine_new(tr_engine **e, tr_model *m, float *mom1, float *mom2,
		  const tr_data *data, int B, int T, at_device dev,
		  int precision, int attention, const tr_ranks *ranks,
		  char *err, size_t errlen);
void tr_engine_free(tr_engine *e);

/* Step st->step of the run st: its training batch (tr_data_train_batch
 * under st->seed), forward, backward, clipping to st->h.clip and one
 * AdamW update at the step's learning rate.  The caller counts the step.
 * On the GPU, the batch of step st->step + 1 is drawn while the device
 * works when that step is below stop_at; with ahead, its forward and
 * backward are launched too, before this step's loss is read.  Then the
 * caller's next call must not be tr_engine_pull of the gradients (they
 * are that step's); tr_engine_eval or another pull in between drops the
 * launched passes, run again with their step.  Every rank passes the
 * same ahead.
 * out->stop is stop (this process's wish to end the run here), or any
 * rank's. */
int tr_engine_step(tr_engine *e, const tr_state *st, long stop_at,
		   int ahead, int stop, tr_step_out *out, char *err,
		   size_t errlen);

/* Returns once every rank has reached it (at once when alone): where
 * rank 0 has written files while the others waited. */
int tr_engine_barrier(tr_engine *e, char *err, size_t errlen);

/* The mean loss over n held-out batches (tr_data_val_batch i of n). */
int tr_engine_eval(tr_engine *e, long n, double *loss, char *err,
		   size_t errlen);

/* The inputs and targets [B,T] of the last step (this rank's rows), in
 * the engine's host memory; valid until the next step or evaluation. */
void tr_engine_batch(const tr_engine *e, const int32_t **inputs,
		     const int32_t **targets);

/* Brings what (TR_PULL_ flags) of the last step into m->p, m->g, mom1
 * and mom2; on the CPU they are there already.  The gradients are the
 * last step's, summed over the ranks, before clipping; with sharded
 * moments, pull them no later than the moments. */
int tr_engine_pull(tr_engine *e, int what, char *err, size_t errlen);

/* The bytes of the engine's device buffers and the most device memory
 * seen in use so far; returns 1, or 0 on the CPU, which counts none. */
int tr_engine_memory(const tr_engine *e, size_t *buffers, size_t *peak);

/* Where and how the engine computes, for a closing line:
 * "NVIDIA H200 (bf16, GELU fused)", or "CPU (fp32)". */
void tr_engine_describe(const tr_engine *e, char *buf, size_t len);

#endif
