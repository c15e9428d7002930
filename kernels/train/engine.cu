// engine.cu - the training engine on the GPU (lib/train/train_cuda.h): its
// buffers, the forward and backward passes of a whole model, the update.
//
// The forward runs the one GPU block (kernels/forward/block.cu) on this
// engine's buffers, keeping what the backward pass needs; the backward
// mirrors lib/train/backward.c op for op, on device buffers laid out as
// the CPU engine's.  What differs from the CPU: q, k and v come from one
// batched product with the three weights; the residual adds ride in the
// products (beta = 1 onto a copy of the input); mask, scale and softmax
// are one kernel, and so are its backward, and softmax, cross-entropy and
// its gradient; the attention scale moves from the scores into the
// softmax.  GPT-2's form: the biases' gradients are the column sums of
// their products' output gradients, as products with a row of ones; a
// tied head multiplies by wte transposed and adds its gradient into wte's
// before the embedding's share.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>

#include "train/train_kernels.cuh"
#include "common/cublas_lazy.cuh"
#include "model/arch.h"

#define MAX_BUFS 64
#define SLOTS 3 // two for training batches, one for evaluation

struct tr_cuda {
	at_config cfg;
	int B, T, prec;
	size_t total;
	tr_layer_off *layer; // host copy of the layout
	size_t wte, wpe, lnfw, lnfb, lm_head;
	int biases, tied;                // the model's form (train.h)
	at_cu_gemm_mode blas;
	tr_gelu_mm *gelu_mm;             // NULL: the GELU is a kernel apart
	void *bufs[MAX_BUFS]; // every device allocation, for freeing
	int nbufs;
	size_t bytes, peak_used;

	// parameters, gradients, moments; bf16 copies of the parameters
	float *p, *g, *m1, *m2;
	bf16 *p16;
	tr_chunk *chunks;
	int nchunks;
	// the batch on the device
	int32_t *in, *tg;
	int *off, *pos;
	// activations (mm: float, or bf16 in bf16 mode)
	float *resid, *xmid;             // (L+1) x [BT,C], L x [BT,C]
	void *ln1, *ln2;                 // L x [BT,C] mm
	float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; // L x [BT]
	void *qkv;                       // L x 3 x [B,H,T,D] mm
	float *att;                      // L x [B,H,T,T] (explicit attention)
	bf16 *att16;                     // L x [B,H,T,T], bf16 mode
	int fused_attn;                  // else explicit (tr_cuda_new)
	float *lse;                      // L x [B,H,T] (fused attention)
	float *delta;                    // [B,H,T] fused fp32 backward scratch
	void *merged;                    // L x [BT,C] mm
	void *fc;                        // L x [BT,F], mm when gelu_mm, else float
	void *gelu;                      // L x [BT,F] mm
	void *lnf;                       // [BT,C] mm
	float *lnf_mean, *lnf_rstd;      // [BT]
	float *logits;                   // [BT,V]; the gradient in fp32 mode
	bf16 *dlogits16;                 // [BT,V], bf16 mode
	float *losses;                   // [BT]
	// backward scratch
	float *buf3;                     // 3 x [BT,C]
	float *d_resid, *d_ln, *d_merged; // [BT,C]
	bf16 *dr16;                      // [BT,C], bf16 mode
	void *d_out;                     // [BT,C] mm
	void *d_qkv;                     // 3 x [BT,C] mm
	float *d_fc;                     // [BT,F]
	bf16 *d_fc16;                    // [BT,F], bf16 mode
	float *d_att;                    // [B,H,T,T] (explicit attention)
	bf16 *ds16;                      // [B,H,T,T], bf16 mode
	float *ln_part;                  // 2 x LN_SPLITS x C
	void *ones;                      // [BT] mm, for the biases' gradients
	double *res;                     // loss, squared norm
	double *norm_part;               // NORM_BLOCKS
	// pinned host memory
	int32_t *h_in[SLOTS], *h_tg[SLOTS];
	int *h_off[SLOTS], *h_pos[SLOTS], *h_cursor;
	double *h_res;
};

