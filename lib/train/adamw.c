/* adamw.c - the learning-rate schedule, gradient clipping and the
 * AdamW update. */
#include "train/train.h"

#include <math.h>

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

double tr_grad_norm(const float *g, size_t n)
{
	double part[NORM_BLOCKS];
	size_t per = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
#pragma omp parallel for schedule(static)
	for (int b = 0; b < NORM_BLOCKS; b++) {
		size_t lo = (size_t)b * per, hi = lo + per > n ? n : lo + per;
		double s = 0.0;
		for (size_t i = lo; i < hi; i++)
			s += (double)g[i] * g[i];
		part[b] = s;
	}
	double total = 0.0;
	for (int b = 0; b < NORM_BLOCKS; b++)
		total += part[b];
	return sqrt(total);
}

void tr_adamw_update(tr_model *m, float *mom1, float *mom2, const tr_hparams *h,
		     double lr, long t, double gscale)
{
	float b1 = (float)h->beta1, b2 = (float)h->beta2, eps = (float)h->eps;
	float c1 = (float)(1.0 - pow(h->beta1, (double)t));
	float c2 = (float)(1.0 - pow(h->beta2, (double)t));
	float flr = (float)lr, gs = (float)gscale;
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		float wd = p->decay ? (float)h->weight_decay : 0.0f;
		float *w = m->p + p->off, *g = m->g + p->off;
		float *m1 = mom1 + p->off, *m2 = mom2 + p->off;
#pragma omp parallel for schedule(static)
		for (size_t j = 0; j < p->n; j++) {
			float gj = g[j] * gs;
			m1[j] = b1 * m1[j] + (1.0f - b1) * gj;
			m2[j] = b2 * m2[j] + (1.0f - b2) * gj * gj;
			float mh = m1[j] / c1, vh = m2[j] / c2;
			w[j] -= flr * (mh / (sqrtf(vh) + eps) + wd * w[j]);
		}
	}
}
