/* engine.c - the training engine of engine.h: the one place where a run
 * goes to the CPU (forward.c, backward.c, adamw.c) or to the GPU
 * (train_cuda.h) with its batch slots. */
#include "train/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_cuda.h"
#include "train/dist.h"
#include "train/rendezvous.h"
#include "train/train_cuda.h"

/* The GPU's slots: two for training batches, one for evaluation. */
enum { SLOT_EVAL = 2 };

struct tr_engine {
	tr_model *m;
	float *mom1, *mom2;
	const tr_data *data;
	int B, T, precision;
	int first, rows;    /* this rank's rows of each batch of B (all alone) */
	tr_cuda *gpu;       /* the GPU's engine, or NULL on the CPU */
	int slot;           /* GPU: the training slot whose batch is next */
	long drawn;         /* GPU: the step whose batch waits there; -1 none */
	long launched;      /* GPU: the step whose forward and backward were
			       launched ahead; -1 none */
	int32_t *in, *tg;   /* the last step's batch: the CPU's buffers, or
			       the GPU slot's pinned ones */
	at_fwd *eval;       /* CPU: the forward engine of the evaluation */
	at_weights w;       /* CPU: its view of m->p */
	at_block_w *layers;
};

/* The reason of the failed GPU call, in err; its memory running out is
 * TR_ENGINE_NOMEM. */
static int gpu_error(char *err, size_t errlen)
{
	const char *e = at_cuda_error();
	snprintf(err, errlen, "%s", e);
	return strstr(e, "out of memory") ? TR_ENGINE_NOMEM : -1;
}

/* The CPU's message when a batch of B x T does not fit. */
static int out_of_memory(int B, int T, char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory (batch %d x %d positions)", B, T);
	return -1;
}

int tr_engine_precision_ok(at_device dev, int precision)
{
	return precision == AT_PREC_FP32 || dev == AT_DEV_CUDA;
}

int tr_engine_gpus(void)
{
	return tr_cuda_gpus();
}

int tr_engine_use_gpu(int gpu)
{
	return tr_cuda_use_gpu(gpu);
}

/* The GPU engine of rank r: its GPU, its rows of the batch of B, the
 * communicator's id from rank 0; once every rank has joined, the
 * rendezvous is cleared away. */
static int gpu_of_rank(tr_engine *e, const tr_ranks *r, int attention,
		       char *err, size_t errlen)
{
	tr_cuda_ranks cr = {.rank = r->rank, .world = r->world,
			    .shard = r->shard, .timeout_s = r->timeout_s};
	if (tr_dist_rows(e->B, r->rank, r->world, &e->first, &e->rows, err,
			 errlen) < 0)
		return -1;
	if (tr_cuda_use_gpu(r->gpu) < 0 ||
	    (r->rank == 0 && tr_cuda_comm_id(cr.id) < 0))
		return gpu_error(err, errlen);
	if (tr_rendezvous(r->init, r->rank, r->world, cr.id,
			  TR_RANKS_PATIENCE_S, err, errlen) < 0)
		return -1;
	e->gpu = tr_cuda_new(e->m, e->mom1, e->mom2, e->rows, e->T,
			     e->precision, attention, &cr);
	if (!e->gpu)
		return gpu_error(err, errlen);
	tr_rendezvous_done(r->init, r->rank);
	return 0;
}

