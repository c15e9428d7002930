/* compare.c - NumPy-style closeness and error statistics of two tensors. */
#include "view/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/parallel.h"

/* Below this many elements a comparison runs on one thread. */
#define PARALLEL_MIN (1u << 16)

int at_isclose(double a, double b, const at_tol *tol)
{
	if (a == b)
		return 1;
	if (isnan(a) && isnan(b))
		return tol->equal_nan;
	return isfinite(b) && fabs(a - b) <= tol->atol + tol->rtol * fabs(b);
}

/* Compares elements lo..hi-1 into s, which starts out empty. */
static void compare_range(const at_tensor *a, const at_tensor *b,
			  const at_tol *tol, uint64_t lo, uint64_t hi,
			  at_diff_stats *s)
{
	for (uint64_t i = lo; i < hi; i++) {
		double x = at_elem(a, i), y = at_elem(b, i);
		if (!at_isclose(x, y, tol) && s->ndiff++ == 0)
			s->first_diff = i;
		if (!isfinite(x) || !isfinite(y))
			continue;
		double d = fabs(x - y);
		if (d > s->max_abs) {
			s->max_abs = d;
			s->max_abs_at = i;
		}
		if (y != 0 && d / fabs(y) > s->max_rel) {
			s->max_rel = d / fabs(y);
			s->max_rel_at = i;
		}
	}
}

/* Folds the stats of a later range into s, keeping first positions. */
static void merge(at_diff_stats *s, const at_diff_stats *t)
{
	if (t->ndiff && !s->ndiff)
		s->first_diff = t->first_diff;
	s->ndiff += t->ndiff;
	if (t->max_abs > s->max_abs) {
		s->max_abs = t->max_abs;
		s->max_abs_at = t->max_abs_at;
	}
	if (t->max_rel > s->max_rel) {
		s->max_rel = t->max_rel;
		s->max_rel_at = t->max_rel_at;
	}
}

typedef struct {
	const at_tensor *a, *b;
	const at_tol *tol;
	uint64_t n;
	int nblocks;
	at_diff_stats *part;
} compare_job;

static void compare_block(void *ctx, int k, int tid)
{
	const compare_job *j = ctx;
	uint64_t per = j->n / (uint64_t)j->nblocks;
	(void)tid;
	compare_range(j->a, j->b, j->tol, per * k,
		      k == j->nblocks - 1 ? j->n : per * (k + 1), &j->part[k]);
}

void at_compare(const at_tensor *a, const at_tensor *b, const at_tol *tol,
		int threads, at_diff_stats *s)
{
	uint64_t n = at_numel(b);
	int nblocks = n < PARALLEL_MIN || threads < 1 ? 1 : threads;
	at_diff_stats one[1] = {{0}};
	at_diff_stats *part = nblocks > 1 ? calloc((size_t)nblocks, sizeof *part)
					  : NULL;
	if (!part) {
		/* small, single-threaded, or no memory for the partials */
		compare_range(a, b, tol, 0, n, one);
		*s = one[0];
		s->n = n;
		return;
	}
	compare_job j = {a, b, tol, n, nblocks, part};
	at_parallel_for(nblocks, nblocks, compare_block, &j);
	*s = part[0];
	for (int k = 1; k < nblocks; k++)
		merge(s, &part[k]);
	s->n = n;
	free(part);
}

void at_index_str(int rank, const uint64_t *dims, uint64_t flat, char *buf,
		  size_t len)
{
	uint64_t idx[AT_MAX_RANK];
	for (int i = rank - 1; i >= 0; i--) {
		idx[i] = dims[i] ? flat % dims[i] : 0;
		flat = dims[i] ? flat / dims[i] : 0;
	}
	at_shape_str(rank, idx, buf, len); /* an index prints like a shape */
}
