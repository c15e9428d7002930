// gemm.cu - at_cu_gemm (gemm.cuh): the one matrix-product wrapper, over
// cuBLAS loaded lazily (cublas_lazy.cuh).
#include "common/cuda_util.cuh"
#include "common/cublas_lazy.cuh"
#include "common/gemm.cuh"
#include "common/gemm_lt.cuh"
#include "common/tune.cuh"

// cuBLAS grids once limited batches to 65535; larger ones go in pieces.
#define MAX_BATCH 65535

// C_i = 0 for i < batch, rows of n elements of es bytes ldc apart: one
// memset where the matrices lie end to end.
static int zero(void *C, int M, int N, int ldc, size_t es, long long sC,
		int batch, const char *what)
{
	size_t mn = (size_t)M * ldc;
	char *c = (char *)C;
	if (ldc == N && (batch == 1 || sC == (long long)mn)) {
		CU_CHECK(cudaMemsetAsync(c, 0, (size_t)batch * mn * es,
					 at_cu_stream), what);
		return 0;
	}
	for (int i = 0; i < (sC ? batch : 1); i++)
		CU_CHECK(cudaMemset2DAsync(c + i * sC * es, ldc * es, 0, N * es,
					   M, at_cu_stream), what);
	return 0;
}

// The stage ops' way: cublasSgemm(StridedBatched) on the process's handle,
// the math mode choosing fp32 or TF32.
static int sgemm(const at_cu_gemm_mode *g, cublasOperation_t opa,
		 cublasOperation_t opb, int M, int N, int K, float alpha,
		 const float *A, int lda, long long sA, const float *B,
		 int ldb, long long sB, float beta, float *C, int ldc,
		 long long sC, int batch, const char *what)
{
	if (g->prec == AT_PREC_BF16)
		return at_cu_failf("%s: bf16 products need a handle of their own",
				   what);
	cublasHandle_t h = at_cu_blas(g->prec == AT_PREC_TF32);
	if (!h)
		return -1;
	BLAS_CHECK(at_cublas.set_stream(h, at_cu_stream), what);
	if (batch == 1) {
		BLAS_CHECK(at_cublas.sgemm(h, opb, opa, N, M, K, &alpha, B, ldb,
					   A, lda, &beta, C, ldc),
			   what);
		return 0;
	}
	for (int i = 0; i < batch; i += MAX_BATCH) {
		int n = batch - i < MAX_BATCH ? batch - i : MAX_BATCH;
		BLAS_CHECK(at_cublas.sgemm_strided_batched(
				   h, opb, opa, N, M, K, &alpha, B + i * sB, ldb,
				   sB, A + i * sA, lda, sA, &beta, C + i * sC, ldc,
				   sC, n),
			   what);
	}
	return 0;
}

// The training engine's way: cublasGemmEx(StridedBatched) on g->h, the
// compute type choosing fp32 or TF32, the operand type bf16 or float,
// C float or (c_bf16) bf16.
static int gemm_ex(const at_cu_gemm_mode *g, cublasOperation_t opa,
		   cublasOperation_t opb, int M, int N, int K, float alpha,
		   const void *A, int lda, long long sA, const void *B, int ldb,
		   long long sB, float beta, void *C, int ldc, int c_bf16,
		   long long sC, int batch, const char *what)
{
	cudaDataType_t ty = g->prec == AT_PREC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
	cudaDataType_t cty = c_bf16 ? CUDA_R_16BF : CUDA_R_32F;
	size_t ces = c_bf16 ? 2 : 4;
	cublasComputeType_t ct = g->prec == AT_PREC_TF32 ?
		CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	size_t es = g->prec == AT_PREC_BF16 ? 2 : 4; // bytes per operand
	BLAS_CHECK(at_cublas.set_stream(g->h, at_cu_stream), what);
	if (batch == 1) {
		BLAS_CHECK(at_cublas.gemm_ex(g->h, opb, opa, N, M, K, &alpha, B,
					     ty, ldb, A, ty, lda, &beta, C, cty,
					     ldc, ct,
					     CUBLAS_GEMM_DEFAULT),
			   what);
		return 0;
	}
	for (int i = 0; i < batch; i += MAX_BATCH) {
		int n = batch - i < MAX_BATCH ? batch - i : MAX_BATCH;
		BLAS_CHECK(at_cublas.gemm_strided_batched_ex(
				   g->h, opb, opa, N, M, K, &alpha,
				   (const char *)B + i * sB * es, ty, ldb, sB,
				   (const char *)A + i * sA * es, ty, lda, sA,
				   &beta, (char *)C + i * sC * ces, cty, ldc,
				   sC, n, ct,
				   CUBLAS_GEMM_DEFAULT),
			   what);
	}
	return 0;
}

