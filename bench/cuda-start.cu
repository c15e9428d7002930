// cuda-start.cu - what starting CUDA costs one process, step by step, as
// a stage pays it on its first GPU call: the driver (cudaGetDeviceCount),
// the context (cudaFree(0)), cuBLAS (opened and its handle made, as
// at_cu_blas does), and the upload of andrea-qkv's weights at C = 768
// (7 MiB from pageable memory, as the stages copy).  Prints "STEP MS"
// lines, then "total MS"; bench/auto.py runs it several times (a fresh
// process each) and takes the medians.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/cuda_util.cuh"

static double now_ms()
{
	using namespace std::chrono;
	return duration<double, std::milli>(steady_clock::now().time_since_epoch())
		.count();
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "cuda-start: %s: %s\n", what, why);
	exit(1);
}

int main()
{
	double t0 = now_ms(), t = t0;
	auto step = [&](const char *name) {
		double n = now_ms();
		printf("%s %.3f\n", name, n - t);
		t = n;
	};
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0)
		die("cudaGetDeviceCount", e != cudaSuccess ? cudaGetErrorString(e)
							    : "no device");
	step("driver");
	if ((e = cudaFree(0)) != cudaSuccess)
		die("cudaFree(0)", cudaGetErrorString(e));
	step("context");
	if (!at_cu_blas(0))
		die("cuBLAS", at_cuda_error());
	step("cublas");
	size_t bytes = (size_t)768 * 3 * 768 * sizeof(float);
	std::vector<float> host(bytes / sizeof(float), 0.02f);
	void *dev;
	if (at_cu_alloc(&dev, bytes, "weights") < 0)
		die("cudaMalloc", at_cuda_error());
	if ((e = cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice)) !=
	    cudaSuccess)
		die("cudaMemcpy", cudaGetErrorString(e));
	step("upload");
	printf("total %.3f\n", now_ms() - t0);
	return 0;
}
