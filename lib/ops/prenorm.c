/* prenorm.c - one pre-norm block and the final LayerNorm and head, forward,
 * from the ops of ops.h. */
#include "ops/prenorm.h"

#include <math.h>
#include <string.h>

#include "model/arch.h"
#include "ops/ops.h"

/* out[N,C] = LN(in) and, where mean is not NULL, its row statistics. */
static void layernorm(float *out, float *mean, float *rstd, const float *in,
		      const float *w, const float *b, int N, int C)
{
	at_layernorm_forward(out, in, w, b, N, C, AT_LN_EPS);
	if (mean)
		at_layernorm_stats(mean, rstd, in, N, C, AT_LN_EPS);
}

/* a->y = concat over heads of causal softmax(Q K^T / sqrt D) V, times Wo,
 * with Q, K, V from LN1(x). */
static void attention(const at_block_w *w, const at_block_acts *a,
		      const float *x, int B, int T, int C, int H)
{
	int D = C / H, BT = B * T, BH = B * H;
	layernorm(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, BT,
		  C);
	const float *wm[3] = {w->wq, w->wk, w->wv};
	float *dst[3] = {a->q, a->k, a->v};
	for (int m = 0; m < 3; m++) {
		at_gemm(0, 0, BT, C, C, 1.0f, a->ln1, C, wm[m], C, 0.0f, a->tmp,
			C);
		at_split_heads(dst[m], a->tmp, B, T, H, D);
	}
	/* the scale andrea-scores uses: 1/sqrt(D) in double, then rounded */
	at_scores_forward(a->scores, a->q, a->k, BH, T, D,
			  (float)(1.0 / sqrt((double)D)));
	at_mask_causal(a->scores, BH, T, -INFINITY);
	at_softmax_rows(a->att, a->scores, (size_t)BH * T, T);
	at_attend_forward(a->out, a->att, a->v, BH, T, D);
	at_merge_heads(a->tmp, a->out, B, T, H, D);
	at_gemm(0, 0, BT, C, C, 1.0f, a->tmp, C, w->wo, C, 0.0f, a->y, C);
}

/* a->tmp = GELU(LN2(x) . fc) . proj. */
static void mlp(const at_block_w *w, const at_block_acts *a, const float *x,
		int BT, int C)
{
	int F = 4 * C;
	layernorm(a->ln2, a->ln2_mean, a->ln2_rstd, x, w->ln2_w, w->ln2_b, BT,
		  C);
	at_gemm(0, 0, BT, F, C, 1.0f, a->ln2, C, w->fc, F, 0.0f, a->fc, F);
	at_gelu_forward(a->gelu, a->fc, (size_t)BT * F);
	at_gemm(0, 0, BT, C, F, 1.0f, a->gelu, F, w->proj, C, 0.0f, a->tmp, C);
}

void at_block_run(const at_block_w *w, const at_block_acts *a,
		  const float *x_in, float *x_out, int B, int T, int C, int H)
{
	size_t nc = (size_t)B * T * C;
	float *xmid = a->xmid ? a->xmid : x_out;
	attention(w, a, x_in, B, T, C, H);
	if (xmid != x_in)
		memcpy(xmid, x_in, nc * sizeof *xmid);
	at_add_inplace(xmid, a->y, nc);
	mlp(w, a, xmid, B * T, C);
	if (x_out != xmid)
		memcpy(x_out, xmid, nc * sizeof *x_out);
	at_add_inplace(x_out, a->tmp, nc);
}

void at_head_run(const float *lnf_w, const float *lnf_b, const float *lm_head,
		 float *ln, float *mean, float *rstd, float *logits,
		 const float *x, int N, int C, int V)
{
	layernorm(ln, mean, rstd, x, lnf_w, lnf_b, N, C);
	at_gemm(0, 0, N, V, C, 1.0f, ln, C, lm_head, V, 0.0f, logits, V);
}
