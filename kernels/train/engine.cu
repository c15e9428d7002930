// engine.cu - the training engine on the GPU (lib/train/train_cuda.h): its
// setup, the forward pass of a whole model, the update (the buffers are
// buffers.cu's, the backward pass backward.cu's, on the same state:
// engine.cuh).
//
// The forward runs the one GPU block (kernels/forward/block.cu) on this
// engine's buffers, keeping what the backward pass needs, on device
// buffers laid out as the CPU engine's.  What differs from the CPU: q, k
// and v come from one batched product with the three weights (for cuDNN
// one product with them side by side, as the engine lays them out); the
// residual adds ride in the products (the stream as the product's addend)
// or, in bf16, in the LayerNorm after them (the branch a bf16 product:
// y16);
// the attention is fused (cuDNN's, in bf16: no T x T weights) or mask,
// scale and softmax are one kernel, and so are its backward; softmax,
// cross-entropy and its gradient are one; the attention scale moves from
// the scores into the softmax.  GPT-2's form: the biases' gradients are
// the column sums of their products' output gradients, as products with a
// row of ones; a tied head multiplies by wte transposed and adds its
// gradient into wte's before the embedding's share.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>

#include "common/cublas_lazy.cuh"
#include "common/graph.cuh"
#include "model/arch.h"
#include "ops/attention_tc.cuh"
#include "train/engine.cuh"

// The copy of the head the products read (engine.cuh's head_weight), after
// each change of the parameters; its pads stay the zeros setup wrote.
static int copy_weights(tr_cuda *d)
{
	int C = d->cfg.d_model, V = d->cfg.vocab;
	if (!d->head_w)
		return 0;
	if (d->tied)
		return MM_CALL(d, tr_copy_rows, d->head_w, C, d->p + d->wte, C,
			       V, C);
	return MM_CALL(d, tr_copy_rows, d->head_w, d->Vp, d->p + d->lm_head,
		       V, C, V);
}

// Each layer's Wq, Wk, Wv in v (a whole vector of the parameters' layout
// on the device) from one after the other to side by side (to_side), or
// back, in place by way of side3; nothing where the engine keeps the
// model's layout (engine.cuh's qkv_side_by_side).
template <typename T>
static int qkv_layout(tr_cuda *d, T *v, int to_side)
{
	int C = d->cfg.d_model;
	size_t bytes = (size_t)3 * C * C * sizeof *v;
	T *side3 = (T *)d->side3;
	for (int l = 0; qkv_side_by_side(d) && l < d->cfg.n_layer; l++) {
		T *w = v + d->layer[l].wq;
		CU_CHECK(cudaMemcpyAsync(side3, w, bytes,
					 cudaMemcpyDeviceToDevice, at_cu_stream),
			 "changing the parameters' layout");
		TRY(to_side ? tr_cat_three(w, side3, C, C)
			    : tr_split_three(w, side3, C, C));
	}
	return 0;
}

// One AdamW moment onto the device: this rank's part of host (the whole
// run's; NULL: zeros), its pads zero.  The whole moment takes the
// parameters' layout in place where this rank keeps all of it, else by
// way of the gradients' buffer (float where sharded: ranks.cu).
static int upload_moment(tr_cuda *d, float *dev, const float *host)
{
	size_t n = host ? d->hi - d->lo : 0, f = sizeof(float);
	CU_CHECK(cudaMemset(dev, 0, d->shard_len * f), "zeroing the moments");
	if (!n)
		return 0;
	float *whole = d->shard ? d->g : dev;
	CU_CHECK(cudaMemcpy(whole, host, d->total * f, cudaMemcpyHostToDevice),
		 "copying the moments to the GPU");
	TRY(qkv_layout(d, whole, 1));
	if (d->shard)
		CU_CHECK(cudaMemcpy(dev + (d->lo - d->base), d->g + d->lo,
				    n * f, cudaMemcpyDeviceToDevice),
			 "copying the moments to the GPU");
	return 0;
}

