// tf32_mma.cuh - what the tensor-core attention kernels share
// (attention_tc.cu, attention_tc_bwd.cu): tiles of rows in shared memory,
// the fragments of mma.sync's m16n8k8 TF32 product loaded from them, and
// the product itself, once (TF32 operands) or three times (fp32 operands
// each split into a TF32 head and a TF32 tail: a.b ~ ah.bh + ah.bt + at.bh,
// what CUTLASS calls fast fp32 and PyTorch's fp32 memory-efficient
// attention runs).  The split keeps about 21 of fp32's 24 bits of each
// product, against TF32's 11.
//
// A warp's lanes are g = lane / 4 (0..7) and t = lane % 4 (0..3); in the
// PTX ISA's layouts A (16 x 8) holds (g, t) (g + 8, t) (g, t + 4)
// (g + 8, t + 4), B (8 x 8) holds (t, g) (t + 4, g), and the accumulator
// (16 x 8) holds (g, 2t) (g, 2t + 1) (g + 8, 2t) (g + 8, 2t + 1).
#ifndef ANDREA_TF32_MMA_CUH
#define ANDREA_TF32_MMA_CUH

#include <stdint.h>

// Tiles are rows of W floats (W a multiple of 32): element (r, c) sits at
// r W + (c ^ swz(r)).  Both ways the fragments read a tile, (row g,
// column t) and (row t, column g), then fall in 32 different banks, and
// four floats from a column that is a multiple of 4 stay side by side.
__device__ __forceinline__ int tc_swz(int r)
{
	return ((r & 3) << 3) | (r & 4);
}

template <int W>
__device__ __forceinline__ int tc_at(int r, int c)
{
	return r * W + (c ^ tc_swz(r));
}

// rows [n, W] of a tile from src (rows ld floats apart), rows from
// `valid` and columns from D as zeros; D % 4 == 0 and src 16-byte aligned.
template <int W, int NT>
__device__ __forceinline__ void tc_tile_in(float *dst, const float *src,
					   size_t ld, int n, int valid, int D)
{
	for (int i = threadIdx.x; i < n * (W / 4); i += NT) {
		int r = i / (W / 4), c = i % (W / 4) * 4;
		float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		if (r < valid && c < D)
			x = *(const float4 *)(src + r * ld + c);
		*(float4 *)(dst + tc_at<W>(r, c)) = x;
	}
}

__device__ __forceinline__ uint32_t tc_tf32(float x)
{
	uint32_t r;
	asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
	return r;
}

// N operand registers of one fragment: the TF32 heads, and with SPLIT
// the tails.
template <bool SPLIT, int N>
struct tc_frag {
	uint32_t hi[N], lo[N];
	__device__ __forceinline__ void set(int i, float x)
	{
		hi[i] = tc_tf32(x);
		if constexpr (SPLIT)
			lo[i] = tc_tf32(x - __uint_as_float(hi[i]));
	}
};
template <bool SPLIT>
using tc_a = tc_frag<SPLIT, 4>;
template <bool SPLIT>
using tc_b = tc_frag<SPLIT, 2>;

__device__ __forceinline__ void tc_mma1(float (&d)[4], const uint32_t (&a)[4],
					const uint32_t (&b)[2])
{
	asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
	    "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
	      "r"(b[1]));
}

// d += a b; the small terms first.
template <bool SPLIT>
__device__ __forceinline__ void tc_mma(float (&d)[4], const tc_a<SPLIT> &a,
				       const tc_b<SPLIT> &b)
{
	if constexpr (SPLIT) {
		tc_mma1(d, a.lo, b.hi);
		tc_mma1(d, a.hi, b.lo);
	}
	tc_mma1(d, a.hi, b.hi);
}

// A = X[r0 .. r0 + 15][c0 .. c0 + 7].
template <int W, bool SPLIT>
__device__ __forceinline__ void tc_load_a(tc_a<SPLIT> &a, const float *X,
					  int r0, int c0, int g, int t)
{
	a.set(0, X[tc_at<W>(r0 + g, c0 + t)]);
	a.set(1, X[tc_at<W>(r0 + g + 8, c0 + t)]);
	a.set(2, X[tc_at<W>(r0 + g, c0 + t + 4)]);
	a.set(3, X[tc_at<W>(r0 + g + 8, c0 + t + 4)]);
}