// A device buffer of n elements of size es, counted and remembered.
static int dalloc(tr_cuda *d, void *pp, size_t n, size_t es, const char *what)
{
	void **p = (void **)pp;
	if (d->nbufs == MAX_BUFS)
		return at_cu_failf("too many device buffers (%s)", what);
	TRY(at_cu_alloc(p, n * es, what));
	d->bufs[d->nbufs++] = *p;
	d->bytes += n * es;
	return 0;
}

static int halloc(void *pp, size_t bytes, const char *what)
{
	CU_CHECK(cudaMallocHost((void **)pp, bytes ? bytes : 1), what);
	return 0;
}

// The element at offset i of an mm buffer.
static inline void *mm_at(const tr_cuda *d, void *base, size_t i)
{
	return (char *)base + i * (d->prec == AT_PREC_BF16 ? 2 : 4);
}

// Parameter off as a product operand: the bf16 copy in bf16 mode.
static inline const void *W(const tr_cuda *d, size_t off)
{
	return d->prec == AT_PREC_BF16 ? (const void *)(d->p16 + off)
				  : (const void *)(d->p + off);
}

// Layer l's slice of the MLP's pre-activations.
static inline void *fc_at(const tr_cuda *d, int l)
{
	size_t i = (size_t)l * d->B * d->T * 4 * d->cfg.d_model;
	return d->gelu_mm ? mm_at(d, d->fc, i) : (void *)((float *)d->fc + i);
}

// Calls fn<bf16> or fn<float> on the mm buffer ptr.
#define MM_CALL(d, fn, ptr, ...)                                        \
	((d)->prec == AT_PREC_BF16 ? fn<bf16>((bf16 *)(ptr), __VA_ARGS__)    \
			      : fn<float>((float *)(ptr), __VA_ARGS__))

