/* attention.c - embedding, LayerNorm, head reshapes and the attention
 * core (scores, causal mask, attend) on the CPU; softmax is in
 * softmax.c. */
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#else
#define omp_get_max_threads() 1
#endif

#include "model/arch.h"

/* Elements below which at_embed_forward stays on one thread: at a tenth
 * of a millisecond the work is shorter than the wait for a second thread
 * whose core is busy elsewhere (another stage of a pipeline). */
#define EMBED_PARALLEL (4 << 20)

/* o[C] = e[C] + p[C]. */
static inline void embed_row(float *o, const float *e, const float *p, int C)
{
	/* simd: without it the loop stays scalar (the compiler cannot rule
	 * out overlap), and its speed then hangs on how x and the tables
	 * happen to lie in memory */
#pragma omp simd
	for (int c = 0; c < C; c++)
		o[c] = e[c] + p[c];
}

void at_embed_forward(float *x, const int32_t *tokens, const float *wte,
		      const float *wpe, int B, int T, int C)
{
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= EMBED_PARALLEL)
	for (int bt = 0; bt < B * T; bt++)
		embed_row(x + (size_t)bt * C, wte + (size_t)tokens[bt] * C,
			  wpe + (size_t)(bt % T) * C, C);
}

void at_embed_at(float *x, const int32_t *tokens, const int *pos,
		 const float *wte, const float *wpe, int N, int C)
{
	for (int n = 0; n < N; n++)
		embed_row(x + (size_t)n * C, wte + (size_t)tokens[n] * C,
			  wpe + (size_t)pos[n] * C, C);
}

void at_layernorm_forward(float *out, const float *in, const float *w,
			  const float *b, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *x = in + (size_t)n * C;
		float *o = out + (size_t)n * C;
		double sum = 0.0, sq = 0.0;
#pragma omp simd reduction(+ : sum)
		for (int c = 0; c < C; c++)
			sum += x[c];
		double mean = sum / C;
#pragma omp simd reduction(+ : sq)
		for (int c = 0; c < C; c++)
			sq += (x[c] - mean) * (x[c] - mean);
		double rstd = 1.0 / sqrt(sq / C + eps);
		for (int c = 0; c < C; c++)
			o[c] = (float)((x[c] - mean) * rstd) * w[c] + b[c];
	}
}

/* Plain sums, apart from at_layernorm_forward's simd ones (whose order may
 * differ): the statistics the trainer's backward has always used. */
void at_layernorm_stats(float *mean, float *rstd, const float *in, int N,
			int C, float eps)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *x = in + (size_t)n * C;
		double sum = 0.0, sq = 0.0;
		for (int c = 0; c < C; c++)
			sum += x[c];
		double mu = sum / C;
		for (int c = 0; c < C; c++)
			sq += (x[c] - mu) * (x[c] - mu);
		mean[n] = (float)mu;
		rstd[n] = (float)(1.0 / sqrt(sq / C + eps));
	}
}

void at_split_heads_ld(float *out, const float *in, size_t ld, int B, int T,
		       int H, int D)
{
#pragma omp parallel for collapse(2) schedule(static)
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				memcpy(out + (((size_t)b * H + h) * T + t) * D,
				       in + ((size_t)b * T + t) * ld + (size_t)h * D,
				       (size_t)D * sizeof *out);
}

void at_split_heads(float *out, const float *in, int B, int T, int H, int D)
{
	at_split_heads_ld(out, in, (size_t)H * D, B, T, H, D);
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

int at_qkv_forward(float *q, float *k, float *v, const float *x,
		   const float *ln_w, const float *ln_b, const float *wqkv,
		   int B, int T, int C, int heads, int D)
{
	size_t rows = (size_t)B * T, cols = (size_t)heads * D;
	float *normed = ln_w ? malloc(rows * C * sizeof *normed + 1) : NULL;
	float *proj = malloc(rows * 3 * cols * sizeof *proj + 1);
	if ((ln_w && !normed) || !proj) {
		free(normed);
		free(proj);
		return -1;
	}
	if (ln_w)
		at_layernorm_forward(normed, x, ln_w, ln_b, (int)rows, C, AT_LN_EPS);
	at_gemm(0, 0, (int)rows, 3 * (int)cols, C, 1.0f, ln_w ? normed : x, C,
		wqkv, 3 * (int)cols, 0.0f, proj, 3 * (int)cols);
	float *out[3] = {q, k, v};
	for (int m = 0; m < 3; m++)
		at_split_heads_ld(out[m], proj + m * cols, 3 * cols, B, T, heads, D);
	free(normed);
	free(proj);
	return 0;
}

void at_scores_forward(float *s, const float *q, const float *k, int BH,
		       int T, int D, float scale)
{
	size_t qs = (size_t)T * D, ss = (size_t)T * T;
	for (int i = 0; i < BH; i++)
		at_scores_rows(s + i * ss, q + i * qs, k + i * qs, T, T, D, scale);
}

void at_scores_rows(float *s, const float *q, const float *k, int n, int T,
		    int D, float scale)
{
	at_gemm(0, 1, n, T, D, scale, q, D, k, D, 0.0f, s, T);
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

void at_mask_causal_span(float *s, uint64_t first, size_t n, int T,
			 float fill)
{
	uint64_t e = first, end = first + n;
	while (e < end) {
		uint64_t row = e / (uint64_t)T, i = row % (uint64_t)T;
		uint64_t row_end = (row + 1) * T < end ? (row + 1) * T : end;
		uint64_t from = row * T + i + 1 > e ? row * T + i + 1 : e;
		for (uint64_t x = from; x < row_end; x++)
			s[x - first] = fill;
		e = row_end;
	}
}

/* Rows per block of the causal product: larger blocks waste more of the
 * zero triangle, smaller ones run the matrix kernel less efficiently. */
#define CAUSAL_BLOCK 128

/* Whether every entry of a[T,T] above the diagonal is exactly 0. */
static int upper_is_zero(const float *a, int T)
{
	int nonzero = 0;
#pragma omp parallel for schedule(static) reduction(| : nonzero)
	for (int i = 0; i < T - 1; i++) {
		const float *row = a + (size_t)i * T;
		int nz = 0;
#pragma omp simd reduction(| : nz)
		for (int j = i + 1; j < T; j++)
			nz |= row[j] != 0.0f;
		nonzero |= nz;
	}
	return !nonzero;
}

void at_attend_forward(float *o, const float *a, const float *v, int BH,
		       int T, int D)
{
	size_t vs = (size_t)T * D, as = (size_t)T * T;
	/* a head per thread where there are enough: the blocks of one head
	 * are too small to share well (products inside run on one thread) */
#pragma omp parallel for schedule(dynamic) if (BH >= 2 * omp_get_max_threads())
	for (int i = 0; i < BH; i++) {
		const float *ai = a + i * as, *vi = v + i * vs;
		float *oi = o + i * vs;
		if (T < 2 * CAUSAL_BLOCK || !upper_is_zero(ai, T)) {
			at_gemm(0, 0, T, D, T, 1.0f, ai, T, vi, D, 0.0f, oi, D);
			continue;
		}
		/* rows [r0, r1) need only columns [0, r1) */
		for (int r0 = 0; r0 < T; r0 += CAUSAL_BLOCK) {
			int r1 = r0 + CAUSAL_BLOCK < T ? r0 + CAUSAL_BLOCK : T;
			at_gemm(0, 0, r1 - r0, D, r1, 1.0f, ai + (size_t)r0 * T, T,
				vi, D, 0.0f, oi + (size_t)r0 * D, D);
		}
	}
}
