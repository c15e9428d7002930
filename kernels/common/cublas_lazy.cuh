// cublas_lazy.cuh - cuBLAS, loaded when the first handle is made.
//
// Linked in, libcublas and libcublasLt cost every tool some 80 ms and
// 200 MB of memory at start-up (their constructors touch a large data
// segment), on every machine and whether or not it computes on a GPU: in a
// six-stage pipeline on a CPU that is half a second.  So the tools are not
// linked against cuBLAS; the functions they use are resolved from the
// libraries the first time a handle is created: cuBLAS for every product,
// cuBLASLt only where andrea-train fuses the GELU into a product's
// epilogue.
#ifndef ANDREA_CUBLAS_LAZY_CUH
#define ANDREA_CUBLAS_LAZY_CUH

#include <cublas_v2.h>
#include <cublasLt.h>

// The C entry points (C++ also sees inline overloads of the two Ex calls
// taking a cudaDataType compute type, hence the spelled-out types).
typedef cublasStatus_t (*at_gemm_ex_fn)(
	cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
	const void *, const void *, cudaDataType, int, const void *, cudaDataType,
	int, const void *, void *, cudaDataType, int, cublasComputeType_t,
	cublasGemmAlgo_t);
typedef cublasStatus_t (*at_gemm_strided_batched_ex_fn)(
	cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
	const void *, const void *, cudaDataType, int, long long, const void *,
	cudaDataType, int, long long, const void *, void *, cudaDataType, int,
	long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct at_cublas_api {
	decltype(&cublasCreate_v2) create;
	decltype(&cublasDestroy_v2) destroy;
	decltype(&cublasSetMathMode) set_math_mode;
	decltype(&cublasSetStream_v2) set_stream;
	decltype(&cublasSetWorkspace_v2) set_workspace;
	decltype(&cublasGetStatusString) status_string;
	decltype(&cublasSgemm_v2) sgemm;
	decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
	at_gemm_ex_fn gemm_ex;
	at_gemm_strided_batched_ex_fn gemm_strided_batched_ex;
};

struct at_cublaslt_api {
	decltype(&cublasLtCreate) create;
	decltype(&cublasLtDestroy) destroy;
	decltype(&cublasLtMatmulDescCreate) desc_create;
	decltype(&cublasLtMatmulDescDestroy) desc_destroy;
	decltype(&cublasLtMatmulDescSetAttribute) desc_set;
	decltype(&cublasLtMatrixLayoutCreate) layout_create;
	decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
	decltype(&cublasLtMatmulPreferenceCreate) pref_create;
	decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
	decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
	decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
	decltype(&cublasLtMatmul) matmul;
};

extern at_cublas_api at_cublas;
extern at_cublaslt_api at_cublaslt;

// A macro's value as a string ("libcublas.so." STR(CUBLAS_VER_MAJOR)).
#define STR2(x) #x
#define STR(x) STR2(x)

// One function a library is asked for: its name and where its address goes.
struct at_lazy_sym {
	void **slot;
	const char *name;
};

// Opens lib and fills every slot of syms[n]; 0, or -1 with the reason
// (cuDNN is resolved the same way: cudnn_lazy.cu).
int at_lazy_load(const char *lib, const at_lazy_sym *syms, int n);

// Load libcublas (libcublasLt) once.  Return 0, or -1 with a one-line
// reason for at_cuda_error().
int at_cublas_load(void);
int at_cublaslt_load(void);

#endif
