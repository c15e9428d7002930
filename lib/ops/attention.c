/* attention.c - embedding, LayerNorm, head reshapes and the attention
 * core (scores, causal mask, attend) on the CPU; softmax is in
 * softmax.c. */
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "model/arch.h"

/* The loops below run on the pool (core/parallel.h) through
 * at_parallel_range: each gets its arguments in a struct and a range of
 * rows (or heads) [lo, hi), and the ns figure is a rough cost of one
 * row, for the size of the pieces. */

typedef struct {
	float *x;
	const int32_t *tokens;
	const int *pos;         /* row bt's position, or NULL: bt % T */
	const float *wte, *wpe;
	int T, C;
} embed_job;

static void embed_rows(void *ctx, size_t lo, size_t hi)
{
	const embed_job *j = ctx;
	int T = j->T, C = j->C;
	for (size_t bt = lo; bt < hi; bt++) {
		const float *e = j->wte + (size_t)j->tokens[bt] * C;
		const float *p = j->wpe + (j->pos ? (size_t)j->pos[bt] : bt % T) * C;
		float *o = j->x + bt * C;
		/* simd: without it the loop stays scalar (the compiler cannot
		 * rule out overlap), and its speed then hangs on how x and the
		 * tables happen to lie in memory */
#pragma omp simd
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

void at_embed_forward(float *x, const int32_t *tokens, const float *wte,
		      const float *wpe, int B, int T, int C)
{
	embed_job j = {x, tokens, NULL, wte, wpe, T, C};
	at_parallel_range((size_t)B * T, 0.2 * C, embed_rows, &j);
}

void at_embed_at(float *x, const int32_t *tokens, const int *pos,
		 const float *wte, const float *wpe, int N, int C)
{
	embed_job j = {x, tokens, pos, wte, wpe, 1, C};
	at_parallel_range((size_t)N, 0.2 * C, embed_rows, &j);
}

typedef struct {
	float *out, *mean, *rstd;
	const float *in, *w, *b;
	int C;
	float eps;
} ln_job;

static void layernorm_rows(void *ctx, size_t lo, size_t hi)
{
	const ln_job *j = ctx;
	int C = j->C;
	const float *w = j->w, *b = j->b;
	float eps = j->eps;
	for (size_t n = lo; n < hi; n++) {
		const float *x = j->in + n * C;
		float *o = j->out + n * C;
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

void at_layernorm_forward(float *out, const float *in, const float *w,
			  const float *b, int N, int C, float eps)
{
	ln_job j = {.out = out, .in = in, .w = w, .b = b, .C = C, .eps = eps};
	at_parallel_range((size_t)N, 1.0 * C, layernorm_rows, &j);
}

/* Plain sums, apart from at_layernorm_forward's simd ones (whose order may
 * differ): the statistics the trainer's backward has always used. */
static void layernorm_stats_rows(void *ctx, size_t lo, size_t hi)
{
	const ln_job *j = ctx;
	int C = j->C;
	for (size_t n = lo; n < hi; n++) {
		const float *x = j->in + n * C;
		double sum = 0.0, sq = 0.0;
		for (int c = 0; c < C; c++)
			sum += x[c];
		double mu = sum / C;
		for (int c = 0; c < C; c++)
			sq += (x[c] - mu) * (x[c] - mu);
		j->mean[n] = (float)mu;
		j->rstd[n] = (float)(1.0 / sqrt(sq / C + j->eps));
	}
}

void at_layernorm_stats(float *mean, float *rstd, const float *in, int N,
			int C, float eps)
{
	ln_job j = {.mean = mean, .rstd = rstd, .in = in, .C = C, .eps = eps};
	at_parallel_range((size_t)N, 2.0 * C, layernorm_stats_rows, &j);
}

/* The head reshapes: a (b, h) pair a unit, T rows of D floats each;
 * merge copies the other way. */
typedef struct {
	float *out;
	const float *in;
	size_t ld;
	int H, T, D, merge;
} heads_job;

static void heads_rows(void *ctx, size_t lo, size_t hi)
{
	const heads_job *j = ctx;
	size_t T = (size_t)j->T, D = (size_t)j->D, H = (size_t)j->H;
	for (size_t bh = lo; bh < hi; bh++) {
		size_t b = bh / H, h = bh % H;
		for (size_t t = 0; t < T; t++) {
			size_t head = (bh * T + t) * D, row = (b * T + t) * j->ld + h * D;
			memcpy(j->out + (j->merge ? row : head),
			       j->in + (j->merge ? head : row), D * sizeof *j->out);
		}
	}
}

void at_split_heads_ld(float *out, const float *in, size_t ld, int B, int T,
		       int H, int D)
{
	heads_job j = {out, in, ld, H, T, D, 0};
	at_parallel_range((size_t)B * H, 0.2 * T * D, heads_rows, &j);
}

void at_split_heads(float *out, const float *in, int B, int T, int H, int D)
{
	at_split_heads_ld(out, in, (size_t)H * D, B, T, H, D);
}

void at_merge_heads(float *out, const float *in, int B, int T, int H, int D)
{
	heads_job j = {out, in, (size_t)H * D, H, T, D, 1};
	at_parallel_range((size_t)B * H, 0.2 * T * D, heads_rows, &j);
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

typedef struct {
	float *s;
	int T;
	float fill;
} mask_job;

/* rows [lo, hi) of all BH * T rows */
static void mask_rows(void *ctx, size_t lo, size_t hi)
{
	const mask_job *j = ctx;
	size_t T = (size_t)j->T;
	for (size_t r = lo; r < hi; r++)
		for (size_t c = r % T + 1; c < T; c++)
			j->s[r * T + c] = j->fill;
}

void at_mask_causal(float *s, int BH, int T, float fill)
{
	mask_job j = {s, T, fill};
	at_parallel_range((size_t)BH * T, 0.1 * T, mask_rows, &j);
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

/* Whether every entry of a[T,T] above the diagonal is exactly 0, on one
 * thread (T^2/2 reads at most, against the product's T^2 D multiply-adds)
 * and stopping at the first row that is not. */
static int upper_is_zero(const float *a, int T)
{
	for (int i = 0; i < T - 1; i++) {
		const float *row = a + (size_t)i * T;
		int nz = 0;
#pragma omp simd reduction(| : nz)
		for (int j = i + 1; j < T; j++)
			nz |= row[j] != 0.0f;
		if (nz)
			return 0;
	}
	return 1;
}

/* Whether all n values are finite: the blocks left out of a causal
 * product hold zeros, and 0 x inf or NaN is NaN (as NumPy's a @ v has it). */
static int all_finite(const float *x, size_t n)
{
	int bad = 0;
#pragma omp simd reduction(| : bad)
	for (size_t i = 0; i < n; i++)
		bad |= !isfinite(x[i]);
	return !bad;
}

typedef struct {
	float *o;
	const float *a, *v;
	int T, D;
} attend_job;

static void attend_head(void *ctx, int i, int tid)
{
	const attend_job *j = ctx;
	int T = j->T, D = j->D;
	size_t vs = (size_t)T * D, as = (size_t)T * T;
	const float *ai = j->a + i * as, *vi = j->v + i * vs;
	float *oi = j->o + i * vs;
	(void)tid;
	if (T < 2 * CAUSAL_BLOCK || !upper_is_zero(ai, T) ||
	    !all_finite(vi, vs)) {
		at_gemm(0, 0, T, D, T, 1.0f, ai, T, vi, D, 0.0f, oi, D);
		return;
	}
	/* rows [r0, r1) need only columns [0, r1) */
	for (int r0 = 0; r0 < T; r0 += CAUSAL_BLOCK) {
		int r1 = r0 + CAUSAL_BLOCK < T ? r0 + CAUSAL_BLOCK : T;
		at_gemm(0, 0, r1 - r0, D, r1, 1.0f, ai + (size_t)r0 * T, T, vi,
			D, 0.0f, oi + (size_t)r0 * D, D);
	}
}

void at_attend_forward(float *o, const float *a, const float *v, int BH,
		       int T, int D)
{
	attend_job j = {o, a, v, T, D};
	/* a head per thread where there are enough: the blocks of one head
	 * are too small to share well (products inside a head run on one
	 * thread, as a call made inside a burst does); else the heads one
	 * after the other, each product split */
	int threads = at_threads();
	if (BH >= 2 * threads) {
		at_parallel_for(BH, threads, attend_head, &j);
		return;
	}
	for (int i = 0; i < BH; i++)
		attend_head(&j, i, 0);
}
