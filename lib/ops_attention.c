/* ops_attention.c - embedding, LayerNorm, head reshapes and the attention
 * core (scores, causal mask, attend) on the CPU; softmax is in
 * ops_softmax.c. */
#include "ops.h"

#include <math.h>
#include <string.h>

void at_embed_forward(float *x, const int32_t *tokens, const float *wte,
		      const float *wpe, int B, int T, int C)
{
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const float *e = wte + (size_t)tokens[bt] * C;
		const float *p = wpe + (size_t)(bt % T) * C;
		float *o = x + (size_t)bt * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

void at_layernorm_forward(float *out, const float *in, const float *w,
			  const float *b, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *x = in + (size_t)n * C;
		float *o = out + (size_t)n * C;
		double sum = 0.0, sq = 0.0;
		for (int c = 0; c < C; c++)
			sum += x[c];
		double mean = sum / C;
		for (int c = 0; c < C; c++)
			sq += (x[c] - mean) * (x[c] - mean);
		double rstd = 1.0 / sqrt(sq / C + eps);
		for (int c = 0; c < C; c++)
			o[c] = (float)((x[c] - mean) * rstd) * w[c] + b[c];
	}
}

void at_split_heads(float *out, const float *in, int B, int T, int H, int D)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				memcpy(out + (((size_t)b * H + h) * T + t) * D,
				       in + ((size_t)b * T + t) * H * D + (size_t)h * D,
				       (size_t)D * sizeof *out);
}

void at_merge_heads(float *out, const float *in, int B, int T, int H, int D)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				memcpy(out + ((size_t)b * T + t) * H * D + (size_t)h * D,
				       in + (((size_t)b * H + h) * T + t) * D,
				       (size_t)D * sizeof *out);
}

void at_scores_forward(float *s, const float *q, const float *k, int BH,
		       int T, int D, float scale)
{
	size_t qs = (size_t)T * D, ss = (size_t)T * T;
	for (int i = 0; i < BH; i++)
		at_matmul(s + i * ss, q + i * qs, k + i * qs, T, D, T, 1, scale);
}

void at_mask_causal(float *s, int BH, int T, float fill)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int i = 0; i < BH; i++)
		for (int r = 0; r < T - 1; r++) {
			float *row = s + ((size_t)i * T + r) * T;
			for (int j = r + 1; j < T; j++)
				row[j] = fill;
		}
}

void at_attend_forward(float *o, const float *a, const float *v, int BH,
		       int T, int D)
{
	size_t vs = (size_t)T * D, as = (size_t)T * T;
	for (int i = 0; i < BH; i++)
		at_matmul(o + i * vs, a + i * as, v + i * vs, T, T, D, 0, 1.0f);
}
