// cublas_lazy.cu - resolving cuBLAS at run time (cublas_lazy.cuh says why).
#include <dlfcn.h>
#include <stdio.h>

#include "cublas_lazy.cuh"
#include "cuda_util.cuh"

at_cublas_api at_cublas;

#define STR2(x) #x
#define STR(x) STR2(x)

int at_cublas_load(void)
{
	static int loaded;
	if (loaded)
		return 0;
	// the major version the kernels were compiled against; the tools'
	// run path holds $(CUDA_HOME)/lib64 (Makefile)
	const char *lib = "libcublas.so." STR(CUBLAS_VER_MAJOR);
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return at_cu_failf("cannot load %s: %s", lib, dlerror());
	struct {
		void **slot;
		const char *name;
	} syms[] = {
		{(void **)&at_cublas.create, "cublasCreate_v2"},
		{(void **)&at_cublas.destroy, "cublasDestroy_v2"},
		{(void **)&at_cublas.set_math_mode, "cublasSetMathMode"},
		{(void **)&at_cublas.status_string, "cublasGetStatusString"},
		{(void **)&at_cublas.sgemm, "cublasSgemm_v2"},
		{(void **)&at_cublas.sgemm_strided_batched, "cublasSgemmStridedBatched"},
		{(void **)&at_cublas.gemm_ex, "cublasGemmEx"},
		{(void **)&at_cublas.gemm_strided_batched_ex,
		 "cublasGemmStridedBatchedEx"},
	};
	for (auto &s : syms)
		if (!(*s.slot = dlsym(h, s.name)))
			return at_cu_failf("%s has no %s", lib, s.name);
	loaded = 1;
	return 0;
}