int tr_engine_new(tr_engine **out, tr_model *m, float *mom1, float *mom2,
		  const tr_data *data, int B, int T, at_device dev,
		  int precision, int attention, const tr_ranks *ranks,
		  char *err, size_t errlen)
{
	tr_engine *e;
	size_t bt = (size_t)B * T;
	*out = NULL;
	if (ranks && dev != AT_DEV_CUDA) {
		snprintf(err, errlen, "training on several ranks needs the GPU "
			 "(--device cuda)");
		return -1;
	}
	if (!tr_engine_precision_ok(dev, precision)) {
		snprintf(err, errlen, "the CPU computes in fp32, not %s",
			 at_precision_name(precision));
		return -1;
	}
	if (dev != AT_DEV_CUDA && attention == TR_ATTN_FUSED) {
		snprintf(err, errlen, "the fused attention trains on the GPU "
			 "only");
		return -1;
	}
	if (bt > (1u << 26) || !(e = calloc(1, sizeof *e)))
		return out_of_memory(B, T, err, errlen);
	*e = (tr_engine){.m = m, .mom1 = mom1, .mom2 = mom2, .data = data,
			 .B = B, .T = T, .precision = precision, .rows = B,
			 .drawn = -1, .launched = -1};
	if (ranks) {
		int rc = gpu_of_rank(e, ranks, attention, err, errlen);
		if (rc < 0) {
			free(e);
			return rc;
		}
	} else if (dev == AT_DEV_CUDA) {
		if (!(e->gpu = tr_cuda_new(m, mom1, mom2, B, T, precision,
					   attention, NULL))) {
			free(e);
			return gpu_error(err, errlen);
		}
	} else if (tr_acts_alloc(m, B, T) < 0 ||
		   !(e->in = malloc(bt * sizeof *e->in)) ||
		   !(e->tg = malloc(bt * sizeof *e->tg)) ||
		   !(e->layers = malloc(((size_t)m->cfg.n_layer + 1) *
					sizeof *e->layers))) {
		tr_engine_free(e);
		return out_of_memory(B, T, err, errlen);
	} else {
		tr_model_weights(m, &e->w, e->layers);
		if (at_fwd_new(&e->eval, &e->w, AT_DEV_CPU, AT_PREC_FP32, 0, err,
			       errlen) < 0) {
			tr_engine_free(e);
			return -1;
		}
	}
	*out = e;
	return 0;
}

void tr_engine_free(tr_engine *e)
{
	if (!e)
		return;
	if (e->gpu)
		tr_cuda_free(e->gpu); /* the slots' pinned buffers with it */
	else {
		free(e->in);
		free(e->tg);
	}
	at_fwd_free(e->eval);
	free(e->layers);
	free(e);
}

/* Draws the training batch of step s into GPU slot `slot` and indexes
 * it. */
static void draw_gpu_batch(tr_engine *e, int slot, uint64_t seed, long s)
{
	int32_t *in, *tg;
	tr_cuda_batch(e->gpu, slot, &in, &tg);
	tr_data_train_batch(e->data, seed, s, e->first, e->rows, e->T, in, tg);
	tr_cuda_prepare(e->gpu, slot);
	e->drawn = s;
}

/* The step on the GPU: the batch waits in e->slot (drawn now if the last
 * step did not draw it ahead); while the device works, the host draws
 * the next one into the other slot.  With ahead, the next step's forward
 * and backward are queued before this step's loss is waited for, so that
 * the device does not idle while the host reads it and launches them
 * (they change no parameter, and the update stays with its own step). */
static int step_gpu(tr_engine *e, const tr_state *st, long stop_at,
		    int ahead, tr_step_out *out, char *err, size_t errlen)
{
	int stop = out->stop;
	if (e->drawn != st->step)
		draw_gpu_batch(e, e->slot, st->seed, st->step);
	tr_cuda_batch(e->gpu, e->slot, &e->in, &e->tg);
	if (e->launched != st->step && tr_cuda_forward(e->gpu, e->slot, 1) < 0)
		return gpu_error(err, errlen);
	e->launched = -1;
	out->lr = tr_lr_at(&st->h, st->step);
	if (tr_cuda_update(e->gpu, &st->h, out->lr, st->step + 1) < 0 ||
	    tr_cuda_results(e->gpu, stop) < 0)
		return gpu_error(err, errlen);
	if (st->step + 1 < stop_at) {
		draw_gpu_batch(e, 1 - e->slot, st->seed, st->step + 1);
		if (ahead) {
			if (tr_cuda_forward(e->gpu, 1 - e->slot, 1) < 0)
				return gpu_error(err, errlen);
			e->launched = st->step + 1;
		}
	}
	if (tr_cuda_finish(e->gpu, &out->loss, &out->norm, &stop) < 0)
		return gpu_error(err, errlen);
	out->stop = stop;
	e->slot = 1 - e->slot;
	return 0;
}

