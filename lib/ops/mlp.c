/* mlp.c - the MLP's elementwise ops and the residual add. */
#include "ops/ops.h"

#include <math.h>

#include "core/parallel.h"

typedef struct {
	float *out;
	const float *in;
} pair_job;

static void gelu_range(void *ctx, size_t lo, size_t hi)
{
	const pair_job *j = ctx;
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
	for (size_t i = lo; i < hi; i++) {
		float x = j->in[i];
		j->out[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
	}
}

void at_gelu_forward(float *out, const float *in, size_t n)
{
	pair_job j = {out, in};
	at_parallel_range(n, 5.0, gelu_range, &j);
}

static void add_range(void *ctx, size_t lo, size_t hi)
{
	const pair_job *j = ctx;
	for (size_t i = lo; i < hi; i++)
		j->out[i] += j->in[i];
}

void at_add_inplace(float *x, const float *y, size_t n)
{
	pair_job j = {x, y};
	at_parallel_range(n, 0.2, add_range, &j);
}

typedef struct {
	float *x;
	const float *b;
	size_t n;
} bias_job;

static void bias_range(void *ctx, size_t lo, size_t hi)
{
	const bias_job *j = ctx;
	for (size_t r = lo; r < hi; r++) {
		float *row = j->x + r * j->n;
		for (size_t i = 0; i < j->n; i++)
			row[i] += j->b[i];
	}
}

void at_add_bias(float *x, const float *b, size_t rows, size_t n)
{
	bias_job j = {x, b, n};
	at_parallel_range(rows, 0.2 * (double)n, bias_range, &j);
}