static int setup(tr_cuda *d, const tr_model *m, const float *mom1,
		 const float *mom2)
{
	tr_piece *pieces = NULL;
	if (tr_dist_pieces(m, d->lo, d->hi, ADAMW_CHUNK, &pieces,
			   &d->npieces) < 0)
		return at_cu_failf("out of host memory");
	int rc = tr_alloc_all(d);
	if (rc == 0) {
		cudaError_t e = cudaMemcpy(d->pieces, pieces,
					   d->npieces * sizeof *pieces,
					   cudaMemcpyHostToDevice);
		if (e != cudaSuccess)
			rc = at_cu_fail(e, "copying the update's pieces", __FILE__,
					__LINE__);
	}
	free(pieces);
	TRY(rc);
	size_t f = sizeof(float);
	CU_CHECK(cudaMemset(d->p, 0, d->padded * f), "zeroing the parameters");
	CU_CHECK(cudaMemcpy(d->p, m->p, d->total * f, cudaMemcpyHostToDevice),
		 "copying the parameters to the GPU");
	TRY(qkv_layout(d, d->p, 1));
	TRY(upload_moment(d, d->m1, mom1));
	TRY(upload_moment(d, d->m2, mom2));
	CU_CHECK(cudaMemset(grad_at(d, 0), 0, d->padded * grad_size(d)),
		 "zeroing the gradients");
	if (d->p16)
		TRY(at_cu_to_bf16(d->p16, d->p, d->total));
	if (d->head_w)
		CU_CHECK(cudaMemset(d->head_w, 0, (size_t)d->cfg.d_model * d->Vp *
					   (d->prec == AT_PREC_BF16 ? 2 : 4)),
			 "zeroing the padded head");
	TRY(copy_weights(d));
	CU_CHECK(cudaMemset(d->res, 0, RES_N * sizeof(double)), "zeroing results");
	BLAS_CHECK(at_cublas.set_workspace(d->blas.h, d->blas_ws,
					   AT_BLAS_WORKSPACE),
		   "setting cuBLAS's workspace");
	if (d->ones)
		TRY(tr_fill_ones(d));
	CU_CHECK(cudaDeviceSynchronize(), "setting up the training engine");
	return 0;
}

extern "C" int tr_cuda_gelu_fused(const tr_cuda *d)
{
	return d->gelu_mm != NULL;
}

extern "C" int tr_cuda_attention_fused(const tr_cuda *d)
{
	return d->fused_attn;
}

extern "C" int tr_cuda_graphed(const tr_cuda *d)
{
	return d->step_graph != NULL;
}

// Whether the engine fuses the attention (train.h's TR_ATTN_*): in bf16
// where cuDNN plans the block's shape, in fp32/tf32 where the tensor-core
// kernels take the heads (others run andrea's FMA kernels only when
// asked: slower than the products); -1 with the reason where fused is
// asked for and impossible.
static int attention_choice(int B, int T, int H, int D, int precision,
			    int attention)
{
	if (attention == TR_ATTN_EXPLICIT)
		return 0;
	int takes = at_cu_fused_attention_takes(precision, B, T, H, D,
						3 * H * D, 1);
	if (precision != AT_PREC_BF16) {
		if (attention == TR_ATTN_FUSED) // wherever the kernels fit
			return at_cu_attention_fits((long long)B * H, D) < 0 ? -1
									    : 1;
		return takes;
	}
	if (takes)
		return 1;
	if (attention == TR_ATTN_FUSED) { // the reason, less its "CUDA: "
		char why[200];
		const char *e = at_cuda_error();
		snprintf(why, sizeof why, "%s",
			 strncmp(e, "CUDA: ", 6) ? e : e + 6);
		return at_cu_failf("no fused attention in bf16 here: %s", why);
	}
	return 0;
}

// The step as a graph, alone (the ranks' sums wait on events of a side
// stream, kept eager): its stream; and the event that marks a step's
// results on the host.
static int streams_setup(tr_cuda *d)
{
	d->graphs = at_cu_graphs_wanted() && !d->comm;
	if (d->graphs)
		CU_CHECK(cudaStreamCreate(&d->stream), "creating a stream");
	CU_CHECK(cudaEventCreateWithFlags(&d->results_ev,
					  cudaEventDisableTiming),
		 "creating an event");
	return 0;
}

