/* matmul.c - the one CPU matrix product: CBLAS where built with it, else
 * C; split over the pool's threads (core/parallel.h) either way. */
#include "ops/ops.h"

#include "core/parallel.h"

#ifdef ANDREA_CBLAS
#include <cblas.h>
#include <pthread.h>

/* OpenBLAS computes on the calling thread only: at_gemm splits the
 * product over the pool instead.  OpenBLAS's own workers (OpenMP's, or
 * its pthread server's) spin after each call, and each call waits for
 * all of them, also for one whose core is busy elsewhere.  Its OpenMP
 * build takes the count from OpenMP's setting of the calling thread, so
 * each thread sets it before its first product; the setting also resizes
 * OpenBLAS's buffers, unguarded, hence the lock. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int blas_serial;

static void blas_serial_here(void)
{
	if (blas_serial)
		return;
	pthread_mutex_lock(&blas_lock);
	openblas_set_num_threads(1);
	pthread_mutex_unlock(&blas_lock);
	blas_serial = 1;
}
#endif

#ifdef ANDREA_CBLAS
static void gemm(int ta, int tb, int M, int N, int K, float alpha,
		 const float *A, int lda, const float *B, int ldb, float beta,
		 float *C, int ldc)
{
	blas_serial_here();
	/* one row (a decoding step): a matrix-vector product, which OpenBLAS
	 * does without sgemm's packing of B, several times faster there */
	if (M == 1 && !ta) {
		cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans,
			    tb ? N : K, tb ? K : N, alpha, B, ldb, A, 1, beta, C,
			    1);
		return;
	}
	cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
		    ldb, beta, C, ldc);
}
#else
/* The plain C product; each element sums its K terms in order.  Without
 * op(B) transposed (and beta 0) the i-k-j order streams rows of B and C;
 * otherwise one dot product per element. */
static void gemm(int ta, int tb, int M, int N, int K, float alpha,
		 const float *A, int lda, const float *B, int ldb, float beta,
		 float *C, int ldc)
{
	for (int i = 0; i < M; i++) {
		float *c = C + (size_t)i * ldc;
		/* a_ik = a[k * sa]; b_kj = b[k * sb] from b at column j */
		const float *a = ta ? A + i : A + (size_t)i * lda;
		size_t sa = ta ? (size_t)lda : 1, sb = tb ? 1 : (size_t)ldb;
		if (!tb && beta == 0.0f) {
			for (int j = 0; j < N; j++)
				c[j] = 0.0f;
			for (int k = 0; k < K; k++) {
				float ak = a[k * sa];
				const float *b = B + k * sb;
				for (int j = 0; j < N; j++)
					c[j] += ak * b[j];
			}
			if (alpha != 1.0f)
				for (int j = 0; j < N; j++)
					c[j] *= alpha;
			continue;
		}
		for (int j = 0; j < N; j++) {
			const float *b = tb ? B + (size_t)j * ldb : B + j;
			float acc = 0.0f;
			for (int k = 0; k < K; k++)
				acc += a[k * sa] * b[k * sb];
			c[j] = beta == 0.0f ? alpha * acc : alpha * acc + beta * c[j];
		}
	}
}
#endif

/* Rows (or columns) of C in a unit of the split.  Cut into rows at
 * multiples of 48, a product has the bits of the whole one, so the thread
 * count does not change them: 48 is a multiple of the register blocks of
 * OpenBLAS's sgemm kernels (OpenBLAS 0.3.21 on this AVX2 machine keeps
 * the bits at multiples of 12 and not at 16).  Cut into columns it does
 * not (but for one row), so columns are cut only where there are too few
 * rows to share. */
#define SPLIT 48
/* Multiply-adds per nanosecond on one core, for the size of the pieces;
 * one row (a matrix-vector product) goes at the speed of reading B, four
 * bytes a multiply-add: some 4 a nanosecond at 16 GB/s.  Sized as if
 * compute-bound, the 768 x 768 products of an andrea-120m decoding step
 * looked too small to share and ran on one core of two, where NumPy's
 * used both (bench/README.md, generate). */
#ifdef ANDREA_CBLAS
#define FMA_PER_NS 20.0
#define GEMV_FMA_PER_NS 4.0
#else
#define FMA_PER_NS 1.0
#define GEMV_FMA_PER_NS 1.0
#endif

typedef struct {
	int ta, tb, M, N, K, rows; /* rows: pieces are rows of C, else columns */
	int unit;                  /* rows or columns in a unit */
	float alpha, beta;
	const float *A, *B;
	float *C;
	int lda, ldb, ldc;
} gemm_job;

static void gemm_piece(void *ctx, size_t lo, size_t hi)
{
	const gemm_job *g = ctx;
	int end = g->rows ? g->M : g->N;
	int a = (int)lo * g->unit;
	int b = (int)hi * g->unit < end ? (int)hi * g->unit : end;
	if (g->rows) /* rows a..b of op(A) and C */
		gemm(g->ta, g->tb, b - a, g->N, g->K, g->alpha,
		     g->ta ? g->A + a : g->A + (size_t)a * g->lda, g->lda, g->B,
		     g->ldb, g->beta, g->C + (size_t)a * g->ldc, g->ldc);
	else /* columns a..b of op(B) and C */
		gemm(g->ta, g->tb, g->M, b - a, g->K, g->alpha, g->A, g->lda,
		     g->tb ? g->B + (size_t)a * g->ldb : g->B + a, g->ldb,
		     g->beta, g->C + a, g->ldc);
}

void at_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
	     int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	if (M == 0 || N == 0)
		return;
	if (K == 0) { /* OpenBLAS may leave C alone when K is 0 */
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				float *c = &C[(size_t)i * ldc + j];
				*c = beta == 0.0f ? 0.0f : beta * *c;
			}
		return;
	}
	if (alpha == 0.0f && beta == 0.0f) {
		/* BLAS forms no product for a zero alpha, and 0 x inf or NaN
		 * would be lost: it is formed, then scaled (NumPy's 0 * (A @ B);
		 * --scale 0 of a q holding inf) */
		at_gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++)
				C[(size_t)i * ldc + j] *= alpha;
		return;
	}
	gemm_job g = {ta, tb, M, N, K, M > SPLIT, SPLIT, alpha, beta, A, B, C,
		      lda, ldb, ldc};
	int along = g.rows ? M : N, across = g.rows ? N : M;
	/* one row (a decoding step) reads B once, memory-bound: one long
	 * stretch of columns per thread streams it better than many short
	 * ones (and a row keeps its bits however its columns are cut) */
	if (M == 1) {
		int t = at_threads();
		g.unit = (N + t - 1) / t;
	}
	at_parallel_range((size_t)(along + g.unit - 1) / g.unit,
			  (double)g.unit * across * K /
				  (M == 1 ? GEMV_FMA_PER_NS : FMA_PER_NS),
			  gemm_piece, &g);
}
