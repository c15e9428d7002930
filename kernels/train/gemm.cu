// train_gemm.cu - the training engine's matrix products through cuBLAS, in
// the precision of the run, and the fp32 -> bf16 conversion.
//
// Row-major products on column-major cuBLAS as in matmul.cu: C = op(A)
// op(B) is computed as C^T = op(B)^T op(A)^T, so the operands swap places
// and nothing moves in memory.  fp32 asks for CUBLAS_COMPUTE_32F (no
// tensor-core rounding), tf32 for CUBLAS_COMPUTE_32F_FAST_TF32; bf16 takes
// bf16 operands with fp32 accumulation and an fp32 result.
#include "train/train_kernels.cuh"
#include "common/cublas_lazy.cuh"

int tr_mm(const tr_blas *b, int ta, int tb, int M, int N, int K, float alpha,
	  const void *A, long long sA, const void *B, long long sB, float beta,
	  float *C, long long sC, int batch, const char *what)
{
	if (M == 0 || N == 0 || batch == 0)
		return 0;
	cudaDataType_t ty = b->prec == TR_BF16 ? CUDA_R_16BF : CUDA_R_32F;
	cublasComputeType_t ct = b->prec == TR_TF32 ?
		CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	int lda = ta ? M : K, ldb = tb ? K : N;
	if (batch == 1)
		BLAS_CHECK(at_cublas.gemm_ex(b->h, opb, opa, N, M, K, &alpha, B, ty,
					ldb, A, ty, lda, &beta, C, CUDA_R_32F,
					N, ct, CUBLAS_GEMM_DEFAULT),
			   what);
	else
		BLAS_CHECK(at_cublas.gemm_strided_batched_ex(
				   b->h, opb, opa, N, M, K, &alpha, B, ty, ldb,
				   sB, A, ty, lda, sA, &beta, C, CUDA_R_32F, N,
				   sC, batch, ct, CUBLAS_GEMM_DEFAULT),
			   what);
	return 0;
}

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

// The engine's buffers are cudaMalloc'd and their offsets multiples of 4
// elements wherever this is called, so 16-byte loads are safe; anything
// else takes the scalar kernel.
__global__ static void to_bf16_scalar(bf16 *dst, const float *src, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		dst[i] = __float2bfloat16(src[i]);
}

int tr_to_bf16(bf16 *dst, const float *src, size_t n)
{
	if (n == 0)
		return 0;
	if (((uintptr_t)src % 16) == 0 && ((uintptr_t)dst % 8) == 0)
		to_bf16_kernel<<<at_cu_blocks(n / 4 + 1, 256), 256>>>(dst, src, n);
	else
		to_bf16_scalar<<<at_cu_blocks(n, 256), 256>>>(dst, src, n);
	CU_LAUNCHED("bf16 conversion kernel");
	return 0;
}
