// bf16.cu - conversions between fp32 and bf16: the bf16 copies of the
// weights (both engines) and of the residual gradient (the trainer), and
// bf16 activations going back to the host as float (hooks).
#include "forward/forward_kernels.cuh"

__global__ static void to_bf16_kernel(bf16 *dst, const float *src, size_t n)
{
	size_t n4 = n / 4;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
	     i += (size_t)gridDim.x * blockDim.x) {
		float4 f = ((const float4 *)src)[i];
		__nv_bfloat162 lo = __floats2bfloat162_rn(f.x, f.y);
		__nv_bfloat162 hi = __floats2bfloat162_rn(f.z, f.w);
		((__nv_bfloat162 *)dst)[2 * i] = lo;
		((__nv_bfloat162 *)dst)[2 * i + 1] = hi;
	}
	size_t i = n4 * 4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = __float2bfloat16(src[i]);
}

// The engines' buffers are cudaMalloc'd and their offsets multiples of 4
// elements wherever this is called, so 16-byte loads are safe; anything
// else takes the scalar kernel.
__global__ static void to_bf16_scalar(bf16 *dst, const float *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] = __float2bfloat16(src[i]);
}

int at_cu_to_bf16(bf16 *dst, const float *src, size_t n)
{
	if (n == 0)
		return 0;
	if (((uintptr_t)src % 16) == 0 && ((uintptr_t)dst % 8) == 0)
		to_bf16_kernel<<<at_cu_blocks(n / 4 + 1, 256), 256, 0, at_cu_stream>>>(dst, src, n);
	else
		to_bf16_scalar<<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(dst, src, n);
	CU_LAUNCHED("bf16 conversion kernel");
	return 0;
}

__global__ static void from_bf16_kernel(float *dst, const bf16 *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] = __bfloat162float(src[i]);
}

int at_cu_from_bf16(float *dst, const bf16 *src, size_t n)
{
	if (n == 0)
		return 0;
	from_bf16_kernel<<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(dst, src, n);
	CU_LAUNCHED("bf16 conversion kernel");
	return 0;
}
