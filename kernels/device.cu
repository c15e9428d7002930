// device.cu - CUDA device discovery and the poison kernel used by the
// kernel harnesses.  Everything here is callable from C.
#include <cmath>
#include <cuda_runtime.h>

extern "C" {
#include "device.h"
}

extern "C" int at_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); // clear the sticky "no driver" error
		return 0;
	}
	return n;
}

__global__ static void poison_kernel(float *p, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = nanf("");
}

extern "C" int at_cuda_poison(float *dev_ptr, size_t n)
{
	if (n == 0)
		return 0;
	unsigned blocks = (unsigned)((n + 255) / 256);
	poison_kernel<<<blocks, 256>>>(dev_ptr, n);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
