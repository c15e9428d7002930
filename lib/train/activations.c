/* activations.c - the forward pass of andrea-train --forward and the
 * records of its activations (activations.h). */
#include "train/activations.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"

int tr_activations_forward(tr_model *m, const at_tensor *tok, char *err,
			   size_t errlen)
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
	if (B * T > (1u << 24) || tr_acts_alloc(m, (int)B, (int)T) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	tr_forward(m, id, NULL, (int)B, (int)T);
	return 0;
}

/* Writes buf as a new f32 record of the given shape and attributes. */
static int put(at_writer *w, const char *name, const float *buf, int rank,
	       const uint64_t *dims, const at_attrs *attrs)
{
	at_tensor t;
	memset(&t, 0, sizeof t);
	t.dtype = AT_F32;
	t.rank = rank;
	memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
	snprintf(t.name, sizeof t.name, "%s", name);
	if (attrs)
		t.attrs = *attrs;
	t.data = (void *)buf;
	return at_write_tensor(w, &t);
}

/* The records of layer l: q, k, v, scores (recomputed: the forward pass
 * does not cache them), attn, out, y, then the block's output x. */
static int put_layer(tr_model *m, at_writer *w, int l, uint64_t B,
		     uint64_t T)
{
	tr_acts *a = &m->a;
	uint64_t C = m->cfg.d_model, H = m->cfg.n_head, D = C / H;
	size_t lc = (size_t)a->B * a->T * C, ltt = (size_t)a->B * H * a->T * a->T;
	uint64_t btc[3] = {B, T, C}, bhtd[4] = {B, H, T, D}, bhtt[4] = {B, H, T, T};
	float scale = (float)(1.0 / sqrt((double)D));
	at_attrs at = {0}, xa = {0};
	at_attr_setf(&at, "layer", "%d", l);
	at_attr_set(&at, "norm", "ln1");
	at_attr_setf(&at, "n_head", "%d", (int)H);
	if (put(w, "q", a->q + l * lc, 4, bhtd, &at) < 0 ||
	    put(w, "k", a->k + l * lc, 4, bhtd, &at) < 0 ||
	    put(w, "v", a->v + l * lc, 4, bhtd, &at) < 0)
		return -1;
	at_scores_forward(a->scratch, a->q + l * lc, a->k + l * lc,
			  (int)(B * H), (int)T, (int)D, scale);
	at_mask_causal(a->scratch, (int)(B * H), (int)T, -INFINITY);
	at_attr_setf(&at, "scale", "%.9g", scale);
	at_attr_set(&at, "mask", "causal");
	at_attr_setf(&at, "fill", "%.9g", -INFINITY);
	at_attr_setf(&xa, "layer", "%d", l);
	if (put(w, "scores", a->scratch, 4, bhtt, &at) < 0 ||
	    put(w, "attn", a->att + l * ltt, 4, bhtt, &at) < 0 ||
	    put(w, "out", a->out + l * lc, 4, bhtd, &at) < 0 ||
	    put(w, "y", a->y + l * lc, 3, btc, &at) < 0 ||
	    put(w, "x", a->resid + (l + 1) * lc, 3, btc, &xa) < 0)
		return -1;
	return 0;
}

int tr_activations_write(tr_model *m, const at_tensor *tok, at_writer *w)
{
	tr_acts *a = &m->a;
	uint64_t B = tok->dims[0], T = tok->dims[1];
	uint64_t btc[3] = {B, T, (uint64_t)m->cfg.d_model};
	uint64_t btv[3] = {B, T, (uint64_t)m->cfg.vocab};
	if (at_write_tensor(w, tok) < 0 ||
	    put(w, "x", a->resid, 3, btc, NULL) < 0)
		return -1;
	for (int l = 0; l < m->cfg.n_layer; l++)
		if (put_layer(m, w, l, B, T) < 0)
			return -1;
	return put(w, "logits", a->logits, 3, btv, NULL);
}
