// kv_cache.cu - the KV cache of the forward engine's decoding: the store
// of new positions' k and v, and the attention of one decoding step over
// the cached keys (forward_kernels.cuh).
#include "forward/forward_kernels.cuh"

// cache[b,h,p,d] = in[b,t,h*D+d] with p = pos[b] + t, or start + t.
template <typename OUT>
__global__ static void kv_store_kernel(OUT *cache, const float *in, int B,
				       int T, int H, int D, int cap, int start,
				       const int *pos)
{
	size_t n = (size_t)B * T * H * D;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int d = (int)(i % D), h = (int)(i / D % H);
		int t = (int)(i / ((size_t)D * H) % T), b = (int)(i / ((size_t)D * H * T));
		int p = (pos ? pos[b] : start) + t;
		store_as(cache + (((size_t)b * H + h) * cap + p) * D + d, in[i]);
	}
}

template <typename OUT>
int at_cu_kv_store(OUT *cache, const float *in, int B, int T, int H, int D,
		   const at_cu_kv *kv)
{
	size_t n = (size_t)B * T * H * D;
	if (n == 0)
		return 0;
	kv_store_kernel<OUT><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(
		cache, in, B, T, H, D, kv->cap, kv->start, kv->pos);
	CU_LAUNCHED("KV cache kernel");
	return 0;
}

// One decoding step's attention, a block per (row, head): the query q
// [B,H*D] (float) against the row's n = pos[b] + 1 cached keys, their
// softmax in s (scratch, [B*H,cap]), and out[b, h*D + d] = sum_j p_j
// v[j,d].  Warps take keys in turn, lanes the d of a key, for the scores
// and for the sum (each warp's part in shared memory, then added), so
// that every lane has independent loads in flight rather than one long
// chain of them.
template <typename KV>
__global__ static void decode_attn_kernel(KV *out, const float *q,
					  const KV *k, const KV *v, float *s,
					  const int *pos, int H, int D, int cap,
					  float scale)
{
	extern __shared__ float part[]; // [warps, D]
	__shared__ float red[32];
	int bh = blockIdx.x, b = bh / H, h = bh % H;
	int n = pos[b] + 1, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	int warps = blockDim.x / 32;
	const float *qr = q + (size_t)b * H * D + (size_t)h * D;
	const KV *kr = k + (size_t)bh * cap * D, *vr = v + (size_t)bh * cap * D;
	float *sr = s + (size_t)bh * cap;
	float m = -INFINITY;
	for (int j = warp; j < n; j += warps) {
		float dot = 0.0f;
		for (int d = lane; d < D; d += 32)
			dot += qr[d] * as_float(kr[(size_t)j * D + d]);
		dot = warp_sum(dot) * scale;
		if (lane == 0)
			sr[j] = dot;
		m = fmaxf(m, dot);
	}
	if (lane == 0)
		red[warp] = m;
	__syncthreads();
	m = -INFINITY;
	for (int w = 0; w < warps; w++)
		m = fmaxf(m, red[w]);
	__syncthreads();
	float l = 0.0f;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float e = expf(sr[j] - m);
		sr[j] = e;
		l += e;
	}
	l = warp_sum(l);
	if (lane == 0)
		red[warp] = l;
	__syncthreads();
	l = 0.0f;
	for (int w = 0; w < warps; w++)
		l += red[w];
	for (int d = lane; d < D; d += 32) {
		float acc = 0.0f;
#pragma unroll 4
		for (int j = warp; j < n; j += warps)
			acc += sr[j] * as_float(vr[(size_t)j * D + d]);
		part[warp * D + d] = acc;
	}
	__syncthreads();
	float inv = 1.0f / l;
	for (int d = threadIdx.x; d < D; d += blockDim.x) {
		float acc = 0.0f;
		for (int w = 0; w < warps; w++)
			acc += part[w * D + d];
		store_as(out + (size_t)b * H * D + (size_t)h * D + d, acc * inv);
	}
}

#define DECODE_SHARED (48u << 10) // bytes of shared memory a block may take

template <typename KV>
int at_cu_decode_attn(void *out, const float *q, const void *k,
		      const void *v, float *s, const int *pos, int B, int H,
		      int D, int cap, float scale)
{
	int warps = 8;
	while (warps > 1 && (size_t)warps * D * 4 > DECODE_SHARED)
		warps /= 2;
	size_t shared = (size_t)warps * D * 4;
	if (shared > DECODE_SHARED)
		return at_cu_failf("decoding: a head of %d values is more than "
				   "the attention kernel holds", D);
	decode_attn_kernel<KV><<<B * H, 32 * warps, shared, at_cu_stream>>>(
		(KV *)out, q, (const KV *)k, (const KV *)v, s, pos, H, D, cap,
		scale);
	CU_LAUNCHED("decoding attention kernel");
	return 0;
}

template int at_cu_kv_store<float>(float *, const float *, int, int, int,
				    int, const at_cu_kv *);
template int at_cu_kv_store<bf16>(bf16 *, const float *, int, int, int, int,
				   const at_cu_kv *);
template int at_cu_decode_attn<float>(void *, const float *, const void *,
				       const void *, float *, const int *,
				       int, int, int, int, float);
template int at_cu_decode_attn<bf16>(void *, const float *, const void *,
				      const void *, float *, const int *, int,
				      int, int, int, float);