extern "C" tr_cuda *tr_cuda_new(const tr_model *m, const float *mom1,
				const float *mom2, int B, int T, int precision,
				int attention, const tr_cuda_ranks *ranks)
{
	tr_cuda *d = (tr_cuda *)calloc(1, sizeof *d);
	if (!d) {
		at_cu_failf("out of host memory");
		return NULL;
	}
	d->cfg = m->cfg;
	d->B = B;
	d->T = T;
	d->prec = precision;
	d->Vp = (m->cfg.vocab + 7) & ~7;
	d->total = m->total;
	d->wte = m->wte;
	d->wpe = m->wpe;
	d->lnfw = m->lnfw;
	d->lnfb = m->lnfb;
	d->lm_head = m->lm_head;
	d->biases = m->biases;
	d->tied = m->tied;
	d->layer = (tr_layer_off *)malloc((m->cfg.n_layer + 1) * sizeof *d->layer);
	if (!d->layer) {
		free(d);
		at_cu_failf("out of host memory");
		return NULL;
	}
	memcpy(d->layer, m->layer, m->cfg.n_layer * sizeof *d->layer);
	d->blas.prec = precision;
	d->blas.tune = 1; // every step runs the same products
	d->fused_attn = attention_choice(B, T, m->cfg.n_head,
					 m->cfg.d_model / m->cfg.n_head,
					 precision, attention);
	if (d->fused_attn < 0 || at_cublas_load() < 0) {
		tr_cuda_free(d);
		return NULL;
	}
	cublasStatus_t s = at_cublas.create(&d->blas.h);
	if (s != CUBLAS_STATUS_SUCCESS) {
		at_cu_blas_fail(s, "creating the cuBLAS handle", __FILE__, __LINE__);
		d->blas.h = nullptr;
		tr_cuda_free(d);
		return NULL;
	}
	// cuBLASLt's GELU epilogue is planned without a bias
	if (tr_plan_gelu_fused(precision) && !m->biases &&
	    tr_gelu_mm_new(&d->gelu_mm, precision, B * T, 4 * m->cfg.d_model,
			   m->cfg.d_model) < 0) {
		tr_cuda_free(d);
		return NULL;
	}
	d->head_rows = tr_head_rows(B * T, d->Vp, precision);
	if (d->head_rows < 0) {
		tr_cuda_free(d);
		return NULL;
	}
	d->grads16 = tr_plan_grads16(precision, ranks);
	d->gelu_kept = tr_plan_gelu_kept(d, m, at_cu_release_stack());
	if (d->gelu_kept < 0) {
		tr_cuda_free(d);
		return NULL;
	}
	tr_ranks_plan(d, m, ranks);
	if (setup(d, m, mom1, mom2) < 0 || tr_ranks_join(d, m, ranks) < 0 ||
	    streams_setup(d) < 0) {
		at_cu_kept_error kept;
		tr_cuda_free(d);
		kept.restore();
		return NULL;
	}
	return d;
}

extern "C" void tr_cuda_free(tr_cuda *d)
{
	if (!d)
		return;
	cudaDeviceSynchronize();
	tr_ranks_free(d);
	for (int i = 0; i < d->nbufs; i++)
		cudaFree(d->bufs[i]);
	for (int s = 0; s < SLOTS; s++) {
		cudaFreeHost(d->h_in[s]);
		cudaFreeHost(d->h_tg[s]);
		cudaFreeHost(d->h_off[s]);
		cudaFreeHost(d->h_pos[s]);
	}
	cudaFreeHost(d->h_res);
	if (d->step_graph)
		cudaGraphExecDestroy(d->step_graph);
	if (d->stream)
		cudaStreamDestroy(d->stream);
	if (d->results_ev)
		cudaEventDestroy(d->results_ev);
	tr_gelu_mm_free(d->gelu_mm);
	if (d->blas.h)
		at_cublas.destroy(d->blas.h);
	free(d->h_cursor);
	free(d->layer);
	free(d);
	cudaGetLastError();
}

