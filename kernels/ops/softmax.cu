// softmax.cu - the row softmax in one pass over the data.
//
// A group of G threads owns a row (G = 32: one warp, rows up to 1024
// floats; G = 512: one block, rows up to 32768).  Each thread loads its
// PER vectors of VEC floats once into registers, the group reduces the
// maximum and then the sum of exponentials by warp shuffles (and shared
// memory across warps), and each thread writes its part once.  VEC = 4
// (16-byte loads and stores) when the row length is a multiple of 4 and
// the buffers are 16-byte aligned; VEC = 1 otherwise.  Longer rows take a
// three-pass block kernel.
//
// As on the CPU (lib/ops/softmax.c), a row whose maximum is -inf (nothing
// unmasked) or +inf, or that holds a NaN, becomes all NaN: a NaN counts as
// +inf in the maximum, so one reduction finds all three.
#include <math.h>

#include "common/cuda_util.cuh"

#define BLOCK_G 512

__device__ __forceinline__ float nan_as_inf(float x)
{
	return x != x ? INFINITY : x;
}

template <int VEC, int PER, int G>
__global__ void __launch_bounds__(G == 32 ? 256 : G)
softmax_kernel(float *p, const float *s, size_t rows, int n)
{
	__shared__ float sh[32];
	int t = G == 32 ? threadIdx.x % 32 : threadIdx.x;
	size_t rpb = G == 32 ? blockDim.x / 32 : 1;
	size_t first = blockIdx.x * rpb + (G == 32 ? threadIdx.x / 32 : 0);
	for (size_t r = first; r < rows; r += gridDim.x * rpb) {
		const float *x = s + r * n;
		float *o = p + r * n;
		float v[PER][VEC];
		float m = -INFINITY;
#pragma unroll
		for (int k = 0; k < PER; k++) {
			int j = (t + k * G) * VEC;
			if (VEC == 4 && j < n) {
				float4 f = __ldcs((const float4 *)(x + j));
				v[k][0] = f.x;
				v[k][1 % VEC] = f.y;
				v[k][2 % VEC] = f.z;
				v[k][3 % VEC] = f.w;
			} else if (VEC == 1 && j < n) {
				v[k][0] = __ldcs(x + j);
			} else {
#pragma unroll
				for (int e = 0; e < VEC; e++)
					v[k][e] = -INFINITY;
			}
#pragma unroll
			for (int e = 0; e < VEC; e++)
				m = fmaxf(m, nan_as_inf(v[k][e]));
		}
		m = group_max<G>(m, sh);
		if (isinf(m)) {
#pragma unroll
			for (int k = 0; k < PER; k++)
#pragma unroll
				for (int e = 0; e < VEC; e++)
					v[k][e] = nanf("");
		} else {
			float sum = 0.0f;
#pragma unroll
			for (int k = 0; k < PER; k++)
#pragma unroll
				for (int e = 0; e < VEC; e++) {
					v[k][e] = expf(v[k][e] - m);
					sum += v[k][e];
				}
			float inv = 1.0f / group_sum<G>(sum, sh);
#pragma unroll
			for (int k = 0; k < PER; k++)
#pragma unroll
				for (int e = 0; e < VEC; e++)
					v[k][e] *= inv;
		}
#pragma unroll
		for (int k = 0; k < PER; k++) {
			int j = (t + k * G) * VEC;
			if (j >= n)
				continue;
			if (VEC == 4)
				__stcs((float4 *)(o + j),
				       make_float4(v[k][0], v[k][1 % VEC],
						   v[k][2 % VEC], v[k][3 % VEC]));
			else
				__stcs(o + j, v[k][0]);
		}
	}
}

