/* matmul.c - the one CPU matrix product: CBLAS where built with it, else
 * C; and the thread count the ops and OpenBLAS share. */
#include "ops/ops.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef ANDREA_CBLAS
#include <cblas.h>
#endif

int at_ops_threads(int n)
{
	int before = 1;
#ifdef _OPENMP
	before = omp_get_max_threads();
	omp_set_num_threads(n);
#endif
#ifdef ANDREA_CBLAS
	openblas_set_num_threads(n);
#endif
	return before;
}

int at_ops_max_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

#ifdef ANDREA_CBLAS
static void gemm(int ta, int tb, int M, int N, int K, float alpha,
		 const float *A, int lda, const float *B, int ldb, float beta,
		 float *C, int ldc)
{
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
/* The plain C product, parallel over the rows of C; each element sums its
 * K terms in order.  Without op(B) transposed (and beta 0) the i-k-j order
 * streams rows of B and C; otherwise one dot product per element. */
static void gemm(int ta, int tb, int M, int N, int K, float alpha,
		 const float *A, int lda, const float *B, int ldb, float beta,
		 float *C, int ldc)
{
#pragma omp parallel for schedule(static)
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
	gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