extern "C" void tr_cuda_batch(tr_cuda *d, int slot, int32_t **inputs,
			      int32_t **targets)
{
	*inputs = d->h_in[slot];
	*targets = d->h_tg[slot];
}

// A counting sort of the positions by input id: off[v] .. off[v+1] index
// pos, positions of id v in increasing order.
extern "C" void tr_cuda_prepare(tr_cuda *d, int slot)
{
	int V = d->cfg.vocab, BT = d->B * d->T;
	const int32_t *in = d->h_in[slot];
	int *off = d->h_off[slot], *pos = d->h_pos[slot], *cur = d->h_cursor;
	memset(off, 0, (V + 1) * sizeof *off);
	for (int i = 0; i < BT; i++)
		off[in[i] + 1]++;
	for (int v = 0; v < V; v++)
		off[v + 1] += off[v];
	memcpy(cur, off, V * sizeof *cur);
	for (int i = 0; i < BT; i++)
		pos[cur[in[i]]++] = i;
}

// The fused GELU product of the block forward: cuBLASLt's epilogue.
static int fused_fc(void *ctx, const void *ln2, const void *wfc, void *gelu,
		    void *pre)
{
	return tr_gelu_mm_fwd((tr_gelu_mm *)ctx, ln2, wfc, gelu, pre);
}

// Layer l forward through the one GPU block, its activations kept in the
// engine's per-layer buffers.
static int block_forward(tr_cuda *d, int l)
{
	const tr_layer_off *o = &d->layer[l];
	int B = d->B, T = d->T, C = d->cfg.d_model, H = d->cfg.n_head;
	size_t BT = (size_t)B * T, BTC = BT * C, lr = (size_t)l * BT;
	size_t TT = (size_t)B * H * T * T;
	void *q = mm_at(d, d->qkv, l * 3 * BTC);
	at_cu_block_w w = {d->p + o->ln1w, d->p + o->ln1b, d->p + o->ln2w,
			   d->p + o->ln2b, W(d, o->wq), W(d, o->wo),
			   W(d, o->fc), W(d, o->proj)};
	if (qkv_side_by_side(d))
		w.wqkv_cat = wqkv_cat_at(d, l);
	if (d->biases) { // bq, bk, bv lie one after the other (train.h)
		w.bqkv = d->p + o->bq;
		w.bo = d->p + o->bo;
		w.bfc = d->p + o->bfc;
		w.bproj = d->p + o->bproj;
	}
	at_cu_fc_fused fused = {fused_fc, d->gelu_mm};
	at_cu_block_acts a = {};
	a.ln1 = mm_at(d, d->ln1, l * BTC);
	a.ln2 = mm_at(d, d->ln2, l * BTC);
	a.ln1_mean = d->ln1_mean + lr;
	a.ln1_rstd = d->ln1_rstd + lr;
	a.ln2_mean = d->ln2_mean + lr;
	a.ln2_rstd = d->ln2_rstd + lr;
	a.q = q;
	a.k = mm_at(d, q, qkv_apart(d));
	a.v = mm_at(d, q, 2 * qkv_apart(d));
	if (d->fused_attn) {
		a.lse = lse_at(d, l);
	} else {
		a.att = d->att + l * TT;
		a.att16 = d->att16 ? d->att16 + l * TT : NULL;
	}
	a.merged = mm_at(d, d->merged, l * BTC);
	a.xmid = d->xmid + l * BTC;
	a.fc = fc_at(d, l);
	a.gelu = gelu_at(d, l);
	a.buf3 = d->buf3;
	a.fused = d->gelu_mm ? &fused : NULL;
	a.layer = l;
	a.y16 = d->y16;
	a.x_prev = d->y16 && l > 0 ? d->xmid + (l - 1) * BTC : NULL;
	return at_cu_block_fwd(&d->blas, &w, &a, NULL, d->resid + l * BTC,
			       d->resid + (l + 1) * BTC, B, T, C, H);
}


