// device.cu - CUDA device discovery, the error that at_cuda_error()
// reports, device allocation, the cuBLAS handle, and the poison kernel
// that the kernel harnesses fill output buffers with.
#include <cstdlib>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/cuda_util.cuh"
#include "common/cublas_lazy.cuh"

extern "C" {
#include "ops/device.h"
}

static char last_error[512] = "CUDA: no error";

cudaStream_t at_cu_stream = 0;

extern "C" const char *at_cuda_error(void)
{
	return last_error;
}

int at_cu_failf(const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(last_error, sizeof last_error, "CUDA: ");
	va_start(ap, fmt);
	vsnprintf(last_error + n, sizeof last_error - n, fmt, ap);
	va_end(ap);
	return -1;
}

// "kernels/ops/softmax.cu" rather than a build machine's absolute path.
static const char *short_file(const char *file)
{
	const char *k = strstr(file, "kernels/");
	return k ? k : file;
}

int at_cu_fail(cudaError_t e, const char *what, const char *file, int line)
{
	cudaGetLastError(); // clear it unless it is sticky
	if (e == cudaErrorMemoryAllocation)
		return at_cu_failf("out of memory in %s", what);
	return at_cu_failf("%s: %s (%s:%d)", what, cudaGetErrorString(e),
			   short_file(file), line);
}

int at_cu_blas_fail(cublasStatus_t s, const char *what, const char *file,
		    int line)
{
	if (s == CUBLAS_STATUS_ALLOC_FAILED)
		return at_cu_failf("out of memory in cuBLAS for %s", what);
	return at_cu_failf("cuBLAS, %s: %s (%s:%d)", what,
			   at_cublas.status_string ? at_cublas.status_string(s) : "?", short_file(file), line);
}

// "4.0 GiB", "512.0 MiB", "12.0 KiB", "100 bytes"
static void human_bytes(char *buf, size_t len, size_t n)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
	if (n < 1024) {
		snprintf(buf, len, "%zu bytes", n);
		return;
	}
	double v = n / 1024.0;
	int u = 0;
	while (v >= 1024.0 && u < 3) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, unit[u]);
}

int at_cu_alloc(void **p, size_t bytes, const char *what)
{
	*p = nullptr;
	if (bytes == 0)
		bytes = 1; // a valid pointer all the same
	cudaError_t e = cudaMalloc(p, bytes);
	if (e == cudaSuccess)
		return 0;
	*p = nullptr;
	cudaGetLastError();
	char size[32];
	human_bytes(size, sizeof size, bytes);
	if (e == cudaErrorMemoryAllocation)
		return at_cu_failf("out of memory allocating %s for %s", size,
				   what);
	return at_cu_failf("allocating %s for %s: %s", size, what,
			   cudaGetErrorString(e));
}

static cublasHandle_t blas_handle;

cublasHandle_t at_cu_blas(int tf32)
{
	cublasStatus_t s;
	if (!blas_handle) {
		if (at_cublas_load() < 0)
			return nullptr;
		s = at_cublas.create(&blas_handle);
		if (s != CUBLAS_STATUS_SUCCESS) {
			blas_handle = nullptr;
			at_cu_blas_fail(s, "creating the cuBLAS handle", __FILE__,
					__LINE__);
			return nullptr;
		}
	}
	s = at_cublas.set_math_mode(blas_handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
						: CUBLAS_DEFAULT_MATH);
	if (s != CUBLAS_STATUS_SUCCESS) {
		at_cu_blas_fail(s, "setting the math mode", __FILE__, __LINE__);
		return nullptr;
	}
	return blas_handle;
}

unsigned at_cu_blocks(size_t n, unsigned bs)
{
	size_t b = (n + bs - 1) / bs;
	if (b > 65535u * 16)
		b = 65535u * 16; // grid-stride loops do the rest
	return b ? (unsigned)b : 1;
}

unsigned at_cu_sm_count(void)
{
	static int sms; // one device per process
	if (!sms) {
		int dev = 0, n = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount,
					   dev) != cudaSuccess || n < 1)
			n = 1;
		sms = n;
	}
	return (unsigned)sms;
}

// The context holds a stack for every thread the device can run at once
// (cudaLimitStackSize, 1 KiB a thread by default: 264 MiB on a 132-SM
// Hopper), which kernels without calls or spills never touch; the driver
// grows it again at the launch of a kernel that needs more (andrea's
// fp32 fused attention spills up to 184 bytes a thread).  Sets it to
// the least the driver keeps; returns what that gave back by the count
// (the device's threads times the bytes a thread), 0 where nothing was.
size_t at_cu_release_stack(void)
{
	size_t was = 0, now = 0;
	int dev = 0, threads = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&threads,
				   cudaDevAttrMaxThreadsPerMultiProcessor,
				   dev) != cudaSuccess ||
	    cudaDeviceGetLimit(&was, cudaLimitStackSize) != cudaSuccess ||
	    cudaDeviceSetLimit(cudaLimitStackSize, 0) != cudaSuccess ||
	    cudaDeviceGetLimit(&now, cudaLimitStackSize) != cudaSuccess) {
		cudaGetLastError(); // not fatal: the stack stays as it was
		return 0;
	}
	return now < was ? (was - now) * threads * (size_t)at_cu_sm_count() : 0;
}

__global__ static void poison_kernel(float *p, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = nanf("");
}

// Usable devices: the count, but 0 when none can run this build's kernels
// (a GPU older than the -arch the build was made for, say); why says so.
extern "C" int at_cuda_probe(char *why, size_t len)
{
	// Each connection is a hardware queue the context makes at its start;
	// andrea's work runs in one stream at a time, and with one queue a
	// CUDA tool started some 0.2 s sooner on the H200 machine (the
	// pipeline embed | block | logits: 1.26 -> 1.05 s).  A value the
	// user set stays.
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 0);
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		cudaGetLastError(); // clear the "no driver" error
		snprintf(why, len, "%s", cudaGetErrorString(e));
		return 0;
	}
	if (n == 0) {
		snprintf(why, len, "no CUDA device found");
		return 0;
	}
	cudaFuncAttributes fa;
	e = cudaFuncGetAttributes(&fa, poison_kernel);
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(why, len, "%s", cudaGetErrorString(e));
		return 0;
	}
	return n;
}

extern "C" int at_cuda_device_count(void)
{
	char why[128];
	return at_cuda_probe(why, sizeof why);
}

extern "C" int at_cuda_poison(float *dev_ptr, size_t n)
{
	if (n == 0)
		return 0;
	poison_kernel<<<at_cu_blocks(n, 256), 256>>>(dev_ptr, n);
	CU_LAUNCHED("poison kernel");
	return 0;
}

extern "C" const char *at_cuda_device_name(void)
{
	static char name[256];
	cudaDeviceProp p;
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
		cudaGetLastError();
		return "";
	}
	snprintf(name, sizeof name, "%s", p.name);
	return name;
}
