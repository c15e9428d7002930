// cudnn_lazy.cu - resolving cuDNN at run time (cudnn_lazy.cuh says why).
#ifdef ANDREA_CUDNN
#include "common/cublas_lazy.cuh"
#include "common/cudnn_lazy.cuh"
#include "common/cuda_util.cuh"

at_cudnn_api at_cudnn;

int at_cudnn_load(cudnnHandle_t *handle)
{
	static cudnnHandle_t h;
	static int state; // 0 not tried, 1 loaded, -1 failed
	if (state == 0) {
		const at_lazy_sym syms[] = {
			{(void **)&at_cudnn.version, "cudnnGetVersion"},
			{(void **)&at_cudnn.create, "cudnnCreate"},
			{(void **)&at_cudnn.set_stream, "cudnnSetStream"},
			{(void **)&at_cudnn.error_string, "cudnnGetErrorString"},
			{(void **)&at_cudnn.last_error, "cudnnGetLastErrorString"},
			{(void **)&at_cudnn.make, "cudnnBackendCreateDescriptor"},
			{(void **)&at_cudnn.destroy, "cudnnBackendDestroyDescriptor"},
			{(void **)&at_cudnn.finalize, "cudnnBackendFinalize"},
			{(void **)&at_cudnn.set, "cudnnBackendSetAttribute"},
			{(void **)&at_cudnn.get, "cudnnBackendGetAttribute"},
			{(void **)&at_cudnn.execute, "cudnnBackendExecute"},
		};
		state = -1;
		if (at_lazy_load("libcudnn.so." STR(CUDNN_MAJOR), syms,
				 sizeof syms / sizeof *syms) < 0)
			return -1;
		cudnnStatus_t s = at_cudnn.create(&h);
		if (s != CUDNN_STATUS_SUCCESS)
			return at_cu_failf("cuDNN: cannot make a handle: %s",
					   at_cudnn.error_string(s));
		state = 1;
	}
	if (state < 0)
		return at_cu_failf("cuDNN could not be loaded");
	*handle = h;
	return 0;
}
#endif