// The step's launches once its batch is on the device: the forward pass,
// the loss and, with backward_too, the backward pass.
static int step_launches(tr_cuda *d, int backward_too)
{
	int B = d->B, T = d->T, C = d->cfg.d_model;
	int L = d->cfg.n_layer, BT = B * T;
	size_t BTC = (size_t)BT * C;
	TRY(at_cuda_embed_forward(d->resid, d->in, d->p + d->wte, d->p + d->wpe,
				  B, T, C));
	for (int l = 0; l < L; l++)
		TRY(block_forward(d, l));
	if (d->y16 && L > 0) // the last block's x_out = xmid + y16 formed here
		TRY(at_cu_layernorm_add_fwd((bf16 *)d->lnf, d->lnf_mean,
					    d->lnf_rstd, d->resid + L * BTC,
					    d->xmid + (L - 1) * BTC, d->y16,
					    d->p + d->lnfw, d->p + d->lnfb, BT,
					    C, AT_LN_EPS));
	else
		TRY(MM_CALL(d, at_cu_layernorm_fwd, d->lnf, d->lnf_mean,
			    d->lnf_rstd, d->resid + L * BTC, d->p + d->lnfw,
			    d->p + d->lnfb, BT, C, AT_LN_EPS));
	TRY(tr_head_loss(d, backward_too));
	return backward_too ? tr_backward(d) : 0;
}

static int training_step_launches(void *d)
{
	return step_launches((tr_cuda *)d, 1);
}

// Records the training step as a graph; without graphs from here on if
// recording fails.
static void record_step(tr_cuda *d)
{
	at_cu_record(d->stream, training_step_launches, d, &d->step_graph);
	if (!d->step_graph)
		d->graphs = 0;
}

extern "C" int tr_cuda_forward(tr_cuda *d, int slot, int backward_too)
{
	int BT = d->B * d->T, V = d->cfg.vocab;
	CU_CHECK(cudaMemcpyAsync(d->in, d->h_in[slot], BT * sizeof(int32_t),
				 cudaMemcpyHostToDevice), "copying the batch");
	CU_CHECK(cudaMemcpyAsync(d->tg, d->h_tg[slot], BT * sizeof(int32_t),
				 cudaMemcpyHostToDevice), "copying the batch");
	if (backward_too) {
		CU_CHECK(cudaMemcpyAsync(d->off, d->h_off[slot],
					 (V + 1) * sizeof(int),
					 cudaMemcpyHostToDevice),
			 "copying the batch");
		CU_CHECK(cudaMemcpyAsync(d->pos, d->h_pos[slot], BT * sizeof(int),
					 cudaMemcpyHostToDevice),
			 "copying the batch");
	}
	if (backward_too && d->graphs) {
		if (!d->step_graph && d->eager_steps++ > 0)
			record_step(d);
		if (d->step_graph) {
			// replayed on the default stream, where the update and
			// the copies go: no wait across streams
			CU_CHECK(cudaGraphLaunch(d->step_graph, 0),
				 "the training step");
			return 0;
		}
	}
	return step_launches(d, backward_too);
}

extern "C" int tr_cuda_update(tr_cuda *d, const tr_hparams *h, double lr,
			      long t)
{
	float c1 = (float)(1.0 - pow(h->beta1, (double)t));
	float c2 = (float)(1.0 - pow(h->beta2, (double)t));
	// sharded, the bf16 copies follow the gathered parameters
	bf16 *p16 = d->shard ? NULL : d->p16;
	TRY(GRAD_CALL(d, tr_adamw, 0, d->p, p16, d->m1, d->m2, d->base,
		      d->pieces, d->npieces, (float)lr, h->beta1, h->beta2,
		      (float)h->eps, (float)h->weight_decay, c1, c2, h->clip,
		      d->res + RES_NORMSQ));
	TRY(tr_ranks_params(d));
	return copy_weights(d);
}