// A[r][c] = X[c0 + c][r0 + r]: X's rows are A's columns (dS^T read as dS).
template <int W, bool SPLIT>
__device__ __forceinline__ void tc_load_at(tc_a<SPLIT> &a, const float *X,
					   int r0, int c0, int g, int t)
{
	a.set(0, X[tc_at<W>(c0 + t, r0 + g)]);
	a.set(1, X[tc_at<W>(c0 + t, r0 + g + 8)]);
	a.set(2, X[tc_at<W>(c0 + t + 4, r0 + g)]);
	a.set(3, X[tc_at<W>(c0 + t + 4, r0 + g + 8)]);
}

// B[k][n] = X[n0 + n][k0 + k]: X's rows are B's columns (k for q.k^T).
template <int W, bool SPLIT>
__device__ __forceinline__ void tc_load_bt(tc_b<SPLIT> &b, const float *X,
					   int n0, int k0, int g, int t)
{
	b.set(0, X[tc_at<W>(n0 + g, k0 + t)]);
	b.set(1, X[tc_at<W>(n0 + g, k0 + t + 4)]);
}

// B[k][n] = X[k0 + k][n0 + n]: X's rows are B's rows (v for p.v).
template <int W, bool SPLIT>
__device__ __forceinline__ void tc_load_b(tc_b<SPLIT> &b, const float *X,
					  int k0, int n0, int g, int t)
{
	b.set(0, X[tc_at<W>(k0 + t, n0 + g)]);
	b.set(1, X[tc_at<W>(k0 + t + 4, n0 + g)]);
}

// The A fragment of the 16 x 8 values an accumulator holds (the
// probabilities of 8 keys, say, for the product with v): lane (g, t)
// takes columns t and t + 4 of rows g and g + 8 from the lanes that hold
// them, 4 g + t / 2 and 4 g + 2 + t / 2.
template <bool SPLIT>
__device__ __forceinline__ void tc_acc_to_a(tc_a<SPLIT> &a, const float (&c)[4],
					    int lane)
{
	int from = (lane & ~3) + ((lane & 3) >> 1);
	bool odd = lane & 1;
	float x0 = __shfl_sync(0xffffffffu, c[0], from);
	float x1 = __shfl_sync(0xffffffffu, c[1], from);
	float y0 = __shfl_sync(0xffffffffu, c[2], from);
	float y1 = __shfl_sync(0xffffffffu, c[3], from);
	float z0 = __shfl_sync(0xffffffffu, c[0], from + 2);
	float z1 = __shfl_sync(0xffffffffu, c[1], from + 2);
	float w0 = __shfl_sync(0xffffffffu, c[2], from + 2);
	float w1 = __shfl_sync(0xffffffffu, c[3], from + 2);
	a.set(0, odd ? x1 : x0);
	a.set(1, odd ? y1 : y0);
	a.set(2, odd ? z1 : z0);
	a.set(3, odd ? w1 : w0);
}

// sum[d] += A . Y over N * 8 rows of Y, A the 16 x 8N values of a
// warp's accumulators acc.
template <int DP, int N, bool SPLIT>
__device__ __forceinline__ void tc_acc_times_rows(float (&sum)[DP / 8][4],
						  const float (&acc)[N][4],
						  const float *Y, int lane)
{
	int g = lane >> 2, t = lane & 3;
	for (int n = 0; n < N; n++) {
		tc_a<SPLIT> a;
		tc_acc_to_a<SPLIT>(a, acc[n], lane);
		for (int d = 0; d < DP / 8; d++) {
			tc_b<SPLIT> b;
			tc_load_b<DP>(b, Y, n * 8, d * 8, g, t);
			tc_mma<SPLIT>(sum[d], a, b);
		}
	}
}

// The fp32 (split) product of tc_acc_times_rows formed in an accumulator
// of its own and added in IEEE arithmetic: sum = sum * alpha[row] + A . Y
// (alpha {1, 1}: sum += A . Y).  mma.sync's accumulation, chained over
// thousands of tiles, is not IEEE: chained, a row of 8192 was 6e-5 to
// 1e-4 off float64 (the fused attention's P.V forward and its dk, dv
// backward, where the diffuse weights cancel).
template <int DP, int N>
__device__ __forceinline__ void tc_add_times_rows(float (&sum)[DP / 8][4],
						  const float (&acc)[N][4],
						  const float *Y, int lane,
						  const float (&alpha)[2])
{
	float tile[DP / 8][4];
	for (int d = 0; d < DP / 8; d++)
		tile[d][0] = tile[d][1] = tile[d][2] = tile[d][3] = 0.0f;
	tc_acc_times_rows<DP, N, true>(tile, acc, Y, lane);
	for (int d = 0; d < DP / 8; d++)
		for (int e = 0; e < 4; e++)
			sum[d][e] = fmaf(sum[d][e], alpha[e >> 1], tile[d][e]);
}

#endif
