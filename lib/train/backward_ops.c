/* backward_ops.c - the backward ops of the training engine (and the
 * cross-entropy they start from).
 *
 * Every reduction runs in a fixed order that does not depend on the number
 * of threads, so a run repeats bit for bit: loops are split over
 * independent outputs (rows, or columns for the sums over rows), never
 * over the terms of one sum.
 */
#include "train/train.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "ops/ops.h"

/* Each loop runs on the pool (core/parallel.h) over a range [lo, hi) of
 * its outputs, its arguments in a struct; the ns figure is a rough cost
 * of one unit, for the size of the pieces. */

typedef struct {
	float *dx, *dw, *db;
	const float *dout, *in, *w, *mean, *rstd;
	int N, C;
} lnb_job;

static void layernorm_dx_rows(void *ctx, size_t lo, size_t hi)
{
	const lnb_job *j = ctx;
	int C = j->C;
	const float *w = j->w;
	for (size_t n = lo; n < hi; n++) {
		const float *x = j->in + n * C, *d = j->dout + n * C;
		float *o = j->dx + n * C;
		float mu = j->mean[n], rs = j->rstd[n];
		double s1 = 0.0, s2 = 0.0; /* mean of dxhat and of dxhat*xhat */
		for (int c = 0; c < C; c++) {
			float dxh = d[c] * w[c];
			s1 += dxh;
			s2 += dxh * ((x[c] - mu) * rs);
		}
		float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
		for (int c = 0; c < C; c++) {
			float xh = (x[c] - mu) * rs;
			o[c] += rs * (d[c] * w[c] - m1 - xh * m2);
		}
	}
}

static void layernorm_dw_columns(void *ctx, size_t lo, size_t hi)
{
	const lnb_job *j = ctx;
	size_t C = (size_t)j->C;
	for (size_t c = lo; c < hi; c++) {
		double sw = 0.0, sb = 0.0;
		for (int n = 0; n < j->N; n++) {
			float g = j->dout[n * C + c];
			sw += g * ((j->in[n * C + c] - j->mean[n]) * j->rstd[n]);
			sb += g;
		}
		j->dw[c] = (float)sw;
		j->db[c] = (float)sb;
	}
}

typedef struct {
	float *db;
	const float *dout;
	size_t N, C;
} bias_job;

static void bias_columns(void *ctx, size_t lo, size_t hi)
{
	const bias_job *j = ctx;
	for (size_t c = lo; c < hi; c++) {
		double sum = 0.0;
		for (size_t n = 0; n < j->N; n++)
			sum += j->dout[n * j->C + c];
		j->db[c] = (float)sum;
	}
}

void tr_bias_backward(float *db, const float *dout, int N, int C)
{
	bias_job j = {db, dout, (size_t)N, (size_t)C};
	at_parallel_range((size_t)C, (double)N, bias_columns, &j);
}

void tr_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
			   const float *in, const float *w, const float *mean,
			   const float *rstd, int N, int C)
{
	lnb_job j = {dx, dw, db, dout, in, w, mean, rstd, N, C};
	at_parallel_range((size_t)N, 3.0 * C, layernorm_dx_rows, &j);
	at_parallel_range((size_t)C, 3.0 * N, layernorm_dw_columns, &j);
}

typedef struct {
	float *dwte, *dwpe;
	const float *dx;
	const int32_t *tokens;
	int B, T, C;
} embb_job;

/* columns are independent; within a column the rows add in order */
static void embed_backward_columns(void *ctx, size_t lo, size_t hi)
{
	const embb_job *j = ctx;
	size_t B = (size_t)j->B, T = (size_t)j->T, C = (size_t)j->C;
	for (size_t c = lo; c < hi; c++) {
		for (size_t t = 0; t < T; t++) {
			float s = 0.0f;
			for (size_t b = 0; b < B; b++)
				s += j->dx[(b * T + t) * C + c];
			j->dwpe[t * C + c] = s;
		}
		for (size_t bt = 0; bt < B * T; bt++)
			j->dwte[(size_t)j->tokens[bt] * C + c] += j->dx[bt * C + c];
	}
}

void tr_embed_backward(float *dwte, float *dwpe, const float *dx,
		       const int32_t *tokens, int B, int T, int C, int V)
{
	memset(dwte, 0, (size_t)V * C * sizeof *dwte);
	embb_job j = {dwte, dwpe, dx, tokens, B, T, C};
	at_parallel_range((size_t)C, 4.0 * B * T, embed_backward_columns, &j);
}

typedef struct {
	float *out;
	const float *a, *b;
	size_t T, V;
	const int32_t *targets;
	float inv;
} rows_job;

