/* ops.h - the CPU forward ops of one attention block, and the one CPU
 * matrix product.
 *
 * Row-major float32 everywhere; shape letters as in docs/ARCHITECTURE.md.  Matrix
 * products go through CBLAS (OpenBLAS) when the build has it, else through
 * a plain C loop; they and the other ops run on the threads of
 * core/parallel.h (at_threads), never on OpenMP's or OpenBLAS's own.
 */
#ifndef ANDREA_OPS_H
#define ANDREA_OPS_H

#include <stddef.h>
#include <stdint.h>

/* C[M,N] = alpha op(A) op(B) + beta C, BLAS's sgemm on row-major
 * matrices: op(A) [M,K] is A, or A stored [K,M] used transposed when ta;
 * op(B) [K,N] is B, or B stored [N,K] when tb; rows of A, B and C are
 * lda, ldb and ldc floats apart.  beta 0 ignores what C held (NaN
 * included).  The one CPU matrix product: every op, stage and the
 * trainer use it. */
void at_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
	     int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* x[B,T,C] = wte[tokens[b,t]] + wpe[t]; tokens already checked < V. */
void at_embed_forward(float *x, const int32_t *tokens, const float *wte,
		      const float *wpe, int B, int T, int C);
/* x[N,C] = wte[tokens[n]] + wpe[pos[n]]: one position per row (decoding). */
void at_embed_at(float *x, const int32_t *tokens, const int *pos,
		 const float *wte, const float *wpe, int N, int C);

/* out[N,C] = (in - mean) / sqrt(var + eps) * w + b per row, biased var. */
void at_layernorm_forward(float *out, const float *in, const float *w,
			  const float *b, int N, int C, float eps);

/* mean[N] and rstd[N] = 1 / sqrt(var + eps) of the rows of in[N,C], as
 * at_layernorm_forward normalises them: what LayerNorm's backward needs. */
void at_layernorm_stats(float *mean, float *rstd, const float *in, int N,
			int C, float eps);

/* [B,T,H*D] -> [B,H,T,D] (split) and back (merge). */
void at_split_heads(float *out, const float *in, int B, int T, int H, int D);
/* The same split from rows ld floats apart (a slice of a wider matrix). */
void at_split_heads_ld(float *out, const float *in, size_t ld, int B, int T,
		       int H, int D);
void at_merge_heads(float *out, const float *in, int B, int T, int H, int D);

/* q, k, v [B,heads,T,D] = split(LN1(x) . wqkv) for x [B,T,C], where wqkv
 * [C, 3*heads*D] holds Wq's, Wk's and Wv's columns side by side (one
 * matrix product instead of three).  ln_w NULL projects x as given.
 * Returns 0, or -1 when out of memory. */
int at_qkv_forward(float *q, float *k, float *v, const float *x,
		   const float *ln_w, const float *ln_b, const float *wqkv,
		   int B, int T, int C, int heads, int D);

/* s[BH,T,T] = scale * q[BH,T,D] . k[BH,T,D]^T */
void at_scores_forward(float *s, const float *q, const float *k, int BH,
		       int T, int D, float scale);
/* The same for n query rows of one head: s[n,T] = scale * q[n,D] . k[T,D]^T
 * (a block of a head's rows, as andrea-scores writes them). */
void at_scores_rows(float *s, const float *q, const float *k, int n, int T,
		    int D, float scale);
/* Sets s[., i, j] = fill for every j > i, touching nothing else. */
void at_mask_causal(float *s, int BH, int T, float fill);
/* The same on a span of a [..., T, T] tensor: s[0, n) holds its elements
 * first .. first + n - 1 (rows may start and end anywhere). */
void at_mask_causal_span(float *s, uint64_t first, size_t n, int T,
			 float fill);
/* Stable row softmax of rows x n; a row whose maximum is -inf (nothing
 * unmasked) becomes all NaN, as in NumPy and PyTorch. */
void at_softmax_rows(float *p, const float *s, size_t rows, int n);
/* out[n] = GELU(in[n]), the tanh form:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void at_gelu_forward(float *out, const float *in, size_t n);
/* x[n] += y[n] (the residual connections). */
void at_add_inplace(float *x, const float *y, size_t n);
/* x[rows,n] += b[n] on every row (a product's bias). */
void at_add_bias(float *x, const float *b, size_t rows, size_t n);

/* out[BH,T,D] = softmax(scale q.k^T) . v for q, k, v [BH,T,D], causal
 * (key j hidden from query i where j > i) unless causal is 0, without the
 * T x T scores (fused_attention.c); lse (if not NULL) [BH,T] gets each
 * row's log-sum-exp of its scaled, visible scores.  Returns 0, or -1 when
 * out of memory. */
int at_attention_fused(float *out, float *lse, const float *q, const float *k,
		       const float *v, int BH, int T, int D, float scale,
		       int causal);

/* o[BH,T,D] = a[BH,T,T] . v[BH,T,D].  Where a matrix is causal (every
 * entry above the diagonal exactly 0, as softmax leaves masked scores),
 * blocks of rows skip the columns that are all zero for them. */
void at_attend_forward(float *o, const float *a, const float *v, int BH,
		       int T, int D);

#endif