int tr_engine_step(tr_engine *e, const tr_state *st, long stop_at,
		   int ahead, int stop, tr_step_out *out, char *err,
		   size_t errlen)
{
	out->stop = stop;
	if (e->gpu)
		return step_gpu(e, st, stop_at, ahead, out, err, errlen);
	tr_model *m = e->m;
	int B = e->B, T = e->T;
	tr_data_train_batch(e->data, st->seed, st->step, 0, B, T, e->in, e->tg);
	out->loss = tr_forward(m, e->in, e->tg, B, T);
	tr_backward(m, e->in, e->tg, B, T);
	out->norm = tr_grad_norm(m->g, m->total);
	double clip = st->h.clip, norm = out->norm;
	double scale = clip > 0 && norm > clip ? clip / norm : 1.0;
	out->lr = tr_lr_at(&st->h, st->step);
	tr_adamw_update(m, e->mom1, e->mom2, &st->h, out->lr, st->step + 1,
			scale);
	return 0;
}

int tr_engine_eval(tr_engine *e, long n, double *loss, char *err,
		   size_t errlen)
{
	int B = e->B, T = e->T;
	double sum = 0.0;
	e->launched = -1; /* a step launched ahead: its loss is overwritten */
	for (long i = 0; i < n; i++) {
		double l;
		if (e->gpu) { /* the next training batch waits in its slot */
			int32_t *in, *tg;
			tr_cuda_batch(e->gpu, SLOT_EVAL, &in, &tg);
			tr_data_val_batch(e->data, (int)i, (int)n, B, e->first,
					  e->rows, T, in, tg);
			if (tr_cuda_forward(e->gpu, SLOT_EVAL, 0) < 0 ||
			    tr_cuda_finish(e->gpu, &l, NULL, NULL) < 0)
				return gpu_error(err, errlen);
		} else {
			tr_acts *a = &e->m->a;
			tr_data_val_batch(e->data, (int)i, (int)n, B, 0, B, T,
					  e->in, e->tg);
			if (at_fwd_logits(e->eval, a->logits, e->in, B, T, err,
					  errlen) < 0)
				return -1;
			l = tr_crossentropy_forward(a->probs, a->losses, a->logits,
						    e->tg, B * T, e->m->cfg.vocab);
		}
		sum += l;
	}
	*loss = sum / n;
	return 0;
}

int tr_engine_barrier(tr_engine *e, char *err, size_t errlen)
{
	if (e->gpu && tr_cuda_barrier(e->gpu, TR_RANKS_PATIENCE_S) < 0)
		return gpu_error(err, errlen);
	return 0;
}

void tr_engine_batch(const tr_engine *e, const int32_t **inputs,
		     const int32_t **targets)
{
	*inputs = e->in;
	*targets = e->tg;
}

int tr_engine_pull(tr_engine *e, int what, char *err, size_t errlen)
{
	if (!e->gpu)
		return 0;
	e->launched = -1; /* sharded, the moments are gathered in the
			     gradients' buffer */
	int mom = what & TR_PULL_MOMENTS;
	if (tr_cuda_download(e->gpu, what & TR_PULL_PARAMS ? e->m->p : NULL,
			     what & TR_PULL_GRADS ? e->m->g : NULL,
			     mom ? e->mom1 : NULL, mom ? e->mom2 : NULL) < 0)
		return gpu_error(err, errlen);
	return 0;
}

int tr_engine_memory(const tr_engine *e, size_t *buffers, size_t *peak)
{
	*buffers = *peak = 0;
	if (!e->gpu)
		return 0;
	tr_cuda_memory(e->gpu, buffers, peak);
	return 1;
}

void tr_engine_describe(const tr_engine *e, char *buf, size_t len)
{
	if (!e->gpu) {
		snprintf(buf, len, "CPU (%s)", at_precision_name(e->precision));
		return;
	}
	char parts[40] = "";
	int n = tr_cuda_head_parts(e->gpu);
	if (n > 1)
		snprintf(parts, sizeof parts, ", head in %d parts", n);
	snprintf(buf, len, "%s (%s%s%s%s%s)", at_cuda_device_name(),
		 at_precision_name(e->precision),
		 tr_cuda_gelu_fused(e->gpu) ? ", GELU fused" : "",
		 tr_cuda_attention_fused(e->gpu) ? ", attention fused" : "",
		 parts, tr_cuda_graphed(e->gpu) ? ", CUDA graph" : "");
}
