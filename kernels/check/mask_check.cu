// mask_check.cu - at_cuda_mask_causal against at_mask_causal.  The mask
// works in place, so two checks per shape: random scores must match the
// CPU bit for bit (the lower triangle untouched), and a buffer poisoned
// with NaN must get the fill exactly above the diagonal and nothing else.
#include "harness.cuh"

static void check(int BH, int T, float fill, int offset)
{
	size_t n = (size_t)BH * T * T;
	char what[160], detail[160];
	snprintf(what, sizeof what, "mask BH=%d T=%d fill=%g%s", BH, T, fill,
		 offset ? " misaligned" : "");

	std::vector<float> s = h_randn(n), ref = s;
	at_mask_causal(ref.data(), BH, T, fill);
	float *d = h_dev(n + offset);
	H_CUDA(cudaMemcpy(d + offset, s.data(), n * sizeof(float),
			  cudaMemcpyHostToDevice));
	H_OP(at_cuda_mask_causal(d + offset, BH, T, fill));
	std::vector<float> out = h_download(d + offset, n);
	bool same = memcmp(out.data(), ref.data(), n * sizeof(float)) == 0;
	bool guard = h_guard_ok(d + offset, n);
	snprintf(detail, sizeof detail, "%s%s", same ? "bit-identical" : "DIFFERS",
		 guard ? "" : ", GUARD OVERWRITTEN");
	h_result(same && guard, what, detail);

	// on NaN: fill above the diagonal, NaN on and below it
	H_OP(at_cuda_poison(d, n + offset));
	H_OP(at_cuda_mask_causal(d + offset, BH, T, fill));
	out = h_download(d + offset, n);
	size_t wrong = 0;
	for (size_t i = 0; i < n; i++) {
		size_t r = i / T % T, j = i % T;
		bool ok = j > r ? memcmp(&out[i], &fill, sizeof fill) == 0
				: std::isnan(out[i]);
		wrong += !ok;
	}
	bool front = offset == 0 || std::isnan(h_download(d, 1)[0]);
	snprintf(detail, sizeof detail, "%zu wrong of %zu%s", wrong, n,
		 front ? "" : ", wrote before the buffer");
	char what2[200];
	snprintf(what2, sizeof what2, "%s on NaN", what);
	h_result(wrong == 0 && front && h_guard_ok(d + offset, n), what2, detail);
	H_CUDA(cudaFree(d));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "mask-check");
	static const int shapes[][2] = {{1, 1}, {1, 2}, {3, 3}, {2, 5},
					{4, 17}, {1, 32}, {2, 33}, {5, 64},
					{2, 127}, {1, 1023}, {2, 1024},
					{3, 4}, {2, 8}, {1, 12}, {2, 36},
					// the flat kernel: more matrices than
					// a grid's rows, rows past float
					// sqrt's exact range of T^2
					{70000, 4}, {2, 2048}, {1, 4092},
					{1, 8192},
					// the sector kernel: walks whose
					// stride is no multiple of T/4,
					// more rows than the grid's threads
					{6000, 40}, {10, 1000}, {3, 72},
					{300000, 8}};
	for (auto &sh : shapes)
		check(sh[0], sh[1], -INFINITY, 0);
	check(3, 17, -1e9f, 0);
	check(2, 33, 0.0f, 0);
	check(2, 64, -INFINITY, 1); // the warp kernel although T % 4 == 0
	check(2, 64, -INFINITY, 4); // the row kernel although T % 8 == 0
	check(3, 4, -INFINITY, 0);
	check(7, 8, 0.5f, 0);
	check(1, 129, -INFINITY, 3);

	if (h_full) {
		const int B = 8, H = 12, T = 1024;
		size_t n = (size_t)B * H * T * T;
		float *d = h_dev(n);
		float ms = h_time_ms([&] {
			at_cuda_mask_causal(d, B * H, T, -INFINITY);
		});
		// bytes the mask must move: writes of the upper triangle
		h_report_time("mask B=8 H=12 T=1024", ms,
			      (double)B * H * T * (T - 1) / 2 * sizeof(float));
		H_OP(at_cuda_mask_causal(d, B * H, T, -INFINITY));
		H_CUDA(cudaFree(d));
	}
	return h_finish();
}