static int alloc_all(tr_cuda *d)
{
	size_t L = d->cfg.n_layer, C = d->cfg.d_model, V = d->cfg.vocab;
	size_t H = d->cfg.n_head, F = 4 * C, B = d->B, T = d->T;
	size_t BT = B * T, BTC = BT * C, TT = B * H * T * T;
	size_t mm = d->prec == AT_PREC_BF16 ? 2 : 4, f = 4;
	int bf = d->prec == AT_PREC_BF16;
	TRY(dalloc(d, &d->p, d->total, f, "the parameters"));
	TRY(dalloc(d, &d->g, d->total, f, "the gradients"));
	TRY(dalloc(d, &d->m1, d->total, f, "the AdamW moments"));
	TRY(dalloc(d, &d->m2, d->total, f, "the AdamW moments"));
	if (bf)
		TRY(dalloc(d, &d->p16, d->total, 2, "the bf16 parameters"));
	TRY(dalloc(d, &d->chunks, d->nchunks, sizeof(tr_chunk), "the update's chunks"));
	TRY(dalloc(d, &d->in, BT, 4, "the batch"));
	TRY(dalloc(d, &d->tg, BT, 4, "the batch"));
	TRY(dalloc(d, &d->off, V + 1, 4, "the batch"));
	TRY(dalloc(d, &d->pos, BT, 4, "the batch"));
	TRY(dalloc(d, &d->resid, (L + 1) * BTC, f, "the residual stream"));
	TRY(dalloc(d, &d->xmid, L * BTC, f, "the residual stream"));
	TRY(dalloc(d, &d->ln1, L * BTC, mm, "the LayerNorm outputs"));
	TRY(dalloc(d, &d->ln2, L * BTC, mm, "the LayerNorm outputs"));
	TRY(dalloc(d, &d->ln1_mean, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln1_rstd, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln2_mean, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln2_rstd, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->qkv, L * 3 * BTC, mm, "q, k and v"));
	if (d->fused_attn) {
		TRY(dalloc(d, &d->lse, L * B * H * T, f, "the attention's lse"));
		if (!bf)
			TRY(dalloc(d, &d->delta, B * H * T, f, "backward scratch"));
	} else {
		TRY(dalloc(d, &d->att, L * TT, f, "the attention weights"));
		if (bf)
			TRY(dalloc(d, &d->att16, L * TT, 2,
				   "the bf16 attention weights"));
	}
	TRY(dalloc(d, &d->merged, L * BTC, mm, "the attention outputs"));
	TRY(dalloc(d, &d->fc, L * BT * F, d->gelu_mm ? mm : f,
		   "the MLP activations"));
	TRY(dalloc(d, &d->gelu, L * BT * F, mm, "the MLP activations"));
	TRY(dalloc(d, &d->lnf, BTC, mm, "the final LayerNorm"));
	TRY(dalloc(d, &d->lnf_mean, BT, f, "the final LayerNorm"));
	TRY(dalloc(d, &d->lnf_rstd, BT, f, "the final LayerNorm"));
	TRY(dalloc(d, &d->logits, BT * V, f, "the logits"));
	if (bf)
		TRY(dalloc(d, &d->dlogits16, BT * V, 2, "the logits' gradient"));
	TRY(dalloc(d, &d->losses, BT, f, "the losses"));
	TRY(dalloc(d, &d->buf3, 3 * BTC, f, "backward scratch"));
	TRY(dalloc(d, &d->d_resid, BTC, f, "backward scratch"));
	TRY(dalloc(d, &d->d_ln, BTC, f, "backward scratch"));
	TRY(dalloc(d, &d->d_merged, BTC, f, "backward scratch"));
	if (bf)
		TRY(dalloc(d, &d->dr16, BTC, 2, "backward scratch"));
	TRY(dalloc(d, &d->d_out, BTC, mm, "backward scratch"));
	TRY(dalloc(d, &d->d_qkv, 3 * BTC, mm, "backward scratch"));
	if (!(bf && d->gelu_mm)) // else the fused backward writes d_fc16
		TRY(dalloc(d, &d->d_fc, BT * F, f, "backward scratch"));
	if (bf)
		TRY(dalloc(d, &d->d_fc16, BT * F, 2, "backward scratch"));
	if (!d->fused_attn)
		TRY(dalloc(d, &d->d_att, TT, f, "the attention gradient"));
	if (bf && !d->fused_attn)
		TRY(dalloc(d, &d->ds16, TT, 2, "the attention gradient"));
	TRY(dalloc(d, &d->ln_part, 2 * LN_SPLITS * C, f, "backward scratch"));
	if (d->biases)
		TRY(dalloc(d, &d->ones, BT, mm, "backward scratch"));
	TRY(dalloc(d, &d->res, 2, sizeof(double), "the results"));
	TRY(dalloc(d, &d->norm_part, NORM_BLOCKS, sizeof(double), "the norm"));
	for (int s = 0; s < SLOTS; s++) {
		TRY(halloc(&d->h_in[s], BT * 4, "pinned batch memory"));
		TRY(halloc(&d->h_tg[s], BT * 4, "pinned batch memory"));
		TRY(halloc(&d->h_off[s], (V + 1) * 4, "pinned batch memory"));
		TRY(halloc(&d->h_pos[s], BT * 4, "pinned batch memory"));
	}
	TRY(halloc(&d->h_res, 2 * sizeof(double), "pinned memory"));
	d->h_cursor = (int *)calloc(V + 1, sizeof(int));
	if (!d->h_cursor)
		return at_cu_failf("out of host memory");
	return 0;
}

