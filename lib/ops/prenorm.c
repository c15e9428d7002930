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

int at_hook_wants(const at_hook *hook, const char *name, int layer)
{
	if (!hook)
		return AT_HOOK_SKIP;
	if (hook->wants)
		return hook->wants(hook->ctx, name, layer);
	return strcmp(name, "result") == 0 ? AT_HOOK_SKIP : AT_HOOK_READ;
}

/* Reports one activation to the hook, if it wants it. */
static int report(const at_block_acts *a, const char *name, float *data,
		  int rank, uint64_t d0, uint64_t d1, uint64_t d2, uint64_t d3)
{
	if (at_hook_wants(a->hook, name, a->layer) == AT_HOOK_SKIP)
		return 0;
	uint64_t dims[4] = {d0, d1, d2, d3};
	return a->hook->fn(a->hook->ctx, name, a->layer, data, rank, dims);
}

#define TRY(call)                          \
	do {                               \
		int rc_ = (call);          \
		if (rc_)                   \
			return rc_;        \
	} while (0)
#define REPORT(...) TRY(report(__VA_ARGS__))

/* The whole square causal attention of B rows of T positions: a->out. */
static int attend_square(const at_block_acts *a, int B, int T, int H, int D,
			 float scale)
{
	int BH = B * H;
	at_scores_forward(a->scores, a->q, a->k, BH, T, D, scale);
	at_mask_causal(a->scores, BH, T, -INFINITY);
	REPORT(a, "scores", a->scores, 4, B, H, T, T);
	at_softmax_rows(a->att, a->scores, (size_t)BH * T, T);
	REPORT(a, "attn", a->att, 4, B, H, T, T);
	at_attend_forward(a->out, a->att, a->v, BH, T, D);
	return 0;
}

/* The same over a KV cache: row b's T new keys and values go in after
 * its kv->len[b] cached ones, and each new position i attends to the
 * cached positions and the new ones up to itself.  Reported per row. */
static int attend_cached(const at_block_acts *a, const at_kv *kv, int B,
			 int T, int H, int D, float scale)
{
	size_t TD = (size_t)T * D, cD = (size_t)kv->cap * D;
	for (int b = 0; b < B; b++) {
		int P = kv->len[b], n = P + T;
		float *s = a->scores + (size_t)b * H * T * kv->cap;
		float *p = a->att + (size_t)b * H * T * kv->cap;
		for (int h = 0; h < H; h++) {
			size_t bh = (size_t)b * H + h;
			float *kc = kv->k + bh * cD, *vc = kv->v + bh * cD;
			memcpy(kc + (size_t)P * D, a->k + bh * TD, TD * sizeof *kc);
			memcpy(vc + (size_t)P * D, a->v + bh * TD, TD * sizeof *vc);
			float *sh = s + (size_t)h * T * n;
			at_gemm(0, 1, T, n, D, scale, a->q + bh * TD, D, kc, D,
				0.0f, sh, n);
			for (int i = 0; i < T; i++)
				for (int j = P + i + 1; j < n; j++)
					sh[(size_t)i * n + j] = -INFINITY;
		}
		REPORT(a, "scores", s, 4, 1, H, T, n);
		at_softmax_rows(p, s, (size_t)H * T, n);
		REPORT(a, "attn", p, 4, 1, H, T, n);
		for (int h = 0; h < H; h++) {
			size_t bh = (size_t)b * H + h;
			at_gemm(0, 0, T, D, n, 1.0f, p + (size_t)h * T * n, n,
				kv->v + bh * cD, D, 0.0f, a->out + bh * TD, D);
		}
	}
	return 0;
}

/* a->result [B,H,T,C]: each head's out times its D rows of Wo, reported;
 * then, where the hook may have changed them, a->y their sum over the
 * heads (without bo), else y as the block computes it without a hook (so
 * that looking changes no number).  1 where y is done. */
static int heads_result(const at_block_w *w, const at_block_acts *a, int B,
			int T, int C, int H, int *y_done)
{
	int D = C / H;
	size_t TD = (size_t)T * D, TC = (size_t)T * C;
	for (size_t bh = 0; bh < (size_t)B * H; bh++)
		at_gemm(0, 0, T, C, D, 1.0f, a->out + bh * TD, D,
			w->wo + (bh % H) * D * C, C, 0.0f, a->result + bh * TC, C);
	REPORT(a, "result", a->result, 4, B, H, T, C);
	if (!(*y_done = at_hook_wants(a->hook, "result", a->layer) == AT_HOOK_WRITE))
		return 0;
	for (int b = 0; b < B; b++) {
		float *y = a->y + b * TC;
		memcpy(y, a->result + (size_t)b * H * TC, TC * sizeof *y);
		for (int h = 1; h < H; h++)
			at_add_inplace(y, a->result + ((size_t)b * H + h) * TC, TC);
	}
	return 0;
}

/* a->y = concat over heads of causal softmax(Q K^T / sqrt D) V, times Wo,
 * with Q, K, V from LN1(x). */
