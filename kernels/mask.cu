// mask.cu - the causal mask in place: s[., i, j] = fill for j > i.  Only
// the masked triangle is written and nothing is read, so the kernel moves
// T(T-1)/2 floats per matrix.
//
// When T % 4 == 0 and s is 16-byte aligned, a block of 256 threads fills
// MASK_ROWS rows one after the other, a thread per float4 of the row's
// masked part (streaming stores; the float4 that holds the diagonal is
// written element by element).  Otherwise one warp fills a pair of rows, r
// and T-1-r, whose masked parts hold T-1 elements together: scalars up to
// a 16-byte boundary, then float4s, then the scalars left over, with the
// alignment taken from the address, so any T works.
//
// On an H200 the row kernel reaches 65-72% of a device-to-device copy's
// bandwidth; writing the second half of every row of the same matrices, a
// rectangle of the same size, reaches only 75%: the holes in the write
// pattern, not the kernel, set most of the limit.
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

#define MASK_ROWS 4

__global__ static void mask_rows_kernel(float *s, int T, size_t rows,
					float fill)
{
	float4 f4 = make_float4(fill, fill, fill, fill);
	for (size_t row0 = (size_t)blockIdx.x * MASK_ROWS; row0 < rows;
	     row0 += (size_t)gridDim.x * MASK_ROWS)
		for (int i = 0; i < MASK_ROWS && row0 + i < rows; i++) {
			size_t row = row0 + i;
			int r = (int)(row % T);
			float *p = s + row * T;
			for (int c4 = (r + 1) / 4 + threadIdx.x; c4 < T / 4;
			     c4 += blockDim.x) {
				int j = c4 * 4;
				if (j > r) {
					__stcs((float4 *)(p + j), f4);
					continue;
				}
				for (int e = 1; e < 4; e++)
					if (j + e > r)
						p[j + e] = fill;
			}
		}
}

extern "C" int at_cuda_mask_causal(float *s, int BH, int T, float fill)
{
	if (BH == 0 || T < 2)
		return 0;
	if (T % 4 == 0 && (uintptr_t)s % 16 == 0) {
		size_t rows = (size_t)BH * T;
		mask_rows_kernel<<<at_cu_blocks(rows, MASK_ROWS), 256>>>(s, T, rows,
									  fill);
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
