// attention_tc_bwd.cu - the fused attention's backward pass on tensor
// cores (mma.sync TF32, tf32_mma.cuh), for the heads attention_tc.cu's
// forward takes; attention_bwd.cu computes delta and dispatches.
//
// Flash attention 2's order, one kernel: a block of 4 warps takes 64 keys
// of a head and runs over the query tiles that see them, a warp owning 16
// keys.  It computes the transposed tiles S^T = k q^T and dP^T = v dout^T,
// so that P^T = exp(scale S^T - lse) and dS^T = P^T (dP^T - delta) sit in
// its accumulators as the A operands of its sums dv += P^T dout and dk +=
// dS^T q.  The tile's dq = scale dS k needs all 64 keys: dS^T goes
// through shared memory, each warp takes 16 queries (and, for BQ = 32, half
// the columns) and adds its share to dq with float2 atomics.  So dq's sums
// run in no fixed order: runs may differ in the last bits (the FMA path,
// attention_bwd.cu, sums in a fixed order).
#include <cmath>

#include "common/cuda_util.cuh"
#include "ops/attention_tc.cuh"
#include "ops/tf32_mma.cuh"

// acc[n] += X[r0 .. r0 + 15][..] . Y[8n .. 8n + 7][..]^T over DP columns:
// the 16 x 8N products of a warp's rows of X with N * 8 rows of Y.
template <int DP, int N, bool SPLIT>
__device__ __forceinline__ void rows_times_rows(float (&acc)[N][4],
						const float *X, int r0,
						const float *Y, int g, int t)
{
	for (int n = 0; n < N; n++)
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
	for (int kk = 0; kk < DP; kk += 8) {
		tc_a<SPLIT> a;
		tc_load_a<DP>(a, X, r0, kk, g, t);
		for (int n = 0; n < N; n++) {
			tc_b<SPLIT> b;
			tc_load_bt<DP>(b, Y, n * 8, kk, g, t);
			tc_mma<SPLIT>(acc[n], a, b);
		}
	}
}

// Rows [r][d] (ld floats apart) of a warp's 16 rows from its sums times
// scale, rows from T and columns from D left alone.
template <int DP>
__device__ __forceinline__ void rows_out(float *dst, size_t ld,
					 const float (&sum)[DP / 8][4],
					 int row0, int T, int D, float scale,
					 int t)
{
	for (int i = 0; i < 2; i++) {
		int row = row0 + 8 * i;
		if (row >= T)
			continue;
		for (int d = 0; d < DP / 8; d++) {
			int col = d * 8 + 2 * t;
			if (col < D)
				*(float2 *)(dst + row * ld + col) =
					make_float2(sum[d][2 * i] * scale,
						    sum[d][2 * i + 1] * scale);
		}
	}
}

