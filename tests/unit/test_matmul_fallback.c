/* test_matmul_fallback.c - the plain C matrix product (the BLAS=none
 * build) against a double-precision triple loop, on odd sizes, with and
 * without transposed operands, with beta 0 and not, and with strided
 * sub-matrices.
 *
 * The fallback is compiled into this test from its source with
 * ANDREA_CBLAS undefined, so it is checked whatever the build links.
 */
#undef ANDREA_CBLAS
#include "../../lib/ops/matmul.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int passed, failed;

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* One product op(A) [M,K] . op(B) [K,N] (A stored [K,M] when ta, B
 * [N,K] when tb) inside larger buffers with row strides lda, ldb, ldc,
 * into a C that holds NaN (beta 0: never read) or values beta scales;
 * returns the relative error. */
static double check(int M, int K, int N, int ta, int tb, float beta, int pad,
		    unsigned seed)
{
	int arows = ta ? K : M, brows = tb ? N : K;
	int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
	float *a = malloc(sizeof(float) * (arows * lda + 1));
	float *b = malloc(sizeof(float) * (brows * ldb + 1));
	float *c = malloc(sizeof(float) * (M * ldc + 1));
	float *c0 = malloc(sizeof(float) * (M * ldc + 1));
	for (int i = 0; i < arows * lda; i++)
		a[i] = frand(&seed);
	for (int i = 0; i < brows * ldb; i++)
		b[i] = frand(&seed);
	for (int i = 0; i < M * ldc; i++) /* poison: every element is written */
		c[i] = c0[i] = beta == 0.0f ? NAN : frand(&seed);
	float alpha = 0.75f;
	at_gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
	double num = 0, den = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double ref = 0;
			for (int k = 0; k < K; k++)
				ref += (double)(ta ? a[k * lda + i] : a[i * lda + k]) *
				       (tb ? b[j * ldb + k] : b[k * ldb + j]);
			ref *= alpha;
			if (beta != 0.0f)
				ref += (double)beta * c0[i * ldc + j];
			double d = c[i * ldc + j] - ref;
			num += d * d;
			den += ref * ref;
		}
	free(a);
	free(b);
	free(c);
	free(c0);
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

int main(void)
{
	static const int sizes[][3] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9},
				       {17, 33, 5}, {64, 64, 64}, {31, 130, 7}};
	static const float betas[] = {0.0f, 0.5f};
	unsigned seed = 1;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (int t = 0; t < 8; t++)
			for (int pad = 0; pad < 4; pad += 3) {
				int ta = t >> 2 & 1, tb = t & 1;
				float beta = betas[t >> 1 & 1];
				double err = check(sizes[s][0], sizes[s][1], sizes[s][2],
						   ta, tb, beta, pad, seed++);
				if (err <= 1e-6) {
					passed++;
				} else {
					failed++;
					printf("M=%d K=%d N=%d ta=%d tb=%d beta=%g pad=%d: "
					       "relative error %.3g\n", sizes[s][0],
					       sizes[s][1], sizes[s][2], ta, tb, beta, pad,
					       err);
				}
			}
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
