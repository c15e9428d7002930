// heads.cu - the head transposes, for the stages and the training engine:
// split [B,T,G*H*D] into G tensors [B,H,T,D] (G = 3 splits a fused q|k|v
// projection in one launch) and merge [B,H,T,D] back into [B,T,H*D], the
// output float or bf16 (the trainer's product operands).  Each thread
// moves VEC consecutive floats of one head row; reads and writes are both
// contiguous along D.
#include "common/cuda_util.cuh"

// VEC (1 or 4) floats from src to dst.
template <int VEC, typename OUT>
__device__ __forceinline__ static void move(OUT *dst, const float *src)
{
	if (VEC == 4)
		store4_as(dst, *(const float4 *)src);
	else
		store_as(dst, *src);
}

// i counts output vectors of out [G,B,H,T,D/VEC].
template <int VEC, typename OUT>
__global__ static void split_kernel(OUT *out, const float *in, int G, int B,
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
		move<VEC>(out + r * D + d,
			  in + ((b * T + t) * G + g) * ld + (size_t)h * D + d);
	}
}

// i counts input vectors of in [B,H,T,D/VEC].
template <int VEC, typename OUT>
__global__ static void merge_kernel(OUT *out, const float *in, int T, int H,
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
		move<VEC>(out + ((b * T + t) * H + h) * (size_t)D + d,
			  in + r * D + d);
	}
}

// Whether four elements at a time stay aligned: D a multiple of 4 and
// both buffers aligned to four of their elements.
template <typename OUT> static int vec4_ok(const OUT *out, const float *in, int D)
{
	return D % 4 == 0 && aligned4(out) && aligned4(in);
}

template <typename OUT>
int at_cu_split_heads(OUT *out, const float *in, int G, int B, int T, int H,
		      int D)
{
	size_t n = (size_t)G * B * H * T * D;
	if (n == 0)
		return 0;
	if (vec4_ok(out, in, D))
		split_kernel<4, OUT><<<at_cu_blocks(n / 4, 256), 256, 0, at_cu_stream>>>(
			out, in, G, B, T, H, D, n / 4);
	else
		split_kernel<1, OUT><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(
			out, in, G, B, T, H, D, n);
	CU_LAUNCHED("split-heads kernel");
	return 0;
}

template <typename OUT>
int at_cu_merge_heads(OUT *out, const float *in, int B, int T, int H, int D)
{
	size_t n = (size_t)B * H * T * D;
	if (n == 0)
		return 0;
	if (vec4_ok(out, in, D))
		merge_kernel<4, OUT><<<at_cu_blocks(n / 4, 256), 256, 0, at_cu_stream>>>(
			out, in, T, H, D, n / 4);
	else
		merge_kernel<1, OUT><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(out, in, T,
								     H, D, n);
	CU_LAUNCHED("merge-heads kernel");
	return 0;
}
template int at_cu_split_heads<float>(float *, const float *, int, int, int,
				      int, int);
template int at_cu_split_heads<__nv_bfloat16>(__nv_bfloat16 *, const float *,
					      int, int, int, int, int);
template int at_cu_merge_heads<float>(float *, const float *, int, int, int,
				      int);
template int at_cu_merge_heads<__nv_bfloat16>(__nv_bfloat16 *, const float *,
					      int, int, int, int);

extern "C" int at_cuda_split_heads(float *out, const float *in, int G, int B,
				   int T, int H, int D)
{
	return at_cu_split_heads<float>(out, in, G, B, T, H, D);
}

extern "C" int at_cuda_merge_heads(float *out, const float *in, int B, int T,
				   int H, int D)
{
	return at_cu_merge_heads<float>(out, in, B, T, H, D);
}
