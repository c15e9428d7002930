// buffers.cu - the GPU training engine's device and pinned buffers
// (engine.cuh's tr_cuda): which exist, in which type and size, for the
// model, the batch, the precision and the attention's path.
#include <cstdlib>

#include "train/engine.cuh"

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


int tr_alloc_all(tr_cuda *d)
{
	size_t L = d->cfg.n_layer, C = d->cfg.d_model, V = d->cfg.vocab;
	size_t H = d->cfg.n_head, F = 4 * C, B = d->B, T = d->T;
	size_t BT = B * T, BTC = BT * C, TT = B * H * T * T;
	size_t mm = d->prec == AT_PREC_BF16 ? 2 : 4, f = 4;
	int bf = d->prec == AT_PREC_BF16;
	TRY(dalloc(d, &d->p, d->padded, f, "the parameters"));
	TRY(dalloc(d, d->grads16 ? (void *)&d->g16 : (void *)&d->g, d->padded,
		   grad_size(d), "the gradients"));
	TRY(dalloc(d, &d->m1, d->shard_len, f, "the AdamW moments"));
	TRY(dalloc(d, &d->m2, d->shard_len, f, "the AdamW moments"));
	if (bf)
		TRY(dalloc(d, &d->p16, d->total, 2, "the bf16 parameters"));
	TRY(dalloc(d, &d->pieces, d->npieces, sizeof(tr_piece),
		   "the update's pieces"));
	TRY(dalloc(d, &d->in, BT, 4, "the batch"));
	TRY(dalloc(d, &d->tg, BT, 4, "the batch"));
	TRY(dalloc(d, &d->off, V + 1, 4, "the batch"));
	TRY(dalloc(d, &d->pos, BT, 4, "the batch"));
	TRY(dalloc(d, &d->resid, (L + 1) * BTC, f, "the residual stream"));
	TRY(dalloc(d, &d->xmid, L * BTC, f, "the residual stream"));
	if (residual_folded(d))
		TRY(dalloc(d, &d->y16, BTC, 2, "the residual stream"));
	TRY(dalloc(d, &d->ln1, L * BTC, mm, "the LayerNorm outputs"));
	TRY(dalloc(d, &d->ln2, L * BTC, mm, "the LayerNorm outputs"));
	TRY(dalloc(d, &d->ln1_mean, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln1_rstd, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln2_mean, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->ln2_rstd, L * BT, f, "the LayerNorm statistics"));
	TRY(dalloc(d, &d->qkv, L * 3 * BTC, mm, "q, k and v"));
	if (d->fused_attn) {
		TRY(dalloc(d, &d->lse, L * lse_stride(d), f,
			   "the attention's lse"));
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
	TRY(dalloc(d, &d->gelu, d->gelu_kept * BT * F, mm,
		   "the MLP activations"));
	TRY(dalloc(d, &d->lnf, BTC, mm, "the final LayerNorm"));
	TRY(dalloc(d, &d->lnf_mean, BT, f, "the final LayerNorm"));
	TRY(dalloc(d, &d->lnf_rstd, BT, f, "the final LayerNorm"));
	TRY(dalloc(d, &d->logits, (size_t)d->head_rows * d->Vp, mm,
		   "the logits"));
	if (qkv_side_by_side(d))
		TRY(dalloc(d, &d->side3, 3 * C * C, f, "the layout's scratch"));
	if ((size_t)d->Vp != V)
		TRY(dalloc(d, &d->head_w, C * d->Vp, mm, "the padded head"));
	if ((size_t)d->Vp != V || d->grads16) // head.cu's head_grad
		TRY(dalloc(d, &d->head_g, C * d->Vp, f, "the padded head"));
	TRY(dalloc(d, &d->losses, BT, f, "the losses"));
	if (!d->fused_attn || (bf && d->biases)) // q, k, v's products in float
		TRY(dalloc(d, &d->buf3, 3 * BTC, f, "backward scratch"));
	TRY(dalloc(d, &d->d_resid, BTC, f, "backward scratch"));
	TRY(dalloc(d, &d->d_ln, BTC, ln_grad_bf16(d) ? 2 : f, "backward scratch"));
	if (!d->fused_attn)
		TRY(dalloc(d, &d->d_merged, BTC, f, "backward scratch"));
	if (bf)
		TRY(dalloc(d, &d->dr16, BTC, 2, "backward scratch"));
	TRY(dalloc(d, &d->d_out, BTC, mm, "backward scratch"));
	TRY(dalloc(d, &d->d_qkv, 3 * BTC, mm, "backward scratch"));
	if (!d->gelu_mm) { // else over the GELU outputs (backward.cu's dfc_at)
		TRY(dalloc(d, &d->d_fc, BT * F, f, "backward scratch"));
		if (bf)
			TRY(dalloc(d, &d->d_fc16, BT * F, 2, "backward scratch"));
	}
	if (!d->fused_attn)
		TRY(dalloc(d, &d->d_att, TT, f, "the attention gradient"));
	if (bf && !d->fused_attn)
		TRY(dalloc(d, &d->ds16, TT, 2, "the attention gradient"));
	TRY(dalloc(d, &d->ln_part, 2 * LN_PARTS * C, f, "backward scratch"));
	if (d->biases)
		TRY(dalloc(d, &d->ones, BT, mm, "backward scratch"));
	TRY(dalloc(d, &d->res, RES_N, sizeof(double), "the results"));
	TRY(dalloc(d, &d->blas_ws, AT_BLAS_WORKSPACE, 1, "cuBLAS's workspace"));
	TRY(dalloc(d, &d->norm_part, NORM_BLOCKS, sizeof(double), "the norm"));
	for (int s = 0; s < SLOTS; s++) {
		TRY(halloc(&d->h_in[s], BT * 4, "pinned batch memory"));
		TRY(halloc(&d->h_tg[s], BT * 4, "pinned batch memory"));
		TRY(halloc(&d->h_off[s], (V + 1) * 4, "pinned batch memory"));
		TRY(halloc(&d->h_pos[s], BT * 4, "pinned batch memory"));
	}
	TRY(halloc(&d->h_res, RES_N * sizeof(double), "pinned memory"));
	d->h_cursor = (int *)calloc(V + 1, sizeof(int));
	if (!d->h_cursor)
		return at_cu_failf("out of host memory");
	return 0;
}

int tr_fill_ones(tr_cuda *d)
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
