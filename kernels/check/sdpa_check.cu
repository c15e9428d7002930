// sdpa_check.cu - the bf16 fused attention through cuDNN
// (at_cudnn_sdpa_forward, _backward) against softmax attention in double
// on the same bf16-rounded inputs: out, lse, dq, dk, dv, causal and full,
// T = 1 and T not a multiple of any tile, D = 32, 64, 128, contiguous and
// in the model block's layout (at_sdpa_block: out and dq, dk, dv in rows
// [B,T,H*D]); then at
// B = 4, H = 12, T = 2048 (the float dq accumulator's path) against the
// fp32 kernels; then timings at B = 8, H = 12, D = 64.  Without cuDNN it
// says so and checks nothing.
#include "harness.cuh"
#include "forward/forward_kernels.cuh"

// Tolerances: out and the gradients pass through bf16 (P, dS and the
// results are rounded to 8 bits of mantissa); lse is float throughout.
#define TOL_BF16 2e-2
#define TOL_LSE 1e-4

// Float values on the device rounded to bf16 (b16) and back (f32: what
// the reference reads).
struct bf_tensor {
	bf16 *b16;
	float *f32;
	std::vector<float> host;
};

static bf_tensor bf_randn(size_t n)
{
	bf_tensor t;
	t.f32 = h_upload(h_randn(n));
	H_CUDA(cudaMalloc(&t.b16, n * sizeof(bf16)));
	H_OP(at_cu_to_bf16(t.b16, t.f32, n));
	H_OP(at_cu_from_bf16(t.f32, t.b16, n));
	t.host = h_download(t.f32, n);
	return t;
}

static void bf_free(bf_tensor &t)
{
	H_CUDA(cudaFree(t.b16));
	H_CUDA(cudaFree(t.f32));
}

// A bf16 buffer of n on the device, read back as floats for h_compare.
static float *bf_read(const bf16 *p, size_t n)
{
	float *f = h_dev(n);
	H_OP(at_cu_from_bf16(f, p, n));
	return f;
}

// out, lse, dq, dk, dv in double, [BH,T,D] contiguous.
static void reference(std::vector<float> *r, const std::vector<float> &q,
		      const std::vector<float> &k, const std::vector<float> &v,
		      const std::vector<float> &g, int BH, int T, int D,
		      float scale, int causal)
{
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

// [B,H,T,D] -> [B,T,H,D] on the host (the row layout's order).
static std::vector<float> to_rows(const std::vector<float> &x, int B, int H,
				  int T, int D)
{
	std::vector<float> y(x.size());
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				for (int d = 0; d < D; d++)
					y[(((size_t)b * T + t) * H + h) * D + d] =
						x[(((size_t)b * H + h) * T + t) * D + d];
	return y;
}

// cuDNN's out, lse, dq, dk, dv against want[5] (host; the same layouts).
static void compare(const char *what, bf16 *const got[5], const float *lse,
		    const std::vector<float> *want, size_t n, size_t nr)
{
	static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
	for (int i = 0; i < 5; i++) {
		char w[200];
		snprintf(w, sizeof w, "%s %s", what, names[i]);
		if (i == 1) {
			h_compare(w, lse, want[1].data(), nr, TOL_LSE);
			continue;
		}
		float *f = bf_read(got[i], n);
		h_compare(w, f, want[i].data(), n, TOL_BF16);
		H_CUDA(cudaFree(f));
	}
}

// rows_layout: the model block's shape (at_sdpa_block: causal).
static void check(int B, int H, int T, int D, int causal, int rows_layout)
{
	float scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)B * H * T * D, nr = (size_t)B * H * T;
	at_sdpa_shape s = rows_layout ? at_sdpa_block(B, H, T, D)
				      : at_sdpa_contiguous(B, H, T, D, scale, causal);
	char what[160];
	snprintf(what, sizeof what, "cudnn attention %s B=%d H=%d T=%d D=%d%s",
		 causal ? "causal" : "full", B, H, T, D,
		 rows_layout ? " rows" : "");
	if (!at_cudnn_sdpa_supported(&s, 0) || !at_cudnn_sdpa_supported(&s, 1)) {
		h_result(false, what, at_cuda_error());
		return;
	}
	bf_tensor q = bf_randn(n), k = bf_randn(n), v = bf_randn(n),
		  g = bf_randn(n);
	std::vector<float> r[5] = {std::vector<float>(n), std::vector<float>(nr),
				   std::vector<float>(n), std::vector<float>(n),
				   std::vector<float>(n)};
	reference(r, q.host, k.host, v.host, g.host, B * H, T, D, scale, causal);
	bf16 *o, *dq, *dk, *dv;
	for (bf16 **p : {&o, &dq, &dk, &dv})
		H_CUDA(cudaMalloc(p, n * sizeof(bf16)));
	float *lse = h_dev(nr);
	H_OP(at_cudnn_sdpa_forward(&s, o, lse, q.b16, k.b16, v.b16));
	H_OP(at_cudnn_sdpa_backward(&s, dq, dk, dv, q.b16, k.b16, v.b16, o,
				    g.b16, lse));
	if (rows_layout)
		for (int i : {0, 2, 3, 4})
			r[i] = to_rows(r[i], B, H, T, D);
	bf16 *got[5] = {o, NULL, dq, dk, dv};
	compare(what, got, lse, r, n, nr);
	for (bf16 *p : {o, dq, dk, dv})
		H_CUDA(cudaFree(p));
	H_CUDA(cudaFree(lse));
	for (bf_tensor *t : {&q, &k, &v, &g})
		bf_free(*t);
}

