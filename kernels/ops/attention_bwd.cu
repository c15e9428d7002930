// attention_bwd.cu - the fused attention's backward pass: from q, k, v,
// out, the rows' log-sum-exp lse that the forward wrote
// (at_cuda_attention_forward) and dout, the gradients dq, dk and dv, with
// no T x T array in memory (flash attention 2's order).
//
// P = exp(scale q.k^T - lse) is recomputed a tile of 32 queries by 32
// keys at a time, with dP = dout.v^T and dS = P (dP - delta), delta_i =
// dout_i . out_i (computed first).  Two kernels, so that no sum needs an
// atomic and every run gives the same bits: one block per 32 keys of a
// head sums dk = scale dS^T q and dv = P^T dout over the query tiles that
// see those keys; one block per 32 queries sums dq = scale dS k over the
// key tiles they see.  256 threads; in the sums thread t owns row t / 8
// of the tile and the columns t % 8 + 8c.  Plain fp32, D <= 256.
#include <cmath>

#include "common/cuda_util.cuh"
#include "ops/attention_tc.cuh"

#define TB 32  // queries, or keys, a tile
#define NT 256 // threads a block

// Shared floats: q, dout, k, v tiles (rows padded by one), P and dS,
// lse and delta of the query tile.
static size_t bwd_smem_floats(int D)
{
	return 4 * (size_t)TB * (D + 1) + 2 * (size_t)TB * (TB + 1) + 2 * TB;
}

// delta[r] = dout[r] . out[r] over D, a warp a row r = bh * T + t (r is
// the whole warp's, so its lanes leave the loop together).
__global__ static void delta_kernel(float *delta, const float *dout,
				    const float *out, size_t rows, int T,
				    int D, at_heads h)
{
	size_t warps = (size_t)gridDim.x * blockDim.x / 32;
	int lane = threadIdx.x % 32;
	for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
	     r < rows; r += warps) {
		size_t at = heads_base(h, (int)(r / T), T, D) + r % T * h.ld;
		float s = 0.0f;
		for (int d = lane; d < D; d += 32)
			s = fmaf(dout[at + d], out[at + d], s);
		for (int o = 16; o > 0; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			delta[r] = s;
	}
}

// rows [TB, D] from src (rows sld floats apart; beyond `valid` as zeros)
// into dst, rows ld floats apart.
__device__ __forceinline__ void tile_in(float *dst, int ld, const float *src,
					size_t sld, int valid, int D)
{
	for (int i = threadIdx.x; i < TB * D; i += NT) {
		int r = i / D, d = i % D;
		dst[r * ld + d] = r < valid ? src[r * sld + d] : 0.0f;
	}
}

struct bwd_tiles {
	float *q, *dout, *k, *v, *p, *ds, *lse, *delta;
	int ld; // D + 1
};

__device__ __forceinline__ bwd_tiles tiles_of(float *sm, int D)
{
	bwd_tiles t;
	t.ld = D + 1;
	t.q = sm;
	t.dout = t.q + TB * t.ld;
	t.k = t.dout + TB * t.ld;
	t.v = t.k + TB * t.ld;
	t.p = t.v + TB * t.ld;
	t.ds = t.p + TB * (TB + 1);
	t.lse = t.ds + TB * (TB + 1);
	t.delta = t.lse + TB;
	return t;
}

// The query tile at q0: q, dout, lse and delta in shared memory.
__device__ __forceinline__ void query_tile_in(const bwd_tiles &t,
					      const float *q, const float *dout,
					      const float *lse,
					      const float *delta, size_t head,
					      size_t sld, size_t hrow, int q0,
					      int T, int D)
{
	tile_in(t.q, t.ld, q + head + q0 * sld, sld, T - q0, D);
	tile_in(t.dout, t.ld, dout + head + q0 * sld, sld, T - q0, D);
	if (threadIdx.x < TB) {
		int row = q0 + threadIdx.x;
		t.lse[threadIdx.x] = row < T ? lse[hrow + row] : 0.0f;
		t.delta[threadIdx.x] = row < T ? delta[hrow + row] : 0.0f;
	}
}

