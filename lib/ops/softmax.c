/* softmax.c - the stable row softmax, with an exp the compiler can
 * vectorise.
 *
 * expf from libm is called one element at a time and dominates the cost
 * of a softmax; fast_exp below works on whole SIMD lanes.  It splits
 * x = k ln2 + r with |r| <= ln2/2 and evaluates e^r by its Taylor series
 * to degree 7 (truncation error below 6e-9 relative, under float32's own
 * rounding), then scales by 2^k through the exponent bits.  Its argument
 * here is s - max <= 0: anything below -87.3 (where e^x leaves the normal
 * float range) and -inf give exactly 0.
 */
#include "ops/ops.h"

#include <math.h>
#include <stdint.h>

#include "core/parallel.h"

#define EXP_LO -87.3f

static inline float fast_exp(float x)
{
	float xc = x < EXP_LO ? EXP_LO : x;
	/* round to nearest by the 1.5 * 2^23 trick: vectorises, unlike rintf */
	float kf = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;
	/* ln2 split in two so that k*ln2_hi is exact */
	float r = xc - kf * 0.693145752f - kf * 1.42860677e-6f;
	float p = 1.0f / 5040;
	p = p * r + 1.0f / 720;
	p = p * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	union { int32_t i; float f; } scale = {.i = ((int32_t)kf + 127) << 23};
	return x < EXP_LO ? 0.0f : p * scale.f;
}

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
