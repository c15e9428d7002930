/* dist.c - the bookkeeping of data-parallel training (dist.h). */
#include "train/dist.h"

#include <stdio.h>
#include <stdlib.h>

int tr_dist_rows(int B, int rank, int world, int *first, int *rows,
		 char *err, size_t errlen)
{
	if (world < 1 || rank < 0 || rank >= world) {
		snprintf(err, errlen, "rank %d is not one of %d", rank, world);
		return -1;
	}
	if (B % world) {
		snprintf(err, errlen, "a batch of %d rows does not split evenly "
			 "over %d ranks", B, world);
		return -1;
	}
	*rows = B / world;
	*first = rank * *rows;
	return 0;
}

int tr_dist_stage(const tr_model *m, int i)
{
	size_t off = m->params[i].off;
	int L = m->cfg.n_layer;
	if (off >= m->lnfw) /* the final LayerNorm and lm_head */
		return 0;
	for (int l = L - 1; l >= 0; l--)
		if (off >= m->layer[l].ln1w)
			return 1 + (L - 1 - l);
	return L + 1; /* wte, wpe */
}

int tr_dist_buckets(const tr_model *m, size_t cap, tr_bucket **out, int *n)
{
	tr_bucket *b = malloc((m->n_params ? m->n_params : 1) * sizeof *b);
	if (!b)
		return -1;
	int k = -1;
	for (int i = m->n_params - 1; i >= 0; i--) {
		const tr_param *p = &m->params[i];
		if (k < 0 || b[k].len + p->n > cap) {
			k++;
			b[k].start = p->off + p->n;
			b[k].len = 0;
			b[k].stage = 0;
		}
		b[k].start = p->off;
		b[k].len += p->n;
		int s = tr_dist_stage(m, i);
		if (s > b[k].stage)
			b[k].stage = s;
	}
	*out = b;
	*n = k + 1;
	return 0;
}

tr_shards tr_dist_shards(size_t total, int world, size_t align)
{
	tr_shards s;
	size_t per = (total + world - 1) / world;
	s.len = (per + align - 1) / align * align;
	s.padded = s.len * world;
	return s;
}

int tr_dist_pieces(const tr_model *m, size_t lo, size_t hi, unsigned chunk,
		   tr_piece **out, int *n)
{
	size_t count = 0;
	for (int pass = 0; pass < 2; pass++) { /* count, then fill */
		tr_piece *c = pass ? malloc((count ? count : 1) * sizeof *c) : NULL;
		if (pass && !c)
			return -1;
		size_t k = 0;
		for (int i = 0; i < m->n_params; i++) {
			const tr_param *p = &m->params[i];
			for (size_t s = p->off; s < p->off + p->n; s += chunk) {
				size_t e = s + chunk < p->off + p->n ? s + chunk
								      : p->off + p->n;
				size_t a = s > lo ? s : lo, z = e < hi ? e : hi;
				if (a >= z)
					continue;
				if (pass)
					c[k] = (tr_piece){a, (unsigned)(z - a),
							  p->decay};
				k++;
			}
		}
		if (pass) {
			*out = c;
			*n = (int)k;
		}
		count = k;
	}
	return 0;
}
