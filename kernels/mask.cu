// mask.cu - the causal mask in place: s[., i, j] = fill for j > i.  Only
// the masked triangle is written and nothing is read, so the kernel moves
// T(T-1)/2 floats per matrix.
//
// When T % 4 == 0 and s is 16-byte aligned, a flat grid stores the
// triangle's float4s (mask_flat4_kernel, below), the float4 that holds the
// diagonal written element by element.
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

// Slots (float4s) in the masked parts of rows 0..r-1 of a matrix, row i
// holding T/4 - (i+1)/4 of them: from the float4 that holds column i+1 to
// the end of the row.
__host__ __device__ static inline long long slots_before(long long r, long long T4)
{
	long long q = r / 4, rem = r % 4;
	return r * T4 - 2 * q * (q - 1) - q * (rem + 1);
}

// T % 4 == 0 and s 16-byte aligned: the masked slots of each matrix
// numbered row after row, and every thread of a grid of about 16 blocks
// per multiprocessor stores one slot per pass (a whole float4 past the
// diagonal, else the one to three elements of it beyond column r).  The
// row of slot f comes from inverting slots_before, about
// r = T - sqrt(T^2 - 8f), then a step or two to make it exact.
//
// The layout is what matters (bench/mask-layouts.cu, figures in
// bench/README.md): a block per row leaves most threads of the short rows
// idle and spends its time starting blocks (59-64% of a device-to-device
// copy on an H200, and a dozen variants of it no better), while a grid
// where every thread stores on every pass writes the triangle as fast as
// it writes any half of the matrix.
__global__ static void mask_flat4_kernel(float *s, int T, unsigned BH,
					 float fill)
{
	float4 f4 = make_float4(fill, fill, fill, fill);
	long long T4 = T / 4, per = slots_before(T, T4);
	long long stride = (long long)gridDim.x * blockDim.x;
	for (unsigned m = blockIdx.y; m < BH; m += gridDim.y) {
		float *mat = s + (size_t)m * T * T;
		for (long long f = blockIdx.x * (long long)blockDim.x + threadIdx.x;
		     f < per; f += stride) {
			long long r = (long long)(T - sqrtf((float)T * T - 8.0f * f));
			r = r < 0 ? 0 : r > T - 1 ? T - 1 : r;
			while (r > 0 && slots_before(r, T4) > f)
				r--;
			while (slots_before(r + 1, T4) <= f)
				r++;
			long long j = 4 * ((r + 1) / 4 + (f - slots_before(r, T4)));
			float *row = mat + (size_t)r * T;
			if (j > r)
				*(float4 *)(row + j) = f4;
			else
				for (long long e = r + 1; e < j + 4; e++)
					row[e] = fill;
		}
	}
}

// Blocks of 256 for the flat kernel: about 16 per multiprocessor over all
// the matrices, at least one per matrix (up to 65535), none idle.
static dim3 flat_grid(long long slots_per_matrix, int BH)
{
	static int sms;
	if (!sms && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
					   0) != cudaSuccess)
		sms = 132;
	unsigned gy = BH < 65535 ? (unsigned)BH : 65535u;
	long long gx = (16LL * sms + gy - 1) / gy;
	long long most = (slots_per_matrix + 255) / 256;
	if (gx > most)
		gx = most;
	return dim3((unsigned)(gx > 0 ? gx : 1), gy);
}

extern "C" int at_cuda_mask_causal(float *s, int BH, int T, float fill)
{
	if (BH == 0 || T < 2)
		return 0;
	if (T % 4 == 0 && (uintptr_t)s % 16 == 0) {
		long long per = slots_before(T, T / 4);
		mask_flat4_kernel<<<flat_grid(per, BH), 256>>>(s, T, (unsigned)BH,
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
