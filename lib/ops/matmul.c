/* ops_matmul.c - matrix products: CBLAS where built with it, else C. */
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

void at_matmul(float *out, const float *a, const float *b, int M, int K,
	       int N, int trans_b, float alpha)
{
	at_matmul_ld(out, N, a, K, b, trans_b ? K : N, M, K, N, trans_b, alpha);
}

#ifdef ANDREA_CBLAS
void at_matmul_ld(float *out, int ldo, const float *a, int lda, const float *b,
		  int ldb, int M, int K, int N, int trans_b, float alpha)
{
	if (M == 0 || N == 0)
		return;
	if (K == 0) { /* BLAS leaves out alone when K is 0 */
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++)
				out[(size_t)i * ldo + j] = 0.0f;
		return;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda,
		    b, ldb, 0.0f, out, ldo);
}
#else
/* The fallback keeps the i-k-j order so the inner loop streams rows of b
 * and out; transposed b uses dot products instead. */
void at_matmul_ld(float *out, int ldo, const float *a, int lda, const float *b,
		  int ldb, int M, int K, int N, int trans_b, float alpha)
{
#pragma omp parallel for schedule(static)
	for (int i = 0; i < M; i++) {
		float *o = out + (size_t)i * ldo;
		const float *ar = a + (size_t)i * lda;
		if (trans_b) {
			for (int j = 0; j < N; j++) {
				const float *br = b + (size_t)j * ldb;
				float acc = 0.0f;
				for (int k = 0; k < K; k++)
					acc += ar[k] * br[k];
				o[j] = alpha * acc;
			}
			continue;
		}
		for (int j = 0; j < N; j++)
			o[j] = 0.0f;
		for (int k = 0; k < K; k++) {
			float av = alpha * ar[k];
			const float *br = b + (size_t)k * ldb;
			for (int j = 0; j < N; j++)
				o[j] += av * br[j];
		}
	}
}
#endif
