// attention_tc.cu - the fused attention's forward pass on tensor cores
// (mma.sync TF32, tf32_mma.cuh), for heads of D <= 128 values with D % 4
// == 0; attention.cu's dispatch sends other heads to its fp32 FMA kernel.
//
// Flash attention 2's order: a block of 4 warps takes 64 query rows of one
// head, 16 a warp, and runs over the keys they see 64 at a time.  A warp's
// scores s = q.k^T stay in its accumulators, each row keeps its running
// maximum and sum (per lane: the row's four lanes add theirs at the end),
// and the output accumulates unnormalised, scaled down whenever a tile
// raises the maximum.  The probabilities go from the accumulators into
// the next product's A fragments by shuffles, never through memory.
// Exponentials are base 2 with log2(e) folded into the scale; lse is
// written in natural log, as the backward pass and the CPU read it.
#include <cmath>

#include "common/cuda_util.cuh"
#include "ops/attention_tc.cuh"
#include "ops/tf32_mma.cuh"

#define TC_ROWS 64 // query rows a block (16 a warp)
#define TC_KEYS 64 // keys a tile

// 4 blocks a multiprocessor (128 registers a thread) where shared memory
// allows: in fp32 the tile's own P.V accumulator then spills a few
// registers, which cost less than a fourth block's absence (0.494
// against 0.505 ms at T = 1024 with 3 blocks and 168 registers).
template <int DP, bool SPLIT>
__global__ static void __launch_bounds__(128, DP > 64 ? 2 : 4)
tc_forward_kernel(float *out, float *lse, const float *q, const float *k,
		  const float *v, int T, int D, float scale, int causal,
		  at_heads h)
{
	extern __shared__ float4 tc_sm[];
	float *qs = (float *)tc_sm, *ks = qs + TC_ROWS * DP,
	      *vs = ks + TC_KEYS * DP;
	int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
	int r0 = threadIdx.x / 32 * 16; // the warp's rows in the tile
	int tiles = (T + TC_ROWS - 1) / TC_ROWS;
	int q0 = (tiles - 1 - blockIdx.x) * TC_ROWS; // the longest rows first
	size_t head = heads_base(h, blockIdx.y, T, D), ld = h.ld;
	tc_tile_in<DP, 128>(qs, q + head + q0 * ld, ld, TC_ROWS, T - q0, D);
	const float sl2 = scale * TC_LOG2E;
	int row[2] = {q0 + r0 + g, q0 + r0 + g + 8};
	float o[DP / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
	for (int d = 0; d < DP / 8; d++)
		o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
	int keys = causal ? min(T, q0 + TC_ROWS) : T;
	for (int k0 = 0; k0 < keys; k0 += TC_KEYS) {
		__syncthreads(); // the last tile's k and v are used
		tc_tile_in<DP, 128>(ks, k + head + k0 * ld, ld, TC_KEYS,
				    T - k0, D);
		tc_tile_in<DP, 128>(vs, v + head + k0 * ld, ld, TC_KEYS,
				    T - k0, D);
		__syncthreads();
		if (causal && k0 > q0 + r0 + 15)
			continue; // the warp's rows see none of these keys
		float s[TC_KEYS / 8][4];
		for (int n = 0; n < TC_KEYS / 8; n++)
			s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
		for (int kk = 0; kk < DP; kk += 8) {
			tc_a<SPLIT> a;
			tc_load_a<DP>(a, qs, r0, kk, g, t);
			for (int n = 0; n < TC_KEYS / 8; n++) {
				tc_b<SPLIT> b;
				tc_load_bt<DP>(b, ks, n * 8, kk, g, t);
				tc_mma<SPLIT>(s[n], a, b);
			}
		}
		// only a tile across the diagonal or the end hides scores
		bool edge = k0 + TC_KEYS > T ||
			    (causal && k0 + TC_KEYS - 1 > q0 + r0);
		float mx[2] = {m[0], m[1]};
		for (int n = 0; n < TC_KEYS / 8; n++)
			for (int e = 0; e < 4; e++) {
				int col = k0 + n * 8 + 2 * t + (e & 1);
				int i = e >> 1;
				s[n][e] *= sl2;
				if (edge && (col >= T || (causal && col > row[i])))
					s[n][e] = -INFINITY;
				mx[i] = fmaxf(mx[i], s[n][e]);
			}
		float alpha[2];
		for (int i = 0; i < 2; i++) {
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
			// a row that has seen nothing yet keeps zeros
			alpha[i] = mx[i] == -INFINITY ? 1.0f : exp2f(m[i] - mx[i]);
			l[i] *= alpha[i];
			m[i] = mx[i];
		}
		if constexpr (!SPLIT)
			for (int d = 0; d < DP / 8; d++)
				for (int e = 0; e < 4; e++)
					o[d][e] *= alpha[e >> 1];
		// a row whose scores so far are all -inf (a block of keys
		// scored -inf, not only the mask's) keeps zeros, as attention.cu
		// and the CPU's online_row
		bool dead[2] = {m[0] == -INFINITY, m[1] == -INFINITY};
		for (int n = 0; n < TC_KEYS / 8; n++)
			for (int e = 0; e < 4; e++) {
				// exp2(-inf) is 0, but -inf - -inf is not -inf
				float p = dead[e >> 1] || (edge && s[n][e] == -INFINITY)
						  ? 0.0f
						  : exp2f(s[n][e] - m[e >> 1]);
				s[n][e] = p;
				l[e >> 1] += p;
			}
		if constexpr (SPLIT) {
			// fp32: the tile's P.V added to o, rescaled in the same
			// fma, in IEEE arithmetic (up to 6.2e-5 off float64 at
			// T = 8192 chained in mma.sync's accumulator)
			tc_add_times_rows<DP, TC_KEYS / 8>(o, s, vs, lane, alpha);
		} else {
			tc_acc_times_rows<DP, TC_KEYS / 8, SPLIT>(o, s, vs, lane);
		}
	}
	for (int i = 0; i < 2; i++) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		if (row[i] >= T)
			continue;
		float inv = 1.0f / l[i];
		float *o_row = out + head + row[i] * ld;
		for (int d = 0; d < DP / 8; d++) {
			int col = d * 8 + 2 * t;
			if (col < D)
				*(float2 *)(o_row + col) = make_float2(
					o[d][2 * i] * inv, o[d][2 * i + 1] * inv);
		}
		if (lse && t == 0)
			lse[(size_t)blockIdx.y * T + row[i]] =
				(m[i] + log2f(l[i])) / TC_LOG2E;
	}
}

