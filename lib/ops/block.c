/* block.c - one transformer block and the model's head loaded from a
 * model, and their forward on the CPU through prenorm.h. */
#include "ops/block.h"

#include <stdlib.h>
#include <string.h>

#include "ops/prenorm.h"

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

int at_block_forward(const at_block *b, float *x, int B, int T)
{
	int C = b->C, H = b->H;
	size_t nc = (size_t)B * T * C, ntt = (size_t)B * H * T * T;
	at_block_w w = {.ln1_w = b->ln1_w.data, .ln1_b = b->ln1_b.data,
			.wq = b->wq.data, .wk = b->wk.data, .wv = b->wv.data,
			.wo = b->wo.data, .ln2_w = b->ln2_w.data,
			.ln2_b = b->ln2_b.data, .fc = b->fc.data,
			.proj = b->proj.data};
	/* nothing kept: buffers shared as far as at_block_run allows, the
	 * MLP's [B*T,F] in the scores where they are large enough */
	float *h = malloc(nc * sizeof *h + 1), *t = malloc(nc * sizeof *t + 1);
	float *q = malloc(nc * sizeof *q + 1), *k = malloc(nc * sizeof *k + 1);
	float *v = malloc(nc * sizeof *v + 1), *s = malloc(ntt * sizeof *s + 1);
	float *f = ntt >= 4 * nc ? s : malloc(4 * nc * sizeof *f + 1);
	int rc = -1;
	if (h && t && q && k && v && s && f) {
		at_block_acts a = {.ln1 = h, .ln2 = h, .y = h, .q = q, .k = k,
				   .v = v, .out = q, .scores = s, .att = s,
				   .fc = f, .gelu = f, .tmp = t};
		at_block_run(&w, &a, x, x, B, T, C, H);
		rc = 0;
	}
	free(h);
	free(t);
	free(q);
	free(k);
	free(v);
	if (f != s)
		free(f);
	free(s);
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
	at_head_run(h->lnf_w.data, h->lnf_b.data, h->lm_head.data, n, NULL, NULL,
		    logits, x, N, h->C, h->V);
	free(n);
	return 0;
}
