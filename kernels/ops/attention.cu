// attention.cu - the fused attention, softmax(scale q.k^T, causal) . v
// without the T x T scores (ops.h: at_attention_fused is the CPU's), and
// the host side of andrea-attention.
//
// at_cuda_attention_forward is the one dispatch point: heads that
// attention_tc.cu's tensor-core kernel takes (D % 4 == 0, D <= 128) go
// there, the rest to the fp32 FMA kernel below.
//
// A block takes BR query rows of one head and runs over the keys they see
// BC at a time (flash attention's order): the tile of scores stays in
// registers, each row keeps its running maximum m and sum l, and the
// output accumulates unnormalised, scaled by exp(m_old - m_new) when a
// tile raises the maximum.  256 threads as a 16 x 16 grid: thread (ty,
// tx) holds rows ty + 16i (i < 4) and key columns tx + 16j of a tile, and
// output columns tx + 16c (c < DC) of those rows, so that a row's 16
// threads are 16 lanes of one warp (shuffles reduce the row) and their
// shared-memory reads fall in different banks.  Plain fp32 arithmetic, so
// that the numbers are the staged pipeline's within float32's rounding.
#include <cmath>

#include "common/cuda_util.cuh"
#include "ops/attention_tc.cuh"

#define BR 64 // query rows a block
#define BC 64 // keys a tile
#define ROWS (BR / 16)
#define COLS (BC / 16)

// Shared floats for heads of D values: q, k (rows padded by one), v, p.
static size_t smem_floats(int D)
{
	return (size_t)BR * (D + 1) + (size_t)BC * (D + 1) + (size_t)BC * D +
	       (size_t)BR * (BC + 1);
}