// dk, dv of the keys k0 .. k0 + 63 of head blockIdx.y over query tiles of
// BQ rows, and each tile's share of dq added to dq (zeroed before).
template <int DP, int BQ, bool SPLIT>
__global__ static void __launch_bounds__(128)
tc_bwd_kernel(float *dq, float *dk, float *dv, const float *q, const float *k,
	      const float *v, const float *dout, const float *lse,
	      const float *delta, int T, int D, float scale, int causal,
	      at_heads h)
{
	extern __shared__ float4 tc_sm[];
	float *ks = (float *)tc_sm, *vs = ks + 64 * DP, *qs = vs + 64 * DP;
	float *dos = qs + BQ * DP, *dss = dos + BQ * DP, *lse2 = dss + 64 * BQ;
	float *dl = lse2 + BQ;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2,
	    t = lane & 3;
	int r0 = warp * 16, k0 = blockIdx.x * 64;
	// the warp's share of a tile's dq: 16 queries from wq, DQ columns from wd
	constexpr int QW = BQ / 16, DQ = DP * QW / 4;
	int wq = warp % QW * 16, wd = warp / QW * DQ;
	size_t head = heads_base(h, blockIdx.y, T, D), ld = h.ld;
	size_t hrow = (size_t)blockIdx.y * T;
	tc_tile_in<DP, 128>(ks, k + head + k0 * ld, ld, 64, T - k0, D);
	tc_tile_in<DP, 128>(vs, v + head + k0 * ld, ld, 64, T - k0, D);
	const float sl2 = scale * TC_LOG2E;
	int key[2] = {k0 + r0 + g, k0 + r0 + g + 8};
	float sk[DP / 8][4], sv[DP / 8][4];
	for (int d = 0; d < DP / 8; d++)
		for (int e = 0; e < 4; e++)
			sk[d][e] = sv[d][e] = 0.0f;
	// causal: the queries before k0 see none of these keys
	for (int q0 = causal ? k0 : 0; q0 < T; q0 += BQ) {
		__syncthreads(); // the last tile's q, dout and dS are used
		tc_tile_in<DP, 128>(qs, q + head + q0 * ld, ld, BQ, T - q0, D);
		tc_tile_in<DP, 128>(dos, dout + head + q0 * ld, ld, BQ, T - q0,
				    D);
		for (int i = threadIdx.x; i < BQ; i += 128) {
			bool in = q0 + i < T;
			lse2[i] = in ? lse[hrow + q0 + i] * TC_LOG2E : 0.0f;
			dl[i] = in ? delta[hrow + q0 + i] : 0.0f;
		}
		__syncthreads();
		float p[BQ / 8][4], ds[BQ / 8][4];
		rows_times_rows<DP, BQ / 8, SPLIT>(p, ks, r0, qs, g, t);
		rows_times_rows<DP, BQ / 8, SPLIT>(ds, vs, r0, dos, g, t);
		for (int n = 0; n < BQ / 8; n++)
			for (int e = 0; e < 4; e++) {
				int j = n * 8 + 2 * t + (e & 1), query = q0 + j;
				int kr = key[e >> 1];
				bool seen = query < T && kr < T &&
					    (!causal || kr <= query);
				float pr = seen ? exp2f(p[n][e] * sl2 - lse2[j])
						: 0.0f;
				p[n][e] = pr;
				ds[n][e] = pr * (ds[n][e] - dl[j]);
				dss[tc_at<BQ>(r0 + g + 8 * (e >> 1), j)] =
					ds[n][e] * scale;
			}
		if constexpr (SPLIT) {
			// fp32: each tile's sums added to sv and sk in IEEE
			// arithmetic (up to 9.7e-5 off float64 at T = 8192
			// chained in mma.sync's accumulator)
			const float one[2] = {1.0f, 1.0f};
			tc_add_times_rows<DP, BQ / 8>(sv, p, dos, lane, one);
			tc_add_times_rows<DP, BQ / 8>(sk, ds, qs, lane, one);
		} else {
			tc_acc_times_rows<DP, BQ / 8, SPLIT>(sv, p, dos, lane);
			tc_acc_times_rows<DP, BQ / 8, SPLIT>(sk, ds, qs, lane);
		}
		__syncthreads(); // every warp's keys of dS^T are in
		float sq[DQ / 8][4];
		for (int n = 0; n < DQ / 8; n++)
			sq[n][0] = sq[n][1] = sq[n][2] = sq[n][3] = 0.0f;
		for (int kk = 0; kk < 64; kk += 8) {
			tc_a<SPLIT> a;
			tc_load_at<BQ>(a, dss, wq, kk, g, t);
			for (int n = 0; n < DQ / 8; n++) {
				tc_b<SPLIT> b;
				tc_load_b<DP>(b, ks, kk, wd + n * 8, g, t);
				tc_mma<SPLIT>(sq[n], a, b);
			}
		}
		for (int i = 0; i < 2; i++) {
			int row = q0 + wq + g + 8 * i;
			if (row >= T)
				continue;
			float *dst = dq + head + row * ld + wd + 2 * t;
			for (int n = 0; n < DQ / 8; n++)
				if (wd + n * 8 + 2 * t < D)
					atomicAdd((float2 *)(dst + n * 8),
						  make_float2(sq[n][2 * i],
							      sq[n][2 * i + 1]));
		}
	}
	rows_out<DP>(dk + head, ld, sk, key[0], T, D, scale, t);
	rows_out<DP>(dv + head, ld, sv, key[0], T, D, 1.0f, t);
}

template <int DP, bool SPLIT>
static int tc_backward(float *dq, float *dk, float *dv, const float *q,
		       const float *k, const float *v, const float *dout,
		       const float *lse, const float *delta, int BH, int T,
		       int D, float scale, int causal, at_heads h)
{
	constexpr int BQ = DP >= 128 ? 32 : 64; // registers: 4 sums of 16 x DP
	int bytes = ((64 + BQ) * 2 * DP + 64 * BQ + 2 * BQ) * (int)sizeof(float);
	CU_CHECK(cudaFuncSetAttribute(tc_bwd_kernel<DP, BQ, SPLIT>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize,
				      bytes),
		 "the attention backward's shared memory");
	// each head's rows: D floats every ld, B * T of them a head column
	CU_CHECK(cudaMemset2DAsync(dq, h.ld * sizeof(float), 0,
				   (size_t)h.H * D * sizeof(float),
				   (size_t)BH / h.H * T, at_cu_stream),
		 "clearing dq");
	dim3 grid((T + 63) / 64, BH);
	tc_bwd_kernel<DP, BQ, SPLIT><<<grid, 128, bytes, at_cu_stream>>>(
		dq, dk, dv, q, k, v, dout, lse, delta, T, D, scale, causal, h);
	CU_LAUNCHED("attention backward kernel (tensor cores)");
	return 0;
}

int at_cu_attention_tc_backward(float *dq, float *dk, float *dv,
				const float *q, const float *k, const float *v,
				const float *dout, const float *lse,
				const float *delta, int BH, int T, int D,
				float scale, int causal, int tf32, at_heads h)
{
#define BWD(dp) (tf32 ? tc_backward<dp, false>(dq, dk, dv, q, k, v, dout, \
					       lse, delta, BH, T, D, scale, \
					       causal, h)                   \
		      : tc_backward<dp, true>(dq, dk, dv, q, k, v, dout, lse, \
					      delta, BH, T, D, scale, causal, h))
	return D <= 32 ? BWD(32) : D <= 64 ? BWD(64) : BWD(128);
#undef BWD
}
