// cuda_util.cuh - what the kernel files share: the one-line error that
// at_cuda_error() reports, check macros naming file and line, device
// buffers that free themselves on every path, and warp reductions.
//
// Every exported function returns 0, or -1 after at_cu_fail() or one of
// the macros below has written the reason.
#ifndef ANDREA_CUDA_UTIL_CUH
#define ANDREA_CUDA_UTIL_CUH

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" {
#include "ops/ops_cuda.h"
}

// Sets the error to "CUDA: <what>: <reason> (file:line)" and returns -1.
// Clears a non-sticky CUDA error so that the next call starts clean.
int at_cu_fail(cudaError_t e, const char *what, const char *file, int line);
int at_cu_blas_fail(cublasStatus_t s, const char *what, const char *file,
		    int line);
// Sets the error to "CUDA: <msg>" and returns -1.
int at_cu_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// cudaMalloc of bytes for a named buffer; out of memory reads
// "CUDA: out of memory allocating 4.0 GiB for scores".
int at_cu_alloc(void **p, size_t bytes, const char *what);
// The process's cuBLAS handle, created on first use, math mode set to
// fp32 (CUBLAS_DEFAULT_MATH) or TF32 tensor cores; NULL after a failure.
cublasHandle_t at_cu_blas(int tf32);
// The stream the kernels of kernels/ops and kernels/forward launch on:
// the legacy default stream (0), except while the forward engine records
// or replays a decoding step as a CUDA graph (kernels/forward/engine.cu),
// which the legacy stream cannot be captured into.  The products follow
// it too (common/gemm.cu).
extern cudaStream_t at_cu_stream;
// Blocks for a grid-stride loop over n items with bs threads each.
unsigned at_cu_blocks(size_t n, unsigned bs);
// The current device's multiprocessors (1 if it cannot be asked), for
// grids sized to the machine.
unsigned at_cu_sm_count(void);
// Gives back the context's per-thread stacks (device.cu); the bytes freed.
size_t at_cu_release_stack(void);

#define CU_CHECK(call, what)                                             \
	do {                                                             \
		cudaError_t e_ = (call);                                 \
		if (e_ != cudaSuccess)                                   \
			return at_cu_fail(e_, what, __FILE__, __LINE__); \
	} while (0)

// Returns a call's non-zero result (-1, or a hook's own value) at once.
#define TRY(call)                      \
	do {                           \
		int rc_ = (call);      \
		if (rc_)               \
			return rc_;    \
	} while (0)

// The reason of a failure, kept while the clean-up after it runs (which
// may fail too and overwrite at_cuda_error()), then made the error again
// without doubling its "CUDA: " prefix.
struct at_cu_kept_error {
	char msg[512];
	at_cu_kept_error() { snprintf(msg, sizeof msg, "%s", at_cuda_error()); }
	void restore() const
	{
		at_cu_failf("%s", msg + (strncmp(msg, "CUDA: ", 6) ? 0 : 6));
	}
};

// After a launch: a bad configuration shows here, a fault later.
#define CU_LAUNCHED(what) CU_CHECK(cudaGetLastError(), what)

#define BLAS_CHECK(call, what)                                               \
	do {                                                                 \
		cublasStatus_t s_ = (call);                                  \
		if (s_ != CUBLAS_STATUS_SUCCESS)                             \
			return at_cu_blas_fail(s_, what, __FILE__, __LINE__); \
	} while (0)

// A device buffer of floats (or anything) freed when it goes out of
// scope, so that every early return of a host wrapper cleans up.
template <typename T> struct dev_buf {
	T *p = nullptr;
	dev_buf() = default;
	dev_buf(const dev_buf &) = delete;
	dev_buf &operator=(const dev_buf &) = delete;
	~dev_buf() { if (p) cudaFree(p); }
	int alloc(size_t n, const char *what)
	{
		return at_cu_alloc((void **)&p, n * sizeof(T), what);
	}
};

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// A float stored as float or bf16 (round to nearest even).
__device__ __forceinline__ void store_as(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_as(__nv_bfloat16 *p, float v)
{
	*p = __float2bfloat16(v);
}
// A float read from float or bf16.
__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}
// Whether p is aligned to four of its elements: where float4 loads and
// store4_as may go (elementwise passes are bound by memory).
template <typename T> static inline bool aligned4(const T *p)
{
	return (uintptr_t)p % (4 * sizeof(T)) == 0;
}

// In a function returning bool: LAUNCH(NV) for the smallest NV = 1 .. 10
// that holds a row of C floats, a float4 a lane (C <= 32 * 4 * NV), and
// return true; past C = 1280, nothing (the caller takes its scalar way).
// For the row kernels that keep their row in registers.
#define AT_NV_LAUNCH(C, LAUNCH)                                      \
	switch (((C) / 4 + 31) / 32) {                               \
	case 1: LAUNCH(1); return true;                              \
	case 2: LAUNCH(2); return true;                              \
	case 3: LAUNCH(3); return true;                              \
	case 4: LAUNCH(4); return true;                              \
	case 5: LAUNCH(5); return true;                              \
	case 6: LAUNCH(6); return true;                              \
	case 7: LAUNCH(7); return true;                              \
	case 8: LAUNCH(8); return true;                              \
	case 9: LAUNCH(9); return true;                              \
	case 10: LAUNCH(10); return true;                            \
	default: break;                                              \
	}