// P and dS of the query tile at q0 against the key tile at k0 (all four
// tiles in shared memory), 4 of the 32 x 32 a thread.
__device__ __forceinline__ void p_and_ds(const bwd_tiles &t, int q0, int k0,
					 int T, int D, float scale, int causal)
{
	for (int u = 0; u < TB * TB / NT; u++) {
		int e = threadIdx.x + NT * u, i = e / TB, j = e % TB;
		int row = q0 + i, col = k0 + j;
		float s = 0.0f, dp = 0.0f;
		for (int d = 0; d < D; d++) {
			s = fmaf(t.q[i * t.ld + d], t.k[j * t.ld + d], s);
			dp = fmaf(t.dout[i * t.ld + d], t.v[j * t.ld + d], dp);
		}
		bool seen = row < T && col < T && (!causal || col <= row);
		float p = seen ? expf(s * scale - t.lse[i]) : 0.0f;
		t.p[i * (TB + 1) + j] = p;
		t.ds[i * (TB + 1) + j] = p * (dp - t.delta[i]);
	}
}

// dk, dv of the keys k0 .. k0 + TB - 1 of head blockIdx.y.
template <int DC>
__global__ static void __launch_bounds__(NT)
dkdv_kernel(float *dk, float *dv, const float *q, const float *k,
	    const float *v, const float *dout, const float *lse,
	    const float *delta, int T, int D, float scale, int causal,
	    at_heads h)
{
	extern __shared__ float sm[];
	bwd_tiles t = tiles_of(sm, D);
	int k0 = blockIdx.x * TB, r = threadIdx.x / 8, d0 = threadIdx.x % 8;
	size_t head = heads_base(h, blockIdx.y, T, D), sld = h.ld;
	size_t hrow = (size_t)blockIdx.y * T;
	tile_in(t.k, t.ld, k + head + k0 * sld, sld, T - k0, D);
	tile_in(t.v, t.ld, v + head + k0 * sld, sld, T - k0, D);
	float ak[DC], av[DC];
	for (int c = 0; c < DC; c++)
		ak[c] = av[c] = 0.0f;
	// causal: the queries before k0 see none of these keys
	for (int q0 = causal ? k0 : 0; q0 < T; q0 += TB) {
		__syncthreads(); // the last tile's q, dout, P and dS are used
		query_tile_in(t, q, dout, lse, delta, head, sld, hrow, q0, T, D);
		__syncthreads();
		p_and_ds(t, q0, k0, T, D, scale, causal);
		__syncthreads();
		for (int i = 0; i < TB; i++) {
			float p = t.p[i * (TB + 1) + r], ds = t.ds[i * (TB + 1) + r];
			for (int c = 0; c < DC; c++) {
				int d = d0 + 8 * c;
				if (d < D) {
					av[c] = fmaf(p, t.dout[i * t.ld + d], av[c]);
					ak[c] = fmaf(ds, t.q[i * t.ld + d], ak[c]);
				}
			}
		}
	}
	if (k0 + r >= T)
		return;
	for (int c = 0; c < DC; c++) {
		int d = d0 + 8 * c;
		if (d < D) {
			dk[head + (k0 + r) * sld + d] = ak[c] * scale;
			dv[head + (k0 + r) * sld + d] = av[c];
		}
	}
}

