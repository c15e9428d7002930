/* backward.c - the backward pass: the gradient of the mean
 * cross-entropy with respect to every parameter, from the activations the
 * last tr_forward cached. */
#include "train/train.h"

#include <math.h>
#include <string.h>

#include "ops/ops.h"

/* Back through one block.  On entry a.d_resid holds the gradient of the
 * block's output; on return that of its input. */
static void block_backward(tr_model *m, int l, int B, int T)
{
	tr_acts *a = &m->a;
	const tr_layer_off *o = &m->layer[l];
	int C = m->cfg.d_model, H = m->cfg.n_head, D = C / H, F = 4 * C;
	int BT = B * T, BH = B * H;
	size_t lc = (size_t)a->B * a->T * C, lr = (size_t)l * a->B * a->T;
	size_t ltt = (size_t)a->B * H * a->T * a->T;
	const float *xin = a->resid + l * lc, *xmid = a->xmid + l * lc;
	const float *ln1 = a->ln1 + l * lc, *ln2 = a->ln2 + l * lc;
	const float *fc = a->fc + (size_t)l * a->B * a->T * F;
	const float *gelu = a->gelu + (size_t)l * a->B * a->T * F;
	const float *p = m->p;
	float *g = m->g, *dr = a->d_resid;

	/* x_out = x_mid + GELU(LN2(x_mid).Wfc + bfc).Wproj + bproj */
	at_gemm(1, 0, F, C, BT, 1.0f, gelu, F, dr, C, 0.0f, g + o->proj, C);
	at_gemm(0, 1, BT, F, C, 1.0f, dr, C, p + o->proj, C, 0.0f, a->d_fc, F);
	tr_gelu_backward(a->d_fc, fc, a->d_fc, (size_t)BT * F);
	if (m->biases) {
		tr_bias_backward(g + o->bproj, dr, BT, C);
		tr_bias_backward(g + o->bfc, a->d_fc, BT, F);
	}
	at_gemm(1, 0, C, F, BT, 1.0f, ln2, C, a->d_fc, F, 0.0f, g + o->fc, F);
	at_gemm(0, 1, BT, C, F, 1.0f, a->d_fc, F, p + o->fc, F, 0.0f,
		a->d_ln, C);
	tr_layernorm_backward(dr, g + o->ln2w, g + o->ln2b, a->d_ln, xmid,
			      p + o->ln2w, a->ln2_mean + lr, a->ln2_rstd + lr,
			      BT, C);

	/* x_mid = x_in + concat(heads).Wo + bo */
	if (m->biases)
		tr_bias_backward(g + o->bo, dr, BT, C);
	at_merge_heads(a->d_tmp, a->out + l * lc, B, T, H, D);
	at_gemm(1, 0, C, C, BT, 1.0f, a->d_tmp, C, dr, C, 0.0f, g + o->wo, C);
	at_gemm(0, 1, BT, C, C, 1.0f, dr, C, p + o->wo, C, 0.0f,
		a->d_merged, C);
	at_split_heads(a->d_tmp, a->d_merged, B, T, H, D);
	tr_attention_backward(a->d_q, a->d_k, a->d_v, a->d_att, a->d_tmp,
			      a->att + l * ltt, a->q + l * lc, a->k + l * lc,
			      a->v + l * lc, BH, T, D,
			      (float)(1.0 / sqrt((double)D)));
	const float *dh[3] = {a->d_q, a->d_k, a->d_v};
	size_t w[3] = {o->wq, o->wk, o->wv}, bias[3] = {o->bq, o->bk, o->bv};
	for (int i = 0; i < 3; i++) {
		at_merge_heads(a->d_merged, dh[i], B, T, H, D);
		if (m->biases)
			tr_bias_backward(g + bias[i], a->d_merged, BT, C);
		at_gemm(1, 0, C, C, BT, 1.0f, ln1, C, a->d_merged, C, 0.0f,
			g + w[i], C);
		at_gemm(0, 1, BT, C, C, 1.0f, a->d_merged, C, p + w[i], C,
			i ? 1.0f : 0.0f, a->d_ln, C);
	}
	tr_layernorm_backward(dr, g + o->ln1w, g + o->ln1b, a->d_ln, xin,
			      p + o->ln1w, a->ln1_mean + lr, a->ln1_rstd + lr,
			      BT, C);
}

void tr_backward(tr_model *m, const int32_t *inputs, const int32_t *targets,
		 int B, int T)
{
	tr_acts *a = &m->a;
	int C = m->cfg.d_model, V = m->cfg.vocab, L = m->cfg.n_layer;
	int BT = B * T;
	size_t lc = (size_t)a->B * a->T * C;
	float *dlogits = a->probs; /* overwritten in place */
	tr_crossentropy_backward(dlogits, a->probs, targets, BT, V);
	if (m->tied) { /* logits = LNf(x).wte^T; wte's share is added last */
		at_gemm(0, 0, BT, C, V, 1.0f, dlogits, V, m->p + m->wte, C, 0.0f,
			a->d_ln, C);
	} else {
		at_gemm(1, 0, C, V, BT, 1.0f, a->lnf, C, dlogits, V, 0.0f,
			m->g + m->lm_head, V);
		at_gemm(0, 1, BT, C, V, 1.0f, dlogits, V, m->p + m->lm_head, V,
			0.0f, a->d_ln, C);
	}
	memset(a->d_resid, 0, (size_t)BT * C * sizeof *a->d_resid);
	tr_layernorm_backward(a->d_resid, m->g + m->lnfw, m->g + m->lnfb,
			      a->d_ln, a->resid + L * lc, m->p + m->lnfw,
			      a->lnf_mean, a->lnf_rstd, BT, C);
	for (int l = L - 1; l >= 0; l--)
		block_backward(m, l, B, T);
	memset(m->g + m->wpe, 0, (size_t)m->cfg.ctx * C * sizeof(float));
	tr_embed_backward(m->g + m->wte, m->g + m->wpe, a->d_resid, inputs, B, T,
			  C, V);
	if (m->tied) /* the blocks left dlogits (a->probs) alone */
		at_gemm(1, 0, V, C, BT, 1.0f, dlogits, V, a->lnf, C, 1.0f,
			m->g + m->wte, C);
}
