// heads_check.cu - at_cuda_split_heads and at_cuda_merge_heads against
// at_split_heads and at_merge_heads (exact: they only move floats).
#include "harness.cuh"

static void check(int G, int B, int T, int H, int D)
{
	size_t n = (size_t)B * T * H * D;
	std::vector<float> in = h_randn(G * n), ref(G * n);
	// the CPU splits one group at a time: take group g's columns first
	std::vector<float> part(n);
	for (int g = 0; g < G; g++) {
		for (size_t r = 0; r < (size_t)B * T; r++)
			memcpy(&part[r * H * D], &in[(r * G + g) * H * D],
			       (size_t)H * D * sizeof(float));
		at_split_heads(&ref[g * n], part.data(), B, T, H, D);
	}
	float *din = h_upload(in), *dout = h_dev(G * n);
	H_OP(at_cuda_split_heads(dout, din, G, B, T, H, D));
	char what[128];
	snprintf(what, sizeof what, "split G=%d B=%d T=%d H=%d D=%d", G, B, T, H, D);
	h_compare(what, dout, ref.data(), G * n, 0.0);
	H_CUDA(cudaFree(din));
	H_CUDA(cudaFree(dout));

	in = h_randn(n);
	at_merge_heads(ref.data(), in.data(), B, T, H, D);
	din = h_upload(in);
	dout = h_dev(n);
	H_OP(at_cuda_merge_heads(dout, din, B, T, H, D));
	snprintf(what, sizeof what, "merge B=%d T=%d H=%d D=%d", B, T, H, D);
	h_compare(what, dout, ref.data(), n, 0.0);
	if (h_full && n >= ((size_t)1 << 20)) {
		float ms = h_time_ms([&] {
			at_cuda_merge_heads(dout, din, B, T, H, D);
		});
		h_report_time(what, ms, 2.0 * n * sizeof(float));
	}
	H_CUDA(cudaFree(din));
	H_CUDA(cudaFree(dout));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "heads-check");
	static const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 3, 1}, {1, 17, 2, 7},
					{3, 13, 4, 4}, {2, 9, 1, 8}, {1, 33, 3, 5},
					{8, 1024, 12, 64}};
	for (auto &s : shapes) {
		if (!h_full && s[1] > 100)
			continue;
		check(1, s[0], s[1], s[2], s[3]);
		check(3, s[0], s[1], s[2], s[3]);
	}
	return h_finish();
}