__device__ __forceinline__ float row_max16(float v)
{
	for (int o = 8; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float row_sum16(float v)
{
	for (int o = 8; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// rows [n, D] from src (rows sld floats apart; beyond `valid` as zeros)
// into dst, rows ld floats apart.
__device__ __forceinline__ void load_tile(float *dst, int ld, const float *src,
					  size_t sld, int n, int valid, int D)
{
	for (int i = threadIdx.x; i < n * D; i += blockDim.x) {
		int r = i / D, d = i % D;
		dst[r * ld + d] = r < valid ? src[r * sld + d] : 0.0f;
	}
}

template <int DC>
__global__ static void __launch_bounds__(256)
fused_attention_kernel(float *out, float *lse, const float *q, const float *k,
		       const float *v, int T, int D, float scale, int causal,
		       at_heads h)
{
	extern __shared__ float sm[];
	float *qs = sm, *ks = qs + BR * (D + 1), *vs = ks + BC * (D + 1);
	float *ps = vs + BC * D;
	int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	int tiles = (T + BR - 1) / BR;
	int q0 = (tiles - 1 - blockIdx.x) * BR; // the longest rows first
	size_t head = heads_base(h, blockIdx.y, T, D), sld = h.ld;
	load_tile(qs, D + 1, q + head + q0 * sld, sld, BR, T - q0, D);

	float m[ROWS], l[ROWS], acc[ROWS][DC];
	for (int i = 0; i < ROWS; i++) {
		m[i] = -INFINITY;
		l[i] = 0.0f;
		for (int c = 0; c < DC; c++)
			acc[i][c] = 0.0f;
	}
	int keys = causal ? min(T, q0 + BR) : T;
	for (int k0 = 0; k0 < keys; k0 += BC) {
		__syncthreads(); // the last tile's k, v and p are used
		load_tile(ks, D + 1, k + head + k0 * sld, sld, BC, T - k0, D);
		load_tile(vs, D, v + head + k0 * sld, sld, BC, T - k0, D);
		__syncthreads();
		float s[ROWS][COLS];
		for (int i = 0; i < ROWS; i++)
			for (int j = 0; j < COLS; j++)
				s[i][j] = 0.0f;
		for (int d = 0; d < D; d++) {
			float a[ROWS], b[COLS];
			for (int i = 0; i < ROWS; i++)
				a[i] = qs[(ty + 16 * i) * (D + 1) + d];
			for (int j = 0; j < COLS; j++)
				b[j] = ks[(tx + 16 * j) * (D + 1) + d];
			for (int i = 0; i < ROWS; i++)
				for (int j = 0; j < COLS; j++)
					s[i][j] = fmaf(a[i], b[j], s[i][j]);
		}
		for (int i = 0; i < ROWS; i++) {
			int row = q0 + ty + 16 * i;
			float mx = m[i];
			for (int j = 0; j < COLS; j++) {
				int col = k0 + tx + 16 * j;
				bool seen = col < T && (!causal || col <= row);
				s[i][j] = seen ? s[i][j] * scale : -INFINITY;
				mx = fmaxf(mx, s[i][j]);
			}
			mx = row_max16(mx);
			// a row that has seen nothing yet keeps zeros
			float alpha = mx == -INFINITY ? 1.0f : __expf(m[i] - mx);
			float sum = 0.0f;
			for (int j = 0; j < COLS; j++) {
				float p = s[i][j] == -INFINITY ? 0.0f
							       : __expf(s[i][j] - mx);
				ps[(ty + 16 * i) * (BC + 1) + tx + 16 * j] = p;
				sum += p;
			}
			l[i] = l[i] * alpha + row_sum16(sum);
			m[i] = mx;
			for (int c = 0; c < DC; c++)
				acc[i][c] *= alpha;
		}
		__syncthreads();
		int n = min(BC, T - k0);
		for (int j = 0; j < n; j++) {
			float b[DC];
			for (int c = 0; c < DC; c++) {
				int d = tx + 16 * c;
				b[c] = d < D ? vs[j * D + d] : 0.0f;
			}
			for (int i = 0; i < ROWS; i++) {
				float p = ps[(ty + 16 * i) * (BC + 1) + j];
				for (int c = 0; c < DC; c++)
					acc[i][c] = fmaf(p, b[c], acc[i][c]);
			}
		}
	}
	for (int i = 0; i < ROWS; i++) {
		int row = q0 + ty + 16 * i;
		if (row >= T)
			continue;
		float inv = 1.0f / l[i];
		for (int c = 0; c < DC; c++) {
			int d = tx + 16 * c;
			if (d < D)
				out[head + row * sld + d] = acc[i][c] * inv;
		}
		if (lse && tx == 0)
			lse[(size_t)blockIdx.y * T + row] = m[i] + logf(l[i]);
	}
}

template <int DC>
static int launch(float *out, float *lse, const float *q, const float *k,
		  const float *v, int BH, int T, int D, float scale, int causal,
		  at_heads h)
{
	size_t bytes = smem_floats(D) * sizeof(float);
	CU_CHECK(cudaFuncSetAttribute(fused_attention_kernel<DC>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)bytes),
		 "the fused attention's shared memory");
	dim3 grid((T + BR - 1) / BR, BH);
	fused_attention_kernel<DC><<<grid, 256, bytes, at_cu_stream>>>(
		out, lse, q, k, v, T, D, scale, causal, h);
	CU_LAUNCHED("fused attention kernel");
	return 0;
}

#define MAX_D 256

int at_cu_attention_fits(long long BH, int D)
{
	if (D > MAX_D)
		return at_cu_failf("the fused attention takes heads of at most "
				   "%d values on the GPU, not %d (--device cpu "
				   "takes any)", MAX_D, D);
	if (BH > 65535)
		return at_cu_failf("the fused attention takes at most 65535 "
				   "heads a call on the GPU, not B*H = %lld", BH);
	return 0;
}

extern "C" int at_cuda_attention_forward(float *out, float *lse,
					 const float *q, const float *k,
					 const float *v, int BH, int T, int D,
					 float scale, int causal, int tf32,
					 const at_heads *heads)
{
	if (BH == 0 || T == 0)
		return 0;
	TRY(at_cu_attention_fits(BH, D));
	at_heads h;
	TRY(at_cu_heads_of(&h, heads, BH, D));
	const void *views[] = {out, lse, q, k, v};
	if (at_cu_attention_tc_takes(D, h, views, 5))
		return at_cu_attention_tc_forward(out, lse, q, k, v, BH, T, D,
						  scale, causal, tf32, h);
	int dc = (D + 15) / 16;
#define FWD(n) launch<n>(out, lse, q, k, v, BH, T, D, scale, causal, h)
	return dc <= 1 ? FWD(1) : dc <= 2 ? FWD(2) : dc <= 4 ? FWD(4)
	     : dc <= 8 ? FWD(8) : FWD(16);
#undef FWD
}

extern "C" int at_cuda_attention_host(float *out, float *lse, const float *q,
				      const float *k, const float *v, int BH,
				      int T, int D, float scale, int causal)
{
	size_t n = (size_t)BH * T * D, rows = (size_t)BH * T;
	if (n == 0)
		return 0;
	dev_buf<float> dq, dk, dv, dout, dlse;
	const float *src[3] = {q, k, v};
	float **dst[3] = {&dq.p, &dk.p, &dv.p};
	if (dq.alloc(n, "q") || dk.alloc(n, "k") || dv.alloc(n, "v") ||
	    dout.alloc(n, "out") || (lse && dlse.alloc(rows, "lse")))
		return -1;
	for (int i = 0; i < 3; i++)
		CU_CHECK(cudaMemcpy(*dst[i], src[i], n * sizeof(float),
				    cudaMemcpyHostToDevice),
			 "copying q, k and v to the GPU");
	TRY(at_cuda_attention_forward(dout.p, lse ? dlse.p : NULL, dq.p, dk.p,
				      dv.p, BH, T, D, scale, causal, 0, NULL));
	CU_CHECK(cudaMemcpy(out, dout.p, n * sizeof(float),
			    cudaMemcpyDeviceToHost),
		 "computing the attention");
	if (lse)
		CU_CHECK(cudaMemcpy(lse, dlse.p, rows * sizeof(float),
				    cudaMemcpyDeviceToHost),
			 "computing the attention");
	return 0;
}
