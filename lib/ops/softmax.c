/* softmax.c - the stable row softmax, with an exp the compiler can
 * vectorise (fast_exp.h).
 */
#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#include "core/parallel.h"
#include "ops/fast_exp.h"

typedef struct {
	float *p;
	const float *s;
	int n;
} softmax_job;

static void softmax_range(void *ctx, size_t lo, size_t hi)
{
	const softmax_job *job = ctx;
	int n = job->n;
	for (size_t r = lo; r < hi; r++) {
		const float *x = job->s + r * n;
		float *o = job->p + r * n;
		/* a masked tail of -inf gives exact zeros (fast_exp(-inf) is
		 * 0): the rest of the row needs no exp, sum or scaling */
		int m = n;
		while (m > 0 && x[m - 1] == -INFINITY)
			m--;
		float max = -INFINITY;
		int nan = 0;
#pragma omp simd reduction(max : max) reduction(| : nan)
		for (int j = 0; j < m; j++) {
			max = x[j] > max ? x[j] : max;
			nan |= x[j] != x[j];
		}
		/* nothing unmasked, a NaN, or +inf: NumPy's answer is all NaN */
		if (max == -INFINITY || max == INFINITY || nan) {
			for (int j = 0; j < n; j++)
				o[j] = NAN;
			continue;
		}
#pragma omp simd
		for (int j = 0; j < m; j++)
			o[j] = fast_exp(x[j] - max);
		/* the sum stops at the last non-zero weight, so that a row whose
		 * masked tail is -1e9 (whose weights are exact zeros too) sums in
		 * the same order as one ending in -inf: the same bits either way */
		int k = m;
		while (k > 0 && o[k - 1] == 0.0f)
			k--;
		double sum = 0.0;
#pragma omp simd reduction(+ : sum)
		for (int j = 0; j < k; j++)
			sum += o[j];
		float inv = (float)(1.0 / sum);
#pragma omp simd
		for (int j = 0; j < m; j++)
			o[j] *= inv;
		for (int j = m; j < n; j++)
			o[j] = 0.0f;
	}
}

void at_softmax_rows(float *p, const float *s, size_t rows, int n)
{
	softmax_job j = {p, s, n};
	at_parallel_range(rows, 1.0 * n, softmax_range, &j);
}