// Rows too long for registers: max, then sum, then write, one block a row.
__global__ void __launch_bounds__(BLOCK_G)
softmax_long_kernel(float *p, const float *s, size_t rows, int n)
{
	__shared__ float sh[32];
	for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
		const float *x = s + r * n;
		float *o = p + r * n;
		float m = -INFINITY;
		for (int j = threadIdx.x; j < n; j += BLOCK_G)
			m = fmaxf(m, nan_as_inf(x[j]));
		m = group_max<BLOCK_G>(m, sh);
		if (isinf(m)) {
			for (int j = threadIdx.x; j < n; j += BLOCK_G)
				o[j] = nanf("");
			continue;
		}
		float sum = 0.0f;
		for (int j = threadIdx.x; j < n; j += BLOCK_G)
			sum += expf(x[j] - m);
		float inv = 1.0f / group_sum<BLOCK_G>(sum, sh);
		for (int j = threadIdx.x; j < n; j += BLOCK_G)
			o[j] = expf(x[j] - m) * inv;
	}
}

template <int VEC, int PER, int G>
static void launch(float *p, const float *s, size_t rows, int n)
{
	if (G == 32) {
		const unsigned bs = 256;
		softmax_kernel<VEC, PER, G>
			<<<at_cu_blocks(rows, bs / 32), bs, 0, at_cu_stream>>>(p, s, rows, n);
	} else {
		softmax_kernel<VEC, PER, G><<<at_cu_blocks(rows, 1), G, 0, at_cu_stream>>>(p, s,
									  rows, n);
	}
}

// Picks the smallest PER (a power of two up to MAXPER) whose registers
// hold a row; returns 0 when none does.
template <int VEC, int G, int MAXPER>
static int launch_fitting(float *p, const float *s, size_t rows, int n)
{
	long need = ((long)n + (long)G * VEC - 1) / ((long)G * VEC);
	if (need > MAXPER)
		return 0;
	if (need <= 1)
		launch<VEC, 1, G>(p, s, rows, n);
	else if (need <= 2)
		launch<VEC, 2, G>(p, s, rows, n);
	else if (need <= 4)
		launch<VEC, 4, G>(p, s, rows, n);
	else if (need <= 8)
		launch<VEC, 8, G>(p, s, rows, n);
	else if (need <= 16)
		launch<VEC, (MAXPER >= 16 ? 16 : 1), G>(p, s, rows, n);
	else
		launch<VEC, (MAXPER >= 32 ? 32 : 1), G>(p, s, rows, n);
	return 1;
}

extern "C" int at_cuda_softmax_rows(float *p, const float *s, size_t rows,
				    int n)
{
	if (rows == 0 || n == 0)
		return 0;
	int vec4 = n % 4 == 0 && aligned4(p) && aligned4(s);
	int done;
	if (vec4)
		done = launch_fitting<4, 32, 8>(p, s, rows, n) ||
		       launch_fitting<4, BLOCK_G, 16>(p, s, rows, n);
	else
		done = launch_fitting<1, 32, 32>(p, s, rows, n) ||
		       launch_fitting<1, BLOCK_G, 32>(p, s, rows, n);
	if (!done)
		softmax_long_kernel<<<at_cu_blocks(rows, 1), BLOCK_G, 0, at_cu_stream>>>(p, s, rows,
									n);
	CU_LAUNCHED("softmax kernel");
	return 0;
}

extern "C" int at_cuda_softmax_host(float *p, const float *s, size_t rows,
				    int n)
{
	size_t total = rows * (size_t)n;
	if (total == 0)
		return 0;
	dev_buf<float> ds, dp;
	if (ds.alloc(total, "scores") || dp.alloc(total, "attn"))
		return -1;
	CU_CHECK(cudaMemcpy(ds.p, s, total * sizeof *s, cudaMemcpyHostToDevice),
		 "copying scores to the GPU");
	if (at_cuda_softmax_rows(dp.p, ds.p, rows, n))
		return -1;
	CU_CHECK(cudaMemcpy(p, dp.p, total * sizeof *p, cudaMemcpyDeviceToHost),
		 "computing attn");
	return 0;
}