static void gelu_backward_range(void *ctx, size_t lo, size_t hi)
{
	const rows_job *j = ctx;
	const float *in = j->a, *dout = j->b;
	float *din = j->out;
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
	for (size_t i = lo; i < hi; i++) {
		float x = in[i];
		float u = k * (x + 0.044715f * x * x * x);
		float th = tanhf(u);
		float du = k * (1.0f + 3.0f * 0.044715f * x * x);
		float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
		din[i] = dout[i] * g;
	}
}

void tr_gelu_backward(float *din, const float *in, const float *dout, size_t n)
{
	rows_job j = {.out = din, .a = in, .b = dout};
	at_parallel_range(n, 8.0, gelu_backward_range, &j);
}

/* softmax backward in place: dS = A * (dA - rowsum(A * dA)); masked
 * entries have A = 0 and so get 0 */
static void softmax_backward_rows(void *ctx, size_t lo, size_t hi)
{
	const rows_job *j = ctx;
	size_t T = j->T;
	for (size_t r = lo; r < hi; r++) {
		const float *a = j->a + r * T;
		float *d = j->out + r * T;
		size_t n = r % T + 1; /* row i sees keys 0..i */
		float s = 0.0f;
		for (size_t c = 0; c < n; c++)
			s += a[c] * d[c];
		for (size_t c = 0; c < n; c++)
			d[c] = a[c] * (d[c] - s);
		for (size_t c = n; c < T; c++)
			d[c] = 0.0f;
	}
}

void tr_attention_backward(float *dq, float *dk, float *dv, float *datt,
			   const float *dout, const float *att, const float *q,
			   const float *k, const float *v, int BH, int T, int D,
			   float scale)
{
	size_t hs = (size_t)T * D, ts = (size_t)T * T;
	for (int i = 0; i < BH; i++) {
		const float *a = att + i * ts, *go = dout + i * hs;
		float *da = datt + i * ts;
		/* dA = dO.V^T; dV = A^T.dO */
		at_gemm(0, 1, T, T, D, 1.0f, go, D, v + i * hs, D, 0.0f, da, T);
		at_gemm(1, 0, T, D, T, 1.0f, a, T, go, D, 0.0f, dv + i * hs, D);
	}
	rows_job sj = {.out = datt, .a = att, .T = (size_t)T};
	at_parallel_range((size_t)BH * T, 1.0 * T, softmax_backward_rows, &sj);
	for (int i = 0; i < BH; i++) {
		const float *ds = datt + i * ts;
		/* S = scale Q.K^T: dQ = scale dS.K, dK = scale dS^T.Q */
		at_gemm(0, 0, T, D, T, scale, ds, T, k + i * hs, D, 0.0f,
			dq + i * hs, D);
		at_gemm(1, 0, T, D, T, scale, ds, T, q + i * hs, D, 0.0f,
			dk + i * hs, D);
	}
}

typedef struct {
	float *probs, *losses;
	const float *logits;
	const int32_t *targets;
	int V;
} ce_job;

static void crossentropy_rows(void *ctx, size_t lo, size_t hi)
{
	const ce_job *c = ctx;
	int V = c->V;
	for (size_t n = lo; n < hi; n++) {
		const float *z = c->logits + n * V;
		float *p = c->probs + n * V;
		float max = z[0];
		for (int j = 1; j < V; j++)
			max = z[j] > max ? z[j] : max;
		double sum = 0.0;
		for (int j = 0; j < V; j++) {
			p[j] = expf(z[j] - max);
			sum += p[j];
		}
		float inv = (float)(1.0 / sum);
		for (int j = 0; j < V; j++)
			p[j] *= inv;
		c->losses[n] = (float)(log(sum) + max - z[c->targets[n]]);
	}
}

double tr_crossentropy_forward(float *probs, float *losses, const float *logits,
			       const int32_t *targets, int N, int V)
{
	ce_job c = {probs, losses, logits, targets, V};
	at_parallel_range((size_t)N, 6.0 * V, crossentropy_rows, &c);
	double total = 0.0;
	for (int n = 0; n < N; n++)
		total += losses[n];
	return total / N;
}

static void crossentropy_backward_rows(void *ctx, size_t lo, size_t hi)
{
	const rows_job *j = ctx;
	size_t V = j->V;
	for (size_t n = lo; n < hi; n++) {
		const float *p = j->a + n * V;
		float *d = j->out + n * V;
		for (size_t c = 0; c < V; c++)
			d[c] = p[c] * j->inv;
		d[j->targets[n]] -= j->inv;
	}
}

void tr_crossentropy_backward(float *dlogits, const float *probs,
			      const int32_t *targets, int N, int V)
{
	rows_job j = {.out = dlogits, .a = probs, .V = (size_t)V,
		      .targets = targets, .inv = 1.0f / N};
	at_parallel_range((size_t)N, 0.5 * V, crossentropy_backward_rows, &j);
}
