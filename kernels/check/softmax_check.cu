// softmax_check.cu - at_cuda_softmax_rows against at_softmax_rows (its
// values recomputed in double): every
// path (warp and block, float4 and scalar, the long-row kernel), causal
// masking, rows that must come out all NaN, and a misaligned buffer.
#include "harness.cuh"

// The reference: the CPU op says which rows come out NaN; the others are
// recomputed in double, so that the fp32 rounding of the CPU op's own sum
// over a long row (2e-5 at n = 32768, now and then) does not count
// against the kernel.
static void exact_rows(std::vector<float> &ref, const std::vector<float> &s,
		       size_t rows, int n)
{
	for (size_t r = 0; r < rows; r++) {
		const float *x = s.data() + r * n;
		float *o = ref.data() + r * n;
		if (o[0] != o[0])
			continue;
		double max = -INFINITY, sum = 0.0;
		for (int j = 0; j < n; j++)
			max = x[j] > max ? x[j] : max;
		for (int j = 0; j < n; j++)
			sum += exp((double)x[j] - max);
		for (int j = 0; j < n; j++)
			o[j] = (float)(exp((double)x[j] - max) / sum);
	}
}

// Checks rows x n from host input s; offset shifts both device buffers
// by that many floats (1 forces the scalar path).
static void check(const char *label, const std::vector<float> &s, size_t rows,
		  int n, int offset = 0)
{
	size_t total = rows * (size_t)n;
	std::vector<float> ref(total);
	at_softmax_rows(ref.data(), s.data(), rows, n);
	exact_rows(ref, s, rows, n);
	float *din = h_dev(total + offset), *dout = h_dev(total + offset);
	H_CUDA(cudaMemcpy(din + offset, s.data(), total * sizeof(float),
			  cudaMemcpyHostToDevice));
	H_OP(at_cuda_softmax_rows(dout + offset, din + offset, rows, n));
	char what[160];
	snprintf(what, sizeof what, "softmax %s rows=%zu n=%d%s", label, rows, n,
		 offset ? " misaligned" : "");
	h_compare(what, dout + offset, ref.data(), total, 1e-5);
	H_CUDA(cudaFree(din));
	H_CUDA(cudaFree(dout));
}

// Scores [BH,T,T] with the causal mask applied, as andrea-mask leaves them.
static std::vector<float> masked(int BH, int T)
{
	std::vector<float> s = h_randn((size_t)BH * T * T, 3.0f);
	at_mask_causal(s.data(), BH, T, -INFINITY);
	return s;
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "softmax-check");
	static const int sizes[][2] = {
		{1, 1},     {3, 1},    {5, 2},     {7, 4},    {3, 17},
		{9, 31},    {4, 32},   {2, 33},    {6, 100},  {3, 1000},
		{2, 1023},  {2, 1024}, {3, 1025},  {2, 2048}, {2, 3001},
		{2, 5000},  {1, 16384}, {1, 16385}, {1, 32768}, {1, 40000},
		{1, 40001},
	};
	for (auto &sz : sizes) {
		size_t rows = sz[0];
		int n = sz[1];
		check("random", h_randn(rows * n, 3.0f), rows, n);
	}
	static const int shapes[][2] = {{1, 1}, {2, 17}, {24, 33}, {3, 64},
					{2, 257}, {1, 1024}};
	for (auto &sh : shapes)
		check("causal", masked(sh[0], sh[1]), (size_t)sh[0] * sh[1], sh[1]);
	check("causal", masked(2, 64), 2 * 64, 64, 1);
	check("random", h_randn(5 * 1024, 3.0f), 5, 1024, 1);
	check("random", h_randn(3 * 4096, 3.0f), 3, 4096, 1);

	// rows that must come out all NaN: nothing unmasked, +inf, a NaN
	for (int n : {5, 8, 1024, 3000, 40000}) {
		std::vector<float> s = h_randn(4 * (size_t)n);
		for (int j = 0; j < n; j++)
			s[j] = -INFINITY;
		s[(size_t)n + n / 2] = INFINITY;
		s[2 * (size_t)n + n - 1] = nanf("");
		s[3 * (size_t)n] = -INFINITY; // one -inf alone is fine
		check("special", s, 4, n);
	}

	if (h_full) {
		const int B = 8, H = 12, T = 1024;
		size_t rows = (size_t)B * H * T, total = rows * T;
		float *din = h_upload(masked(B * H, T)), *dout = h_dev(total);
		float ms = h_time_ms([&] {
			at_cuda_softmax_rows(dout, din, rows, T);
		});
		h_report_time("softmax B=8 H=12 T=1024 (causal)", ms,
			      2.0 * total * sizeof(float));
		H_OP(at_cuda_softmax_rows(dout, din, rows, T));
		H_CUDA(cudaFree(din));
		H_CUDA(cudaFree(dout));
	}
	return h_finish();
}
