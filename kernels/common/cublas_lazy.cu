// cublas_lazy.cu - resolving cuBLAS at run time (cublas_lazy.cuh says why).
#include <dlfcn.h>
#include <stdio.h>

#include "common/cublas_lazy.cuh"
#include "common/cuda_util.cuh"

at_cublas_api at_cublas;
at_cublaslt_api at_cublaslt;

int at_lazy_load(const char *lib, const at_lazy_sym *syms, int n)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return at_cu_failf("cannot load %s: %s", lib, dlerror());
	for (int i = 0; i < n; i++)
		if (!(*syms[i].slot = dlsym(h, syms[i].name)))
			return at_cu_failf("%s has no %s", lib, syms[i].name);
	return 0;
}

// The libraries of the major version the kernels were compiled against;
// the tools' run path holds $(CUDA_HOME)/lib64 (Makefile).
int at_cublas_load(void)
{
	static int loaded;
	if (loaded)
		return 0;
	const at_lazy_sym syms[] = {
		{(void **)&at_cublas.create, "cublasCreate_v2"},
		{(void **)&at_cublas.destroy, "cublasDestroy_v2"},
		{(void **)&at_cublas.set_math_mode, "cublasSetMathMode"},
		{(void **)&at_cublas.set_stream, "cublasSetStream_v2"},
		{(void **)&at_cublas.set_workspace, "cublasSetWorkspace_v2"},
		{(void **)&at_cublas.status_string, "cublasGetStatusString"},
		{(void **)&at_cublas.sgemm, "cublasSgemm_v2"},
		{(void **)&at_cublas.sgemm_strided_batched, "cublasSgemmStridedBatched"},
		{(void **)&at_cublas.gemm_ex, "cublasGemmEx"},
		{(void **)&at_cublas.gemm_strided_batched_ex,
		 "cublasGemmStridedBatchedEx"},
	};
	if (at_lazy_load("libcublas.so." STR(CUBLAS_VER_MAJOR), syms,
		 sizeof syms / sizeof *syms) < 0)
		return -1;
	loaded = 1;
	return 0;
}

int at_cublaslt_load(void)
{
	static int loaded;
	if (loaded)
		return 0;
	const at_lazy_sym syms[] = {
		{(void **)&at_cublaslt.create, "cublasLtCreate"},
		{(void **)&at_cublaslt.destroy, "cublasLtDestroy"},
		{(void **)&at_cublaslt.desc_create, "cublasLtMatmulDescCreate"},
		{(void **)&at_cublaslt.desc_destroy, "cublasLtMatmulDescDestroy"},
		{(void **)&at_cublaslt.desc_set, "cublasLtMatmulDescSetAttribute"},
		{(void **)&at_cublaslt.layout_create, "cublasLtMatrixLayoutCreate"},
		{(void **)&at_cublaslt.layout_destroy, "cublasLtMatrixLayoutDestroy"},
		{(void **)&at_cublaslt.pref_create, "cublasLtMatmulPreferenceCreate"},
		{(void **)&at_cublaslt.pref_destroy, "cublasLtMatmulPreferenceDestroy"},
		{(void **)&at_cublaslt.pref_set,
		 "cublasLtMatmulPreferenceSetAttribute"},
		{(void **)&at_cublaslt.heuristic, "cublasLtMatmulAlgoGetHeuristic"},
		{(void **)&at_cublaslt.matmul, "cublasLtMatmul"},
	};
	if (at_lazy_load("libcublasLt.so." STR(CUBLAS_VER_MAJOR), syms,
		 sizeof syms / sizeof *syms) < 0)
		return -1;
	loaded = 1;
	return 0;
}
