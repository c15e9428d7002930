/* params.c - the training engine's parameters and activation buffers,
 * its seeded initialisation and model-file I/O. */
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "stream/stream.h"

/* Appends one parameter to the table and returns its offset. */
static size_t add_param(tr_model *m, const char *name, int rank, uint64_t d0,
			uint64_t d1, int decay)
{
	tr_param *p = &m->params[m->n_params++];
	snprintf(p->name, sizeof p->name, "%s", name);
	p->rank = rank;
	p->dims[0] = d0;
	p->dims[1] = d1;
	p->n = rank == 1 ? d0 : d0 * d1;
	p->off = m->total;
	p->decay = decay;
	m->total += p->n;
	return p->off;
}

int tr_model_init(tr_model *m, const at_config *cfg, int biases, int tied)
{
	memset(m, 0, sizeof *m);
	m->cfg = *cfg;
	m->biases = biases;
	m->tied = tied;
	int L = cfg->n_layer;
	uint64_t C = cfg->d_model, V = cfg->vocab, T = cfg->ctx, F = 4 * C;
	m->params = calloc((size_t)(16 * L + 5), sizeof *m->params);
	m->layer = calloc((size_t)L + 1, sizeof *m->layer);
	if (!m->params || !m->layer)
		return -1;
	char n[TR_NAME];
	m->wte = add_param(m, "wte", 2, V, C, 0);
	m->wpe = add_param(m, "wpe", 2, T, C, 0);
	for (int l = 0; l < L; l++) {
		tr_layer_off *o = &m->layer[l];
#define P(field, suffix, rank, d0, d1, decay)                                   \
	snprintf(n, sizeof n, "layers.%d.%s", l, suffix);                       \
	o->field = add_param(m, n, rank, d0, d1, decay)
		P(ln1w, "ln1.weight", 1, C, 0, 0);
		P(ln1b, "ln1.bias", 1, C, 0, 0);
		P(wq, "attn.wq", 2, C, C, 1);
		P(wk, "attn.wk", 2, C, C, 1);
		P(wv, "attn.wv", 2, C, C, 1);
		P(wo, "attn.wo", 2, C, C, 1);
		P(ln2w, "ln2.weight", 1, C, 0, 0);
		P(ln2b, "ln2.bias", 1, C, 0, 0);
		P(fc, "mlp.fc", 2, C, F, 1);
		P(proj, "mlp.proj", 2, F, C, 1);
		if (biases) { /* no weight decay on biases, as on LN's */
			P(bq, "attn.bq", 1, C, 0, 0);
			P(bk, "attn.bk", 1, C, 0, 0);
			P(bv, "attn.bv", 1, C, 0, 0);
			P(bo, "attn.bo", 1, C, 0, 0);
			P(bfc, "mlp.bfc", 1, F, 0, 0);
			P(bproj, "mlp.bproj", 1, C, 0, 0);
		}
#undef P
	}
	m->lnfw = add_param(m, "lnf.weight", 1, C, 0, 0);
	m->lnfb = add_param(m, "lnf.bias", 1, C, 0, 0);
	if (!tied)
		m->lm_head = add_param(m, "lm_head", 2, C, V, 1);
	m->p = calloc(m->total, sizeof *m->p);
	m->g = calloc(m->total, sizeof *m->g);
	return m->p && m->g ? 0 : -1;
}

/* Puts the address of every activation buffer into list (room for 40);
 * returns how many there are. */
static int act_ptrs(tr_acts *a, float **list[])
{
	float **l[] = {&a->resid, &a->ln1, &a->ln2, &a->ln1_mean,
		       &a->ln1_rstd, &a->ln2_mean, &a->ln2_rstd, &a->q, &a->k,
		       &a->v, &a->out, &a->att, &a->y, &a->xmid, &a->fc,
		       &a->gelu, &a->lnf, &a->lnf_mean, &a->lnf_rstd,
		       &a->logits, &a->probs, &a->scratch, &a->losses,
		       &a->d_resid, &a->d_ln, &a->d_tmp, &a->d_q, &a->d_k,
		       &a->d_v, &a->d_merged, &a->d_fc, &a->d_att};
	int n = (int)(sizeof l / sizeof l[0]);
	memcpy(list, l, sizeof l);
	return n;
}

static void acts_free(tr_acts *a)
{
	float **list[40];
	int n = act_ptrs(a, list);
	for (int i = 0; i < n; i++) {
		free(*list[i]);
		*list[i] = NULL;
	}
}

void tr_model_free(tr_model *m)
{
	acts_free(&m->a);
	free(m->params);
	free(m->layer);
	free(m->p);
	free(m->g);
	at_tok_free(m->tok);
	memset(m, 0, sizeof *m);
}

