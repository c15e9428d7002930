/* adamw.c - the learning-rate schedule, gradient clipping and the
 * AdamW update. */
#include "train/train.h"

#include <math.h>

#include "core/parallel.h"

double tr_lr_at(const tr_hparams *h, long s)
{
	if (s < h->warmup)
		return h->lr * (double)(s + 1) / (double)h->warmup;
	if (h->steps <= h->warmup)
		return h->lr;
	double progress = (double)(s - h->warmup) / (double)(h->steps - h->warmup);
	if (progress > 1.0)
		progress = 1.0;
	return h->min_lr + 0.5 * (h->lr - h->min_lr) * (1.0 + cos(M_PI * progress));
}

/* Fixed blocks summed in index order: the result does not depend on the
 * number of threads. */
#define NORM_BLOCKS 64

typedef struct {
	const float *g;
	size_t n, per;
	double part[NORM_BLOCKS];
} norm_job;

static void norm_blocks(void *ctx, size_t b0, size_t b1)
{
	norm_job *j = ctx;
	for (size_t b = b0; b < b1; b++) {
		size_t lo = b * j->per, hi = lo + j->per > j->n ? j->n : lo + j->per;
		double s = 0.0;
		for (size_t i = lo; i < hi; i++)
			s += (double)j->g[i] * j->g[i];
		j->part[b] = s;
	}
}

double tr_grad_norm(const float *g, size_t n)
{
	norm_job j = {g, n, (n + NORM_BLOCKS - 1) / NORM_BLOCKS, {0}};
	at_parallel_range(NORM_BLOCKS, 0.5 * j.per, norm_blocks, &j);
	const double *part = j.part;
	double total = 0.0;
	for (int b = 0; b < NORM_BLOCKS; b++)
		total += part[b];
	return sqrt(total);
}

typedef struct {
	float *w, *m1, *m2;
	const float *g;
	float b1, b2, eps, c1, c2, lr, gs, wd;
	float nb1, nb2; /* 1 - b1, 1 - b2, taken in double (see tr_adamw_update) */
} adamw_job;

static void adamw_range(void *ctx, size_t lo, size_t hi)
{
	const adamw_job *a = ctx;
	float *w = a->w, *m1 = a->m1, *m2 = a->m2;
	for (size_t j = lo; j < hi; j++) {
		float gj = a->g[j] * a->gs;
		m1[j] = a->b1 * m1[j] + a->nb1 * gj;
		m2[j] = a->b2 * m2[j] + a->nb2 * gj * gj;
		float mh = m1[j] / a->c1, vh = m2[j] / a->c2;
		w[j] -= a->lr * (mh / (sqrtf(vh) + a->eps) + a->wd * w[j]);
	}
}

void tr_adamw_update(tr_model *m, float *mom1, float *mom2, const tr_hparams *h,
		     double lr, long t, double gscale)
{
	/* 1 - beta in double, then float, as the bias corrections c1, c2
	 * (and PyTorch): 1 - (float)0.999 is 0.00099998713, 1.3e-5 off */
	adamw_job a = {.b1 = (float)h->beta1, .b2 = (float)h->beta2,
		       .nb1 = (float)(1.0 - h->beta1),
		       .nb2 = (float)(1.0 - h->beta2), .eps = (float)h->eps,
		       .c1 = (float)(1.0 - pow(h->beta1, (double)t)),
		       .c2 = (float)(1.0 - pow(h->beta2, (double)t)),
		       .lr = (float)lr, .gs = (float)gscale};
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		a.wd = p->decay ? (float)h->weight_decay : 0.0f;
		a.w = m->p + p->off, a.g = m->g + p->off;
		a.m1 = mom1 + p->off, a.m2 = mom2 + p->off;
		at_parallel_range(p->n, 3.0, adamw_range, &a);
	}
}
