// embed_check.cu - at_cuda_embed_forward and at_cuda_layernorm_forward
// against at_embed_forward and at_layernorm_forward, and the LayerNorm
// with the residual add folded in (at_cu_layernorm_add_fwd) against the
// add and then at_layernorm_forward; the training engine's LayerNorm
// backward (tr_layernorm_bwd) against tr_layernorm_backward.
#include "harness.cuh"
#include "common/cuda_util.cuh"
#include "train/train_kernels.cuh"
extern "C" {
#include "train/train.h"
}

static void check_embed(int B, int T, int C, int V)
{
	std::vector<int32_t> tok((size_t)B * T);
	for (auto &t : tok)
		t = (int32_t)(h_u32() % V);
	std::vector<float> wte = h_randn((size_t)V * C), wpe = h_randn((size_t)T * C);
	std::vector<float> ref((size_t)B * T * C);
	at_embed_forward(ref.data(), tok.data(), wte.data(), wpe.data(), B, T, C);
	int32_t *dtok;
	H_CUDA(cudaMalloc(&dtok, tok.size() * sizeof(int32_t) + 1));
	H_CUDA(cudaMemcpy(dtok, tok.data(), tok.size() * sizeof(int32_t),
			  cudaMemcpyHostToDevice));
	float *dwte = h_upload(wte), *dwpe = h_upload(wpe), *dx = h_dev(ref.size());
	H_OP(at_cuda_embed_forward(dx, dtok, dwte, dwpe, B, T, C));
	char what[128];
	snprintf(what, sizeof what, "embed B=%d T=%d C=%d V=%d", B, T, C, V);
	h_compare(what, dx, ref.data(), ref.size(), 0.0);
	if (h_full && B * T >= 8192) {
		float ms = h_time_ms([&] {
			at_cuda_embed_forward(dx, dtok, dwte, dwpe, B, T, C);
		});
		snprintf(what, sizeof what, "embed B=%d T=%d C=%d", B, T, C);
		h_report_time(what, ms, 3.0 * ref.size() * sizeof(float));
	}
	H_CUDA(cudaFree(dtok));
	H_CUDA(cudaFree(dwte));
	H_CUDA(cudaFree(dwpe));
	H_CUDA(cudaFree(dx));
}

static void check_layernorm(int N, int C, float shift, bool in_place)
{
	std::vector<float> x = h_randn((size_t)N * C), w = h_randn(C), b = h_randn(C);
	for (auto &v : x)
		v += shift; // a large mean tests the two-pass variance
	std::vector<float> ref(x.size());
	at_layernorm_forward(ref.data(), x.data(), w.data(), b.data(), N, C, AT_LN_EPS);
	float *dx = h_upload(x), *dw = h_upload(w), *db = h_upload(b);
	float *dout = in_place ? dx : h_dev(x.size());
	H_OP(at_cuda_layernorm_forward(dout, dx, dw, db, N, C, AT_LN_EPS));
	char what[128];
	snprintf(what, sizeof what, "layernorm N=%d C=%d mean=%g%s", N, C, shift,
		 in_place ? " in place" : "");
	h_compare(what, dout, ref.data(), ref.size(), 1e-5);
	if (h_full && N >= 8192 && !in_place) {
		float ms = h_time_ms([&] {
			at_cuda_layernorm_forward(dout, dx, dw, db, N, C, AT_LN_EPS);
		});
		snprintf(what, sizeof what, "layernorm N=%d C=%d", N, C);
		h_report_time(what, ms, 2.0 * x.size() * sizeof(float));
	}
	if (!in_place)
		H_CUDA(cudaFree(dout));
	H_CUDA(cudaFree(dx));
	H_CUDA(cudaFree(dw));
	H_CUDA(cudaFree(db));
}

// sum = x + y (y a bf16 residual branch), out = LN(sum).
static void check_layernorm_add(int N, int C)
{
	size_t n = (size_t)N * C;
	std::vector<float> x = h_randn(n), y = h_randn(n), w = h_randn(C),
			   b = h_randn(C), sum(n), ref(n);
	std::vector<__nv_bfloat16> y16(n);
	for (size_t i = 0; i < n; i++) {
		y16[i] = __float2bfloat16(y[i]);
		sum[i] = x[i] + __bfloat162float(y16[i]);
	}
	at_layernorm_forward(ref.data(), sum.data(), w.data(), b.data(), N, C,
			     AT_LN_EPS);
	float *dx = h_upload(x), *dw = h_upload(w), *db = h_upload(b);
	float *dout = h_dev(n), *dsum = h_dev(n);
	__nv_bfloat16 *dy;
	H_CUDA(cudaMalloc(&dy, n * sizeof *dy + 16));
	H_CUDA(cudaMemcpy(dy, y16.data(), n * sizeof *dy, cudaMemcpyHostToDevice));
	H_OP(at_cu_layernorm_add_fwd(dout, (float *)NULL, (float *)NULL, dsum,
				     dx, dy, dw, db, N, C, AT_LN_EPS));
	char what[128];
	snprintf(what, sizeof what, "layernorm + add N=%d C=%d: the sum", N, C);
	h_compare(what, dsum, sum.data(), n, 0.0);
	snprintf(what, sizeof what, "layernorm + add N=%d C=%d", N, C);
	h_compare(what, dout, ref.data(), n, 1e-5);
	for (float *p : {dx, dw, db, dout, dsum})
		H_CUDA(cudaFree(p));
	H_CUDA(cudaFree(dy));
}

