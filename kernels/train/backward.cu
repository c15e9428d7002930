// backward.cu - the GPU training engine's backward pass (engine.cuh's
// state; engine.cu runs the forward and the update).
//
// It mirrors lib/train/backward.c op for op, except for a fused
// attention: that goes back through cuDNN's fused backward in bf16
// (recomputing the weights from the kept log-sum-exp) or through andrea's
// fp32 kernels, and through the stored weights only where explicit.
#include <cmath>

#include "train/engine.cuh"

// d_resid as a product operand: in bf16 mode its copy dr16, which each
// LayerNorm backward writes beside it.
static const void *resid_grad_mm(const tr_cuda *d)
{
	return d->prec == AT_PREC_BF16 ? (const void *)d->dr16 : d->d_resid;
}

// The gradient of the parameter at off = op(A) . op(B), M x N from sums
// over K, `batch` of them (A's, B's and the gradients' strides sA, sB and
// M * N), as the gradients are stored.
static int grad_product(tr_cuda *d, int ta, int tb, int M, int N, int K,
			const void *A, long long sA, const void *B,
			long long sB, size_t off, int batch, const char *what)
{
	at_cu_gemm_layout to = {0, 0, 0, d->grads16};
	return at_cu_gemm_ld(&d->blas, ta, tb, M, N, K, 1.0f, A, sA, B, sB,
			     0.0f, grad_at(d, off), (long long)M * N, batch,
			     &to, what);
}

// The gradient of `groups` biases of n (at off, one after the other):
// the column sums of dy, groups x [B*T,n] mm, as ones . dy; none without
// biases.
static int bias_grad(tr_cuda *d, size_t off, const void *dy, int n,
		     int groups, const char *what)
{
	if (!d->biases)
		return 0;
	size_t BT = (size_t)d->B * d->T;
	return grad_product(d, 0, 0, 1, n, (int)BT, d->ones, 0, dy,
			    (long long)(BT * n), off, groups, what);
}

// From dO (d_out: rows [B*T,C] where fused, else [B,H,T,D]) to d_qkv (3
// x [B*T,C] mm) through layer l's attention, q its q, k, v (rows where
// fused, else [B,H,T,D]) and merged its output's rows.
static int attention_backward(tr_cuda *d, int l, const void *q,
			      const void *merged)
{
	int B = d->B, T = d->T, C = d->cfg.d_model, H = d->cfg.n_head;
	int D = C / H, BH = B * H, bf = d->prec == AT_PREC_BF16;
	size_t BTC = (size_t)B * T * C, TD = (size_t)T * D, TT = (size_t)T * T;
	const at_cu_gemm_mode *bl = &d->blas;
	size_t apart = qkv_apart(d);
	const void *k = mm_at(d, (void *)q, apart);
	const void *v = mm_at(d, (void *)q, 2 * apart);
	float scale = (float)(1.0 / sqrt((double)D));
	if (cudnn_attention(d)) { // cuDNN writes d_qkv's rows itself
		at_sdpa_shape s = at_sdpa_block(B, H, T, D, qkv_ld(d));
		return at_cudnn_sdpa_backward(&s, d->d_qkv,
					      mm_at(d, d->d_qkv, apart),
					      mm_at(d, d->d_qkv, 2 * apart), q,
					      k, v, merged, d->d_out,
					      lse_at(d, l));
	}
	if (d->fused_attn) { // fp32, tf32: andrea's kernels, rows as well
		at_heads rows = {H, C};
		float *dq = (float *)d->d_qkv;
		return at_cuda_attention_backward(
			dq, dq + BTC, dq + 2 * BTC, (const float *)q,
			(const float *)k, (const float *)v, (const float *)merged,
			lse_at(d, l), (const float *)d->d_out, d->delta, BH, T,
			D, scale, 1, d->prec == AT_PREC_TF32, &rows);
	}
	// explicit: dA = dO.V^T, dV = A^T.dO, dS, dQ = dS.K, dK = dS^T.Q
	float *dq = d->buf3, *dk = d->buf3 + BTC, *dv = d->buf3 + 2 * BTC;
	size_t at_l = (size_t)l * BH * TT; // layer l's weights
	float *att = d->att + at_l;
	void *att_mm = bf ? (void *)(d->att16 + at_l) : (void *)att;
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
	return MM_CALL(d, at_cu_merge_heads, d->d_qkv, d->buf3, 3 * B, T, H, D);
}

