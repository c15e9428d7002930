/* train_forward.c - the forward pass of the training engine, built from
 * the same ops as the stage filters so that both compute the same bits,
 * caching what the backward pass needs. */
#include "train/train.h"

#include <math.h>
#include <string.h>

#include "ops/ops.h"
#include "model/arch.h"

/* One pre-norm block: x_out = x_mid + MLP(LN2(x_mid)), x_mid = x_in +
 * Attn(LN1(x_in)).  Caches the layer's activations. */
static void block_forward(tr_model *m, int l, const float *xin, float *xout,
			  int B, int T)
{
	tr_acts *a = &m->a;
	const tr_layer_off *o = &m->layer[l];
	int C = m->cfg.d_model, H = m->cfg.n_head, D = C / H, F = 4 * C;
	int BT = B * T, BH = B * H;
	size_t nc = (size_t)BT * C, lc = (size_t)a->B * a->T * C;
	size_t ltt = (size_t)a->B * H * a->T * a->T;
	float *ln1 = a->ln1 + l * lc, *ln2 = a->ln2 + l * lc;
	float *q = a->q + l * lc, *k = a->k + l * lc, *v = a->v + l * lc;
	float *out = a->out + l * lc, *y = a->y + l * lc, *xmid = a->xmid + l * lc;
	float *att = a->att + l * ltt;
	float *fc = a->fc + (size_t)l * a->B * a->T * F;
	float *gelu = a->gelu + (size_t)l * a->B * a->T * F;
	size_t lr = (size_t)l * a->B * a->T;
	const float *p = m->p;
	float *buf = a->d_tmp; /* [BT,C] scratch: free during the forward */

	at_layernorm_forward(ln1, xin, p + o->ln1w, p + o->ln1b, BT, C, AT_LN_EPS);
	tr_layernorm_stats(a->ln1_mean + lr, a->ln1_rstd + lr, xin, BT, C, AT_LN_EPS);
	float *qkv[3] = {q, k, v};
	size_t w[3] = {o->wq, o->wk, o->wv};
	for (int i = 0; i < 3; i++) {
		at_matmul(buf, ln1, p + w[i], BT, C, C, 0, 1.0f);
		at_split_heads(qkv[i], buf, B, T, H, D);
	}
	float scale = (float)(1.0 / sqrt((double)D));
	at_scores_forward(a->scratch, q, k, BH, T, D, scale);
	at_mask_causal(a->scratch, BH, T, -INFINITY);
	at_softmax_rows(att, a->scratch, (size_t)BH * T, T);
	at_attend_forward(out, att, v, BH, T, D);
	at_merge_heads(buf, out, B, T, H, D);
	at_matmul(y, buf, p + o->wo, BT, C, C, 0, 1.0f);
	memcpy(xmid, xin, nc * sizeof *xmid);
	at_add_inplace(xmid, y, nc);

	at_layernorm_forward(ln2, xmid, p + o->ln2w, p + o->ln2b, BT, C, AT_LN_EPS);
	tr_layernorm_stats(a->ln2_mean + lr, a->ln2_rstd + lr, xmid, BT, C, AT_LN_EPS);
	at_matmul(fc, ln2, p + o->fc, BT, C, F, 0, 1.0f);
	at_gelu_forward(gelu, fc, (size_t)BT * F);
	at_matmul(buf, gelu, p + o->proj, BT, F, C, 0, 1.0f);
	memcpy(xout, xmid, nc * sizeof *xout);
	at_add_inplace(xout, buf, nc);
}

double tr_forward(tr_model *m, const int32_t *inputs, const int32_t *targets,
		  int B, int T)
{
	tr_acts *a = &m->a;
	int C = m->cfg.d_model, V = m->cfg.vocab, L = m->cfg.n_layer;
	int BT = B * T;
	size_t lc = (size_t)a->B * a->T * C;
	at_embed_forward(a->resid, inputs, m->p + m->wte, m->p + m->wpe, B, T, C);
	for (int l = 0; l < L; l++)
		block_forward(m, l, a->resid + l * lc, a->resid + (l + 1) * lc, B, T);
	const float *x = a->resid + L * lc;
	at_layernorm_forward(a->lnf, x, m->p + m->lnfw, m->p + m->lnfb, BT, C,
			     AT_LN_EPS);
	tr_layernorm_stats(a->lnf_mean, a->lnf_rstd, x, BT, C, AT_LN_EPS);
	at_matmul(a->logits, a->lnf, m->p + m->lm_head, BT, C, V, 0, 1.0f);
	if (!targets)
		return NAN;
	return tr_crossentropy_forward(a->probs, a->losses, a->logits, targets,
				       BT, V);
}
