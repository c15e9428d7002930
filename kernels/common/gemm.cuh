// gemm.cuh - the one matrix-product wrapper of the kernels: the stage ops
// (kernels/ops/matmul.cu), the training engine (kernels/train/) and the
// harness (kernels/check/matmul_check.cu) call it with one argument order.
//
// Row-major products on column-major cuBLAS: a row-major X[r,c] is the
// column-major X^T, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T;
// the operands swap places and nothing moves in memory.
//
// Two ways through cuBLAS, each its callers' since before the wrapper was
// shared, so that no result changes:
//  - no handle (the stage ops): cublasSgemm and cublasSgemmStridedBatched
//    on the process's handle (at_cu_blas), whose math mode gives full fp32
//    (AT_PREC_FP32) or TF32 tensor cores (AT_PREC_TF32);
//  - the caller's handle (the training engine's own, default math mode):
//    cublasGemmEx and cublasGemmStridedBatchedEx with the compute type
//    CUBLAS_COMPUTE_32F (fp32, no tensor-core rounding) or
//    CUBLAS_COMPUTE_32F_FAST_TF32, or bf16 operands (AT_PREC_BF16)
//    accumulated in fp32.
// The result is fp32 in every mode, or bf16 where at_cu_gemm_ld asks.
#ifndef ANDREA_GEMM_CUH
#define ANDREA_GEMM_CUH

#include <cublas_v2.h>

#include "ops/precision.h"

// How products are computed: on which handle, in which precision.
struct at_cu_gemm_mode {
	cublasHandle_t h; // NULL: the process's handle and cublasSgemm
	int prec;         // AT_* of ops/precision.h; AT_PREC_BF16 only with a handle
	// With a handle: one product of AT_TUNE_FLOP or more (common/tune.cuh)
	// goes through cuBLASLt, its algorithm timed on its first eager call
	// among the heuristic's first eight (gemm_lt.cuh).  For callers that
	// run the same shapes many times (the training engine's steps).
	int tune;
};

// C_i[M,N] = alpha op(A_i) op(B_i) + beta C_i for i < batch, row-major, A
// stored [K,M] when ta (else [M,K]), B stored [N,K] when tb (else [K,N]);
// sA, sB, sC are the element strides between consecutive matrices (0
// reuses one).  A and B are float, or bf16 in AT_PREC_BF16; C is float.
// batch 1 is one plain product, more a strided batched one (in pieces of
// at most 65535).  K = 0 with beta = 0 zeroes C, which BLAS would leave
// alone.  what names the product in the error.  Launches on at_cu_stream; returns 0, or -1 with the reason in at_cuda_error().
int at_cu_gemm(const at_cu_gemm_mode *g, int ta, int tb, int M, int N,
	       int K, float alpha, const void *A, long long sA, const void *B,
	       long long sB, float beta, float *C, long long sC, int batch,
	       const char *what);

// Where a product reads or writes a strided view, not packed rows: the
// leading dimensions in elements (0: packed, as at_cu_gemm) and whether C
// is bf16 (bf16 products on a handle only).  Padded leading dimensions
// keep every row 16-byte aligned, which cuBLAS's Hopper kernels want.
// addend (float C, one product, rows ldc apart) is the matrix beta
// multiplies in place of C's own contents: C = alpha op(A) op(B) + beta
// addend, C only written.  On a handle that is one cuBLASLt kernel
// (gemm_lt.cuh; the residual stream's products, which otherwise copied
// x_in into x_out first); elsewhere addend is copied into C first.
struct at_cu_gemm_layout {
	int lda, ldb, ldc;
	int c_bf16;
	const float *addend;
};

// The workspace a handle's products take (cuBLAS's default on Hopper),
// given to the handle (cublasSetWorkspace) so that recording its products
// into a CUDA graph allocates nothing (common/graph.cuh).
#define AT_BLAS_WORKSPACE (32u << 20)

// at_cu_gemm with the layout ld (NULL: packed, float C).
int at_cu_gemm_ld(const at_cu_gemm_mode *g, int ta, int tb, int M, int N,
		  int K, float alpha, const void *A, long long sA,
		  const void *B, long long sB, float beta, void *C,
		  long long sC, int batch, const at_cu_gemm_layout *ld,
		  const char *what);

#endif