// The update's chunk table: every parameter cut into ADAMW_CHUNK pieces.
static int make_chunks(tr_cuda *d, const tr_model *m, tr_chunk **out)
{
	int n = 0;
	for (int i = 0; i < m->n_params; i++)
		n += (int)((m->params[i].n + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
	tr_chunk *c = (tr_chunk *)malloc((n ? n : 1) * sizeof *c);
	if (!c)
		return at_cu_failf("out of host memory");
	int k = 0;
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		for (size_t s = 0; s < p->n; s += ADAMW_CHUNK) {
			c[k].start = p->off + s;
			c[k].len = (unsigned)(p->n - s < ADAMW_CHUNK ? p->n - s
								     : ADAMW_CHUNK);
			c[k].wd = p->decay ? 1.0f : 0.0f; // times --weight-decay
			k++;
		}
	}
	d->nchunks = n;
	*out = c;
	return 0;
}

// d->ones = B*T ones in the products' type.
static int fill_ones(tr_cuda *d)
{
	size_t n = (size_t)d->B * d->T;
	int bf = d->prec == AT_PREC_BF16;
	dev_buf<float> one; // bf16: the floats to convert
	if (bf)
		TRY(one.alloc(n, "backward scratch"));
	float *h = (float *)malloc(n * sizeof *h);
	if (!h)
		return at_cu_failf("out of host memory");
	for (size_t i = 0; i < n; i++)
		h[i] = 1.0f;
	cudaError_t e = cudaMemcpy(bf ? one.p : (float *)d->ones, h,
				   n * sizeof *h, cudaMemcpyHostToDevice);
	free(h);
	CU_CHECK(e, "filling backward scratch");
	return bf ? at_cu_to_bf16((bf16 *)d->ones, one.p, n) : 0;
}

static int setup(tr_cuda *d, const tr_model *m, const float *mom1,
		 const float *mom2)
{
	tr_chunk *chunks = NULL;
	TRY(make_chunks(d, m, &chunks));
	int rc = alloc_all(d);
	if (rc == 0) {
		cudaError_t e = cudaMemcpy(d->chunks, chunks,
					   d->nchunks * sizeof *chunks,
					   cudaMemcpyHostToDevice);
		if (e != cudaSuccess)
			rc = at_cu_fail(e, "copying the chunk table", __FILE__,
					__LINE__);
	}
	free(chunks);
	TRY(rc);
	size_t nb = d->total * sizeof(float);
	CU_CHECK(cudaMemcpy(d->p, m->p, nb, cudaMemcpyHostToDevice),
		 "copying the parameters to the GPU");
	CU_CHECK(cudaMemset(d->g, 0, nb), "zeroing the gradients");
	if (mom1)
		CU_CHECK(cudaMemcpy(d->m1, mom1, nb, cudaMemcpyHostToDevice),
			 "copying the moments to the GPU");
	else
		CU_CHECK(cudaMemset(d->m1, 0, nb), "zeroing the moments");
	if (mom2)
		CU_CHECK(cudaMemcpy(d->m2, mom2, nb, cudaMemcpyHostToDevice),
			 "copying the moments to the GPU");
	else
		CU_CHECK(cudaMemset(d->m2, 0, nb), "zeroing the moments");
	if (d->p16)
		TRY(at_cu_to_bf16(d->p16, d->p, d->total));
	CU_CHECK(cudaMemset(d->res, 0, 2 * sizeof(double)), "zeroing results");
	if (d->ones)
		TRY(fill_ones(d));
	CU_CHECK(cudaDeviceSynchronize(), "setting up the training engine");
	return 0;
}

// Whether to fuse the GELU into the MLP product where cuBLASLt can:
// ANDREA_TRAIN_FUSE_GELU=0 or 1 decides (to compare the two paths), else
// the precision does.  In bf16 the fused path pays (1.06x at andrea-120m,
// bench-train-gpu); in fp32 and tf32 cuBLASLt's epilogue kernels ran 1-2%
// slower than cuBLAS's plain product plus the GELU kernel.
static int gelu_fusion_wanted(int prec)
{
	const char *e = getenv("ANDREA_TRAIN_FUSE_GELU");
	if (e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0))
		return *e == '1';
	return prec == AT_PREC_BF16;
}

extern "C" int tr_cuda_gelu_fused(const tr_cuda *d)
{
	return d->gelu_mm != NULL;
}

extern "C" int tr_cuda_attention_fused(const tr_cuda *d)
{
	return d->fused_attn;
}

// Whether the engine fuses the attention (train.h's TR_ATTN_*): in bf16
// where cuDNN plans the block's shape, in fp32/tf32 (own kernels) only
// when asked; -1 with the reason where fused is asked for and impossible.
static int attention_choice(int B, int T, int H, int D, int precision,
			    int attention)
{
	if (attention == TR_ATTN_EXPLICIT)
		return 0;
	if (precision != AT_PREC_BF16)
		return attention == TR_ATTN_FUSED;
	at_sdpa_shape s = at_sdpa_block(B, H, T, D);
	if (at_cudnn_sdpa_supported(&s, 0) && at_cudnn_sdpa_supported(&s, 1))
		return 1;
	if (attention == TR_ATTN_FUSED) {
		char why[200];
		snprintf(why, sizeof why, "%s", at_cuda_error());
		return at_cu_failf("no fused attention in bf16 here (%s)", why);
	}
	return 0;
}

