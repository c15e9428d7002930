/* fast_exp.h - an exp of x <= 0 that the compiler can vectorise, for the
 * softmaxes (softmax.c, fused_attention.c).
 *
 * expf from libm is called one element at a time and dominates the cost
 * of a softmax; fast_exp works on whole SIMD lanes.  It splits
 * x = k ln2 + r with |r| <= ln2/2 and evaluates e^r by its Taylor series
 * to degree 7 (truncation error below 6e-9 relative, under float32's own
 * rounding), then scales by 2^k through the exponent bits.  Its argument
 * is s - max <= 0: anything below -87.3 (where e^x leaves the normal
 * float range) and -inf give exactly 0, and NaN (a NaN score, or inf -
 * inf) gives NaN.  x is clamped to [-87.3, 0] before the exponent bits
 * are built, so that no input reaches an undefined conversion or shift.
 */
#ifndef ANDREA_FAST_EXP_H
#define ANDREA_FAST_EXP_H

#include <stdint.h>

#define EXP_LO -87.3f

static inline float fast_exp(float x)
{
	/* NaN fails both comparisons: the clamp takes it to EXP_LO */
	float xc = x >= EXP_LO ? (x < 0.0f ? x : 0.0f) : EXP_LO;
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
	return x < EXP_LO ? 0.0f : x != x ? x : p * scale.f;
}

#endif
