// attention_ref.cuh - the fused attention's oracle in double, for the
// harnesses of the fp32 kernels (attention_check.cu) and of cuDNN's
// (sdpa_check.cu).
#ifndef ANDREA_ATTENTION_REF_CUH
#define ANDREA_ATTENTION_REF_CUH

#include <algorithm>
#include <cmath>
#include <vector>

// Softmax attention out = softmax(scale q.k^T [causal]) v in double, with
// its row log-sum-exp and the gradients dq, dk, dv of out against dout:
// r[5] = out, lse, dq, dk, dv, all [BH,T,D] ([BH,T] for lse).
static inline void attention_reference(std::vector<float> *r,
				       const std::vector<float> &q,
				       const std::vector<float> &k,
				       const std::vector<float> &v,
				       const std::vector<float> &g, int BH,
				       int T, int D, float scale, int causal)
{
	size_t n = (size_t)BH * T * D;
	for (int i = 0; i < 5; i++)
		r[i].assign(i == 1 ? (size_t)BH * T : n, 0.0f);
	std::vector<float> &out = r[0], &lse = r[1];
	std::vector<double> p(T), dp(T), gq(n), gk(n), gv(n);
	for (int h = 0; h < BH; h++) {
		size_t o = (size_t)h * T * D;
		for (int i = 0; i < T; i++) {
			int n = causal ? i + 1 : T;
			double mx = -INFINITY, sum = 0, delta = 0;
			for (int j = 0; j < n; j++) {
				double s = 0;
				for (int d = 0; d < D; d++)
					s += (double)q[o + i * D + d] * k[o + j * D + d];
				p[j] = s * scale;
				mx = p[j] > mx ? p[j] : mx;
			}
			for (int j = 0; j < n; j++)
				sum += (p[j] = exp(p[j] - mx));
			lse[(size_t)h * T + i] = (float)(mx + log(sum));
			for (int d = 0; d < D; d++) {
				double acc = 0;
				for (int j = 0; j < n; j++)
					acc += p[j] / sum * v[o + j * D + d];
				out[o + i * D + d] = (float)acc;
			}
			for (int j = 0; j < n; j++) {
				p[j] /= sum;
				dp[j] = 0;
				for (int d = 0; d < D; d++)
					dp[j] += (double)g[o + i * D + d] * v[o + j * D + d];
				delta += p[j] * dp[j];
			}
			for (int j = 0; j < n; j++) {
				double ds = p[j] * (dp[j] - delta) * scale;
				for (int d = 0; d < D; d++) {
					gq[o + i * D + d] += ds * k[o + j * D + d];
					gk[o + j * D + d] += ds * q[o + i * D + d];
					gv[o + j * D + d] += p[j] * g[o + i * D + d];
				}
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		r[2][i] = (float)gq[i];
		r[3][i] = (float)gk[i];
		r[4][i] = (float)gv[i];
	}
}

// The same for a few rows of one causal head, in double throughout, with
// no [T,T] or [T,D] sums: out and dq at the query rows `queries`, dk and
// dv at the key rows `keys` (each [n,D] in the order given), from every
// row's log-sum-exp and delta_i = dout_i . out_i.
static inline void attention_rows_reference(
	std::vector<double> &out, std::vector<double> &gq,
	std::vector<double> &gk, std::vector<double> &gv,
	const std::vector<float> &q, const std::vector<float> &k,
	const std::vector<float> &v, const std::vector<float> &g, int T, int D,
	double scale, const int *queries, int NQ, const int *keys, int NK)
{
	auto dot = [&](const std::vector<float> &a, int i,
		       const std::vector<float> &b, int j) {
		double s = 0;
		for (int d = 0; d < D; d++)
			s += (double)a[(size_t)i * D + d] * b[(size_t)j * D + d];
		return s;
	};
	std::vector<double> lse(T), delta(T), s(T), out_i(D);
	for (int i = 0; i < T; i++) {
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j <= i; j++)
			mx = fmax(mx, s[j] = scale * dot(q, i, k, j));
		for (int j = 0; j <= i; j++)
			sum += s[j] = exp(s[j] - mx);
		std::fill(out_i.begin(), out_i.end(), 0.0);
		for (int j = 0; j <= i; j++)
			for (int d = 0; d < D; d++)
				out_i[d] += s[j] / sum * v[(size_t)j * D + d];
		lse[i] = mx + log(sum);
		delta[i] = 0;
		for (int d = 0; d < D; d++)
			delta[i] += out_i[d] * g[(size_t)i * D + d];
	}
	out.assign((size_t)NQ * D, 0.0);
	gq.assign((size_t)NQ * D, 0.0);
	gk.assign((size_t)NK * D, 0.0);
	gv.assign((size_t)NK * D, 0.0);
	for (int r = 0; r < NQ; r++) {
		int i = queries[r];
		for (int j = 0; j <= i; j++) {
			double p = exp(scale * dot(q, i, k, j) - lse[i]),
			       ds = p * (dot(g, i, v, j) - delta[i]) * scale;
			for (int d = 0; d < D; d++) {
				out[r * D + d] += p * v[(size_t)j * D + d];
				gq[r * D + d] += ds * k[(size_t)j * D + d];
			}
		}
	}
	for (int r = 0; r < NK; r++) {
		int j = keys[r];
		for (int i = j; i < T; i++) {
			double p = exp(scale * dot(q, i, k, j) - lse[i]),
			       ds = p * (dot(g, i, v, j) - delta[i]) * scale;
			for (int d = 0; d < D; d++) {
				gk[r * D + d] += ds * q[(size_t)i * D + d];
				gv[r * D + d] += p * g[(size_t)i * D + d];
			}
		}
	}
}

#endif