extern "C" tr_cuda *tr_cuda_new(const tr_model *m, const float *mom1,
				const float *mom2, int B, int T, int precision,
				int attention)
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
	if (gelu_fusion_wanted(precision) && !m->biases &&
	    tr_gelu_mm_new(&d->gelu_mm, precision, B * T, 4 * m->cfg.d_model,
			   m->cfg.d_model) < 0) {
		tr_cuda_free(d);
		return NULL;
	}
	if (setup(d, m, mom1, mom2) < 0) {
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
	for (int i = 0; i < d->nbufs; i++)
		cudaFree(d->bufs[i]);
	for (int s = 0; s < SLOTS; s++) {
		cudaFreeHost(d->h_in[s]);
		cudaFreeHost(d->h_tg[s]);
		cudaFreeHost(d->h_off[s]);
		cudaFreeHost(d->h_pos[s]);
	}
	cudaFreeHost(d->h_res);
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
	a.k = mm_at(d, q, BTC);
	a.v = mm_at(d, q, 2 * BTC);
	if (d->fused_attn) {
		a.lse = d->lse + (size_t)l * B * H * T;
	} else {
		a.att = d->att + l * TT;
		a.att16 = d->att16 ? d->att16 + l * TT : NULL;
	}
	a.merged = mm_at(d, d->merged, l * BTC);
	a.xmid = d->xmid + l * BTC;
	a.fc = fc_at(d, l);
	a.gelu = mm_at(d, d->gelu, l * BT * 4 * C);
	a.buf3 = d->buf3;
	a.fused = d->gelu_mm ? &fused : NULL;
	a.layer = l;
	return at_cu_block_fwd(&d->blas, &w, &a, NULL, d->resid + l * BTC,
			       d->resid + (l + 1) * BTC, B, T, C, H);
}

// d->dr16 = bf16(d_resid) in bf16 mode; the operand to use either way.
static const void *resid_grad_mm(tr_cuda *d, int *rc)
{
	size_t n = (size_t)d->B * d->T * d->cfg.d_model;
	if (d->prec != AT_PREC_BF16)
		return d->d_resid;
	*rc = at_cu_to_bf16(d->dr16, d->d_resid, n);
	return d->dr16;
}

// The gradient of `groups` biases of n (at g + off, one after the other):
// the column sums of dy, groups x [B*T,n] mm, as ones . dy; none without
// biases.
static int bias_grad(tr_cuda *d, size_t off, const void *dy, int n,
		     int groups, const char *what)
{
	if (!d->biases)
		return 0;
	size_t BT = (size_t)d->B * d->T;
	return at_cu_gemm(&d->blas, 0, 0, 1, n, (int)BT, 1.0f, d->ones, 0, dy,
			  (long long)(BT * n), 0.0f, d->g + off, n, groups, what);
}

