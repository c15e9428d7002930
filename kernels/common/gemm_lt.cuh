// gemm_lt.cuh - cuBLASLt for the products plain cuBLAS cannot do in one
// kernel or cannot time: a result written apart from the matrix it adds
// (D = A.B + X, X not D: the residual stream's products), the GELU
// epilogues of andrea-train's MLP (kernels/train/gelu_mm.cu), and the
// training engine's large products, whose algorithm is chosen by timing.
// One handle and one workspace for the process, made on first use; the
// products run on the default stream one after another, so they share
// the workspace.
#ifndef ANDREA_GEMM_LT_CUH
#define ANDREA_GEMM_LT_CUH

#include <cublasLt.h>

#define AT_LT_WORKSPACE (32u << 20) // cuBLAS's default on Hopper

struct at_cu_lt {
	cublasLtHandle_t h;
	void *ws;
};

// The process's handle and workspace: 0, -1 with the reason in
// at_cuda_error() where the device failed, or 1 where cuBLASLt is not
// there (the caller takes another way).
int at_cu_lt_get(at_cu_lt **out);

// A product's cuBLASLt descriptors and the algorithm chosen for them.
struct at_cu_lt_plan {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algo;
	int tuned; // at_cu_lt_tune has made its choice
};

// Row-major D[M,N] = op(A) op(B) (+ beta X) as cuBLASLt's column-major
// descriptors, into q: the operands swap places (its A is our B, as in
// common/gemm.cu); operands bf16 (prec AT_PREC_BF16) or float, D bf16
// where d_bf16, else float; leading dimensions as at_cu_gemm_ld's.  1 on
// success, else 0 (at_cu_lt_plan_free cleans up what was made).
int at_cu_lt_describe(at_cu_lt_plan *q, int prec, int ta, int tb, int M,
		      int N, int K, int lda, int ldb, int ldd, int d_bf16);
// One run of q's product with q->algo on at_cu_stream (C laid out as D):
// 0, or -1 with the reason, naming `what`.
int at_cu_lt_matmul(const at_cu_lt *lt, const at_cu_lt_plan *q, float alpha,
		    const void *A, const void *B, float beta, const void *X,
		    void *D, const char *what);
// p's algo: the heuristic's first for its descriptors (C laid out as D)
// within the workspace; 1 when there is one, else 0.
int at_cu_lt_pick(const at_cu_lt *lt, at_cu_lt_plan *p);
// Once per plan (p->tuned): times up to AT_LT_TRIES of the heuristic's
// algorithms for p, a product of `flop` operations, on the caller's real
// operands (launch(p, ctx) runs the product once with p->algo), and keeps
// the fastest in p->algo (common/tune.cuh's at_cu_fastest: the product
// must be safe to repeat; a product under AT_TUNE_FLOP, or any with
// ANDREA_TUNE=0, keeps the heuristic's first; while the stream is being
// recorded it does nothing).  Returns 0, or -1 with the reason.
#define AT_LT_TRIES 8
int at_cu_lt_tune(const at_cu_lt *lt, at_cu_lt_plan *p,
		  int (*launch)(const at_cu_lt_plan *p, void *ctx), void *ctx,
		  double flop, const char *what);
// Destroys what p holds and zeroes it.
void at_cu_lt_plan_free(at_cu_lt_plan *p);

// Row-major D[M,N] = alpha op(A) op(B) + beta X, as at_cu_gemm's operands
// (A [K,M] when ta, B [N,K] when tb, leading dimensions lda, ldb; 0:
// packed), operands bf16 (prec AT_PREC_BF16) or float; D float, or bf16
// where d_bf16, with leading dimension ldd, and X laid out as D (X may be
// D; X apart from D: float only).  Plans are made once per shape; with
// tune, a plan's algorithm is timed on its first eager call
// (at_cu_lt_tune) unless D is also read (X = D, beta not 0).  Returns 0,
// -1 with the reason, or 1 where cuBLASLt has no way for it.
int at_cu_lt_gemm(int prec, int ta, int tb, int M, int N, int K,
		  float alpha, const void *A, int lda, const void *B, int ldb,
		  float beta, const void *X, void *D, int ldd, int d_bf16,
		  int tune, const char *what);

#endif
