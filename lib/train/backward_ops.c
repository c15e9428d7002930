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

#include "ops/ops.h"

void tr_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
			   const float *in, const float *w, const float *mean,
			   const float *rstd, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *x = in + (size_t)n * C, *d = dout + (size_t)n * C;
		float *o = dx + (size_t)n * C;
		float mu = mean[n], rs = rstd[n];
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
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		double sw = 0.0, sb = 0.0;
		for (int n = 0; n < N; n++) {
			float g = dout[(size_t)n * C + c];
			sw += g * ((in[(size_t)n * C + c] - mean[n]) * rstd[n]);
			sb += g;
		}
		dw[c] = (float)sw;
		db[c] = (float)sb;
	}
}

void tr_embed_backward(float *dwte, float *dwpe, const float *dx,
		       const int32_t *tokens, int B, int T, int C, int V)
{
	memset(dwte, 0, (size_t)V * C * sizeof *dwte);
	/* columns are independent; within a column the rows add in order */
#pragma omp parallel for schedule(static)
	for (int c = 0; c < C; c++) {
		for (int t = 0; t < T; t++) {
			float s = 0.0f;
			for (int b = 0; b < B; b++)
				s += dx[((size_t)b * T + t) * C + c];
			dwpe[(size_t)t * C + c] = s;
		}
		for (int bt = 0; bt < B * T; bt++)
			dwte[(size_t)tokens[bt] * C + c] += dx[(size_t)bt * C + c];
	}
}

void tr_gelu_backward(float *din, const float *in, const float *dout, size_t n)
{
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float x = in[i];
		float u = k * (x + 0.044715f * x * x * x);
		float th = tanhf(u);
		float du = k * (1.0f + 3.0f * 0.044715f * x * x);
		float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
		din[i] = dout[i] * g;
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
	/* softmax backward in place: dS = A * (dA - rowsum(A * dA)); masked
	 * entries have A = 0 and so get 0 */
#pragma omp parallel for schedule(static)
	for (size_t r = 0; r < (size_t)BH * T; r++) {
		const float *a = att + r * T;
		float *d = datt + r * T;
		int n = (int)(r % T) + 1; /* row i sees keys 0..i */
		float s = 0.0f;
		for (int j = 0; j < n; j++)
			s += a[j] * d[j];
		for (int j = 0; j < n; j++)
			d[j] = a[j] * (d[j] - s);
		for (int j = n; j < T; j++)
			d[j] = 0.0f;
	}
	for (int i = 0; i < BH; i++) {
		const float *ds = datt + i * ts;
		/* S = scale Q.K^T: dQ = scale dS.K, dK = scale dS^T.Q */
		at_gemm(0, 0, T, D, T, scale, ds, T, k + i * hs, D, 0.0f,
			dq + i * hs, D);
		at_gemm(1, 0, T, D, T, scale, ds, T, q + i * hs, D, 0.0f,
			dk + i * hs, D);
	}
}

double tr_crossentropy_forward(float *probs, float *losses, const float *logits,
			       const int32_t *targets, int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *z = logits + (size_t)n * V;
		float *p = probs + (size_t)n * V;
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
		losses[n] = (float)(log(sum) + max - z[targets[n]]);
	}
	double total = 0.0;
	for (int n = 0; n < N; n++)
		total += losses[n];
	return total / N;
}

void tr_crossentropy_backward(float *dlogits, const float *probs,
			      const int32_t *targets, int N, int V)
{
	float inv = 1.0f / N;
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *p = probs + (size_t)n * V;
		float *d = dlogits + (size_t)n * V;
		for (int j = 0; j < V; j++)
			d[j] = p[j] * inv;
		d[targets[n]] -= inv;
	}
}
