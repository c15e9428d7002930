// mask.cu - the causal mask in place: s[., i, j] = fill for j > i.  The
// kernels move the masked triangle, T(T-1)/2 floats per matrix, plus, in
// the fast path, the one 32-byte sector per row that holds the diagonal.
//
// When T % 8 == 0 and s is 32-byte aligned, every sector is written whole
// (mask_sectors_kernel, below).
// Else when T % 4 == 0 and s is 16-byte aligned, a block fills each row
// (mask_rows4_kernel).
// Otherwise one warp fills a pair of rows, r and T-1-r, whose masked parts
// hold T-1 elements together: scalars up to a 16-byte boundary, then
// float4s, then the scalars left over, with the alignment taken from the
// address, so any T works.
#include "common/cuda_util.cuh"

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

// T % 4 == 0 and s 16-byte aligned (T % 8 != 0): a block per row, thread
// t on float4 t of the row counted from the 512-byte span that holds the
// diagonal, the float4 that holds the diagonal written element by element.
// About 64% of a device-to-device copy on an H200 (bench/README.md).
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

// T % 8 == 0 and s 32-byte aligned, so every row is whole 32-byte
// sectors.  What makes the triangle slow is the one sector per row that
// it writes in part: the L2 must fetch such a sector from DRAM before
// writing it back, and those reads, strewn among the writes, cost a
// third of the bandwidth (bench/mask-layouts.cu: the same triangle
// rounded to whole sectors writes at 90% of a copy, exact at 62%).  So
// no sector is written in part:
//   1. each thread first takes one row's diagonal sector (its rows are
//      the grid's first threads, so these reads come together at the
//      start), reads it, sets its masked elements and writes it whole:
//      its unmasked elements are rewritten with their own bits;
//   2. then the grid walks every float4 of the buffer in address order
//      and stores the fill where its sector lies wholly past the
//      diagonal.  Threads on the lower triangle store nothing: skipping
//      costs less than finding each row's start.
// No store of step 2 touches a diagonal sector, so the two need no
// ordering.  Reading the diagonal's float4 where the walk writes it
// instead (reads among the writes), or ahead of the walk, measured
// slower.  The walk tracks (column, row mod T) by addition: a division
// per float4 would cost more than the store.
__global__ static void mask_sectors_kernel(float *s, unsigned T, size_t rows,
					   float fill)
{
	size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	unsigned fill_bits = __float_as_uint(fill);

	for (size_t row = tid; row < rows; row += stride) {
		unsigned c = (unsigned)(row % T) + 1; // first masked column
		if (c >= T || c % 8 == 0)
			continue;
		uint4 *sec = (uint4 *)(s + row * T + (c & ~7u));
		uint4 h[2] = {sec[0], sec[1]};
		unsigned *e = (unsigned *)h;
#pragma unroll
		for (unsigned i = 0; i < 8; i++) // constant indices: registers
			e[i] = i >= c % 8 ? fill_bits : e[i];
		sec[0] = h[0];
		sec[1] = h[1];
	}

	float4 f4 = make_float4(fill, fill, fill, fill);
	unsigned t4 = T / 4;
	size_t n4 = rows * t4, step_rows = stride / t4;
	unsigned k = (unsigned)(tid % t4), r = (unsigned)(tid / t4 % T);
	unsigned dk = (unsigned)(stride % t4), dr = (unsigned)(step_rows % T);
	for (size_t i = tid; i < n4; i += stride) {
		if ((4 * k & ~7u) > r) // its sector starts past the diagonal
			((float4 *)s)[i] = f4;
		k += dk;
		r += dr;
		if (k >= t4) {
			k -= t4;
			r++;
		}
		if (r >= T) // r < 2T here
			r -= T;
	}
}

extern "C" int at_cuda_mask_causal(float *s, int BH, int T, float fill)
{
	if (BH == 0 || T < 2)
		return 0;
	size_t rows = (size_t)BH * T;
	if (T % 8 == 0 && (uintptr_t)s % 32 == 0) {
		// 128 blocks of 256 per SM measured best; fewer for small inputs
		size_t want = (rows * (T / 4) + 255) / 256;
		unsigned grid = 128u * at_cu_sm_count();
		if (want < grid)
			grid = (unsigned)want;
		mask_sectors_kernel<<<grid, 256, 0, at_cu_stream>>>(s, (unsigned)T, rows, fill);
		CU_LAUNCHED("mask kernel");
		return 0;
	}
	if (T % 4 == 0 && aligned4(s) && rows <= UINT32_MAX) {
		unsigned grid = rows < (1u << 31) ? (unsigned)rows : (1u << 31) - 1;
		mask_rows4_kernel<<<grid, 256, 0, at_cu_stream>>>(s, T, (unsigned)rows, fill);
		CU_LAUNCHED("mask kernel");
		return 0;
	}
	size_t pairs = (size_t)BH * ((T + 1) / 2);
	const unsigned bs = 256;
	mask_kernel<<<at_cu_blocks(pairs, bs / 32), bs, 0, at_cu_stream>>>(s, T, pairs, fill);
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
