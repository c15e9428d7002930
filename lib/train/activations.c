/* activations.c - the records of andrea-train --forward (activations.h),
 * written by the forward engine's hook. */
#include "train/activations.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/forward.h"

typedef struct {
	at_writer *w;
	int H, D;
} sink;

/* Writes one activation as the stages would: q, k and v carry the layer,
 * norm and head count; scores and what follows in the layer the scale
 * and mask too; x only its layer (none after the embedding). */
static int put(void *ctx, const char *name, int layer, const float *data,
	       int rank, const uint64_t *dims)
{
	sink *s = ctx;
	at_tensor t;
	memset(&t, 0, sizeof t);
	t.dtype = AT_F32;
	t.rank = rank;
	memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
	snprintf(t.name, sizeof t.name, "%s", name);
	t.data = (void *)data;
	if (layer >= 0)
		at_attr_setf(&t.attrs, "layer", "%d", layer);
	int in_head = strcmp(name, "x") && strcmp(name, "logits");
	if (in_head) {
		at_attr_set(&t.attrs, "norm", "ln1");
		at_attr_setf(&t.attrs, "n_head", "%d", s->H);
	}
	if (in_head && strcmp(name, "q") && strcmp(name, "k") &&
	    strcmp(name, "v")) {
		float scale = (float)(1.0 / sqrt((double)s->D));
		at_attr_setf(&t.attrs, "scale", "%.9g", scale);
		at_attr_set(&t.attrs, "mask", "causal");
		at_attr_setf(&t.attrs, "fill", "%.9g", -INFINITY);
	}
	return at_write_tensor(s->w, &t) < 0 ? 1 : 0;
}

int tr_activations_run(const tr_model *m, const at_tensor *tok, at_device dev,
		       int precision, at_writer *w, char *err, size_t errlen)
{
	uint64_t B = tok->dims[0], T = tok->dims[1];
	if (B == 0 || T == 0) {
		snprintf(err, errlen, "no tokens to run (B=%llu, T=%llu)",
			 (unsigned long long)B, (unsigned long long)T);
		return -1;
	}
	const int32_t *id = tok->data;
	if (at_tokens_check(&m->cfg, id, B, T, err, errlen) < 0)
		return -1;
	size_t n = B * T * (uint64_t)m->cfg.vocab;
	at_block_w *layers = malloc(((size_t)m->cfg.n_layer + 1) * sizeof *layers);
	float *logits = B * T <= (1u << 24) ? malloc(n * sizeof *logits + 1) : NULL;
	at_fwd *e = NULL;
	int rc = -1;
	if (!layers || !logits) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	at_weights wts;
	tr_model_weights(m, &wts, layers);
	if (at_fwd_new(&e, &wts, dev, precision, 0, err, errlen) < 0)
		goto done;
	sink s = {.w = w, .H = m->cfg.n_head, .D = m->cfg.d_model / m->cfg.n_head};
	at_hook hook = {.fn = put, .ctx = &s};
	at_fwd_set_hook(e, &hook);
	if (at_write_tensor(w, tok) < 0 ||
	    at_fwd_logits(e, logits, id, (int)B, (int)T, err, errlen) != 0) {
		if (w->err[0])
			snprintf(err, errlen, "%s", w->err);
		goto done;
	}
	rc = 0;
done:
	at_fwd_free(e);
	free(layers);
	free(logits);
	return rc;
}