// cuDNN against the fp32 kernels on the same rounded inputs, at a size
// whose backward takes the float dq accumulator.
static void check_large(int B, int H, int T, int D)
{
	float scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)B * H * T * D, nr = (size_t)B * H * T;
	int BH = B * H;
	at_sdpa_shape s = at_sdpa_contiguous(B, H, T, D, scale, 1);
	char what[160];
	snprintf(what, sizeof what, "cudnn attention causal B=%d H=%d T=%d D=%d "
		 "vs fp32 kernels", B, H, T, D);
	bf_tensor q = bf_randn(n), k = bf_randn(n), v = bf_randn(n),
		  g = bf_randn(n);
	float *o32 = h_dev(n), *lse32 = h_dev(nr), *delta = h_dev(nr),
	      *dq32 = h_dev(n), *dk32 = h_dev(n), *dv32 = h_dev(n);
	H_OP(at_cuda_attention_forward(o32, lse32, q.f32, k.f32, v.f32, BH, T,
				       D, scale, 1));
	H_OP(at_cuda_attention_backward(dq32, dk32, dv32, q.f32, k.f32, v.f32,
					o32, lse32, g.f32, delta, BH, T, D,
					scale, 1));
	bf16 *o, *dq, *dk, *dv;
	for (bf16 **p : {&o, &dq, &dk, &dv})
		H_CUDA(cudaMalloc(p, n * sizeof(bf16)));
	float *lse = h_dev(nr);
	H_OP(at_cudnn_sdpa_forward(&s, o, lse, q.b16, k.b16, v.b16));
	H_OP(at_cudnn_sdpa_backward(&s, dq, dk, dv, q.b16, k.b16, v.b16, o,
				    g.b16, lse));
	bf16 *got[5] = {o, NULL, dq, dk, dv};
	float *fp32[5] = {o32, lse32, dq32, dk32, dv32};
	std::vector<float> want[5];
	for (int i = 0; i < 5; i++)
		want[i] = h_download(fp32[i], i == 1 ? nr : n);
	compare(what, got, lse, want, n, nr);
	for (float *p : {o32, lse32, delta, dq32, dk32, dv32, lse})
		H_CUDA(cudaFree(p));
	for (bf16 *p : {o, dq, dk, dv})
		H_CUDA(cudaFree(p));
	for (bf_tensor *t : {&q, &k, &v, &g})
		bf_free(*t);
}

static void timing(int T)
{
	const int B = 8, H = 12, D = 64;
	size_t n = (size_t)B * H * T * D;
	at_sdpa_shape s = at_sdpa_contiguous(B, H, T, D, 0.125f, 1);
	bf_tensor q = bf_randn(n), k = bf_randn(n), v = bf_randn(n),
		  g = bf_randn(n);
	bf16 *o, *dq, *dk, *dv;
	for (bf16 **p : {&o, &dq, &dk, &dv})
		H_CUDA(cudaMalloc(p, n * sizeof(bf16)));
	float *lse = h_dev((size_t)B * H * T);
	H_OP(at_cudnn_sdpa_forward(&s, o, lse, q.b16, k.b16, v.b16));
	H_OP(at_cudnn_sdpa_backward(&s, dq, dk, dv, q.b16, k.b16, v.b16, o,
				    g.b16, lse)); // then the timings' own calls
	float fms = h_time_ms([&] {
		at_cudnn_sdpa_forward(&s, o, lse, q.b16, k.b16, v.b16);
	}, 20);
	float bms = h_time_ms([&] {
		at_cudnn_sdpa_backward(&s, dq, dk, dv, q.b16, k.b16, v.b16, o,
				       g.b16, lse);
	}, 20);
	double flops = 4.0 * B * H * T * (T + 1) / 2.0 * D;
	printf("time cudnn attention bf16 causal B=8 H=12 T=%d D=64: forward "
	       "%.4f ms (%.1f TFLOP/s), backward %.4f ms (%.1f TFLOP/s), "
	       "forward + backward %.4f ms\n", T, fms, flops / fms / 1e9, bms,
	       2.5 * flops / bms / 1e9, fms + bms);
	fflush(stdout);
	for (bf16 *p : {o, dq, dk, dv})
		H_CUDA(cudaFree(p));
	H_CUDA(cudaFree(lse));
	for (bf_tensor *t : {&q, &k, &v, &g})
		bf_free(*t);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "sdpa-check");
	at_sdpa_shape probe = at_sdpa_contiguous(1, 1, 64, 64, 0.125f, 1);
	if (!at_cudnn_sdpa_supported(&probe, 0)) {
		printf("sdpa-check: no cuDNN fused attention here "
		       "(%s); nothing checked\n", at_cuda_error());
		return h_finish();
	}
	static const int shapes[][4] = {
		{1, 1, 1, 64},  {2, 3, 7, 32},  {1, 2, 64, 64}, {2, 2, 65, 64},
		{1, 2, 130, 128}, {2, 1, 257, 64},
	};
	for (auto &sh : shapes)
		for (int causal = 1; causal >= 0; causal--)
			check(sh[0], sh[1], sh[2], sh[3], causal, 0);
	check(2, 3, 65, 64, 1, 1); // the model block's layout
	check(1, 4, 33, 32, 1, 1);
	check_large(4, 12, 2048, 64);
	if (h_full)
		for (int T : {1024, 4096, 16384})
			timing(T);
	return h_finish();
}
