/* fused_attention.c - softmax(scale q.k^T, causal) . v without the T x T
 * scores: the CPU's fused attention (ops.h, at_attention_fused).
 *
 * Work goes out in items of QT query rows of one head; an item runs over
 * the keys it sees KT at a time, keeping each row's running maximum m and
 * sum l of exp(s - m), and its output unnormalised in acc: a block of
 * keys with a larger maximum first scales what came before by
 * exp(m_old - m_new).  Memory is QT x (KT + D) floats a thread, whatever
 * T is.  The exp is softmax.c's, so the numbers stay those of the staged
 * pipeline within float32's rounding.
 */
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "ops/fast_exp.h"

#define QT 64  /* query rows an item */
#define KT 256 /* keys a block */

typedef struct {
	float *out, *lse;
	const float *q, *k, *v;
	int T, D, causal, tiles;
	float scale;
	float *scratch; /* per thread: s [QT,KT], acc [QT,D], m, l [QT] */
	size_t per_thread;
} fused_job;

/* Row i of s (n keys, those past `seen` masked) into the running state:
 * s becomes exp(s - m_new), acc's row is scaled to the new maximum.  A row
 * whose scores so far are all -inf keeps zeros (as attention.cu's does):
 * -inf - -inf would be NaN, and a block of keys it cannot see (q . k of
 * -inf) made NaN of a row whose later keys NumPy weighs as usual. */
static void online_row(float *s, int n, int seen, float *m, float *l,
		       float *acc, int D)
{
	float mx = *m;
	for (int j = 0; j < seen; j++)
		mx = s[j] > mx ? s[j] : mx;
	float base = mx == -INFINITY ? 0.0f : mx; /* exp(-inf - 0) = 0 */
	float alpha = mx == -INFINITY ? 1.0f : fast_exp(*m - mx), sum = 0.0f;
#pragma omp simd reduction(+ : sum)
	for (int j = 0; j < n; j++) {
		float p = j < seen ? fast_exp(s[j] - base) : 0.0f;
		s[j] = p;
		sum += p;
	}
	*l = *l * alpha + sum;
	*m = mx;
	if (alpha != 1.0f)
		for (int d = 0; d < D; d++)
			acc[d] *= alpha;
}

static void fused_item(void *ctx, int item, int tid)
{
	const fused_job *j = ctx;
	int T = j->T, D = j->D;
	size_t bh = (size_t)(item / j->tiles);
	int q0 = item % j->tiles * QT, rows = T - q0 < QT ? T - q0 : QT;
	const float *q = j->q + (bh * T + q0) * D;
	const float *k = j->k + bh * T * D, *v = j->v + bh * T * D;
	float *s = j->scratch + (size_t)tid * j->per_thread;
	float *acc = s + QT * KT, *m = acc + (size_t)QT * D, *l = m + QT;
	for (int r = 0; r < rows; r++) {
		m[r] = -INFINITY;
		l[r] = 0.0f;
	}
	for (size_t i = 0; i < (size_t)rows * D; i++)
		acc[i] = 0.0f;
	int keys = j->causal ? q0 + rows : T; /* the last row sees these */
	for (int k0 = 0; k0 < keys; k0 += KT) {
		int n = keys - k0 < KT ? keys - k0 : KT;
		at_gemm(0, 1, rows, n, D, j->scale, q, D, k + (size_t)k0 * D, D,
			0.0f, s, KT);
		for (int r = 0; r < rows; r++) {
			int seen = j->causal ? q0 + r + 1 - k0 : n;
			seen = seen < 0 ? 0 : seen > n ? n : seen;
			online_row(s + (size_t)r * KT, n, seen, &m[r], &l[r],
				   acc + (size_t)r * D, D);
		}
		at_gemm(0, 0, rows, D, n, 1.0f, s, KT, v + (size_t)k0 * D, D,
			1.0f, acc, D);
	}
	float *out = j->out + (bh * T + q0) * D;
	for (int r = 0; r < rows; r++) {
		float inv = 1.0f / l[r];
		for (int d = 0; d < D; d++)
			out[(size_t)r * D + d] = acc[(size_t)r * D + d] * inv;
		if (j->lse)
			j->lse[bh * T + q0 + r] = m[r] + logf(l[r]);
	}
}

int at_attention_fused(float *out, float *lse, const float *q, const float *k,
		       const float *v, int BH, int T, int D, float scale,
		       int causal)
{
	if (BH == 0 || T == 0)
		return 0;
	int tiles = (T + QT - 1) / QT, items = BH * tiles;
	int threads = at_threads() < items ? at_threads() : items;
	fused_job j = {out, lse, q, k, v, T, D, causal, tiles, scale, NULL,
		       (size_t)QT * (KT + D) + 2 * QT};
	j.scratch = malloc((size_t)threads * j.per_thread * sizeof *j.scratch);
	if (!j.scratch)
		return -1;
	at_parallel_for(items, threads, fused_item, &j);
	free(j.scratch);
	return 0;
}
