/* block.c - one transformer block and the model's head, forward on the
 * CPU, built from the ops of ops.h. */
#include "ops/block.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Loads `prefix``name` with the given shape into t; on failure frees
 * nothing (the caller does) and fills err. */
static int param(const at_model *m, const char *prefix, const char *name,
		 at_tensor *t, uint64_t d0, uint64_t d1, int rank, char *err,
		 size_t errlen)
{
	char full[AT_MAX_NAME + 1];
	uint64_t dims[2] = {d0, d1};
	snprintf(full, sizeof full, "%s%s", prefix, name);
	return at_model_param(m, full, rank, dims, t, err, errlen);
}

void at_block_free(at_block *b)
{
	at_tensor *all[] = {&b->ln1_w, &b->ln1_b, &b->wq, &b->wk, &b->wv,
			    &b->wo, &b->ln2_w, &b->ln2_b, &b->fc, &b->proj};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		at_tensor_free(all[i]);
}

int at_block_load(at_block *b, const at_model *m, int layer, char *err,
		  size_t errlen)
{
	memset(b, 0, sizeof *b);
	b->layer = layer;
	b->C = m->cfg.d_model;
	b->H = m->cfg.n_head;
	uint64_t C = (uint64_t)b->C, F = 4 * C;
	char pre[64];
	snprintf(pre, sizeof pre, "layers.%d.", layer);
	if (param(m, pre, "ln1.weight", &b->ln1_w, C, 0, 1, err, errlen) < 0 ||
	    param(m, pre, "ln1.bias", &b->ln1_b, C, 0, 1, err, errlen) < 0 ||
	    param(m, pre, "attn.wq", &b->wq, C, C, 2, err, errlen) < 0 ||
	    param(m, pre, "attn.wk", &b->wk, C, C, 2, err, errlen) < 0 ||
	    param(m, pre, "attn.wv", &b->wv, C, C, 2, err, errlen) < 0 ||
	    param(m, pre, "attn.wo", &b->wo, C, C, 2, err, errlen) < 0 ||
	    param(m, pre, "ln2.weight", &b->ln2_w, C, 0, 1, err, errlen) < 0 ||
	    param(m, pre, "ln2.bias", &b->ln2_b, C, 0, 1, err, errlen) < 0 ||
	    param(m, pre, "mlp.fc", &b->fc, C, F, 2, err, errlen) < 0 ||
	    param(m, pre, "mlp.proj", &b->proj, F, C, 2, err, errlen) < 0) {
		at_block_free(b);
		return -1;
	}
	return 0;
}

/* x += (concat over heads of causal softmax(Q K^T / sqrt D) V) . Wo with
 * Q, K, V from LN1(x).  h and t are [N,C] scratch. */
static int attention(const at_block *b, float *x, int B, int T, float *h,
		     float *t)
{
	int C = b->C, H = b->H, D = C / H, BH = B * H;
	size_t N = (size_t)B * T, nc = N * C;
	float *q = malloc(nc * sizeof *q + 1), *k = malloc(nc * sizeof *k + 1);
	float *v = malloc(nc * sizeof *v + 1);
	float *s = malloc((size_t)BH * T * T * sizeof *s + 1);
	int rc = -1;
	if (!q || !k || !v || !s)
		goto out;
	at_layernorm_forward(h, x, b->ln1_w.data, b->ln1_b.data, (int)N, C,
			     AT_LN_EPS);
	const at_tensor *w[3] = {&b->wq, &b->wk, &b->wv};
	float *dst[3] = {q, k, v};
	for (int m = 0; m < 3; m++) {
		at_matmul(t, h, w[m]->data, (int)N, C, C, 0, 1.0f);
		at_split_heads(dst[m], t, B, T, H, D);
	}
	/* the scale andrea-scores uses: 1/sqrt(D) in double, then rounded */
	at_scores_forward(s, q, k, BH, T, D, (float)(1.0 / sqrt((double)D)));
	at_mask_causal(s, BH, T, -INFINITY);
	at_softmax_rows(s, s, (size_t)BH * T, T);
	at_attend_forward(q, s, v, BH, T, D); /* q now holds the head outputs */
	at_merge_heads(t, q, B, T, H, D);
	at_matmul(h, t, b->wo.data, (int)N, C, C, 0, 1.0f);
	at_add_inplace(x, h, nc);
	rc = 0;
out:
	free(q);
	free(k);
	free(v);
	free(s);
	return rc;
}

/* x += GELU(LN2(x) . fc) . proj.  h is [N,C] scratch. */
static int mlp(const at_block *b, float *x, int N, float *h)
{
	int C = b->C, F = 4 * C;
	float *f = malloc((size_t)N * F * sizeof *f + 1);
	if (!f)
		return -1;
	at_layernorm_forward(h, x, b->ln2_w.data, b->ln2_b.data, N, C, AT_LN_EPS);
	at_matmul(f, h, b->fc.data, N, C, F, 0, 1.0f);
	at_gelu_forward(f, f, (size_t)N * F);
	at_matmul(h, f, b->proj.data, N, F, C, 0, 1.0f);
	at_add_inplace(x, h, (size_t)N * C);
	free(f);
	return 0;
}

int at_block_forward(const at_block *b, float *x, int B, int T)
{
	size_t nc = (size_t)B * T * b->C;
	float *h = malloc(nc * sizeof *h + 1), *t = malloc(nc * sizeof *t + 1);
	int rc = -1;
	if (h && t && attention(b, x, B, T, h, t) == 0 &&
	    mlp(b, x, B * T, h) == 0)
		rc = 0;
	free(h);
	free(t);
	return rc;
}

void at_head_free(at_head *h)
{
	at_tensor_free(&h->lnf_w);
	at_tensor_free(&h->lnf_b);
	at_tensor_free(&h->lm_head);
}

int at_head_load(at_head *h, const at_model *m, char *err, size_t errlen)
{
	memset(h, 0, sizeof *h);
	h->C = m->cfg.d_model;
	h->V = m->cfg.vocab;
	uint64_t C = (uint64_t)h->C, V = (uint64_t)h->V;
	if (param(m, "", "lnf.weight", &h->lnf_w, C, 0, 1, err, errlen) < 0 ||
	    param(m, "", "lnf.bias", &h->lnf_b, C, 0, 1, err, errlen) < 0 ||
	    param(m, "", "lm_head", &h->lm_head, C, V, 2, err, errlen) < 0) {
		at_head_free(h);
		return -1;
	}
	return 0;
}

int at_head_forward(const at_head *h, float *logits, const float *x, int N)
{
	float *n = malloc((size_t)N * h->C * sizeof *n + 1);
	if (!n)
		return -1;
	at_layernorm_forward(n, x, h->lnf_w.data, h->lnf_b.data, N, h->C,
			     AT_LN_EPS);
	at_matmul(logits, n, h->lm_head.data, N, h->C, h->V, 0, 1.0f);
	free(n);
	return 0;
}