int tr_acts_alloc(tr_model *m, int B, int T)
{
	tr_acts *a = &m->a;
	acts_free(a);
	size_t L = m->cfg.n_layer, C = m->cfg.d_model, V = m->cfg.vocab;
	size_t H = m->cfg.n_head, F = 4 * C, BT = (size_t)B * T;
	size_t TT = (size_t)B * H * T * T;
	a->B = B;
	a->T = T;
	struct {
		float **p;
		size_t n;
	} want[] = {
		{&a->resid, (L + 1) * BT * C}, {&a->ln1, L * BT * C},
		{&a->ln2, L * BT * C}, {&a->ln1_mean, L * BT},
		{&a->ln1_rstd, L * BT}, {&a->ln2_mean, L * BT},
		{&a->ln2_rstd, L * BT}, {&a->q, L * BT * C}, {&a->k, L * BT * C},
		{&a->v, L * BT * C}, {&a->out, L * BT * C}, {&a->att, L * TT},
		{&a->y, L * BT * C}, {&a->xmid, L * BT * C}, {&a->fc, L * BT * F},
		{&a->gelu, L * BT * F}, {&a->lnf, BT * C}, {&a->lnf_mean, BT},
		{&a->lnf_rstd, BT}, {&a->logits, BT * V}, {&a->probs, BT * V},
		{&a->scratch, TT > BT * F ? TT : BT * F}, {&a->losses, BT},
		{&a->d_resid, BT * C}, {&a->d_ln, BT * C}, {&a->d_tmp, BT * C},
		{&a->d_q, BT * C}, {&a->d_k, BT * C}, {&a->d_v, BT * C},
		{&a->d_merged, BT * C}, {&a->d_fc, BT * F}, {&a->d_att, TT},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (!(*want[i].p = malloc(want[i].n * sizeof(float) + 16)))
			return -1;
	return 0;
}

/* LayerNorm weights (".weight") start at 1, biases at 0, the rest from
 * the generator: the rule of lib/model/model.c's seeded model. */
void tr_model_seed(tr_model *m, uint64_t seed)
{
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		float *d = m->p + p->off;
		size_t len = strlen(p->name);
		if (len > 7 && strcmp(p->name + len - 7, ".weight") == 0)
			for (size_t j = 0; j < p->n; j++)
				d[j] = 1.0f;
		else if (len > 5 && strcmp(p->name + len - 5, ".bias") == 0)
			memset(d, 0, p->n * sizeof *d);
		else
			at_seeded_normal(seed, p->name, 0.02, d, p->n);
	}
}

int tr_model_load(tr_model *m, const at_model *src, char *err, size_t errlen)
{
	/* the layout holds all six biases or none: a bias the file has and
	 * the layout lacks would be dropped */
	for (int i = 0; !m->biases && !src->seeded && i < src->n_entries; i++)
		if (at_param_optional(src->entries[i].name)) {
			snprintf(err, errlen, "%s: '%s': the trainer takes all six "
				 "biases of a layer or none (andrea-model(5))",
				 src->path, src->entries[i].name);
			return -1;
		}
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		at_tensor t;
		if (at_model_param(src, p->name, p->rank, p->dims, &t, err,
				   errlen) < 0)
			return -1;
		memcpy(m->p + p->off, t.data, p->n * sizeof(float));
		at_tensor_free(&t);
	}
	if (at_model_has(src, "tokenizer.vocab") &&
	    !(m->tok = at_model_tokenizer(src, err, errlen)))
		return -1;
	return 0;
}

int tr_model_write(const tr_model *m, at_writer *w, int config,
		   const char *prefix, const float *buf)
{
	at_tensor t;
	if (config && at_config_write(w, &m->cfg) < 0)
		return -1;
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		memset(&t, 0, sizeof t);
		t.dtype = AT_F32;
		t.rank = p->rank;
		t.dims[0] = p->dims[0];
		t.dims[1] = p->dims[1];
		snprintf(t.name, sizeof t.name, "%s%s", prefix, p->name);
		t.data = (void *)(buf + p->off);
		if (at_write_tensor(w, &t) < 0)
			return -1;
	}
	return 0;
}

void tr_layer_weights(const tr_model *m, int l, at_block_w *w)
{
	const float *p = m->p;
	const tr_layer_off *o = &m->layer[l];
	*w = (at_block_w){.ln1_w = p + o->ln1w, .ln1_b = p + o->ln1b,
			  .wq = p + o->wq, .wk = p + o->wk, .wv = p + o->wv,
			  .wo = p + o->wo, .ln2_w = p + o->ln2w,
			  .ln2_b = p + o->ln2b, .fc = p + o->fc,
			  .proj = p + o->proj};
	if (m->biases) {
		w->bq = p + o->bq;
		w->bk = p + o->bk;
		w->bv = p + o->bv;
		w->bo = p + o->bo;
		w->bfc = p + o->bfc;
		w->bproj = p + o->bproj;
	}
}

void tr_model_weights(const tr_model *m, at_weights *w, at_block_w *layers)
{
	const float *p = m->p;
	for (int l = 0; l < m->cfg.n_layer; l++)
		tr_layer_weights(m, l, &layers[l]);
	*w = (at_weights){.C = m->cfg.d_model, .H = m->cfg.n_head,
			  .L = m->cfg.n_layer, .V = m->cfg.vocab,
			  .ctx = m->cfg.ctx, .wte = p + m->wte,
			  .wpe = p + m->wpe, .layer = layers,
			  .lnf_w = p + m->lnfw, .lnf_b = p + m->lnfb,
			  .lm_head = m->tied ? NULL : p + m->lm_head};
}
