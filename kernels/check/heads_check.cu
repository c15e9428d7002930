// heads_check.cu - the head transposes (heads.cu) against at_split_heads
// and at_merge_heads, exact since they only move floats: the fp32 entries
// the stages call, the bf16 output the training engine takes (each value
// rounded to nearest even), and outputs one element off alignment (the
// scalar path where D would allow four at a time).
#include <cuda_bf16.h>

#include "harness.cuh"
#include "common/cuda_util.cuh"

typedef __nv_bfloat16 bf16;

// n bf16 on the device, then GUARD more, all NaN (0xffff).
static bf16 *dev_bf16(size_t n)
{
	bf16 *p;
	H_CUDA(cudaMalloc(&p, (n + GUARD) * sizeof *p));
	H_CUDA(cudaMemset(p, 0xff, (n + GUARD) * sizeof *p));
	return p;
}

// Whether dev[n] holds bf16(ref) exactly, the guard after it intact.
static void compare_bf16(const char *what, const bf16 *dev, const float *ref,
			 size_t n)
{
	std::vector<bf16> out(n + GUARD);
	H_CUDA(cudaMemcpy(out.data(), dev, out.size() * sizeof out[0],
			  cudaMemcpyDeviceToHost));
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n; i++)
		if (__bfloat162float(out[i]) !=
			    __bfloat162float(__float2bfloat16(ref[i])) &&
		    bad++ == 0)
			first = i;
	bool guard = true;
	for (size_t i = n; i < n + GUARD; i++)
		guard = guard && std::isnan(__bfloat162float(out[i]));
	char detail[160];
	if (bad)
		snprintf(detail, sizeof detail, "%zu mismatches, first at %zu: "
			 "%g vs %g", bad, first, __bfloat162float(out[first]),
			 ref[first]);
	else
		snprintf(detail, sizeof detail, "exact%s",
			 guard ? "" : ", GUARD OVERWRITTEN");
	h_result(!bad && guard, what, detail);
}

// op(out, in) writing n outputs, in fp32, in bf16 and in fp32 one float
// off alignment, each against ref.
template <typename OP>
static void check_op(const char *what, OP op, const float *din,
		     const float *ref, size_t n)
{
	char name[160];
	float *dout = h_dev(n + 1);
	H_OP(op(dout, din));
	h_compare(what, dout, ref, n, 0.0);
	H_OP(op(dout + 1, din));
	snprintf(name, sizeof name, "%s, unaligned", what);
	h_compare(name, dout + 1, ref, n, 0.0);
	H_CUDA(cudaFree(dout));
	bf16 *d16 = dev_bf16(n);
	H_OP(op(d16, din));
	snprintf(name, sizeof name, "%s, bf16", what);
	compare_bf16(name, d16, ref, n);
	H_CUDA(cudaFree(d16));
}

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
	float *din = h_upload(in);
	char what[128];
	snprintf(what, sizeof what, "split G=%d B=%d T=%d H=%d D=%d", G, B, T, H, D);
	check_op(what, [&](auto *out, const float *x) {
		return at_cu_split_heads(out, x, G, B, T, H, D);
	}, din, ref.data(), G * n);
	H_CUDA(cudaFree(din));

	in = h_randn(n);
	at_merge_heads(ref.data(), in.data(), B, T, H, D);
	din = h_upload(in);
	snprintf(what, sizeof what, "merge B=%d T=%d H=%d D=%d", B, T, H, D);
	check_op(what, [&](auto *out, const float *x) {
		return at_cu_merge_heads(out, x, B, T, H, D);
	}, din, ref.data(), n);
	if (h_full && n >= ((size_t)1 << 20)) {
		float *dout = h_dev(n);
		float ms = h_time_ms([&] {
			at_cuda_merge_heads(dout, din, B, T, H, D);
		});
		h_report_time(what, ms, 2.0 * n * sizeof(float));
		H_CUDA(cudaFree(dout));
	}
	H_CUDA(cudaFree(din));
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