static int attention(const at_block_w *w, const at_block_acts *a,
		     const at_kv *kv, const float *x, int B, int T, int C,
		     int H)
{
	int D = C / H, BT = B * T;
	layernorm(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, BT,
		  C);
	REPORT(a, "ln1", a->ln1, 3, B, T, C, 0);
	const float *wm[3] = {w->wq, w->wk, w->wv};
	const float *bm[3] = {w->bq, w->bk, w->bv};
	float *dst[3] = {a->q, a->k, a->v};
	static const char *names[3] = {"q", "k", "v"};
	for (int m = 0; m < 3; m++) {
		at_gemm(0, 0, BT, C, C, 1.0f, a->ln1, C, wm[m], C, 0.0f, a->tmp,
			C);
		if (bm[m])
			at_add_bias(a->tmp, bm[m], BT, C);
		at_split_heads(dst[m], a->tmp, B, T, H, D);
		REPORT(a, names[m], dst[m], 4, B, H, T, D);
	}
	/* the scale andrea-scores uses: 1/sqrt(D) in double, then rounded */
	float scale = (float)(1.0 / sqrt((double)D));
	int rc = kv ? attend_cached(a, kv, B, T, H, D, scale)
		    : attend_square(a, B, T, H, D, scale);
	if (rc)
		return rc;
	REPORT(a, "out", a->out, 4, B, H, T, D);
	int y_done = 0;
	if (a->result)
		TRY(heads_result(w, a, B, T, C, H, &y_done));
	if (!y_done) {
		at_merge_heads(a->tmp, a->out, B, T, H, D);
		at_gemm(0, 0, BT, C, C, 1.0f, a->tmp, C, w->wo, C, 0.0f, a->y, C);
	}
	if (w->bo)
		at_add_bias(a->y, w->bo, BT, C);
	REPORT(a, "y", a->y, 3, B, T, C, 0);
	return 0;
}

/* a->tmp = GELU(LN2(x) . fc) . proj. */
static int mlp(const at_block_w *w, const at_block_acts *a, const float *x,
	       int B, int T, int C)
{
	int F = 4 * C, BT = B * T;
	layernorm(a->ln2, a->ln2_mean, a->ln2_rstd, x, w->ln2_w, w->ln2_b, BT,
		  C);
	REPORT(a, "ln2", a->ln2, 3, B, T, C, 0);
	at_gemm(0, 0, BT, F, C, 1.0f, a->ln2, C, w->fc, F, 0.0f, a->fc, F);
	if (w->bfc)
		at_add_bias(a->fc, w->bfc, BT, F);
	REPORT(a, "fc", a->fc, 3, B, T, F, 0);
	at_gelu_forward(a->gelu, a->fc, (size_t)BT * F);
	REPORT(a, "gelu", a->gelu, 3, B, T, F, 0);
	at_gemm(0, 0, BT, C, F, 1.0f, a->gelu, F, w->proj, C, 0.0f, a->tmp, C);
	if (w->bproj)
		at_add_bias(a->tmp, w->bproj, BT, C);
	REPORT(a, "mlp", a->tmp, 3, B, T, C, 0);
	return 0;
}

int at_block_run(const at_block_w *w, const at_block_acts *a,
		 const at_kv *kv, const float *x_in, float *x_out, int B, int T,
		 int C, int H)
{
	size_t nc = (size_t)B * T * C;
	float *xmid = a->xmid ? a->xmid : x_out;
	int rc = attention(w, a, kv, x_in, B, T, C, H);
	if (rc)
		return rc;
	if (xmid != x_in)
		memcpy(xmid, x_in, nc * sizeof *xmid);
	at_add_inplace(xmid, a->y, nc);
	REPORT(a, "xmid", xmid, 3, B, T, C, 0);
	if ((rc = mlp(w, a, xmid, B, T, C)))
		return rc;
	if (x_out != xmid)
		memcpy(x_out, xmid, nc * sizeof *x_out);
	at_add_inplace(x_out, a->tmp, nc);
	return 0;
}

void at_head_run(const float *lnf_w, const float *lnf_b, const float *lm_head,
		 const float *wte, float *ln, float *mean, float *rstd,
		 float *logits, const float *x, int N, int C, int V)
{
	layernorm(ln, mean, rstd, x, lnf_w, lnf_b, N, C);
	at_head_product(lm_head, wte, logits, ln, N, C, V);
}

void at_head_norm(const float *lnf_w, const float *lnf_b, float *ln,
		  const float *x, int N, int C)
{
	layernorm(ln, NULL, NULL, x, lnf_w, lnf_b, N, C);
}

void at_head_product(const float *lm_head, const float *wte, float *logits,
		     const float *ln, int N, int C, int V)
{
	if (lm_head)
		at_gemm(0, 0, N, V, C, 1.0f, ln, C, lm_head, V, 0.0f, logits, V);
	else
		at_gemm(0, 1, N, V, C, 1.0f, ln, C, wte, C, 0.0f, logits, V);
}
