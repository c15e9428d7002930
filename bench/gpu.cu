// gpu.cu - the kernel work of each stage on the GPU at ANDREA-120M size
// (B=8, H=12, T=1024, D=64, C=768), fp32, TF32 off, inputs already on the
// device.  Prints "STAGE MS" lines (median of REPS runs after warm-up,
// timed with CUDA events), then the device-to-device copy bandwidth and
// the bytes mask and softmax must move; bench/gpu.py sets them beside
// PyTorch.  Links the kernels, not the command-line tools.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "ops_cuda.h"
}

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

template <typename F> static float median_ms(F fn)
{
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = 0; i < 5; i++)
		fn();
	CK(cudaDeviceSynchronize());
	std::vector<float> ms(REPS);
	for (int i = 0; i < REPS; i++) {
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
	printf("embed %.4f\n", median_ms([&] {
		       at_cuda_embed_forward(x, dtok, wte, wpe, B, T, C);
	       }));
	printf("qkv %.4f\n", median_ms([&] {
		       at_cuda_layernorm_forward(h, x, lnw, lnb, (int)BT, C, 1e-5f);
		       at_cuda_matmul(proj, h, wqkv, (int)BT, C, 3 * C, 0, 1.0f, 0);
		       at_cuda_split_heads(qkv, proj, 3, B, T, H, D);
	       }));
	OP(at_cuda_layernorm_forward(h, x, lnw, lnb, (int)BT, C, 1e-5f));
	OP(at_cuda_matmul(proj, h, wqkv, (int)BT, C, 3 * C, 0, 1.0f, 0));
	OP(at_cuda_split_heads(qkv, proj, 3, B, T, H, D));
	float scale = 1.0f / sqrtf((float)D);
	printf("scores %.4f\n", median_ms([&] {
		       at_cuda_scores_forward(s, q, k, B * H, T, D, scale, 0);
	       }));
	printf("mask %.4f\n", median_ms([&] {
		       at_cuda_mask_causal(s, B * H, T, -INFINITY);
	       }));
	printf("softmax %.4f\n", median_ms([&] {
		       at_cuda_softmax_rows(a, s, (size_t)B * H * T, T);
	       }));
	OP(at_cuda_softmax_rows(a, s, (size_t)B * H * T, T));
	printf("attend %.4f\n", median_ms([&] {
		       at_cuda_attend_forward(o, a, v, B * H, T, D, 0);
	       }));
	printf("proj %.4f\n", median_ms([&] {
		       at_cuda_merge_heads(cat, o, B, T, H, D);
		       at_cuda_matmul(y, cat, wo, (int)BT, C, C, 0, 1.0f, 0);
	       }));

	// the reference bandwidth: a device-to-device copy of 1 GiB, counting
	// the bytes read and the bytes written
	size_t big = (size_t)1 << 30;
	void *src, *dst;
	CK(cudaMalloc(&src, big));
	CK(cudaMalloc(&dst, big));
	CK(cudaMemset(src, 0, big));
	float copy_ms = median_ms([&] {
		cudaMemcpy(dst, src, big, cudaMemcpyDeviceToDevice);
	});
	printf("copy_gbs %.1f\n", 2.0 * big / copy_ms / 1e6);
	printf("mask_bytes %.0f\n", (double)B * H * T * (T - 1) / 2 * sizeof(float));
	printf("softmax_bytes %.0f\n", 2.0 * ns * sizeof(float));
	OP(at_cuda_mask_causal(s, B * H, T, -INFINITY)); // a last check for errors
	CK(cudaDeviceSynchronize());
	return 0;
}