// Four floats stored as float or bf16 (round to nearest even, as
// store_as), at p aligned to four elements.
__device__ __forceinline__ void store4_as(float *p, float4 v)
{
	*(float4 *)p = v;
}
__device__ __forceinline__ void store4_as(__nv_bfloat16 *p, float4 v)
{
	((__nv_bfloat162 *)p)[0] = __floats2bfloat162_rn(v.x, v.y);
	((__nv_bfloat162 *)p)[1] = __floats2bfloat162_rn(v.z, v.w);
}

// Four floats read from float or bf16, at p aligned to four elements.
__device__ __forceinline__ float4 load4_as(const float *p)
{
	return *(const float4 *)p;
}
__device__ __forceinline__ float4 load4_as(const __nv_bfloat16 *p)
{
	float2 a = __bfloat1622float2(((const __nv_bfloat162 *)p)[0]);
	float2 b = __bfloat1622float2(((const __nv_bfloat162 *)p)[1]);
	return make_float4(a.x, a.y, b.x, b.y);
}

// embed.cu: x[N,C] = wte[tokens[n]] + wpe[pos[n]] (decoding).
int at_cu_embed_at(float *x, const int32_t *tokens, const int *pos,
		   const float *wte, const float *wpe, int N, int C);
// layernorm.cu: out = (in - mean) * rstd * w + b over N rows of C, out
// float or bf16; each row's mean and rstd also go to mean[] and rstd[]
// unless those are NULL.
template <typename OUT>
int at_cu_layernorm_fwd(OUT *out, float *mean, float *rstd, const float *in,
			const float *w, const float *b, int N, int C, float eps);
// The same over sum = in + add (written), add a bf16 residual branch: the
// residual add folded into the LayerNorm that reads its result.
template <typename OUT>
int at_cu_layernorm_add_fwd(OUT *out, float *mean, float *rstd, float *sum,
			    const float *in, const __nv_bfloat16 *add,
			    const float *w, const float *b, int N, int C,
			    float eps);
// heads.cu: in [B,T,G*H*D] -> out [G,B,H,T,D] (G = 3 splits a fused
// q|k|v projection at once; the trainer's [G,B,T,H*D] is G = 1 over G*B
// rows), and merge [B,H,T,D] -> [B,T,H*D]; out float or bf16.
template <typename OUT>
int at_cu_split_heads(OUT *out, const float *in, int G, int B, int T, int H,
		      int D);
template <typename OUT>
int at_cu_merge_heads(OUT *out, const float *in, int B, int T, int H, int D);

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// The maximum (or sum) over a group of G threads, a warp or the whole
// block (G = blockDim.x); every thread gets it.  sh holds one float per
// warp of a block-wide group and may be shared by successive calls.
template <int G>
__device__ __forceinline__ float group_max(float v, float *sh)
{
	v = warp_max(v);
	if (G == 32)
		return v;
	__syncthreads(); // sh may still be read by an earlier reduction
	if (threadIdx.x % 32 == 0)
		sh[threadIdx.x / 32] = v;
	__syncthreads();
	v = threadIdx.x % 32 < G / 32 ? sh[threadIdx.x % 32] : -INFINITY;
	return warp_max(v);
}

template <int G>
__device__ __forceinline__ float group_sum(float v, float *sh)
{
	v = warp_sum(v);
	if (G == 32)
		return v;
	__syncthreads();
	if (threadIdx.x % 32 == 0)
		sh[threadIdx.x / 32] = v;
	__syncthreads();
	v = threadIdx.x % 32 < G / 32 ? sh[threadIdx.x % 32] : 0.0f;
	return warp_sum(v);
}

// One warp's online softmax statistics of x[0..n) * scale: on return every
// lane holds the row maximum *M and the sum of exp(x * scale - M) *L.  Each
// lane keeps a running maximum and rescales its running sum when the
// maximum moves, so the row is read once.
__device__ __forceinline__ void warp_softmax_stats(const float *x, int n,
						   float scale, float *M,
						   float *L)
{
	int lane = threadIdx.x % 32;
	float m = -INFINITY, l = 0.0f;
	for (int j = lane; j < n; j += 32) {
		float v = x[j] * scale;
		if (v > m) {
			l = l * expf(m - v) + 1.0f;
			m = v;
		} else {
			l += expf(v - m);
		}
	}
	*M = warp_max(m);
	*L = warp_sum(m == -INFINITY ? 0.0f : l * expf(m - *M));
}

#endif
