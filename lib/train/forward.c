/* forward.c - the forward pass of the training engine: the stages' own
 * block and head (ops/prenorm.h), keeping what the backward pass needs. */
#include "train/train.h"

#include <math.h>

#include "ops/ops.h"
#include "ops/prenorm.h"

/* Layer l from resid[l] to resid[l+1], its activations kept in a. */
static void block_forward(tr_model *m, int l, int B, int T)
{
	tr_acts *a = &m->a;
	int C = m->cfg.d_model, H = m->cfg.n_head, F = 4 * C;
	size_t lc = (size_t)a->B * a->T * C, lr = (size_t)l * a->B * a->T;
	size_t ltt = (size_t)a->B * H * a->T * a->T, lf = lr * F;
	at_block_acts keep = {
		.ln1 = a->ln1 + l * lc, .ln2 = a->ln2 + l * lc,
		.ln1_mean = a->ln1_mean + lr, .ln1_rstd = a->ln1_rstd + lr,
		.ln2_mean = a->ln2_mean + lr, .ln2_rstd = a->ln2_rstd + lr,
		.q = a->q + l * lc, .k = a->k + l * lc, .v = a->v + l * lc,
		.out = a->out + l * lc, .scores = a->scratch,
		.att = a->att + l * ltt, .y = a->y + l * lc,
		.xmid = a->xmid + l * lc, .fc = a->fc + lf,
		.gelu = a->gelu + lf,
		.tmp = a->d_tmp}; /* backward scratch, free during the forward */
	at_block_w w;
	tr_layer_weights(m, l, &w);
	at_block_run(&w, &keep, NULL, a->resid + l * lc, a->resid + (l + 1) * lc, B,
		     T, C, H);
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
		block_forward(m, l, B, T);
	at_head_run(m->p + m->lnfw, m->p + m->lnfb,
		    m->tied ? NULL : m->p + m->lm_head, m->p + m->wte,
		    a->lnf, a->lnf_mean, a->lnf_rstd, a->logits, a->resid + L * lc,
		    BT, C, V);
	if (!targets)
		return NAN;
	return tr_crossentropy_forward(a->probs, a->losses, a->logits, targets,
				       BT, V);
}
