/* test_matmul_fallback.c - the plain C matrix product (the BLAS=none
 * build) against a double-precision triple loop, on odd sizes, with and
 * without a transposed b and with strided sub-matrices.
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

/* One product of M x K by K x N (or N x K transposed) inside larger
 * buffers with row strides lda, ldb, ldo; returns the relative error. */
static double check(int M, int K, int N, int trans_b, int pad, unsigned seed)
{
	int lda = K + pad, ldb = (trans_b ? K : N) + pad, ldo = N + pad;
	int brows = trans_b ? N : K;
	float *a = malloc(sizeof(float) * (M * lda + 1));
	float *b = malloc(sizeof(float) * (brows * ldb + 1));
	float *o = malloc(sizeof(float) * (M * ldo + 1));
	for (int i = 0; i < M * lda; i++)
		a[i] = frand(&seed);
	for (int i = 0; i < brows * ldb; i++)
		b[i] = frand(&seed);
	for (int i = 0; i < M * ldo; i++)
		o[i] = NAN; /* poison: every element must be written */
	float alpha = 0.75f;
	at_matmul_ld(o, ldo, a, lda, b, ldb, M, K, N, trans_b, alpha);
	double num = 0, den = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double ref = 0;
			for (int k = 0; k < K; k++)
				ref += (double)a[i * lda + k] *
				       (trans_b ? b[j * ldb + k] : b[k * ldb + j]);
			ref *= alpha;
			double d = o[i * ldo + j] - ref;
			num += d * d;
			den += ref * ref;
		}
	free(a);
	free(b);
	free(o);
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

int main(void)
{
	static const int sizes[][3] = {{1, 1, 1}, {1, 7, 3}, {5, 1, 9},
				       {17, 33, 5}, {64, 64, 64}, {31, 130, 7}};
	unsigned seed = 1;
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
		for (int trans_b = 0; trans_b < 2; trans_b++)
			for (int pad = 0; pad < 4; pad += 3) {
				double err = check(sizes[s][0], sizes[s][1], sizes[s][2],
						   trans_b, pad, seed++);
				if (err <= 1e-6) {
					passed++;
				} else {
					failed++;
					printf("M=%d K=%d N=%d trans_b=%d pad=%d: "
					       "relative error %.3g\n", sizes[s][0],
					       sizes[s][1], sizes[s][2], trans_b, pad, err);
				}
			}
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
