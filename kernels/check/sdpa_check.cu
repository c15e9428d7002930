// sdpa_check.cu - the bf16 fused attention through cuDNN
// (at_cudnn_sdpa_forward, _backward) against softmax attention in double
// on the same bf16-rounded inputs: out, lse, dq, dk, dv, causal and full,
// T = 1 and T not a multiple of any tile, D = 32, 64, 128, contiguous and
// in the model block's layout (at_sdpa_block: every view in rows
// [B,T,H*D]); then at
// B = 4, H = 12, T = 2048 (the float dq accumulator's path) against the
// fp32 kernels; then timings at B = 8, H = 12, D = 64.  Without cuDNN it
// says so and checks nothing.
#include "harness.cuh"
#include "forward/forward_kernels.cuh"
#include "attention_ref.cuh"

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

// [B,H,T,D] -> [B,T,H,D] on the host (the row layout's order), or back.
static std::vector<float> to_rows(const std::vector<float> &x, int B, int H,
				  int T, int D, bool back = false)
{
	std::vector<float> y(x.size());
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				for (int d = 0; d < D; d++) {
					size_t r = (((size_t)b * T + t) * H + h) * D + d,
					       c = (((size_t)b * H + h) * T + t) * D + d;
					if (back)
						y[c] = x[r];
					else
						y[r] = x[c];
				}
	return y;
}

// One problem: random bf16 inputs q, k, v and the output gradient g
// (n values each), and cuDNN's out, lse (nr), dq, dk, dv.
struct problem {
	bf_tensor q, k, v, g;
	bf16 *o, *dq, *dk, *dv;
	float *lse;
	size_t n, nr;
};

static problem problem_new(size_t n, size_t nr)
{
	problem p;
	p.q = bf_randn(n), p.k = bf_randn(n), p.v = bf_randn(n);
	p.g = bf_randn(n);
	for (bf16 **b : {&p.o, &p.dq, &p.dk, &p.dv})
		H_CUDA(cudaMalloc(b, n * sizeof(bf16)));
	p.lse = h_dev(nr);
	p.n = n, p.nr = nr;
	return p;
}

static void problem_free(problem &p)
{
	for (bf16 *b : {p.o, p.dq, p.dk, p.dv})
		H_CUDA(cudaFree(b));
	H_CUDA(cudaFree(p.lse));
	for (bf_tensor *t : {&p.q, &p.k, &p.v, &p.g})
		bf_free(*t);
}

// cuDNN's forward and backward of p under s.
static int run(const at_sdpa_shape *s, problem &p)
{
	TRY(at_cudnn_sdpa_forward(s, p.o, p.lse, p.q.b16, p.k.b16, p.v.b16));
	return at_cudnn_sdpa_backward(s, p.dq, p.dk, p.dv, p.q.b16, p.k.b16,
				      p.v.b16, p.o, p.g.b16, p.lse);
}

// cuDNN's out, lse, dq, dk, dv against want[5] (host; the same layouts).
static void compare(const char *what, const problem &p,
		    const std::vector<float> *want)
{
	static const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
	bf16 *got[5] = {p.o, NULL, p.dq, p.dk, p.dv};
	for (int i = 0; i < 5; i++) {
		char w[200];
		snprintf(w, sizeof w, "%s %s", what, names[i]);
		if (i == 1) {
			h_compare(w, p.lse, want[1].data(), p.nr, TOL_LSE);
			continue;
		}
		float *f = bf_read(got[i], p.n);
		h_compare(w, f, want[i].data(), p.n, TOL_BF16);
		H_CUDA(cudaFree(f));
	}
}

// rows_layout: the model block's shape (at_sdpa_block: causal).
static void check(int B, int H, int T, int D, int causal, int rows_layout)
{
	float scale = 1.0f / sqrtf((float)D);
	at_sdpa_shape s = rows_layout ? at_sdpa_block(B, H, T, D, H * D)
				      : at_sdpa_contiguous(B, H, T, D, scale, causal);
	char what[160];
	snprintf(what, sizeof what, "cudnn attention %s B=%d H=%d T=%d D=%d%s",
		 causal ? "causal" : "full", B, H, T, D,
		 rows_layout ? " rows" : "");
	if (!at_cudnn_sdpa_supported(&s, 0) || !at_cudnn_sdpa_supported(&s, 1)) {
		h_result(false, what, at_cuda_error());
		return;
	}
	problem p = problem_new((size_t)B * H * T * D, (size_t)B * H * T);
	std::vector<float> r[5], in[4] = {p.q.host, p.k.host, p.v.host, p.g.host};
	if (rows_layout) // the device holds them in rows: the oracle's order
		for (std::vector<float> &x : in)
			x = to_rows(x, B, H, T, D, true);
	attention_reference(r, in[0], in[1], in[2], in[3], B * H, T, D, scale,
			    causal);
	H_OP(run(&s, p));
	if (rows_layout)
		for (int i : {0, 2, 3, 4})
			r[i] = to_rows(r[i], B, H, T, D);
	compare(what, p, r);
	problem_free(p);
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
	problem p = problem_new(n, nr);
	float *o32 = h_dev(n), *lse32 = h_dev(nr), *delta = h_dev(nr),
	      *dq32 = h_dev(n), *dk32 = h_dev(n), *dv32 = h_dev(n);
	H_OP(at_cuda_attention_forward(o32, lse32, p.q.f32, p.k.f32, p.v.f32,
				       BH, T, D, scale, 1, 0, NULL));
	H_OP(at_cuda_attention_backward(dq32, dk32, dv32, p.q.f32, p.k.f32,
					p.v.f32, o32, lse32, p.g.f32, delta, BH,
					T, D, scale, 1, 0, NULL));
	H_OP(run(&s, p));
	float *fp32[5] = {o32, lse32, dq32, dk32, dv32};
	std::vector<float> want[5];
	for (int i = 0; i < 5; i++)
		want[i] = h_download(fp32[i], i == 1 ? nr : n);
	compare(what, p, want);
	for (float *f : {o32, lse32, delta, dq32, dk32, dv32})
		H_CUDA(cudaFree(f));
	problem_free(p);
}

static void timing(int T)
{
	const int B = 8, H = 12, D = 64;
	at_sdpa_shape s = at_sdpa_contiguous(B, H, T, D, 0.125f, 1);
	problem p = problem_new((size_t)B * H * T * D, (size_t)B * H * T);
	H_OP(run(&s, p)); // then the timings' own calls
	float fms = h_time_ms([&] {
		at_cudnn_sdpa_forward(&s, p.o, p.lse, p.q.b16, p.k.b16, p.v.b16);
	}, 20);
	float bms = h_time_ms([&] {
		at_cudnn_sdpa_backward(&s, p.dq, p.dk, p.dv, p.q.b16, p.k.b16,
				       p.v.b16, p.o, p.g.b16, p.lse);
	}, 20);
	double flops = 4.0 * B * H * T * (T + 1) / 2.0 * D;
	printf("time cudnn attention bf16 causal B=8 H=12 T=%d D=64: forward "
	       "%.4f ms (%.1f TFLOP/s), backward %.4f ms (%.1f TFLOP/s), "
	       "forward + backward %.4f ms\n", T, fms, flops / fms / 1e9, bms,
	       2.5 * flops / bms / 1e9, fms + bms);
	fflush(stdout);
	problem_free(p);
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