// From dO (d_out, [B,H,T,D]) to d_qkv (3 x [B*T,C] mm) through layer
// l's attention, q its q, k, v and merged its output's rows.
static int attention_backward(tr_cuda *d, int l, const void *q,
			      const void *merged)
{
	int B = d->B, T = d->T, C = d->cfg.d_model, H = d->cfg.n_head;
	int D = C / H, BH = B * H, bf = d->prec == AT_PREC_BF16;
	size_t BTC = (size_t)B * T * C, TD = (size_t)T * D, TT = (size_t)T * T;
	const at_cu_gemm_mode *bl = &d->blas;
	const void *k = mm_at(d, (void *)q, BTC), *v = mm_at(d, (void *)q, 2 * BTC);
	float scale = (float)(1.0 / sqrt((double)D));
	float *dq = d->buf3, *dk = d->buf3 + BTC, *dv = d->buf3 + 2 * BTC;
	if (d->fused_attn && bf) { // cuDNN writes d_qkv's rows itself
		at_sdpa_shape s = at_sdpa_block(B, H, T, D);
		return at_cudnn_sdpa_backward(&s, d->d_qkv, mm_at(d, d->d_qkv, BTC),
					      mm_at(d, d->d_qkv, 2 * BTC), q, k,
					      v, merged, d->d_out,
					      d->lse + (size_t)l * BH * T);
	}
	if (d->fused_attn) { // fp32: out back to [B,H,T,D] in d_merged
		TRY(at_cu_split_heads<float>(d->d_merged, (const float *)merged,
					     1, B, T, H, D));
		TRY(at_cuda_attention_backward(
			dq, dk, dv, (const float *)q, (const float *)k,
			(const float *)v, d->d_merged, d->lse + (size_t)l * BH * T,
			(const float *)d->d_out, d->delta, BH, T, D, scale, 1));
	} else { // dA = dO.V^T, dV = A^T.dO, dS, dQ = dS.K, dK = dS^T.Q
		float *att = d->att + l * BH * TT;
		void *att_mm = bf ? (void *)(d->att16 + l * BH * TT) : (void *)att;
		void *ds_mm = bf ? (void *)d->ds16 : (void *)d->d_att;
		TRY(at_cu_gemm(bl, 0, 1, T, T, D, 1.0f, d->d_out, TD, v, TD, 0.0f,
			       d->d_att, TT, BH, "the attention product, backward"));
		TRY(at_cu_gemm(bl, 1, 0, T, D, T, 1.0f, att_mm, TT, d->d_out, TD,
			       0.0f, dv, TD, BH, "the attention product, backward"));
		TRY(MM_CALL(d, tr_softmax_causal_bwd, ds_mm, d->d_att, att,
			    (size_t)BH * T, T, scale));
		TRY(at_cu_gemm(bl, 0, 0, T, D, T, 1.0f, ds_mm, TT, k, TD, 0.0f,
			       dq, TD, BH, "the scores product, backward"));
		TRY(at_cu_gemm(bl, 1, 0, T, D, T, 1.0f, ds_mm, TT, q, TD, 0.0f,
			       dk, TD, BH, "the scores product, backward"));
	}
	return MM_CALL(d, at_cu_merge_heads, d->d_qkv, d->buf3, 3 * B, T, H, D);
}