extern "C" int tr_cuda_results(tr_cuda *d, int stop)
{
	double *h = d->h_res;
	if (d->comm) { // the mean of the ranks' means; any rank's stop
		h[RES_STOP] = stop;
		CU_CHECK(cudaMemcpyAsync(d->res + RES_STOP, h + RES_STOP,
					 sizeof *h, cudaMemcpyHostToDevice),
			 "sending the stop flag");
		TRY(at_comm_sum(d->comm, d->res, 2, AT_COMM_DOUBLE, 0));
	}
	CU_CHECK(cudaMemcpyAsync(h, d->res, RES_N * sizeof *h,
				 cudaMemcpyDeviceToHost), "reading the loss");
	CU_CHECK(cudaEventRecord(d->results_ev, 0), "reading the loss");
	d->results_queued = 1;
	return 0;
}

extern "C" int tr_cuda_finish(tr_cuda *d, double *loss, double *norm,
			      int *stop)
{
	if (!d->results_queued)
		TRY(tr_cuda_results(d, stop && *stop));
	d->results_queued = 0;
	// asked while the step runs (the step allocates nothing), so that
	// the driver's answer does not hold up the next step
	size_t fr = 0, tot = 0;
	if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > d->peak_used)
		d->peak_used = tot - fr;
	cudaGetLastError();
	TRY(tr_ranks_wait(d, d->results_ev, d->timeout_s, "the training step"));
	double *h = d->h_res;
	*loss = h[RES_LOSS] / d->world;
	if (norm)
		*norm = sqrt(h[RES_NORMSQ]);
	if (stop && d->comm)
		*stop = h[RES_STOP] > 0;
	return 0;
}

extern "C" int tr_cuda_barrier(tr_cuda *d, double timeout_s)
{
	if (!d->comm)
		return 0;
	TRY(at_comm_sum(d->comm, d->res + RES_STOP, 1, AT_COMM_DOUBLE, 0));
	CU_CHECK(cudaEventRecord(d->results_ev, 0), "waiting for the other ranks");
	return tr_ranks_wait(d, d->results_ev, timeout_s,
			     "waiting for the other ranks");
}

// v (the engine's layout, on the device) into host in the model's
// layout, the device's left as it was whether the copy worked or not.
template <typename T>
static int download(tr_cuda *d, T *host, T *v)
{
	TRY(qkv_layout(d, v, 0));
	cudaError_t e = cudaMemcpy(host, v, d->total * sizeof(T),
				   cudaMemcpyDeviceToHost);
	TRY(qkv_layout(d, v, 1));
	if (e != cudaSuccess)
		return at_cu_fail(e, "copying the model from the GPU", __FILE__,
				  __LINE__);
	return 0;
}

// The bf16 gradients into host's floats: copied into host's second half,
// then widened from the front (element i's float is written after the
// bf16 elements up to i are read).
static int download_grads16(tr_cuda *d, float *host)
{
	size_t n = d->total;
	uint16_t *half = (uint16_t *)host + n;
	TRY(download(d, (bf16 *)half, d->g16));
	for (size_t i = 0; i < n; i++) {
		uint32_t bits = (uint32_t)half[i] << 16;
		memcpy(host + i, &bits, sizeof bits);
	}
	return 0;
}

extern "C" int tr_cuda_download(tr_cuda *d, float *p, float *g, float *mom1,
				float *mom2)
{
	float *host[4] = {p, g, mom1, mom2};
	float *dev[4] = {d->p, d->g, d->m1, d->m2};
	for (int i = 0; i < 4; i++) {
		if (!host[i])
			continue;
		if (i == 1 && d->grads16) {
			TRY(download_grads16(d, host[i]));
			continue;
		}
		// sharded: the gradients' shards in place, each moment's
		// gathered over the gradients
		if (d->shard && i > 0) {
			float *from = i == 1 ? d->g + d->base : dev[i];
			TRY(at_comm_gather(d->comm, from, d->g,
					   d->shard_len * sizeof(float), 0));
			dev[i] = d->g;
		}
		TRY(download(d, host[i], dev[i]));
	}
	return 0;
}

extern "C" void tr_cuda_memory(const tr_cuda *d, size_t *buffers,
			       size_t *peak_in_use)
{
	*buffers = d->bytes;
	*peak_in_use = d->peak_used;
}
