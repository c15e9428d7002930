// attention_ref.cuh - the fused attention's oracle in double, for the
// harnesses of the fp32 kernels (attention_check.cu) and of cuDNN's
// (sdpa_check.cu).
#ifndef ANDREA_ATTENTION_REF_CUH
#define ANDREA_ATTENTION_REF_CUH

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
	std::vector<float> &out = r[0], &lse = r[1], &gq = r[2], &gk = r[3],
			   &gv = r[4];
	std::vector<double> p(T), dp(T);
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
					gq[o + i * D + d] += (float)(ds * k[o + j * D + d]);
					gk[o + j * D + d] += (float)(ds * q[o + i * D + d]);
					gv[o + j * D + d] += (float)(p[j] * g[o + i * D + d]);
				}
			}
		}
	}
}

#endif
