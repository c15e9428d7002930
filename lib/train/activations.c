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

/* The records of activations.h: the stages' names only. */
static int kept(void *ctx, const char *name, int layer)
{
	static const char *const names[] = {"x", "q", "k", "v", "scores", "attn",
					    "out", "y", "logits"};
	(void)ctx, (void)layer;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return AT_HOOK_READ;
	return AT_HOOK_SKIP;
}

/* Writes one activation as the stages would (at_fwd_activation_header). */
static int put(void *ctx, const char *name, int layer, float *data,
	       int rank, const uint64_t *dims)
{
	sink *s = ctx;
	at_tensor t;
	at_fwd_activation_header(&t, name, layer, s->H, s->D, rank, dims);
	t.data = (void *)data;
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
	at_hook hook = {.fn = put, .wants = kept, .ctx = &s};
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
