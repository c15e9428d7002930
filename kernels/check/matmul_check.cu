// matmul_check.cu - the cuBLAS products against the CPU: at_cu_gemm (the
// one GPU wrapper, gemm.cuh) against at_gemm (the CPU one) and a loop in
// double, both ways through cuBLAS (the stage ops' and the training
// engine's, bf16 too, its large products' timed cuBLASLt algorithms
// too), and at_cuda_scores_forward and
// at_cuda_attend_forward against at_scores_forward and at_attend_forward
// (at scale 0 too, where an inf in q makes NaN).
#include <cuda_bf16.h>

#include "harness.cuh"
#include "forward/forward_kernels.cuh"
#include "common/cublas_lazy.cuh"
#include "common/gemm.cuh"
#include "common/tune.cuh"

// The stage ops' products: out = alpha a . op(b), on the process's handle.
static void check_matmul(int M, int K, int N, int trans_b, float alpha)
{
	std::vector<float> a = h_randn((size_t)M * K), b = h_randn((size_t)K * N);
	std::vector<float> ref((size_t)M * N);
	at_gemm(0, trans_b, M, N, K, alpha, a.data(), K, b.data(),
		trans_b ? K : N, 0.0f, ref.data(), N);
	float *da = h_upload(a), *db = h_upload(b), *dout = h_dev(ref.size());
	at_cu_gemm_mode g = {nullptr, AT_PREC_FP32};
	H_OP(at_cu_gemm(&g, 0, trans_b, M, N, K, alpha, da, 0, db, 0, 0.0f, dout,
			0, 1, "the product"));
	char what[128];
	snprintf(what, sizeof what, "matmul M=%d K=%d N=%d%s alpha=%g", M, K, N,
		 trans_b ? " b^T" : "", alpha);
	h_compare(what, dout, ref.data(), ref.size(), 1e-5);
	if (h_full && (size_t)M * N * K >= ((size_t)1 << 32)) {
		for (int tf32 = 0; tf32 < 2; tf32++) {
			at_cu_gemm_mode gt = {nullptr, tf32 ? AT_PREC_TF32
							    : AT_PREC_FP32};
			float ms = h_time_ms([&] {
				at_cu_gemm(&gt, 0, trans_b, M, N, K, alpha, da, 0,
					   db, 0, 0.0f, dout, 0, 1, "the product");
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

// n values on the device as g's operands: float, or rounded to bf16 (v is
// rounded in place, for the reference).
static void *operands(std::vector<float> &v, int prec)
{
	if (prec != AT_PREC_BF16)
		return h_upload(v);
	std::vector<__nv_bfloat16> w(v.size());
	for (size_t i = 0; i < v.size(); i++) {
		w[i] = __float2bfloat16(v[i]);
		v[i] = __bfloat162float(w[i]);
	}
	void *p;
	H_CUDA(cudaMalloc(&p, (w.size() + 1) * sizeof w[0]));
	H_CUDA(cudaMemcpy(p, w.data(), w.size() * sizeof w[0],
			  cudaMemcpyHostToDevice));
	return p;
}

// Every form the training engine asks for: C_i = alpha op(A_i) op(B_i) +
// beta C_i over a batch (A reused across it when reuse_a), against a loop
// in double.  h NULL is the stage ops' way through cuBLAS.  pad > 0 lays
// every operand out with rows pad elements longer than packed
// (at_cu_gemm_ld; the pads of C must come back untouched), c_bf16 makes C
// bf16.  addend 1 gives beta a matrix X of C's layout apart from C (which
// must come back unchanged), 2 gives it C itself as the addend.  tune
// is at_cu_gemm_mode's (a product of AT_TUNE_FLOP or more through
// cuBLASLt, its algorithm timed).
static void check_gemm(cublasHandle_t h, int prec, int ta, int tb, int M,
		       int N, int K, float alpha, float beta, int batch,
		       int reuse_a, int pad = 0, int c_bf16 = 0, int addend = 0,
		       int tune = 0)
{
	int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
	long long sA = reuse_a ? 0 : (long long)(ta ? K : M) * lda;
	long long sB = (long long)(tb ? N : K) * ldb, sC = (long long)M * ldc;
	std::vector<float> a = h_randn((size_t)(reuse_a ? 1 : batch) * (ta ? K : M) * lda);
	std::vector<float> b = h_randn((size_t)batch * sB);
	std::vector<float> c = h_randn((size_t)batch * sC);
	void *da = operands(a, prec), *db = operands(b, prec);
	void *dc = c_bf16 ? operands(c, AT_PREC_BF16) : h_upload(c);
	std::vector<float> x = addend == 1 ? h_randn(c.size()) : c;
	float *dx = addend == 1 ? h_upload(x) : addend ? (float *)dc : NULL;
	std::vector<float> ref(c);
	auto A = [&](int i, int m, int k) { // op(A_i)[m,k]
		return (double)a[i * sA + (ta ? (size_t)k * lda + m : (size_t)m * lda + k)];
	};
	auto B = [&](int i, int k, int n) { // op(B_i)[k,n]
		return (double)b[i * sB + (tb ? (size_t)n * ldb + k : (size_t)k * ldb + n)];
	};
	for (int i = 0; i < batch; i++)
		for (int m = 0; m < M; m++)
			for (int n = 0; n < N; n++) {
				double s = 0;
				for (int k = 0; k < K; k++)
					s += A(i, m, k) * B(i, k, n);
				size_t o = i * sC + (size_t)m * ldc + n;
				ref[o] = (float)(alpha * s + (double)beta * x[o]);
			}
	at_cu_gemm_mode g = {h, prec, tune};
	if (pad || c_bf16 || addend) {
		at_cu_gemm_layout ld = {pad ? lda : 0, pad ? ldb : 0,
					pad ? ldc : 0, c_bf16, dx};
		H_OP(at_cu_gemm_ld(&g, ta, tb, M, N, K, alpha, da, sA, db, sB,
				   beta, dc, sC, batch, &ld, "the product"));
	} else {
		H_OP(at_cu_gemm(&g, ta, tb, M, N, K, alpha, da, sA, db, sB, beta,
				(float *)dc, sC, batch, "the product"));
	}
	char what[160];
	snprintf(what, sizeof what,
		 "gemm %s%s%s M=%d N=%d K=%d%s%s alpha=%g beta=%g batch=%d%s%s%s%s",
		 h ? "own handle " : "", tune ? "tuned " : "",
		 prec == AT_PREC_BF16 ? "bf16" :
		 prec == AT_PREC_TF32 ? "tf32" : "fp32",
		 M, N, K, ta ? " A^T" : "", tb ? " B^T" : "", alpha, beta, batch,
		 reuse_a ? " (one A)" : "", pad ? " padded rows" : "",
		 c_bf16 ? " bf16 C" : "", addend == 1 ? " addend apart" :
		 addend ? " addend C" : "");
	float *got = (float *)dc;
	if (c_bf16) {
		got = h_dev(ref.size());
		H_OP(at_cu_from_bf16(got, (const __nv_bfloat16 *)dc, ref.size()));
	}
	// a bf16 C is rounded to 8 bits of mantissa
	h_compare(what, got, ref.data(), ref.size(),
		  c_bf16 ? 1e-2 : prec == AT_PREC_BF16 ? 1e-4 :
		  prec == AT_PREC_TF32 ? 5e-3 : 1e-5);
	if (addend == 1) { // the addend is only read
		char kept[200];
		snprintf(kept, sizeof kept, "%s: the addend", what);
		h_compare(kept, dx, x.data(), x.size(), 0.0);
		H_CUDA(cudaFree(dx));
	}
	if (got != dc)
		H_CUDA(cudaFree(got));
	H_CUDA(cudaFree(da));
	H_CUDA(cudaFree(db));
	H_CUDA(cudaFree(dc));
}

// The residual stream's product x_out = x_in + A . W two ways, timed on
// the handle h: x_in copied into x_out and then beta = 1 (cuBLAS), against
// x_in as the product's addend (cuBLASLt), both checked against each other.
static void time_residual(cublasHandle_t h, int prec, int M, int N, int K)
{
	std::vector<float> a = h_randn((size_t)M * K), b = h_randn((size_t)K * N);
	std::vector<float> x = h_randn((size_t)M * N);
	void *da = operands(a, prec), *db = operands(b, prec);
	float *dx = h_upload(x), *d1 = h_dev(x.size()), *d2 = h_dev(x.size());
	at_cu_gemm_mode g = {h, prec};
	at_cu_gemm_layout add = {0, 0, 0, 0, dx};
	auto copied = [&] {
		cudaMemcpyAsync(d1, dx, x.size() * 4, cudaMemcpyDeviceToDevice,
				at_cu_stream);
		at_cu_gemm(&g, 0, 0, M, N, K, 1.0f, da, 0, db, 0, 1.0f, d1, 0, 1,
			   "the product");
	};
	auto added = [&] {
		at_cu_gemm_ld(&g, 0, 0, M, N, K, 1.0f, da, 0, db, 0, 1.0f, d2, 0,
			      1, &add, "the product");
	};
	float t1 = h_time_ms(copied, 20), t2 = h_time_ms(added, 20);
	const char *p = prec == AT_PREC_BF16 ? "bf16" : prec == AT_PREC_TF32 ?
		"tf32" : "fp32";
	printf("time residual %s M=%d N=%d K=%d: copy + product %.4f ms, "
	       "addend %.4f ms (%.2fx)\n", p, M, N, K, t1, t2, t1 / t2);
	char what[96];
	snprintf(what, sizeof what, "residual %s M=%d N=%d K=%d, both ways", p, M,
		 N, K);
	std::vector<float> ref = h_download(d1, x.size());
	h_compare(what, d2, ref.data(), ref.size(), prec == AT_PREC_FP32 ? 1e-6 : 1e-3);
	H_CUDA(cudaFree(da));
	H_CUDA(cudaFree(db));
	H_CUDA(cudaFree(dx));
	H_CUDA(cudaFree(d1));
	H_CUDA(cudaFree(d2));
}

// with_inf: q holds an inf and a -inf, whose rows are NaN at scale 0 (0 x
// inf), as the CPU's product, formed then scaled, has them.
static void check_scores(int BH, int T, int D, float scale, int with_inf = 0)
{
	std::vector<float> q = h_randn((size_t)BH * T * D), k = h_randn(q.size());
	if (with_inf) {
		q[q.size() / 2] = INFINITY;
		q.back() = -INFINITY;
	}
	std::vector<float> ref((size_t)BH * T * T);
	at_scores_forward(ref.data(), q.data(), k.data(), BH, T, D, scale);
	float *dq = h_upload(q), *dk = h_upload(k), *ds = h_dev(ref.size());
	H_OP(at_cuda_scores_forward(ds, dq, dk, BH, T, D, scale, 0));
	char what[128];
	snprintf(what, sizeof what, "scores BH=%d T=%d D=%d scale=%g%s", BH, T,
		 D, scale, with_inf ? " q with inf" : "");
	h_compare(what, ds, ref.data(), ref.size(), 1e-5);
	if (with_inf) { // h_compare takes -0 for 0: a zero's sign apart
		std::vector<float> out = h_download(ds, ref.size());
		size_t differ = 0;
		for (size_t i = 0; i < out.size(); i++)
			differ += !std::isnan(ref[i]) && // a NaN's sign is the machine's
				  std::signbit(out[i]) != std::signbit(ref[i]);
		char detail[64];
		snprintf(detail, sizeof detail, "%zu signs differ", differ);
		h_result(differ == 0, what, detail);
	}
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
	// the training engine's forms, on a handle of its own as the engine
	// makes one, and the stage ops' way too
	if (at_cublas_load() < 0) {
		fprintf(stderr, "%s: %s\n", h_prog, at_cuda_error());
		return 1;
	}
	cublasHandle_t own;
	if (at_cublas.create(&own) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "%s: cannot create a cuBLAS handle\n", h_prog);
		return 1;
	}
	static const int gm[][3] = {{1, 1, 1}, {17, 33, 5}, {33, 17, 64},
				    {100, 96, 768}};
	const struct { cublasHandle_t h; int prec; } way[] = {
		{nullptr, AT_PREC_FP32}, {own, AT_PREC_FP32}, {own, AT_PREC_BF16}};
	for (auto &w : way)
		for (int t = 0; t < 4; t++)
			for (int i = 0; i < 4; i++) {
				const int *s = gm[i];
				check_gemm(w.h, w.prec, t & 1, t >> 1, s[0], s[1],
					   s[2], i & 1 ? 0.5f : 1.0f,
					   i & 2 ? 1.0f : 0.0f, i ? 3 : 1, i == 2);
			}
	for (auto &w : way) {
		check_gemm(w.h, w.prec, 0, 0, 5, 3, 0, 1.0f, 0.0f, 2, 0); // zeros
		// more than 65535 matrices: the batch goes in pieces
		check_gemm(w.h, w.prec, 0, 1, 1, 2, 3, 1.0f, 0.0f, 70000, 0);
		// rows padded to alignment (the engine's logits and head), as
		// the four forms, one batched; K = 0 on padded rows
		for (int t = 0; t < 4; t++)
			check_gemm(w.h, w.prec, t & 1, t >> 1, 17, 33, 5, 1.0f,
				   t & 1 ? 1.0f : 0.0f, t == 3 ? 3 : 1, 0, 3);
		check_gemm(w.h, w.prec, 0, 0, 5, 3, 0, 1.0f, 0.0f, 2, 0, 2);
	}
	// the residual's products: beta's matrix apart from C (cuBLASLt on a
	// handle, copied first without one), or C itself; K = 0; padded rows;
	// the four forms; T = 1 and C = 1 shapes
	const struct { cublasHandle_t h; int prec; } adds[] = {
		{nullptr, AT_PREC_FP32}, {own, AT_PREC_FP32}, {own, AT_PREC_TF32},
		{own, AT_PREC_BF16}};
	static const int am[][3] = {{1, 1, 1}, {1, 7, 3}, {19, 1, 5},
				    {33, 17, 64}, {130, 96, 200}};
	for (auto &w : adds) {
		for (int t = 0; t < 4; t++)
			for (int i = 0; i < 5; i++)
				check_gemm(w.h, w.prec, t & 1, t >> 1, am[i][0],
					   am[i][1], am[i][2], i & 1 ? 0.5f : 1.0f,
					   1.0f, 1, 0, i == 3 ? 3 : 0, 0, 1);
		check_gemm(w.h, w.prec, 0, 0, 17, 33, 5, 1.0f, 1.0f, 1, 0, 0, 0, 2);
		check_gemm(w.h, w.prec, 0, 0, 5, 3, 0, 1.0f, 1.0f, 1, 0, 2, 0, 1);
		check_gemm(w.h, w.prec, 0, 1, 9, 8, 16, 1.0f, 0.0f, 1, 0, 0, 0, 1);
	}
	// bf16 results (q, k, v and dO in rows for cuDNN), batched and padded
	check_gemm(own, AT_PREC_BF16, 0, 0, 33, 17, 64, 1.0f, 0.0f, 3, 0, 0, 1);
	check_gemm(own, AT_PREC_BF16, 0, 1, 17, 33, 5, 0.5f, 0.0f, 1, 0, 5, 1);
	// products large enough to have their algorithm timed (the training
	// engine's way): odd sizes of 4.4 GFLOP, beta 0 (timed), beta with
	// C as its addend (not timed: C is read) and an addend apart (timed);
	// left out with ANDREA_TUNE=0, as run-gpu.sh's racecheck runs it: the
	// timing of cuBLAS's candidates (its own kernels) takes many minutes
	// there
	if (at_cu_tune_when(AT_TUNE_FLOP) == AT_TUNE_NEVER)
		printf("skip the timed products (ANDREA_TUNE=0)\n");
	else
		for (int prec : {AT_PREC_BF16, AT_PREC_TF32, AT_PREC_FP32}) {
			int bf = prec == AT_PREC_BF16;
			check_gemm(own, prec, 0, 1, 1031, 1029, 2053, 1.0f,
				   0.0f, 1, 0, 0, bf, 0, 1);
			check_gemm(own, prec, 1, 0, 1031, 1029, 2053, 0.5f,
				   1.0f, 1, 0, 0, 0, 2, 1);
			check_gemm(own, prec, 0, 0, 1031, 1029, 2053, 1.0f,
				   1.0f, 1, 0, 0, 0, 1, 1);
			if (h_full)
				check_gemm(own, prec, 1, 1, 1031, 1029, 2053,
					   1.0f, 0.0f, 1, 0, 3, 0, 0, 1);
		}
	if (h_full) // andrea-120m's two, B = 16, T = 1024
		for (int prec : {AT_PREC_BF16, AT_PREC_TF32, AT_PREC_FP32}) {
			time_residual(own, prec, 16384, 768, 768);
			time_residual(own, prec, 16384, 768, 3072);
		}
	at_cublas.destroy(own);
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
	for (float zero : {0.0f, -0.0f}) // cuBLAS forms no product at alpha 0
		check_scores(3, 33, 5, zero, 1);
	if (h_full) {
		check_scores(96, 1024, 64, 0.125f);
		check_attend(96, 1024, 64);
	}
	return h_finish();
}