// C_i *= s, rows of n elements ldc apart: the zero alpha of a product
// formed at alpha 1 (at_cu_gemm_ld).
__global__ static void scale_k(float *C, int M, int N, int ldc, long long sC,
			int batch, float s)
{
	long long mn = (long long)M * N, n = mn * batch;
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	     i < n; i += (long long)gridDim.x * blockDim.x) {
		long long b = i / mn, r = i % mn;
		C[b * sC + r / N * ldc + r % N] *= s;
	}
}

static int scale(float *C, int M, int N, int ldc, long long sC, int batch,
		 float s, const char *what)
{
	long long n = (long long)M * N * batch, blocks = (n + 255) / 256;
	scale_k<<<blocks < 4096 ? (int)blocks : 4096, 256, 0,
		  at_cu_stream>>>(C, M, N, ldc, sC, batch, s);
	CU_CHECK(cudaGetLastError(), what);
	return 0;
}

// C = addend (rows ldc apart), for a product then to take beta.
static int copy_addend(float *C, const float *addend, int M, int N, int ldc,
		       const char *what)
{
	if (addend != C)
		CU_CHECK(cudaMemcpy2DAsync(C, ldc * sizeof *C, addend,
					   ldc * sizeof *C, N * sizeof *C, M,
					   cudaMemcpyDeviceToDevice,
					   at_cu_stream),
			 what);
	return 0;
}

int at_cu_gemm_ld(const at_cu_gemm_mode *g, int ta, int tb, int M, int N,
		  int K, float alpha, const void *A, long long sA,
		  const void *B, long long sB, float beta, void *C,
		  long long sC, int batch, const at_cu_gemm_layout *ld,
		  const char *what)
{
	static const at_cu_gemm_layout packed = {0, 0, 0, 0, NULL};
	if (!ld)
		ld = &packed;
	if (ld->c_bf16 && g->prec != AT_PREC_BF16)
		return at_cu_failf("%s: a bf16 result needs bf16 operands", what);
	if (ld->addend && (ld->c_bf16 || batch != 1))
		return at_cu_failf("%s: an addend takes one product with a "
				   "float result", what);
	int ldc = ld->ldc ? ld->ldc : N;
	if (M == 0 || N == 0 || batch == 0)
		return 0;
	// cuBLAS forms no product for a zero alpha, and 0 x inf or NaN would
	// be lost: it is formed, then scaled, as at_gemm does (NumPy's
	// 0 * (A @ B); andrea-scores --scale 0 of a q holding inf).  A bf16
	// result (the training engine's, whose alpha is never 0) keeps
	// cuBLAS's zeros.
	if (alpha == 0.0f && beta == 0.0f && K > 0 && !ld->c_bf16) {
		TRY(at_cu_gemm_ld(g, ta, tb, M, N, K, 1.0f, A, sA, B, sB, 0.0f,
				  C, sC, batch, ld, what));
		return scale((float *)C, M, N, ldc, sC, batch, alpha, what);
	}
	int lda = ld->lda ? ld->lda : ta ? M : K;
	int ldb = ld->ldb ? ld->ldb : tb ? K : N;
	// cuBLASLt where an addend is apart, or to time a large product's
	// algorithm (see at_cu_gemm_mode's tune); else an addend is copied
	// into C first
	int timed = g->tune && batch == 1 && 2.0 * M * N * K >= AT_TUNE_FLOP;
	if (ld->addend || timed) {
		const void *X = ld->addend ? (const void *)ld->addend : C;
		int rc = g->h && K > 0 ?
			at_cu_lt_gemm(g->prec, ta, tb, M, N, K, alpha, A, lda,
				      B, ldb, beta, X, C, ldc, ld->c_bf16,
				      g->tune, what) : 1;
		if (rc <= 0)
			return rc;
		if (ld->addend)
			TRY(copy_addend((float *)C, ld->addend, M, N, ldc,
					what));
	}
	if (K == 0 && beta == 0.0f)
		return zero(C, M, N, ldc, ld->c_bf16 ? 2 : 4, sC, batch, what);
	cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (!g->h)
		return sgemm(g, opa, opb, M, N, K, alpha, (const float *)A, lda,
			     sA, (const float *)B, ldb, sB, beta, (float *)C,
			     ldc, sC, batch, what);
	return gemm_ex(g, opa, opb, M, N, K, alpha, A, lda, sA, B, ldb, sB,
		       beta, C, ldc, ld->c_bf16, sC, batch, what);
}

int at_cu_gemm(const at_cu_gemm_mode *g, int ta, int tb, int M, int N,
	       int K, float alpha, const void *A, long long sA, const void *B,
	       long long sB, float beta, float *C, long long sC, int batch,
	       const char *what)
{
	return at_cu_gemm_ld(g, ta, tb, M, N, K, alpha, A, sA, B, sB, beta, C,
			     sC, batch, NULL, what);
}
