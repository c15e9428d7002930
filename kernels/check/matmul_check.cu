// matmul_check.cu - the cuBLAS products (at_cuda_matmul, scores, attend)
// against at_gemm, at_scores_forward and at_attend_forward, in fp32.
#include "harness.cuh"

static void check_matmul(int M, int K, int N, int trans_b, float alpha)
{
	std::vector<float> a = h_randn((size_t)M * K), b = h_randn((size_t)K * N);
	std::vector<float> ref((size_t)M * N);
	at_gemm(0, trans_b, M, N, K, alpha, a.data(), K, b.data(),
		trans_b ? K : N, 0.0f, ref.data(), N);
	float *da = h_upload(a), *db = h_upload(b), *dout = h_dev(ref.size());
	H_OP(at_cuda_matmul(dout, da, db, M, K, N, trans_b, alpha, 0));
	char what[128];
	snprintf(what, sizeof what, "matmul M=%d K=%d N=%d%s alpha=%g", M, K, N,
		 trans_b ? " b^T" : "", alpha);
	h_compare(what, dout, ref.data(), ref.size(), 1e-5);
	if (h_full && (size_t)M * N * K >= ((size_t)1 << 32)) {
		for (int tf32 = 0; tf32 < 2; tf32++) {
			float ms = h_time_ms([&] {
				at_cuda_matmul(dout, da, db, M, K, N, trans_b,
					       alpha, tf32);
			});
			printf("time matmul M=%d K=%d N=%d%s: %.4f ms, %.1f TFLOP/s\n",
			       M, K, N, tf32 ? " tf32" : "", ms,
			       2.0 * M * N * K / ms / 1e9);
		}
	}
	H_CUDA(cudaFree(da));
	H_CUDA(cudaFree(db));
	H_CUDA(cudaFree(dout));
}

static void check_scores(int BH, int T, int D, float scale)
{
	std::vector<float> q = h_randn((size_t)BH * T * D), k = h_randn(q.size());
	std::vector<float> ref((size_t)BH * T * T);
	at_scores_forward(ref.data(), q.data(), k.data(), BH, T, D, scale);
	float *dq = h_upload(q), *dk = h_upload(k), *ds = h_dev(ref.size());
	H_OP(at_cuda_scores_forward(ds, dq, dk, BH, T, D, scale, 0));
	char what[128];
	snprintf(what, sizeof what, "scores BH=%d T=%d D=%d scale=%g", BH, T, D,
		 scale);
	h_compare(what, ds, ref.data(), ref.size(), 1e-5);
	if (h_full && BH * (size_t)T >= 98304) {
		float ms = h_time_ms([&] {
			at_cuda_scores_forward(ds, dq, dk, BH, T, D, scale, 0);
		});
		h_report_time(what, ms, 0);
	}
	H_CUDA(cudaFree(dq));
	H_CUDA(cudaFree(dk));
	H_CUDA(cudaFree(ds));
}

static void check_attend(int BH, int T, int D)
{
	std::vector<float> a((size_t)BH * T * T), v = h_randn((size_t)BH * T * D);
	std::vector<float> s = h_randn(a.size());
	at_mask_causal(s.data(), BH, T, -INFINITY);
	at_softmax_rows(a.data(), s.data(), (size_t)BH * T, T);
	std::vector<float> ref(v.size());
	at_attend_forward(ref.data(), a.data(), v.data(), BH, T, D);
	float *da = h_upload(a), *dv = h_upload(v), *dout = h_dev(ref.size());
	H_OP(at_cuda_attend_forward(dout, da, dv, BH, T, D, 0));
	char what[128];
	snprintf(what, sizeof what, "attend BH=%d T=%d D=%d", BH, T, D);
	h_compare(what, dout, ref.data(), ref.size(), 1e-5);
	if (h_full && BH * (size_t)T >= 98304) {
		float ms = h_time_ms([&] {
			at_cuda_attend_forward(dout, da, dv, BH, T, D, 0);
		});
		h_report_time(what, ms, 0);
	}
	H_CUDA(cudaFree(da));
	H_CUDA(cudaFree(dv));
	H_CUDA(cudaFree(dout));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "matmul-check");
	static const int mm[][3] = {{1, 1, 1}, {17, 5, 33}, {3, 1, 7},
				    {33, 64, 17}, {100, 768, 96}};
	for (auto &s : mm)
		for (int t = 0; t < 2; t++)
			check_matmul(s[0], s[1], s[2], t, t ? 0.5f : 1.0f);
	check_matmul(5, 0, 3, 0, 1.0f); // K = 0: zeros
	if (h_full) {
		check_matmul(8192, 768, 2304, 0, 1.0f); // the fused Q|K|V product
		check_matmul(8192, 768, 768, 0, 1.0f);  // Wo
	}
	static const int sh[][3] = {{1, 1, 1}, {6, 5, 1}, {2, 1, 7}, {6, 13, 4},
				    {4, 17, 16}, {3, 33, 5}, {24, 64, 64}};
	for (auto &s : sh) {
		check_scores(s[0], s[1], s[2], 1.0f / sqrtf((float)s[2]));
		check_attend(s[0], s[1], s[2]);
	}
	if (h_full) {
		check_scores(96, 1024, 64, 0.125f);
		check_attend(96, 1024, 64);
	}
	return h_finish();
}
