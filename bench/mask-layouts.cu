// mask-layouts.cu - why the causal mask writes slower than a copy, and which
// store layout closes the gap.  A standalone experiment (make bench-mask on
// a GPU machine): each variant fills the masked triangle (j > i) of
// B*H = 96 matrices of 1024 x 1024 floats with -inf, timed with CUDA events
// (median of 50, rotating over 4 buffers so the 50 MB L2 holds none of
// it), checked against a host reference; bandwidth counts the bytes each
// variant writes, beside a device-to-device copy (read + write) and a
// memset of the triangle's byte count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <functional>

#include <cuda_runtime.h>

extern "C" {
#include "ops/ops_cuda.h"
}

#define BH 96
#define T 1024
#define NBUF 4
#define REPS 50

#define CK(call)                                                           \
	do {                                                               \
		cudaError_t e_ = (call);                                   \
		if (e_ != cudaSuccess) {                                   \
			fprintf(stderr, "%s: %s\n", #call,                 \
				cudaGetErrorString(e_));                   \
			exit(1);                                           \
		}                                                          \
	} while (0)

// the variants (a) .. and the probes (p1) ..
#include "mask-variants.cuh"

static float median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

template <class F>
static float time_ms(F launch)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < 3; i++)
		launch(i % NBUF);
	std::vector<float> t;
	for (int i = 0; i < REPS; i++) {
		CK(cudaEventRecord(a));
		launch(i % NBUF);
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		float ms;
		CK(cudaEventElapsedTime(&ms, a, b));
		t.push_back(ms);
	}
	CK(cudaGetLastError());
	return median(t);
}

// Poisons buf with random finite values, runs the kernel once, and checks
// the triangle is -inf and the rest untouched.
typedef void (*kernel)(float *, float);

// Runs variant k, or the library's at_cuda_mask_causal where k is NULL.
static void launch(kernel k, float *buf, unsigned grid, unsigned threads)
{
	if (k == two_pass_body) { // (r): the diagonal pass first
		diag_sectors<<<(BH * T + 255) / 256, 256>>>(buf, -INFINITY);
	}
	if (!k && grid == 1) { // (q''): T passed at run time
		int sms;
		CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
		flat_pred_runtime<<<64 * sms, threads>>>(buf, -INFINITY, T);
		return;
	}
	if (!k) {
		if (at_cuda_mask_causal(buf, BH, T, -INFINITY) < 0) {
			fprintf(stderr, "%s\n", at_cuda_error());
			exit(1);
		}
		return;
	}
	if (grid == 0) // the numbered-pairs kernels: ~16 blocks per SM over BH rows
		k<<<dim3(22, BH), threads>>>(buf, -INFINITY);
	else
		k<<<grid, threads>>>(buf, -INFINITY);
}

static bool check(kernel k, float *buf, unsigned grid, unsigned threads)
{
	size_t n = (size_t)4 * T * T; // 4 matrices are enough for the pattern
	std::vector<float> h(n), got(n);
	for (auto &x : h)
		x = rand() / (float)RAND_MAX + 0.5f;
	CK(cudaMemcpy(buf, h.data(), n * 4,
		      cudaMemcpyHostToDevice));
	launch(k, buf, grid, threads);
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(got.data(), buf, n * 4, cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < n; i++) {
		int r = (i / T) % T, c = i % T;
		float want = c > r ? -INFINITY : h[i];
		if (memcmp(&want, &got[i], 4))
			return false;
	}
	return true;
}