// Back through one block (train_backward.c's block_backward): d_resid
// holds the gradient of the block's output on entry, of its input on
// return.
static int block_backward(tr_cuda *d, int l)
{
	const tr_layer_off *o = &d->layer[l];
	int B = d->B, T = d->T, C = d->cfg.d_model, H = d->cfg.n_head;
	int D = C / H, F = 4 * C, BT = B * T;
	size_t BTC = (size_t)BT * C, CC = (size_t)C * C;
	const at_cu_gemm_mode *bl = &d->blas;
	int bf = d->prec == AT_PREC_BF16, rc = 0;
	float *xin = d->resid + l * BTC, *xm = d->xmid + l * BTC;
	void *ln1 = mm_at(d, d->ln1, l * BTC), *ln2 = mm_at(d, d->ln2, l * BTC);
	void *q = mm_at(d, d->qkv, l * 3 * BTC);
	void *merged = mm_at(d, d->merged, l * BTC);
	void *fc = fc_at(d, l), *gelu = mm_at(d, d->gelu, (size_t)l * BT * F);
	size_t lr = (size_t)l * BT;
	float *g = d->g, *dr = d->d_resid;
	void *dfc_mm = bf ? (void *)d->d_fc16 : (void *)d->d_fc;

	// x_out = x_mid + GELU(LN2(x_mid).Wfc).Wproj
	const void *drm = resid_grad_mm(d, &rc);
	TRY(rc);
	TRY(at_cu_gemm(bl, 1, 0, F, C, BT, 1.0f, gelu, 0, drm, 0, 0.0f,
		       g + o->proj, 0, 1,
		       "the MLP's second product, backward"));
	TRY(bias_grad(d, o->bproj, drm, C, 1, "the MLP's second bias, backward"));
	if (d->gelu_mm) {
		TRY(tr_gelu_mm_bwd(d->gelu_mm, drm, W(d, o->proj), fc, dfc_mm));
	} else {
		TRY(at_cu_gemm(bl, 0, 1, BT, F, C, 1.0f, drm, 0, W(d, o->proj),
			       0, 0.0f, d->d_fc, 0, 1,
			       "the MLP's second product, backward"));
		TRY(MM_CALL(d, tr_gelu_bwd, dfc_mm, (const float *)fc, d->d_fc,
			    (size_t)BT * F));
	}
	TRY(at_cu_gemm(bl, 1, 0, C, F, BT, 1.0f, ln2, 0, dfc_mm, 0, 0.0f,
		       g + o->fc, 0, 1, "the MLP's first product, backward"));
	TRY(bias_grad(d, o->bfc, dfc_mm, F, 1, "the MLP's first bias, backward"));
	TRY(at_cu_gemm(bl, 0, 1, BT, C, F, 1.0f, dfc_mm, 0, W(d, o->fc), 0,
		       0.0f, d->d_ln, 0, 1,
		       "the MLP's first product, backward"));
	TRY(tr_layernorm_bwd(dr, g + o->ln2w, g + o->ln2b, d->d_ln, xm,
			     d->p + o->ln2w, d->ln2_mean + lr, d->ln2_rstd + lr,
			     BT, C, d->ln_part));

	// x_mid = x_in + concat(heads).Wo
	drm = resid_grad_mm(d, &rc);
	TRY(rc);
	TRY(at_cu_gemm(bl, 1, 0, C, C, BT, 1.0f, merged, 0, drm, 0, 0.0f,
		       g + o->wo, 0, 1, "the output projection, backward"));
	TRY(bias_grad(d, o->bo, drm, C, 1, "the output bias, backward"));
	TRY(at_cu_gemm(bl, 0, 1, BT, C, C, 1.0f, drm, 0, W(d, o->wo), 0, 0.0f,
		       d->d_merged, 0, 1, "the output projection, backward"));
	TRY(MM_CALL(d, at_cu_split_heads, d->d_out, d->d_merged, 1, B, T,
		    H, D));
	TRY(attention_backward(d, l, q, merged));
	TRY(at_cu_gemm(bl, 1, 0, C, C, BT, 1.0f, ln1, 0, d->d_qkv, BTC, 0.0f,
		       g + o->wq, CC, 3, "the q, k, v products, backward"));
	TRY(bias_grad(d, o->bq, d->d_qkv, C, 3, "the q, k, v biases, backward"));
	for (int i = 0; i < 3; i++)
		TRY(at_cu_gemm(bl, 0, 1, BT, C, C, 1.0f,
			       mm_at(d, d->d_qkv, i * BTC), 0,
			       W(d, o->wq + i * CC), 0, i ? 1.0f : 0.0f,
			       d->d_ln, 0, 1,
			       "the q, k, v products, backward"));
	TRY(tr_layernorm_bwd(dr, g + o->ln1w, g + o->ln1b, d->d_ln, xin,
			     d->p + o->ln1w, d->ln1_mean + lr, d->ln1_rstd + lr,
			     BT, C, d->ln_part));
	return 0;
}

static int backward(tr_cuda *d)
{
	int B = d->B, T = d->T, C = d->cfg.d_model, V = d->cfg.vocab;
	int L = d->cfg.n_layer, BT = B * T;
	size_t BTC = (size_t)BT * C;
	const at_cu_gemm_mode *bl = &d->blas;
	void *dl = d->prec == AT_PREC_BF16 ? (void *)d->dlogits16 : (void *)d->logits;
	float *g = d->g;
	if (d->tied) { // logits = lnf . wte^T: wte's gradient starts here
		TRY(at_cu_gemm(bl, 1, 0, V, C, BT, 1.0f, dl, 0, d->lnf, 0, 0.0f,
			       g + d->wte, 0, 1, "the head product, backward"));
		TRY(at_cu_gemm(bl, 0, 0, BT, C, V, 1.0f, dl, 0, W(d, d->wte), 0,
			       0.0f, d->d_ln, 0, 1, "the head product, backward"));
	} else {
		TRY(at_cu_gemm(bl, 1, 0, C, V, BT, 1.0f, d->lnf, 0, dl, 0, 0.0f,
			       g + d->lm_head, 0, 1, "the head product, backward"));
		TRY(at_cu_gemm(bl, 0, 1, BT, C, V, 1.0f, dl, 0, W(d, d->lm_head),
			       0, 0.0f, d->d_ln, 0, 1,
			       "the head product, backward"));
	}
	CU_CHECK(cudaMemsetAsync(d->d_resid, 0, BTC * sizeof(float)),
		 "zeroing the residual gradient");
	TRY(tr_layernorm_bwd(d->d_resid, g + d->lnfw, g + d->lnfb, d->d_ln,
			     d->resid + L * BTC, d->p + d->lnfw, d->lnf_mean,
			     d->lnf_rstd, BT, C, d->ln_part));
	for (int l = L - 1; l >= 0; l--)
		TRY(block_backward(d, l));
	CU_CHECK(cudaMemsetAsync(g + d->wpe, 0,
				 (size_t)d->cfg.ctx * C * sizeof(float)),
		 "zeroing the position gradient");
	TRY(tr_embed_bwd(g + d->wte, g + d->wpe, d->d_resid, d->off, d->pos, B,
			 T, C, V, d->tied));
	return tr_sumsq(d->res + 1, g, d->total, d->norm_part);
}