template <int DP, bool SPLIT>
static int tc_launch(float *out, float *lse, const float *q, const float *k,
		     const float *v, int BH, int T, int D, float scale,
		     int causal, at_heads h)
{
	int bytes = (TC_ROWS + 2 * TC_KEYS) * DP * (int)sizeof(float);
	CU_CHECK(cudaFuncSetAttribute(tc_forward_kernel<DP, SPLIT>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize,
				      bytes),
		 "the fused attention's shared memory");
	dim3 grid((T + TC_ROWS - 1) / TC_ROWS, BH);
	tc_forward_kernel<DP, SPLIT><<<grid, 128, bytes, at_cu_stream>>>(
		out, lse, q, k, v, T, D, scale, causal, h);
	CU_LAUNCHED("fused attention kernel (tensor cores)");
	return 0;
}

int at_cu_heads_of(at_heads *out, const at_heads *in, int BH, int D)
{
	*out = in ? *in : at_heads{1, D};
	if (out->H < 1 || BH % out->H || out->ld < (long long)out->H * D)
		return at_cu_failf("the fused attention: %d heads side by side "
				   "in rows of %d floats cannot hold %d heads "
				   "of %d values", out->H, out->ld, BH, D);
	return 0;
}

int at_cu_attention_tc_takes(int D, at_heads h, const void *const *ptrs,
			     int n)
{
	if (D % 4 || D > 128 || h.ld % 4)
		return 0;
	for (int i = 0; i < n; i++)
		if (ptrs[i] && (uintptr_t)ptrs[i] % 16)
			return 0;
	return 1;
}

int at_cu_attention_tc_forward(float *out, float *lse, const float *q,
			       const float *k, const float *v, int BH, int T,
			       int D, float scale, int causal, int tf32,
			       at_heads h)
{
#define FWD(dp) (tf32 ? tc_launch<dp, false>(out, lse, q, k, v, BH, T, D,   \
					     scale, causal, h)                \
		      : tc_launch<dp, true>(out, lse, q, k, v, BH, T, D, scale, \
					    causal, h))
	return D <= 32 ? FWD(32) : D <= 64 ? FWD(64) : FWD(128);
#undef FWD
}
