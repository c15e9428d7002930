/* mlp.c - the MLP's elementwise ops and the residual add. */
#include "ops/ops.h"

#include <math.h>

void at_gelu_forward(float *out, const float *in, size_t n)
{
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = in[i];
		out[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
	}
}

void at_add_inplace(float *x, const float *y, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}