extern "C" int tr_cuda_forward(tr_cuda *d, int slot, int backward_too)
{
	int B = d->B, T = d->T, C = d->cfg.d_model, V = d->cfg.vocab;
	int L = d->cfg.n_layer, BT = B * T;
	size_t BTC = (size_t)BT * C;
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
	TRY(at_cuda_embed_forward(d->resid, d->in, d->p + d->wte, d->p + d->wpe,
				  B, T, C));
	for (int l = 0; l < L; l++)
		TRY(block_forward(d, l));
	TRY(MM_CALL(d, at_cu_layernorm_fwd, d->lnf, d->lnf_mean, d->lnf_rstd,
		    d->resid + L * BTC, d->p + d->lnfw, d->p + d->lnfb, BT, C,
		    AT_LN_EPS));
	TRY(at_cu_gemm(&d->blas, 0, d->tied, BT, V, C, 1.0f, d->lnf, 0,
		       W(d, d->tied ? d->wte : d->lm_head), 0, 0.0f, d->logits,
		       0, 1, "the head product"));
	float inv = 1.0f / BT;
	if (!backward_too)
		TRY(tr_crossentropy<float>(NULL, d->losses, d->logits, d->tg, BT,
					   V, inv));
	else if (d->prec == AT_PREC_BF16)
		TRY(tr_crossentropy<bf16>(d->dlogits16, d->losses, d->logits,
					  d->tg, BT, V, inv));
	else
		TRY(tr_crossentropy<float>(d->logits, d->losses, d->logits,
					   d->tg, BT, V, inv));
	TRY(tr_mean(d->res, d->losses, BT));
	return backward_too ? backward(d) : 0;
}

extern "C" int tr_cuda_update(tr_cuda *d, const tr_hparams *h, double lr,
			      long t)
{
	float c1 = (float)(1.0 - pow(h->beta1, (double)t));
	float c2 = (float)(1.0 - pow(h->beta2, (double)t));
	return tr_adamw(d->p, d->p16, d->g, d->m1, d->m2, d->chunks, d->nchunks,
			(float)lr, (float)h->beta1, (float)h->beta2,
			(float)h->eps, (float)h->weight_decay, c1, c2, h->clip,
			d->res + 1);
}

extern "C" int tr_cuda_finish(tr_cuda *d, double *loss, double *norm)
{
	CU_CHECK(cudaMemcpyAsync(d->h_res, d->res, 2 * sizeof(double),
				 cudaMemcpyDeviceToHost), "reading the loss");
	CU_CHECK(cudaStreamSynchronize(0), "the training step");
	*loss = d->h_res[0];
	if (norm)
		*norm = sqrt(d->h_res[1]);
	size_t fr = 0, tot = 0;
	if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > d->peak_used)
		d->peak_used = tot - fr;
	cudaGetLastError();
	return 0;
}

extern "C" int tr_cuda_download(tr_cuda *d, float *p, float *g, float *mom1,
				float *mom2)
{
	size_t nb = d->total * sizeof(float);
	float *host[4] = {p, g, mom1, mom2};
	const float *dev[4] = {d->p, d->g, d->m1, d->m2};
	for (int i = 0; i < 4; i++)
		if (host[i])
			CU_CHECK(cudaMemcpy(host[i], dev[i], nb,
					    cudaMemcpyDeviceToHost),
				 "copying the model from the GPU");
	return 0;
}

extern "C" void tr_cuda_memory(const tr_cuda *d, size_t *buffers,
			       size_t *peak_in_use)
{
	*buffers = d->bytes;
	*peak_in_use = d->peak_used;
}
