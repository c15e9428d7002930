// harness.cuh - what the kernel harnesses share (the llm.c dev/cuda habit):
// fresh random inputs, device buffers poisoned with NaN and followed by a
// poisoned guard, comparison against the CPU op of lib/ops/ops.h, and timing
// with CUDA events.
//
// A harness prints one line per check and ends with "N passed, N failed";
// it exits 1 when a check failed.  --quick leaves out the full-size
// checks and the timings (for compute-sanitizer); ANDREA_CHECK_SEED
// repeats a run's inputs.
#ifndef ANDREA_HARNESS_CUH
#define ANDREA_HARNESS_CUH

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>
#include <unistd.h>

extern "C" {
#include "ops/device.h"
#include "model/arch.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"
}

#define GUARD 64 // poisoned floats after every device buffer

static int h_passed, h_failed, h_full = 1; // h_full: not --quick
static const char *h_prog;

#define H_CUDA(call)                                                       \
	do {                                                               \
		cudaError_t e_ = (call);                                   \
		if (e_ != cudaSuccess) {                                   \
			fprintf(stderr, "%s: %s:%d: %s: %s\n", h_prog,     \
				__FILE__, __LINE__, #call,                 \
				cudaGetErrorString(e_));                   \
			exit(1);                                           \
		}                                                          \
	} while (0)

// An at_cuda_ op: launch, then wait so that a fault shows at its call.
#define H_OP(call)                                                         \
	do {                                                               \
		if ((call) < 0) {                                          \
			fprintf(stderr, "%s: %s:%d: %s\n", h_prog, __FILE__, \
				__LINE__, at_cuda_error());                \
			exit(1);                                           \
		}                                                          \
		H_CUDA(cudaDeviceSynchronize());                           \
	} while (0)

static uint64_t h_state;

static inline uint32_t h_u32(void)
{
	h_state ^= h_state << 13; // xorshift64
	h_state ^= h_state >> 7;
	h_state ^= h_state << 17;
	return (uint32_t)(h_state >> 32);
}

static inline float h_uniform(void) // (0, 1)
{
	return ((h_u32() >> 8) + 0.5f) / 16777216.0f;
}

static inline float h_normal(void)
{
	float u = h_uniform(), v = h_uniform();
	return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static inline std::vector<float> h_randn(size_t n, float std = 1.0f)
{
	std::vector<float> v(n);
	for (auto &x : v)
		x = std * h_normal();
	return v;
}

// Parses --quick, seeds the generator, checks for a device.
static inline void h_init(int argc, char **argv, const char *prog)
{
	h_prog = prog;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			h_full = 0;
		} else {
			fprintf(stderr, "usage: %s [--quick]\n", prog);
			exit(2);
		}
	}
	const char *s = getenv("ANDREA_CHECK_SEED");
	h_state = s ? strtoull(s, NULL, 10)
		    : (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (!h_state)
		h_state = 1;
	printf("%s: seed %llu (ANDREA_CHECK_SEED repeats it)\n", prog,
	       (unsigned long long)h_state);
	char why[160];
	if (at_cuda_probe(why, sizeof why) == 0) {
		fprintf(stderr, "%s: no usable CUDA device (%s)\n", prog, why);
		exit(1);
	}
}

// n floats on the device, then GUARD more, all NaN.
static inline float *h_dev(size_t n)
{
	float *p;
	H_CUDA(cudaMalloc(&p, (n + GUARD) * sizeof *p));
	H_OP(at_cuda_poison(p, n + GUARD));
	return p;
}

static inline float *h_upload(const std::vector<float> &v)
{
	float *p = h_dev(v.size());
	H_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(float),
			  cudaMemcpyHostToDevice));
	return p;
}

static inline std::vector<float> h_download(const float *p, size_t n)
{
	std::vector<float> v(n);
	H_CUDA(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
	return v;
}

// Whether the GUARD floats after p[n] are all still NaN.
static inline bool h_guard_ok(const float *p, size_t n)
{
	std::vector<float> g = h_download(p + n, GUARD);
	for (float x : g)
		if (!std::isnan(x))
			return false;
	return true;
}

// Records one check: prints "ok   what  detail" or "FAIL what  detail".
static inline void h_result(bool ok, const char *what, const char *detail)
{
	printf("%s %s  %s\n", ok ? "ok  " : "FAIL", what, detail);
	fflush(stdout);
	(ok ? h_passed : h_failed)++;
}

// Compares out with ref: non-finite entries must match exactly (NaN with
// NaN, -inf with -inf), the finite ones to ||out-ref||/||ref|| <= tol; a
// reference of zeros has no scale, and there the root mean square of the
// error must be within tol (the gradients of one position, T = 1, are
// zeros, and a TF32 dq or dk of it holds rounding the size of 1e-3).
// The guard after the device buffer dev[n] must be intact.
static inline void h_compare(const char *what, const float *dev, const float *ref,
		      size_t n, double tol)
{
	std::vector<float> out = h_download(dev, n);
	double num = 0, den = 0;
	size_t bad = 0, first = n, finite = 0;
	for (size_t i = 0; i < n; i++) {
		float o = out[i], r = ref[i];
		if (!std::isfinite(r) || !std::isfinite(o)) {
			bool same = (std::isnan(r) && std::isnan(o)) || o == r;
			if (!same && bad++ == 0)
				first = i;
			continue;
		}
		num += ((double)o - r) * ((double)o - r);
		den += (double)r * r;
		finite++;
	}
	double rel = den > 0 ? sqrt(num / den)
			     : sqrt(num / (finite ? finite : 1));
	bool guard = h_guard_ok(dev, n);
	char detail[256];
	if (bad)
		snprintf(detail, sizeof detail,
			 "%zu non-finite mismatches, first at %zu: %g vs %g", bad,
			 first, out[first], ref[first]);
	else
		snprintf(detail, sizeof detail, "%s %.2e (tol %.0e)%s",
			 den > 0 ? "rel err" : "rms err (zero reference)", rel,
			 tol, guard ? "" : ", GUARD OVERWRITTEN");
	h_result(!bad && rel <= tol && guard, what, detail);
}

// Median milliseconds of fn over reps runs after warm-up, by CUDA events.
template <typename F> static float h_time_ms(F fn, int reps = 50)
{
	cudaEvent_t a, b;
	H_CUDA(cudaEventCreate(&a));
	H_CUDA(cudaEventCreate(&b));
	for (int i = 0; i < 5; i++)
		fn();
	std::vector<float> ms(reps);
	for (int i = 0; i < reps; i++) {
		H_CUDA(cudaEventRecord(a));
		fn();
		H_CUDA(cudaEventRecord(b));
		H_CUDA(cudaEventSynchronize(b));
		H_CUDA(cudaEventElapsedTime(&ms[i], a, b));
	}
	H_CUDA(cudaEventDestroy(a));
	H_CUDA(cudaEventDestroy(b));
	std::sort(ms.begin(), ms.end());
	return ms[reps / 2];
}

// Prints one timing line; bytes 0 leaves out the bandwidth.
static inline void h_report_time(const char *what, float ms, double bytes)
{
	if (bytes > 0)
		printf("time %s: %.4f ms, %.0f GB/s\n", what, ms, bytes / ms / 1e6);
	else
		printf("time %s: %.4f ms\n", what, ms);
	fflush(stdout);
}

static inline int h_finish(void)
{
	printf("%s: %d passed, %d failed\n", h_prog, h_passed, h_failed);
	return h_failed ? 1 : 0;
}

#endif
