// mask.cu - the causal mask in place: s[., i, j] = fill for j > i.  Only
// the masked triangle is written and nothing is read, so the kernel moves
// T(T-1)/2 floats per matrix.
//
// When T % 4 == 0 and s is 16-byte aligned, a flat grid stores the
// triangle's float4s (mask_pairs4_kernel, below), the float4 that holds the
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

// T % 4 == 0, T <= 65536 and s 16-byte aligned.  Rows r and T-1-r of a
// matrix pair up: their masked parts start at the float4 holding the
// column after the diagonal and hold T/4 or T/4 + 1 float4 slots together,
// so a pair takes W = T/4 + 1 numbers (one spare at times), and the slots
// of each matrix are numbered pair after pair.  Every thread of a grid of
// about 16 blocks per multiprocessor stores one slot per pass: a whole
// float4 past the diagonal, else the one to three elements of it beyond
// column r.
//
// The layout is what matters (bench/mask-layouts.cu, figures in
// bench/README.md): a block per row spends its time starting blocks and
// leaves most threads of the short rows idle (59-64% of a
// device-to-device copy on an H200, a dozen variants of it no better),
// and numbering the slots row by row costs a square root and 64-bit steps
// per slot (23%), while the same grid writing stripes of the same byte
// count reaches 89%.
__global__ static void mask_pairs4_kernel(float *s, unsigned T, unsigned BH,
					  float fill)
{
	float4 f4 = make_float4(fill, fill, fill, fill);
	unsigned T4 = T / 4, W = T4 + 1, per = T / 2 * W;
	unsigned stride = gridDim.x * blockDim.x;
	for (unsigned m = blockIdx.y; m < BH; m += gridDim.y) {
		float *mat = s + (size_t)m * T * T;
		for (unsigned f = blockIdx.x * blockDim.x + threadIdx.x; f < per;
		     f += stride) {
			unsigned r = f / W, k = f - r * W, k0 = (r + 1) / 4;
			if (k >= T4 - k0) { // past row r: row T-1-r's slots
				k -= T4 - k0;
				r = T - 1 - r;
				k0 = (r + 1) / 4;
				if (k >= T4 - k0)
					continue; // the pair's spare number
			}
			unsigned j = 4 * (k0 + k);
			float *row = mat + (size_t)r * T;
			if (j > r)
				*(float4 *)(row + j) = f4;
			else
				for (unsigned e = r + 1; e < j + 4; e++)
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
	if (T % 4 == 0 && T <= 65536 && (uintptr_t)s % 16 == 0) {
		long long per = (long long)T / 2 * (T / 4 + 1);
		mask_pairs4_kernel<<<flat_grid(per, BH), 256>>>(s, (unsigned)T,
								(unsigned)BH, fill);
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