// The MLP's activations GELU(fc) are kept for the top gelu_kept layers
// only (gelu_at): the backward pass computes each lower layer's again (one
// elementwise pass a layer instead of 96 MiB at andrea-120m, B 16, T 1024).
// Where the cuBLASLt epilogue computes dfc, by a pass of their own; else
// in the pass of the GELU's backward (mlp_backward).
static int gelu_again(tr_cuda *d, int l)
{
	if (gelu_is_kept(d, l))
		return 0;
	size_t n = (size_t)d->B * d->T * 4 * d->cfg.d_model;
	const void *fc = fc_at(d, l);
	void *gelu = gelu_at(d, l);
	if (d->prec == AT_PREC_BF16) // fc is bf16 there
		return tr_gelu_again((bf16 *)gelu, (const bf16 *)fc, n);
	return at_cu_gelu_fwd((float *)gelu, (const float *)fc, n);
}

// Where layer l's dfc, the gradient of its MLP's pre-activations, goes:
// where the product's epilogue computes it, over the layer's GELU(fc)
// (gelu_at), which the second product's weight gradient has read by
// then (so no buffer of its own: at andrea-120m, B 16, T 1024, its 96
// MiB keep another layer's GELU outputs); else in d_fc16 in bf16, in
// place in d_fc in float.
static void *dfc_at(const tr_cuda *d, int l)
{
	if (d->gelu_mm)
		return gelu_at(d, l);
	return d->prec == AT_PREC_BF16 ? (void *)d->d_fc16 : (void *)d->d_fc;
}

// From the gradient of layer l's MLP output (drm) to dfc (at dfc_at),
// and the gradients of its second product and bias.
static int mlp_backward(tr_cuda *d, int l, const void *drm, void *dfc)
{
	const tr_layer_off *o = &d->layer[l];
	size_t BT = (size_t)d->B * d->T;
	int C = d->cfg.d_model, F = 4 * C;
	const at_cu_gemm_mode *bl = &d->blas;
	void *fc = fc_at(d, l);
	if (d->gelu_mm) {
		TRY(gelu_again(d, l));
	} else {
		TRY(at_cu_gemm(bl, 0, 1, (int)BT, F, C, 1.0f, drm, 0,
			       W(d, o->proj), 0, 0.0f, d->d_fc, 0, 1,
			       "the MLP's second product, backward"));
		void *act = gelu_is_kept(d, l) ? NULL : gelu_at(d, l);
		const float *pre = (const float *)fc;
		TRY(d->prec == AT_PREC_BF16
			    ? tr_gelu_bwd((bf16 *)dfc, (bf16 *)act, pre, d->d_fc,
					  BT * F)
			    : tr_gelu_bwd((float *)dfc, (float *)act, pre,
					  d->d_fc, BT * F));
	}
	TRY(grad_product(d, 1, 0, F, C, (int)BT, gelu_at(d, l), 0, drm, 0,
			 o->proj, 1, "the MLP's second product, backward"));
	TRY(bias_grad(d, o->bproj, drm, C, 1,
		      "the MLP's second bias, backward"));
	// fused, dfc now goes over the GELU outputs just read
	return d->gelu_mm ? tr_gelu_mm_bwd(d->gelu_mm, drm, W(d, o->proj), fc,
					   dfc)
			  : 0;
}

