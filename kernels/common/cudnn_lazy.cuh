// cudnn_lazy.cuh - cuDNN's backend (graph) API, loaded the first time the
// fused attention asks for it, for the reason cuBLAS is (cublas_lazy.cuh):
// no tool is linked against it, and a machine without it loses only the
// bf16 fused attention (the callers fall back).  Built only where cuDNN's
// headers are (the Makefile's CUDNN=1, which defines ANDREA_CUDNN).
#ifndef ANDREA_CUDNN_LAZY_CUH
#define ANDREA_CUDNN_LAZY_CUH
#ifdef ANDREA_CUDNN

#include <cudnn_graph.h>

struct at_cudnn_api {
	decltype(&cudnnGetVersion) version;
	decltype(&cudnnCreate) create;
	decltype(&cudnnSetStream) set_stream;
	decltype(&cudnnGetErrorString) error_string;
	decltype(&cudnnGetLastErrorString) last_error;
	decltype(&cudnnBackendCreateDescriptor) make;
	decltype(&cudnnBackendDestroyDescriptor) destroy;
	decltype(&cudnnBackendFinalize) finalize;
	decltype(&cudnnBackendSetAttribute) set;
	decltype(&cudnnBackendGetAttribute) get;
	decltype(&cudnnBackendExecute) execute;
};

extern at_cudnn_api at_cudnn;

// Load libcudnn (found on the loader's usual path: LD_LIBRARY_PATH, the
// tools' run path) once and make the process's handle.  0, or -1 with a
// one-line reason for at_cuda_error().
int at_cudnn_load(cudnnHandle_t *handle);

#endif
#endif