// dx += LN backward of dout (float, or bf16 as the engine's products write
// it), dx16 = bf16(dx), dw and db, against the CPU's in float from the
// same bf16-rounded dout; the mean and rstd of the forward pass as the
// CPU's forward keeps them (at_layernorm_stats).
template <typename G>
static void check_layernorm_bwd(int N, int C)
{
	size_t n = (size_t)N * C;
	std::vector<float> x = h_randn(n), w = h_randn(C), dout = h_randn(n),
			   dx = h_randn(n), mean(N), rstd(N), dw(C), db(C);
	std::vector<G> dout_g(n);
	for (size_t i = 0; i < n; i++) {
		dout_g[i] = (G)dout[i];
		dout[i] = (float)dout_g[i];
	}
	at_layernorm_stats(mean.data(), rstd.data(), x.data(), N, C, AT_LN_EPS);
	float *d_x = h_upload(x), *d_w = h_upload(w), *d_dx = h_upload(dx);
	float *d_mean = h_upload(mean), *d_rstd = h_upload(rstd);
	float *d_dw = h_dev(C), *d_db = h_dev(C), *scratch = h_dev(2 * LN_PARTS * C);
	G *d_dout;
	bf16 *d_dx16;
	H_CUDA(cudaMalloc(&d_dout, n * sizeof(G) + 16));
	H_CUDA(cudaMemcpy(d_dout, dout_g.data(), n * sizeof(G),
			  cudaMemcpyHostToDevice));
	H_CUDA(cudaMalloc(&d_dx16, n * sizeof(bf16) + 16));
	H_OP(tr_layernorm_bwd(d_dx, d_dx16, d_dw, d_db, d_dout, d_x, d_w, d_mean,
			      d_rstd, N, C, scratch));
	tr_layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(),
			      x.data(), w.data(), mean.data(), rstd.data(), N, C);
	const char *g = sizeof(G) == 2 ? "bf16" : "float";
	char what[128];
	snprintf(what, sizeof what, "layernorm backward N=%d C=%d %s dout: dx", N,
		 C, g);
	h_compare(what, d_dx, dx.data(), n, 1e-5);
	snprintf(what, sizeof what, "layernorm backward N=%d C=%d %s dout: dw", N,
		 C, g);
	h_compare(what, d_dw, dw.data(), C, 1e-5);
	snprintf(what, sizeof what, "layernorm backward N=%d C=%d %s dout: db", N,
		 C, g);
	h_compare(what, d_db, db.data(), C, 1e-5);
	std::vector<bf16> dx16(n);
	H_CUDA(cudaMemcpy(dx16.data(), d_dx16, n * sizeof(bf16),
			  cudaMemcpyDeviceToHost));
	std::vector<float> got(n);
	for (size_t i = 0; i < n; i++)
		got[i] = __bfloat162float(dx16[i]);
	float *d_got = h_upload(got); // the rounding of dx, within bf16's
	snprintf(what, sizeof what, "layernorm backward N=%d C=%d %s dout: dx16",
		 N, C, g);
	h_compare(what, d_got, dx.data(), n, 5e-3);
	if (h_full && N >= 8192) {
		float ms = h_time_ms([&] {
			tr_layernorm_bwd(d_dx, d_dx16, d_dw, d_db, d_dout, d_x, d_w,
					 d_mean, d_rstd, N, C, scratch);
		});
		snprintf(what, sizeof what, "layernorm backward N=%d C=%d %s dout",
			 N, C, g);
		// x read, dx read and written, dout read, dx16 written
		h_report_time(what, ms, (double)n * (12 + sizeof(G) + 2));
	}
	for (float *p : {d_x, d_w, d_dx, d_mean, d_rstd, d_dw, d_db, scratch, d_got})
		H_CUDA(cudaFree(p));
	H_CUDA(cudaFree(d_dout));
	H_CUDA(cudaFree(d_dx16));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "embed-check");
	check_embed(1, 1, 1, 5);
	check_embed(2, 17, 12, 37);
	check_embed(3, 13, 5, 11);
	check_embed(1, 33, 768, 257);
	if (h_full)
		check_embed(8, 1024, 768, 257);
	check_layernorm(1, 1, 0.0f, false);
	check_layernorm(17, 5, 0.0f, false);
	check_layernorm(3, 33, 0.0f, false);
	check_layernorm(33, 768, 0.0f, false);
	check_layernorm(9, 1000, 50.0f, false);
	check_layernorm(13, 64, 0.0f, true);
	check_layernorm(7, 4, 3.0f, false);     // the vectorized kernel's edges:
	check_layernorm(5, 1280, 0.0f, true);   // C = 4 and 1280, and beyond
	check_layernorm(3, 1284, 0.0f, false);
	if (h_full)
		check_layernorm(8192, 768, 0.0f, false);
	check_layernorm_add(1, 1);     // the scalar kernel
	check_layernorm_add(17, 33);
	check_layernorm_add(33, 768);  // the vectorized one, C = 4 .. 1280
	check_layernorm_add(5, 4);
	check_layernorm_add(3, 1280);
	check_layernorm_add(3, 1284);
	// the backward: the scalar kernels (C = 1, 33, 1284), the vectorized
	// one's edges (C = 4, 1280) and andrea-120m's rows
	for (int C : {1, 33, 4, 768, 1280, 1284}) {
		check_layernorm_bwd<float>(37, C);
		check_layernorm_bwd<bf16>(37, C);
	}
	check_layernorm_bwd<bf16>(1, 768);
	if (h_full) {
		check_layernorm_bwd<bf16>(16384, 768);
		check_layernorm_bwd<float>(16384, 768);
	}
	return h_finish();
}
