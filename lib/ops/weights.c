/* weights.c - loading a model's weights by name for the forward engine. */
#include "ops/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loads `prefix``name` [d0] or [d0,d1] into the next tensor of lw. */
static const float *param(at_loaded *lw, const at_model *m, const char *prefix,
			  const char *name, uint64_t d0, uint64_t d1, char *err,
			  size_t errlen)
{
	char full[AT_MAX_NAME + 1];
	uint64_t dims[2] = {d0, d1};
	snprintf(full, sizeof full, "%s%s", prefix, name);
	at_tensor *t = &lw->t[lw->n];
	if (at_model_param(m, full, d1 ? 2 : 1, dims, t, err, errlen) < 0)
		return NULL;
	lw->n++;
	return t->data;
}

void at_weights_free(at_loaded *lw)
{
	for (int i = 0; i < lw->n; i++)
		at_tensor_free(&lw->t[i]);
	free(lw->t);
	free(lw->layer);
	memset(lw, 0, sizeof *lw);
}

/* param() for an optional parameter: NULL without an error where m
 * lacks it, *ok 0 where it is there but cannot be loaded. */
static const float *optional(at_loaded *lw, const at_model *m,
			     const char *prefix, const char *name, uint64_t d0,
			     int *ok, char *err, size_t errlen)
{
	char full[AT_MAX_NAME + 1];
	snprintf(full, sizeof full, "%s%s", prefix, name);
	if (!*ok || !at_model_has(m, full))
		return NULL;
	const float *p = param(lw, m, prefix, name, d0, 0, err, errlen);
	*ok = p != NULL;
	return p;
}

/* Loads layer l's ten parameters, and the biases it has, into
 * lw->layer[l]. */
static int load_layer(at_loaded *lw, const at_model *m, int l, char *err,
		      size_t errlen)
{
	uint64_t C = (uint64_t)m->cfg.d_model, F = 4 * C;
	char pre[64];
	snprintf(pre, sizeof pre, "layers.%d.", l);
	at_block_w *b = &lw->layer[l];
	int ok = 1;
	b->bq = optional(lw, m, pre, "attn.bq", C, &ok, err, errlen);
	b->bk = optional(lw, m, pre, "attn.bk", C, &ok, err, errlen);
	b->bv = optional(lw, m, pre, "attn.bv", C, &ok, err, errlen);
	b->bo = optional(lw, m, pre, "attn.bo", C, &ok, err, errlen);
	b->bfc = optional(lw, m, pre, "mlp.bfc", F, &ok, err, errlen);
	b->bproj = optional(lw, m, pre, "mlp.bproj", C, &ok, err, errlen);
	return ok &&
	       (b->ln1_w = param(lw, m, pre, "ln1.weight", C, 0, err, errlen)) &&
	       (b->ln1_b = param(lw, m, pre, "ln1.bias", C, 0, err, errlen)) &&
	       (b->wq = param(lw, m, pre, "attn.wq", C, C, err, errlen)) &&
	       (b->wk = param(lw, m, pre, "attn.wk", C, C, err, errlen)) &&
	       (b->wv = param(lw, m, pre, "attn.wv", C, C, err, errlen)) &&
	       (b->wo = param(lw, m, pre, "attn.wo", C, C, err, errlen)) &&
	       (b->ln2_w = param(lw, m, pre, "ln2.weight", C, 0, err, errlen)) &&
	       (b->ln2_b = param(lw, m, pre, "ln2.bias", C, 0, err, errlen)) &&
	       (b->fc = param(lw, m, pre, "mlp.fc", C, F, err, errlen)) &&
	       (b->proj = param(lw, m, pre, "mlp.proj", F, C, err, errlen))
		       ? 0 : -1;
}

int at_weights_load(at_loaded *lw, const at_model *m, int what,
		    const unsigned char *layers, char *err, size_t errlen)
{
	const at_config *cfg = &m->cfg;
	int L = cfg->n_layer > 0 ? cfg->n_layer : 0;
	uint64_t C = (uint64_t)cfg->d_model, V = (uint64_t)cfg->vocab;
	int need = 0; /* 1 + the highest layer read: a partial file will do */
	for (int l = 0; (what & AT_LOAD_LAYERS) && l < L; l++)
		if (!layers || layers[l])
			need = l + 1;
	memset(lw, 0, sizeof *lw);
	if (at_model_check_held(m, need, err, errlen) < 0)
		return -1;
	lw->t = calloc((size_t)L * 16 + 5, sizeof *lw->t);
	lw->layer = calloc((size_t)L + 1, sizeof *lw->layer);
	if (!lw->t || !lw->layer) {
		snprintf(err, errlen, "out of memory");
		at_weights_free(lw);
		return -1;
	}
	at_weights *w = &lw->w;
	*w = (at_weights){.C = cfg->d_model, .H = cfg->n_head, .L = L,
			  .V = cfg->vocab, .ctx = cfg->ctx, .layer = lw->layer};
	int ok = 1;
	if (what & AT_LOAD_EMBED)
		ok = (w->wte = param(lw, m, "", "wte", V, C, err, errlen)) &&
		     (w->wpe = param(lw, m, "", "wpe", (uint64_t)cfg->ctx, C, err,
				     errlen));
	for (int l = 0; ok && (what & AT_LOAD_LAYERS) && l < L; l++)
		if (!layers || layers[l])
			ok = load_layer(lw, m, l, err, errlen) == 0;
	if (ok && (what & AT_LOAD_HEAD)) {
		ok = (w->lnf_w = param(lw, m, "", "lnf.weight", C, 0, err, errlen)) &&
		     (w->lnf_b = param(lw, m, "", "lnf.bias", C, 0, err, errlen));
		/* without lm_head the head is tied to the token table */
		if (ok && at_model_has(m, "lm_head"))
			ok = (w->lm_head = param(lw, m, "", "lm_head", C, V, err,
						 errlen)) != NULL;
		else if (ok && !w->wte)
			ok = (w->wte = param(lw, m, "", "wte", V, C, err, errlen)) !=
			     NULL;
	}
	if (!ok) {
		at_weights_free(lw);
		return -1;
	}
	return 0;
}