int main()
{
	size_t n = (size_t)BH * T * T, bytes = n * 4;
	float *buf[NBUF];
	for (auto &b : buf) {
		CK(cudaMalloc(&b, bytes));
		CK(cudaMemset(b, 0x3f, bytes));
	}
	double tri = (double)BH * T * (T - 1) / 2 * 4;
	int sms;
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	float copy = time_ms([&](int i) {
		CK(cudaMemcpyAsync(buf[(i + 1) % NBUF], buf[i], bytes,
				   cudaMemcpyDeviceToDevice));
	});
	double copy_bw = 2.0 * bytes / copy / 1e6;
	printf("copy (read+write) %.1f GB/s\n", copy_bw);
	float ms = time_ms([&](int i) {
		CK(cudaMemsetAsync(buf[i], 0xff, (size_t)tri));
	});
	printf("%-34s %7.4f ms %7.1f GB/s %5.1f%% of copy\n",
	       "memset, triangle's bytes", ms, tri / ms / 1e6,
	       100 * tri / ms / 1e6 / copy_bw);

	struct variant {
		const char *name;
		kernel k;
		unsigned grid, threads;
		double bytes;
		bool is_mask;
	} vs[] = {
		{"(s) shipped: at_cuda_mask_causal", nullptr, 0, 0, tri, true},
		{"(a) rows16 (shipped before)", rows16, BH * T, 256, tri, true},
		{"(i) flat grid over row pairs", pairs_sectors<WHOLE_TRIANGLE>, 0, 256, tri, true},
		{"(m) as (i), diagonal sector merged", pairs_sectors<MERGE_DIAGONAL>, 0, 256, tri, true},
		{"(k) probe: as (i), whole sectors only", pairs_sectors<WHOLE_SECTORS>, 0, 256, -1, false},
		{"(q) flat over all slots, predicated", flat_pred_const, 64u * sms, 256, tri, true},
		{"(q'') as (q), T at run time", nullptr, 1, 256, tri, true},
		{"(p4) probe: (q) grid, right halves", probe_spans<SPAN_RIGHT_HALF>, 64u * sms, 256, -2, false},
		{"(p4) probe: (q) grid, left triangle", probe_spans<SPAN_LEFT_TRIANGLE>, 64u * sms, 256, -3, false},
		{"(p5) probe: (q) grid, inner sectors", probe_spans<SPAN_INNER_SECTORS>, 64u * sms, 256, -4, false},
		{"(p5) probe: (q) grid, inner lines", probe_spans<SPAN_INNER_LINES>, 64u * sms, 256, -5, false},
		{"(p5) probe: (q) grid, outer sectors", probe_spans<SPAN_OUTER_SECTORS>, 64u * sms, 256, -6, false},
		{"(p4) probe: (q) grid, rotated rows", probe_spans<SPAN_ROTATED_TRIANGLE>, 64u * sms, 256, -3, false},
		{"(w) first wave's diag, synced", sectors_first_wave<true>, 128u * sms, 256, tri, true},
		{"(w') first wave's diag, no sync", sectors_first_wave<false>, 128u * sms, 256, tri, true},
		{"(x) probe: (v), diag written only", sectors_probe<DIAG_WRITE_ONLY>, 128u * sms, 256, tri, false},
		{"(x) probe: (v), diag read only", sectors_probe<DIAG_READ_ONLY>, 128u * sms, 256, tri, false},
		{"(y) as (s) on 64-byte blocks", atoms<16>, 128u * sms, 256, tri, true},
		{"(y) as (s) on 128-byte lines", atoms<32>, 128u * sms, 256, tri, true},
		{"(v) as (s), grid 64 x SMs", sectors_knobs<false, false>, 64u * sms, 256, tri, true},
		{"(v) as (s), streaming stores", sectors_knobs<false, true>, 128u * sms, 256, tri, true},
		{"(v) a sector per thread", sectors_knobs<true, false>, 64u * sms, 256, tri, true},
		{"(r) 2 passes: diag, flat whole sectors", two_pass_body, 64u * sms, 256, tri, true},
		{"(t) 1 pass, flat, diag merged", flat_merge_diag, 64u * sms, 256, tri, true},
		{"(b) rows aligned, streaming", rows_aligned, BH * T, 256, tri, true},
		{"(b'') rows aligned, 128 threads", rows_aligned, BH * T, 128, tri, true},
		{"(b3) rows aligned, grid 8 x SMs", rows_aligned, 8u * sms, 256, tri, true},
		{"(c) row pairs aligned", pairs_aligned, BH * T / 2, 256, tri, true},
		{"(f) 32-row bands", bands, BH * T / 32, 512, tri, true},
		{"(g) rows by cp.async.bulk, 4xSMs", rows_bulk, 4u * sms, 128, tri, true},
		{"(g') rows by cp.async.bulk, 16xSMs", rows_bulk, 16u * sms, 64, tri, true},
		{"(h) warp per row, 4 float4/lane", warp_rows4, BH * T / 8, 256, tri, true},
		{"(h') as (h), grid 16 x SMs", warp_rows4, 16u * sms, 256, tri, true},
		{"(p1) probe: contiguous, ours", probe_contiguous, 16u * sms, 256, tri, false},
		{"(p2) probe: first half of rows", probe_half_matrix, BH * T / 2, 256,
		 (double)BH * T * T / 2 * 4, false},
		{"(p3) probe: 512 B on / 512 off", probe_stripes<512, 512>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(p3) probe: 1 KiB on / 1 off", probe_stripes<1024, 1024>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(p3) probe: 2 KiB on / 2 off", probe_stripes<2048, 2048>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(p3) probe: 4 KiB on / 4 off", probe_stripes<4096, 4096>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(p3) probe: 16 KiB on / 16 off", probe_stripes<16384, 16384>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(p3) probe: 64 KiB on / 64 off", probe_stripes<65536, 65536>, 16u * sms, 256, tri + 0.5 * (BH * T * 4.0), false},
		{"(d) probe: aligned starts", probe_aligned_starts, BH * T, 256, 0, false},
		{"(e) probe: right half rows", probe_half_rows, BH * T, 128,
		 (double)BH * T * T / 2 * 4, false},
		{"(e') as (e), 256 threads", probe_half_rows, BH * T, 256,
		 (double)BH * T * T / 2 * 4, false},
	};
	for (auto &v : vs) {
		if (v.is_mask && !check(v.k, buf[0], v.grid, v.threads)) {
			printf("%-34s WRONG\n", v.name);
			continue;
		}
		double b = v.bytes;
		if (b == -2) { // right halves
			b = (double)BH * T * T / 2 * 4;
		} else if (b == -3) { // whole float4 spans of the triangle's lengths
			b = 0;
			for (int r = 0; r < T; r++)
				b += (double)BH * ((T - 1 - r) / 4) * 16;
		} else if (b <= -4 && b >= -6) { // rounded triangles: count the float4s
			double nb = 0;
			for (int r = 0; r < T; r++)
				for (unsigned k = 0; k < T / 4; k++) {
					unsigned j = 4 * k;
					bool on = b == -4 ? (j & ~7u) > (unsigned)r
						: b == -5 ? (j & ~31u) > (unsigned)r
						: (j | 7u) > (unsigned)r;
					nb += on ? 16.0 * BH : 0;
				}
			b = nb;
		} else if (b < 0) { // the whole-sector probe: count what it writes
			b = 0;
			for (int r = 0; r < T; r++)
				b += (double)BH * std::max(0, T - ((r + 1) / 8 * 8 + 8)) * 4;
		} else if (b == 0) { // the aligned-start probe, likewise
			for (int r = 0; r < T; r++)
				b += (double)BH * (T - ((r + 32) / 32) * 32) * 4;
		}
		float t = time_ms([&](int i) {
			launch(v.k, buf[i], v.grid, v.threads);
		});
		printf("%-34s %7.4f ms %7.1f GB/s %5.1f%% of copy\n", v.name, t,
		       b / t / 1e6, 100 * b / t / 1e6 / copy_bw);
	}
	return 0;
}