// From d_qkv to the gradients of Wq, Wk, Wv (and bq, bk, bv) and to d_ln,
// the gradient of layer l's ln1.
static int qkv_backward(tr_cuda *d, int l, const void *ln1)
{
	const tr_layer_off *o = &d->layer[l];
	int C = d->cfg.d_model, BT = d->B * d->T;
	size_t BTC = (size_t)BT * C, CC = (size_t)C * C;
	const at_cu_gemm_mode *bl = &d->blas;
	if (qkv_side_by_side(d)) { // d_qkv's rows [B*T,3C]: q's, k's, v's
		TRY(bias_grad(d, o->bq, d->d_qkv, 3 * C, 1,
			      "the q, k, v biases, backward"));
		// one product of [C,3C] (wide enough to fill the GPU without
		// splitting K), the gradients as the parameters lie
		TRY(grad_product(d, 1, 0, C, 3 * C, BT, ln1, 0, d->d_qkv, 0,
				 o->wq, 1, "the q, k, v products, backward"));
		at_cu_gemm_layout ln16 = {0, 0, 0, 1};
		return at_cu_gemm_ld(bl, 0, 1, BT, C, 3 * C, 1.0f, d->d_qkv, 0,
				     wqkv_cat_at(d, l), 0, 0.0f, d->d_ln, 0, 1,
				     &ln16, "the q, k, v products, backward");
	}
	TRY(bias_grad(d, o->bq, d->d_qkv, C, 3, "the q, k, v biases, backward"));
	for (int i = 0; i < 3; i++) {
		// three products, not one batched: cuBLAS splits a plain
		// product's long K (B*T) across blocks, not a batched one's;
		// batched, 3 x C^2 outputs fill too few blocks (2.3x slower)
		const void *dqkv = mm_at(d, d->d_qkv, i * BTC);
		TRY(grad_product(d, 1, 0, C, C, BT, ln1, 0, dqkv, 0,
				 o->wq + i * CC, 1,
				 "the q, k, v products, backward"));
		TRY(at_cu_gemm(bl, 0, 1, BT, C, C, 1.0f, dqkv, 0,
			       W(d, o->wq + i * CC), 0, i ? 1.0f : 0.0f,
			       (float *)d->d_ln, 0, 1,
			       "the q, k, v products, backward"));
	}
	return 0;
}

// d_resid += the backward of the LayerNorm with weight and bias at w and
// b of the parameters, from d_ln, the gradient of its output; in the
// input, mean and rstd of its forward pass.
template <typename W>
static int ln_backward_to(tr_cuda *d, W *gw, W *gb, size_t w,
			  const float *in, const float *mean,
			  const float *rstd)
{
	int BT = d->B * d->T, C = d->cfg.d_model;
	if (ln_grad_bf16(d))
		return tr_layernorm_bwd(d->d_resid, d->dr16, gw, gb,
					(const bf16 *)d->d_ln, in, d->p + w,
					mean, rstd, BT, C, d->ln_part);
	return tr_layernorm_bwd(d->d_resid, d->dr16, gw, gb,
				(const float *)d->d_ln, in, d->p + w, mean,
				rstd, BT, C, d->ln_part);
}
static int ln_backward(tr_cuda *d, size_t w, size_t b, const float *in,
		       const float *mean, const float *rstd)
{
	if (d->grads16)
		return ln_backward_to(d, d->g16 + w, d->g16 + b, w, in, mean,
				      rstd);
	return ln_backward_to(d, d->g + w, d->g + b, w, in, mean, rstd);
}

