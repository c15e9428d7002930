// heads.cu - the head transposes: split [B,T,G*H*D] into G tensors
// [B,H,T,D] (G = 3 splits a fused q|k|v projection in one launch) and merge
// [B,H,T,D] back into [B,T,H*D].  Each thread moves VEC consecutive floats
// of one head row; reads and writes are both contiguous along D.
#include "common/cuda_util.cuh"

// i counts output vectors of out [G,B,H,T,D/VEC].
template <int VEC>
__global__ static void split_kernel(float *out, const float *in, int G, int B,
				    int T, int H, int D, size_t n)
{
	int dv = D / VEC;
	size_t ld = (size_t)H * D; // one head group of a row of in
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / dv; // row of out: ((g * B + b) * H + h) * T + t
		int d = (int)(i % dv) * VEC;
		int t = (int)(r % T);
		size_t r2 = r / T;
		int h = (int)(r2 % H);
		size_t gb = r2 / H;
		size_t g = gb / B, b = gb % B;
		const float *src = in + ((b * T + t) * G + g) * ld + (size_t)h * D + d;
		float *dst = out + r * D + d;
		if (VEC == 4)
			*(float4 *)dst = *(const float4 *)src;
		else
			*dst = *src;
	}
}

// i counts input vectors of in [B,H,T,D/VEC].
template <int VEC>
__global__ static void merge_kernel(float *out, const float *in, int T, int H,
				    int D, size_t n)
{
	int dv = D / VEC;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / dv; // (b * H + h) * T + t
		int d = (int)(i % dv) * VEC;
		int t = (int)(r % T);
		int h = (int)((r / T) % H);
		size_t b = r / ((size_t)T * H);
		const float *src = in + r * D + d;
		float *dst = out + ((b * T + t) * H + h) * (size_t)D + d;
		if (VEC == 4)
			*(float4 *)dst = *(const float4 *)src;
		else
			*dst = *src;
	}
}

static int vec4_ok(const float *a, const float *b, int D)
{
	return D % 4 == 0 && ((uintptr_t)a | (uintptr_t)b) % 16 == 0;
}

extern "C" int at_cuda_split_heads(float *out, const float *in, int G, int B,
				   int T, int H, int D)
{
	size_t n = (size_t)G * B * H * T * D;
	if (n == 0)
		return 0;
	if (vec4_ok(out, in, D))
		split_kernel<4><<<at_cu_blocks(n / 4, 256), 256>>>(out, in, G, B, T,
								    H, D, n / 4);
	else
		split_kernel<1><<<at_cu_blocks(n, 256), 256>>>(out, in, G, B, T, H,
								D, n);
	CU_LAUNCHED("split-heads kernel");
	return 0;
}

extern "C" int at_cuda_merge_heads(float *out, const float *in, int B, int T,
				   int H, int D)
{
	size_t n = (size_t)B * H * T * D;
	if (n == 0)
		return 0;
	if (vec4_ok(out, in, D))
		merge_kernel<4><<<at_cu_blocks(n / 4, 256), 256>>>(out, in, T, H, D,
								    n / 4);
	else
		merge_kernel<1><<<at_cu_blocks(n, 256), 256>>>(out, in, T, H, D, n);
	CU_LAUNCHED("merge-heads kernel");
	return 0;
}
