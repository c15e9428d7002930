// gpu.cu - the kernel work of each stage on the GPU at ANDREA-120M size
// (B=8, H=12, T=1024, D=64, C=768), fp32, TF32 off, inputs already on the
// device.  Prints "STAGE PER_CALL_MS QUEUED_MS" lines (each the median of
// REPS runs after warm-up, timed with CUDA events; the two ways are
// explained above lead_kernel), then the device-to-device copy bandwidth
// both ways and the bytes mask and softmax must move; bench/gpu.py sets
// them beside PyTorch.  Links the kernels, not the command-line tools.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "ops/ops_cuda.h"
}
#include "common/gemm.cuh"

#define B 8
#define H 12
#define T 1024
#define D 64
#define C (H * D)
#define V 257
#define REPS 50

static void die(const char *what, const char *why)
{
	fprintf(stderr, "bench-gpu: %s: %s\n", what, why);
	exit(1);
}

#define CK(call)                                                          \
	do {                                                              \
		cudaError_t e_ = (call);                                  \
		if (e_ != cudaSuccess)                                    \
			die(#call, cudaGetErrorString(e_));               \
	} while (0)
#define OP(call)                                                          \
	do {                                                              \
		if ((call) < 0)                                           \
			die(#call, at_cuda_error());                      \
	} while (0)

static float *dev_randn(size_t n, float std, unsigned seed)
{
	std::vector<float> h(n);
	srand(seed);
	for (auto &x : h) { // sum of uniforms: near-normal, cheap
		float s = 0;
		for (int i = 0; i < 4; i++)
			s += rand() / (float)RAND_MAX - 0.5f;
		x = std * s * 1.7320508f;
	}
	float *d;
	CK(cudaMalloc(&d, n * sizeof *d));
	CK(cudaMemcpy(d, h.data(), n * sizeof *d, cudaMemcpyHostToDevice));
	return d;
}

// Every call is timed two ways.  Per call: the events go round the call
// on an idle GPU, so the time includes the host's launch latency (about
// 4 us, a fifteenth of the mask's time), as a lone eager call pays it.
// Queued: this kernel spins for LEAD_CYCLES SM clocks (about 0.5 ms),
// touching no memory, ahead of the first event, so the call is queued
// before the GPU reaches it and the events hold only its GPU work; the
// bandwidth of mask and softmax is taken from these.  NVIDIA's nvbench
// holds the GPU back with a blocking kernel for the same reason.
// bench/gpu.py times PyTorch both ways too (torch.cuda._sleep).
#define LEAD_CYCLES 1000000LL
__global__ static void lead_kernel(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

template <typename F> static float median_ms(F fn, long long lead)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < 5; i++)
		fn();
	CK(cudaDeviceSynchronize());
	std::vector<float> ms(REPS);
	for (int i = 0; i < REPS; i++) {
		if (lead > 0)
			lead_kernel<<<1, 1>>>(lead);
		CK(cudaEventRecord(a));
		fn();
		CK(cudaEventRecord(b));
		CK(cudaEventSynchronize(b));
		CK(cudaEventElapsedTime(&ms[i], a, b));
	}
	CK(cudaGetLastError());
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	std::sort(ms.begin(), ms.end());
	return ms[REPS / 2];
}

// Prints "name per_call_ms queued_ms".
template <typename F> static void stage(const char *name, F fn)
{
	float per_call = median_ms(fn, 0);
	printf("%s %.4f %.4f\n", name, per_call, median_ms(fn, LEAD_CYCLES));
}

int main(void)
{
	const size_t BT = (size_t)B * T, nx = BT * C, ns = (size_t)B * H * T * T;
	std::vector<int32_t> tok(BT);
	for (size_t i = 0; i < BT; i++)
		tok[i] = (int32_t)((i * 131 + 7) % V);
	int32_t *dtok;
	CK(cudaMalloc(&dtok, BT * sizeof *dtok));
	CK(cudaMemcpy(dtok, tok.data(), BT * sizeof *dtok, cudaMemcpyHostToDevice));
	float *wte = dev_randn((size_t)V * C, 0.02f, 1);
	float *wpe = dev_randn((size_t)T * C, 0.02f, 2);
	float *lnw = dev_randn(C, 1.0f, 3), *lnb = dev_randn(C, 1.0f, 4);
	float *wqkv = dev_randn((size_t)C * 3 * C, 0.02f, 5);
	float *wo = dev_randn((size_t)C * C, 0.02f, 6);
	float *x, *h, *proj, *qkv, *s, *a, *o, *cat, *y;
	CK(cudaMalloc(&x, nx * sizeof *x));
	CK(cudaMalloc(&h, nx * sizeof *h));
	CK(cudaMalloc(&proj, 3 * nx * sizeof *proj));
	CK(cudaMalloc(&qkv, 3 * nx * sizeof *qkv));
	CK(cudaMalloc(&s, ns * sizeof *s));
	CK(cudaMalloc(&a, ns * sizeof *a));
	CK(cudaMalloc(&o, nx * sizeof *o));
	CK(cudaMalloc(&cat, nx * sizeof *cat));
	CK(cudaMalloc(&y, nx * sizeof *y));
	float *q = qkv, *k = qkv + nx, *v = qkv + 2 * nx;

	OP(at_cuda_embed_forward(x, dtok, wte, wpe, B, T, C));
	stage("embed", [&] {
		at_cuda_embed_forward(x, dtok, wte, wpe, B, T, C);
	});
	at_cu_gemm_mode fp32 = {nullptr, AT_PREC_FP32}; // the stages' products, TF32 off
	stage("qkv", [&] {
		at_cuda_layernorm_forward(h, x, lnw, lnb, (int)BT, C, 1e-5f);
		at_cu_gemm(&fp32, 0, 0, (int)BT, 3 * C, C, 1.0f, h, 0, wqkv, 0,
			   0.0f, proj, 0, 1, "qkv");
		at_cuda_split_heads(qkv, proj, 3, B, T, H, D);
	});
	OP(at_cuda_layernorm_forward(h, x, lnw, lnb, (int)BT, C, 1e-5f));
	OP(at_cu_gemm(&fp32, 0, 0, (int)BT, 3 * C, C, 1.0f, h, 0, wqkv, 0, 0.0f,
		      proj, 0, 1, "qkv"));
	OP(at_cuda_split_heads(qkv, proj, 3, B, T, H, D));
	float scale = 1.0f / sqrtf((float)D);
	stage("scores", [&] {
		at_cuda_scores_forward(s, q, k, B * H, T, D, scale, 0);
	});
	stage("mask", [&] {
		at_cuda_mask_causal(s, B * H, T, -INFINITY);
	});
	stage("softmax", [&] {
		at_cuda_softmax_rows(a, s, (size_t)B * H * T, T);
	});
	OP(at_cuda_softmax_rows(a, s, (size_t)B * H * T, T));
	stage("attend", [&] {
		at_cuda_attend_forward(o, a, v, B * H, T, D, 0);
	});
	stage("proj", [&] {
		at_cuda_merge_heads(cat, o, B, T, H, D);
		at_cu_gemm(&fp32, 0, 0, (int)BT, C, C, 1.0f, cat, 0, wo, 0, 0.0f,
			   y, 0, 1, "proj");
	});

	// the reference bandwidth: a device-to-device copy of 1 GiB, counting
	// the bytes read and the bytes written
	size_t big = (size_t)1 << 30;
	void *src, *dst;
	CK(cudaMalloc(&src, big));
	CK(cudaMalloc(&dst, big));
	CK(cudaMemset(src, 0, big));
	auto copy = [&] { cudaMemcpy(dst, src, big, cudaMemcpyDeviceToDevice); };
	float copy_ms = median_ms(copy, 0), copy_queued_ms = median_ms(copy, LEAD_CYCLES);
	printf("copy_gbs %.1f %.1f\n", 2.0 * big / copy_ms / 1e6,
	       2.0 * big / copy_queued_ms / 1e6);
	printf("mask_bytes %.0f\n", (double)B * H * T * (T - 1) / 2 * sizeof(float));
	printf("softmax_bytes %.0f\n", 2.0 * ns * sizeof(float));
	OP(at_cuda_mask_causal(s, B * H, T, -INFINITY)); // a last check for errors
	CK(cudaDeviceSynchronize());
	return 0;
}