// Back through one block (lib/train/backward.c's block_backward): d_resid
// holds the gradient of the block's output on entry, of its input on
// return.
static int block_backward(tr_cuda *d, int l)
{
	const tr_layer_off *o = &d->layer[l];
	int B = d->B, T = d->T, C = d->cfg.d_model, H = d->cfg.n_head;
	int D = C / H, F = 4 * C, BT = B * T;
	size_t BTC = (size_t)BT * C;
	const at_cu_gemm_mode *bl = &d->blas;
	int bf = d->prec == AT_PREC_BF16;
	float *xin = d->resid + l * BTC, *xm = d->xmid + l * BTC;
	void *ln1 = mm_at(d, d->ln1, l * BTC), *ln2 = mm_at(d, d->ln2, l * BTC);
	void *q = mm_at(d, d->qkv, l * 3 * BTC);
	void *merged = mm_at(d, d->merged, l * BTC);
	size_t lr = (size_t)l * BT;
	void *dfc_mm = dfc_at(d, l);

	// x_out = x_mid + GELU(LN2(x_mid).Wfc).Wproj
	const void *drm = resid_grad_mm(d);
	TRY(mlp_backward(d, l, drm, dfc_mm));
	TRY(grad_product(d, 1, 0, C, F, BT, ln2, 0, dfc_mm, 0, o->fc, 1,
			 "the MLP's first product, backward"));
	TRY(bias_grad(d, o->bfc, dfc_mm, F, 1, "the MLP's first bias, backward"));
	at_cu_gemm_layout ln16 = {0, 0, 0, ln_grad_bf16(d)};
	TRY(at_cu_gemm_ld(bl, 0, 1, BT, C, F, 1.0f, dfc_mm, 0, W(d, o->fc), 0,
			  0.0f, d->d_ln, 0, 1, &ln16,
			  "the MLP's first product, backward"));
	TRY(ln_backward(d, o->ln2w, o->ln2b, xm, d->ln2_mean + lr,
			d->ln2_rstd + lr));

	// x_mid = x_in + concat(heads).Wo
	drm = resid_grad_mm(d);
	TRY(grad_product(d, 1, 0, C, C, BT, merged, 0, drm, 0, o->wo, 1,
			 "the output projection, backward"));
	TRY(bias_grad(d, o->bo, drm, C, 1, "the output bias, backward"));
	if (d->fused_attn) { // the fused attentions read dO in rows
		at_cu_gemm_layout rows = {0, 0, 0, bf};
		TRY(at_cu_gemm_ld(bl, 0, 1, BT, C, C, 1.0f, drm, 0, W(d, o->wo), 0,
				  0.0f, d->d_out, 0, 1, &rows,
				  "the output projection, backward"));
	} else {
		TRY(at_cu_gemm(bl, 0, 1, BT, C, C, 1.0f, drm, 0, W(d, o->wo), 0,
			       0.0f, d->d_merged, 0, 1,
			       "the output projection, backward"));
		TRY(MM_CALL(d, at_cu_split_heads, d->d_out, d->d_merged, 1, B, T,
			    H, D));
	}
	TRY(attention_backward(d, l, q, merged));
	TRY(qkv_backward(d, l, ln1));
	return ln_backward(d, o->ln1w, o->ln1b, xin, d->ln1_mean + lr,
			   d->ln1_rstd + lr);
}

int tr_backward(tr_cuda *d)
{
	int B = d->B, T = d->T, C = d->cfg.d_model, V = d->cfg.vocab;
	int L = d->cfg.n_layer, BT = B * T;
	size_t BTC = (size_t)BT * C;
	CU_CHECK(cudaMemsetAsync(d->d_resid, 0, BTC * sizeof(float),
				 at_cu_stream),
		 "zeroing the residual gradient");
	TRY(ln_backward(d, d->lnfw, d->lnfb, d->resid + L * BTC, d->lnf_mean,
			d->lnf_rstd));
	TRY(tr_ranks_stage_done(d, 0)); // stages: dist.h's tr_dist_stage
	for (int l = L - 1; l >= 0; l--) {
		TRY(block_backward(d, l));
		TRY(tr_ranks_stage_done(d, 1 + (L - 1 - l)));
	}
	CU_CHECK(cudaMemsetAsync(grad_at(d, d->wpe), 0,
				 (size_t)d->cfg.ctx * C * grad_size(d),
				 at_cu_stream),
		 "zeroing the position gradient");
	// a tied head's gradient (head.cu's head_grad: its padded copy, or
	// wte's own) comes in under the embedding's
	const float *head = !d->tied ? NULL
			    : d->head_g ? d->head_g : d->g + d->wte;
	TRY(d->grads16 ? tr_embed_bwd(d->g16 + d->wte, d->g16 + d->wpe, head,
					 d->d_resid, d->off, d->pos, B, T, C,
					 V)
			  : tr_embed_bwd(d->g + d->wte, d->g + d->wpe, head,
					 d->d_resid, d->off, d->pos, B, T, C,
					 V));
	TRY(tr_ranks_stage_done(d, L + 1));
	return tr_ranks_grads(d);
}