// dq of the queries q0 .. q0 + TB - 1 of head blockIdx.y.
template <int DC>
__global__ static void __launch_bounds__(NT)
dq_kernel(float *dq, const float *q, const float *k, const float *v,
	  const float *dout, const float *lse, const float *delta, int T, int D,
	  float scale, int causal, at_heads h)
{
	extern __shared__ float sm[];
	bwd_tiles t = tiles_of(sm, D);
	int q0 = blockIdx.x * TB, r = threadIdx.x / 8, d0 = threadIdx.x % 8;
	size_t head = heads_base(h, blockIdx.y, T, D), sld = h.ld;
	size_t hrow = (size_t)blockIdx.y * T;
	query_tile_in(t, q, dout, lse, delta, head, sld, hrow, q0, T, D);
	float aq[DC];
	for (int c = 0; c < DC; c++)
		aq[c] = 0.0f;
	int keys = causal ? min(T, q0 + TB) : T;
	for (int k0 = 0; k0 < keys; k0 += TB) {
		__syncthreads(); // the last tile's k, v and dS are used
		tile_in(t.k, t.ld, k + head + k0 * sld, sld, T - k0, D);
		tile_in(t.v, t.ld, v + head + k0 * sld, sld, T - k0, D);
		__syncthreads();
		p_and_ds(t, q0, k0, T, D, scale, causal);
		__syncthreads();
		for (int j = 0; j < TB; j++) {
			float ds = t.ds[r * (TB + 1) + j];
			for (int c = 0; c < DC; c++) {
				int d = d0 + 8 * c;
				if (d < D)
					aq[c] = fmaf(ds, t.k[j * t.ld + d], aq[c]);
			}
		}
	}
	if (q0 + r >= T)
		return;
	for (int c = 0; c < DC; c++) {
		int d = d0 + 8 * c;
		if (d < D)
			dq[head + (q0 + r) * sld + d] = aq[c] * scale;
	}
}

template <int DC>
static int launch_bwd(float *dq, float *dk, float *dv, const float *q,
		      const float *k, const float *v, const float *dout,
		      const float *lse, const float *delta, int BH, int T,
		      int D, float scale, int causal, at_heads h)
{
	size_t bytes = bwd_smem_floats(D) * sizeof(float);
	CU_CHECK(cudaFuncSetAttribute(dkdv_kernel<DC>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)bytes),
		 "the attention backward's shared memory");
	CU_CHECK(cudaFuncSetAttribute(dq_kernel<DC>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)bytes),
		 "the attention backward's shared memory");
	dim3 grid((T + TB - 1) / TB, BH);
	dkdv_kernel<DC><<<grid, NT, bytes, at_cu_stream>>>(
		dk, dv, q, k, v, dout, lse, delta, T, D, scale, causal, h);
	CU_LAUNCHED("attention backward (dk, dv) kernel");
	dq_kernel<DC><<<grid, NT, bytes, at_cu_stream>>>(
		dq, q, k, v, dout, lse, delta, T, D, scale, causal, h);
	CU_LAUNCHED("attention backward (dq) kernel");
	return 0;
}

extern "C" int at_cuda_attention_backward(float *dq, float *dk, float *dv,
					  const float *q, const float *k,
					  const float *v, const float *out,
					  const float *lse, const float *dout,
					  float *delta, int BH, int T, int D,
					  float scale, int causal, int tf32,
					  const at_heads *heads)
{
	if (BH == 0 || T == 0)
		return 0;
	TRY(at_cu_attention_fits(BH, D));
	at_heads h;
	TRY(at_cu_heads_of(&h, heads, BH, D));
	size_t rows = (size_t)BH * T;
	delta_kernel<<<at_cu_blocks(rows * 32, 256), 256, 0, at_cu_stream>>>(
		delta, dout, out, rows, T, D, h);
	CU_LAUNCHED("attention backward (delta) kernel");
	const void *views[] = {dq, dk, dv, q, k, v, dout};
	if (at_cu_attention_tc_takes(D, h, views, 7))
		return at_cu_attention_tc_backward(dq, dk, dv, q, k, v, dout,
						   lse, delta, BH, T, D, scale,
						   causal, tf32, h);
	int dc = (D + 7) / 8;
#define BWD(n) launch_bwd<n>(dq, dk, dv, q, k, v, dout, lse, delta, BH, T, D, \
			     scale, causal, h)
	return dc <= 1 ? BWD(1) : dc <= 2 ? BWD(2) : dc <= 4 ? BWD(4)
	     : dc <= 8 ? BWD(8) : dc <= 16 ? BWD(16) : BWD(32);
#undef BWD
}
