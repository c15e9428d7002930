// mask.cu - the causal mask in place: s[., i, j] = fill for j > i.  Only
// the masked triangle is written and nothing is read, so the kernel moves
// T(T-1)/2 floats per matrix.
//
// When T % 4 == 0 and s is 16-byte aligned, a block fills each row
// (mask_rows4_kernel, below).
// Otherwise one warp fills a pair of rows, r and T-1-r, whose masked parts
// hold T-1 elements together: scalars up to a 16-byte boundary, then
// float4s, then the scalars left over, with the alignment taken from the
// address, so any T works.
#include "cuda_util.cuh"

__device__ static void fill_tail(float *p, long n, float fill, int lane)
{
	if (n <= 0)
		return;
	long head = (long)((16 - ((uintptr_t)p & 15)) & 15) / 4;
	if (head > n)
		head = n;
	if (lane < head)
		p[lane] = fill;
	float4 *p4 = (float4 *)(p + head);
	long n4 = (n - head) / 4;
	float4 f4 = make_float4(fill, fill, fill, fill);
	for (long i = lane; i < n4; i += 32)
		p4[i] = f4;
	long done = head + n4 * 4;
	if (lane < n - done)
		p[done + lane] = fill;
}

__global__ static void mask_kernel(float *s, int T, size_t pairs, float fill)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	size_t per = (size_t)(T + 1) / 2; // pairs per matrix
	for (size_t w = (size_t)blockIdx.x * wpb + threadIdx.x / 32; w < pairs;
	     w += (size_t)gridDim.x * wpb) {
		size_t m = w / per;
		int r = (int)(w % per), r2 = T - 1 - r;
		float *mat = s + m * T * T;
		fill_tail(mat + (size_t)r * T + r + 1, T - 1 - r, fill, lane);
		if (r2 != r)
			fill_tail(mat + (size_t)r2 * T + r2 + 1, T - 1 - r2, fill,
				  lane);
	}
}

// T % 4 == 0 and s 16-byte aligned: a block per row, thread t on float4
// t of the row counted from the 512-byte span that holds the diagonal, so
// each warp's stores fill one aligned span (lanes before the diagonal
// idle); the float4 that holds the diagonal written element by element.
// Plain stores: streaming ones (__stcs) measured 8% slower.
//
// bench/mask-layouts.cu times this against a dozen other layouts and
// against probes that write other shapes of the same byte count (figures
// in bench/README.md).  On an H200 every layout of the triangle stays at
// 50-65% of a device-to-device copy, this one at the top; the same bytes
// as stripes of any width reach 89-93% and as contiguous whole rows 97%.
// The shape itself costs: rows written in part, a different part each.
__global__ static void mask_rows4_kernel(float *s, int T, unsigned rows,
					 float fill)
{
	float4 f4 = make_float4(fill, fill, fill, fill);
	for (unsigned row = blockIdx.x; row < rows; row += gridDim.x) {
		int r = (int)(row % (unsigned)T);
		float *p = s + (size_t)row * T;
		for (int k = threadIdx.x + (r + 1) / 128 * 32; k < T / 4;
		     k += blockDim.x) {
			int j = k * 4;
			if (j > r)
				*(float4 *)(p + j) = f4;
			else if (j + 3 > r)
				for (int e = r + 1; e < j + 4; e++)
					p[e] = fill;
		}
	}
}

extern "C" int at_cuda_mask_causal(float *s, int BH, int T, float fill)
{
	if (BH == 0 || T < 2)
		return 0;
	size_t rows = (size_t)BH * T;
	if (T % 4 == 0 && (uintptr_t)s % 16 == 0 && rows <= UINT32_MAX) {
		unsigned grid = rows < (1u << 31) ? (unsigned)rows : (1u << 31) - 1;
		mask_rows4_kernel<<<grid, 256>>>(s, T, (unsigned)rows, fill);
		CU_LAUNCHED("mask kernel");
		return 0;
	}
	size_t pairs = (size_t)BH * ((T + 1) / 2);
	const unsigned bs = 256;
	mask_kernel<<<at_cu_blocks(pairs, bs / 32), bs>>>(s, T, pairs, fill);
	CU_LAUNCHED("mask kernel");
	return 0;
}

extern "C" int at_cuda_mask_host(float *s, int BH, int T, float fill)
{
	size_t n = (size_t)BH * T * T;
	if (n == 0 || T < 2)
		return 0;
	dev_buf<float> ds;
	if (ds.alloc(n, "scores"))
		return -1;
	CU_CHECK(cudaMemcpy(ds.p, s, n * sizeof *s, cudaMemcpyHostToDevice),
		 "copying scores to the GPU");
	if (at_cuda_mask_causal(ds.p, BH, T, fill))
		return -1;
	CU_CHECK(cudaMemcpy(s, ds.p, n * sizeof *s, cudaMemcpyDeviceToHost),
		 "masking scores");
	return 0;
}
