// norm.cu - LayerNorm backward for the training engine (the forward
// pass, shared with the stages, is layernorm.cu).
//
// Backward: one warp per row for dx; the sums over rows for dw and db go
// through LN_PARTS partial sums per column, which a second kernel adds in
// a fixed order, so the result never depends on timing (no atomics).
// Where C allows (C % 4 == 0, C <= 1280, aligned), one kernel makes dx and
// the partial sums in the same pass over the rows (block b's are the sums
// over its warps' rows); elsewhere a kernel apart makes them from blocks
// of 32 columns x 8 row phases.
#include "train/train_kernels.cuh"


// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
// dxhat = dout * w; dx16 (if not NULL) = bf16(dx).  dout is G: float, or
// bf16 where the products write it so.
template <typename G>
__global__ static void ln_bwd_dx_kernel(float *dx, bf16 *dx16,
					const G *dout,
					const float *in, const float *w,
					const float *mean, const float *rstd,
					int N, int C)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float *x = in + n * C;
		const G *d = dout + n * C;
		float *o = dx + n * C;
		float mu = mean[n], rs = rstd[n];
		float s1 = 0.0f, s2 = 0.0f;
		// dxhat rounded as a product apart (__fmul_rn), never fused
		// into the sums or the difference below: at C = 1, where
		// dxhat - mean(dxhat) is 0, a fused one left its rounding
		// times rstd (1/sqrt(eps), 316) in dx, 1.3e-5 of it
		// (embed-check); the CPU's op rounds the product apart too
		for (int c = lane; c < C; c += 32) {
			float dxh = __fmul_rn(as_float(d[c]), w[c]);
			s1 += dxh;
			s2 += dxh * ((x[c] - mu) * rs);
		}
		float m1 = warp_sum(s1) / C, m2 = warp_sum(s2) / C;
		for (int c = lane; c < C; c += 32) {
			float xh = (x[c] - mu) * rs;
			float v = o[c] + rs * (__fmul_rn(as_float(d[c]), w[c]) - m1 -
					       xh * m2);
			o[c] = v;
			if (dx16)
				dx16[n * C + c] = __float2bfloat16(v);
		}
	}
}

// The same for C a multiple of 4 of at most 128 NV, all pointers 16-byte
// aligned, with the partial sums for dw and db.  Each lane loads its NV
// float4 of x, dout and dx for a row before it uses any (one trip to
// memory a row, not two), keeps them in registers for the second pass,
// and adds dout * xhat of its columns into its warp's row of shared
// memory and dout into registers, over its warp's rows in order.  The
// block then sums its 8 warps' in order into part[blockIdx.x * C + c]
// and part[(LN_PARTS + blockIdx.x) * C + c].  With dw's sums in shared
// memory a thread needs at most 128 registers at C = 768, so two blocks
// share a multiprocessor.  At andrea-120m's rows (N 16384, C 768, bf16
// dout): 68 us a call in embed-check (3.0 TB/s); 72 us (ncu) with both
// sums in registers and dx loaded after the row's sums, and 76 + 35 us
// as two kernels before that.
template <int NV, typename G>
__global__ static void __launch_bounds__(256, NV <= 6 ? 2 : 1)
ln_bwd_vec_kernel(float *dx, bf16 *dx16, float *part, const G *dout,
		  const float *in, const float *w, const float *mean,
		  const float *rstd, int N, int C)
{
	extern __shared__ float warp_sums[]; // [8][C]
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32, C4 = C / 4;
	const float4 *w4 = (const float4 *)w;
	float4 *sw = (float4 *)(warp_sums + (size_t)warp * C); // dout * xhat
	float4 sb[NV]; // this lane's sums of dout
#pragma unroll
	for (int k = 0; k < NV; k++) {
		sb[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		if (lane + 32 * k < C4)
			sw[lane + 32 * k] = sb[k];
	}
	int wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float4 *x = (const float4 *)(in + n * C);
		const G *d = dout + n * C;
		float4 *o = (float4 *)(dx + n * C);
		float4 xh[NV], dxh[NV], ov[NV]; // x, then x normalized; dout,
						// then dout * w; dx so far
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c < C4) {
				xh[k] = x[c];
				dxh[k] = load4_as(d + 4 * c);
				ov[k] = o[c];
			}
		}
		float mu = mean[n], rs = rstd[n];
		float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c >= C4)
				continue;
			float4 a = xh[k], g = dxh[k], ww = w4[c], t = sw[c];
			xh[k] = make_float4((a.x - mu) * rs, (a.y - mu) * rs,
					    (a.z - mu) * rs, (a.w - mu) * rs);
			dxh[k] = make_float4(g.x * ww.x, g.y * ww.y, g.z * ww.z,
					     g.w * ww.w);
			t.x += g.x * xh[k].x;
			t.y += g.y * xh[k].y;
			t.z += g.z * xh[k].z;
			t.w += g.w * xh[k].w;
			sw[c] = t;
			sb[k].x += g.x;
			sb[k].y += g.y;
			sb[k].z += g.z;
			sb[k].w += g.w;
			s1 += dxh[k].x + dxh[k].y + dxh[k].z + dxh[k].w;
			s2 += dxh[k].x * xh[k].x + dxh[k].y * xh[k].y +
			      dxh[k].z * xh[k].z + dxh[k].w * xh[k].w;
		}
		float m1 = warp_sum(s1) / C, m2 = warp_sum(s2) / C;
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c >= C4)
				continue;
			float4 v = ov[k];
			v.x += rs * (dxh[k].x - m1 - xh[k].x * m2);
			v.y += rs * (dxh[k].y - m1 - xh[k].y * m2);
			v.z += rs * (dxh[k].z - m1 - xh[k].z * m2);
			v.w += rs * (dxh[k].w - m1 - xh[k].w * m2);
			o[c] = v;
			if (dx16) {
				__nv_bfloat162 *h = (__nv_bfloat162 *)(dx16 + n * C) + 2 * c;
				h[0] = __floats2bfloat162_rn(v.x, v.y);
				h[1] = __floats2bfloat162_rn(v.z, v.w);
			}
		}
	}
	// the block's sums, dw's and then db's, warp by warp in order
	for (int which = 0; which < 2; which++) {
		if (which) { // db's sums take the place of dw's
			__syncthreads();
#pragma unroll
			for (int k = 0; k < NV; k++)
				if (lane + 32 * k < C4)
					sw[lane + 32 * k] = sb[k];
		}
		__syncthreads();
		float *out = part + (size_t)(which * LN_PARTS + blockIdx.x) * C;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float t = 0.0f;
			for (int y = 0; y < wpb; y++)
				t += warp_sums[(size_t)y * C + c];
			out[c] = t;
		}
	}
}

// ln_bwd_vec_kernel<NV> for the smallest NV that holds C, if one does
// (NV up to 10: C up to 1280), on LN_PARTS blocks of 8 warps.
template <typename G>
static bool ln_bwd_vec(float *dx, bf16 *dx16, float *part, const G *dout,
		       const float *in, const float *w, const float *mean,
		       const float *rstd, int N, int C)
{
	uintptr_t all = (uintptr_t)dx | (uintptr_t)dx16 | (uintptr_t)dout |
			(uintptr_t)in | (uintptr_t)w;
	if (C % 4 || all % 16)
		return false;
	size_t smem = 8 * (size_t)C * sizeof(float);
#define LN_VEC(NV)                                                      \
	ln_bwd_vec_kernel<NV, G><<<LN_PARTS, 256, smem, at_cu_stream>>>(\
		dx, dx16, part, dout, in, w, mean, rstd, N, C)
	AT_NV_LAUNCH(C, LN_VEC)
#undef LN_VEC
	return false;
}

// Block (x: 32 columns, y: 8 row phases); grid (column tiles, LN_PARTS).
// part[s*C + c] and part[(LN_PARTS + s)*C + c]: split s's sums for dw, db.
template <typename G>
__global__ static void ln_bwd_dwdb_kernel(float *part, const G *dout,
					  const float *in, const float *mean,
					  const float *rstd, int N, int C)
{
	__shared__ float sw[8][33], sb[8][33];
	int c = blockIdx.x * 32 + threadIdx.x, s = blockIdx.y;
	int per = (N + LN_PARTS - 1) / LN_PARTS;
	int lo = s * per, hi = min(N, lo + per);
	float aw = 0.0f, ab = 0.0f;
	if (c < C)
		for (int n = lo + threadIdx.y; n < hi; n += 8) {
			float g = as_float(dout[(size_t)n * C + c]);
			aw += g * ((in[(size_t)n * C + c] - mean[n]) * rstd[n]);
			ab += g;
		}
	sw[threadIdx.y][threadIdx.x] = aw;
	sb[threadIdx.y][threadIdx.x] = ab;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		float tw = 0.0f, tb = 0.0f;
		for (int y = 0; y < 8; y++) {
			tw += sw[y][threadIdx.x];
			tb += sb[y][threadIdx.x];
		}
		part[(size_t)s * C + c] = tw;
		part[(size_t)(LN_PARTS + s) * C + c] = tb;
	}
}

// dw, db = the sums of the LN_PARTS partial sums, in a fixed order: block
// (x: 32 columns, y: 8 phases over the parts); grid: column tiles.
template <typename W>
__global__ static void ln_bwd_sum_kernel(W *dw, W *db,
					 const float *part, int C)
{
	__shared__ float sw[8][33], sb[8][33];
	int c = blockIdx.x * 32 + threadIdx.x;
	float tw = 0.0f, tb = 0.0f;
	if (c < C)
		for (int s = threadIdx.y; s < LN_PARTS; s += 8) {
			tw += part[(size_t)s * C + c];
			tb += part[(size_t)(LN_PARTS + s) * C + c];
		}
	sw[threadIdx.y][threadIdx.x] = tw;
	sb[threadIdx.y][threadIdx.x] = tb;
	__syncthreads();
	if (threadIdx.y == 0 && c < C) {
		for (int y = 1; y < 8; y++) {
			tw += sw[y][threadIdx.x];
			tb += sb[y][threadIdx.x];
		}
		store_as(dw + c, tw);
		store_as(db + c, tb);
	}
}

template <typename G, typename W>
int tr_layernorm_bwd(float *dx, bf16 *dx16, W *dw, W *db,
		     const G *dout, const float *in, const float *w,
		     const float *mean, const float *rstd, int N, int C,
		     float *scratch)
{
	if (N == 0 || C == 0)
		return 0;
	dim3 block(32, 8);
	if (!ln_bwd_vec(dx, dx16, scratch, dout, in, w, mean, rstd, N, C)) {
		ln_bwd_dx_kernel<G><<<at_cu_blocks(N, 8), 256, 0, at_cu_stream>>>(
			dx, dx16, dout, in, w, mean, rstd, N, C);
		CU_LAUNCHED("LayerNorm backward kernel");
		dim3 grid((C + 31) / 32, LN_PARTS);
		ln_bwd_dwdb_kernel<G><<<grid, block, 0, at_cu_stream>>>(
			scratch, dout, in, mean, rstd, N, C);
	}
	CU_LAUNCHED("LayerNorm backward kernel");
	ln_bwd_sum_kernel<W><<<(C + 31) / 32, block, 0, at_cu_stream>>>(
		dw, db, scratch, C);
	CU_LAUNCHED("LayerNorm weight-gradient sum kernel");
	return 0;
}
#define LN_BWD(G, W)                                                          \
	template int tr_layernorm_bwd<G, W>(float *, bf16 *, W *, W *,        \
					    const G *, const float *,         \
					    const float *, const float *,     \
					    const float *, int, int, float *);
LN_BWD(float, float)
LN_BWD(bf16, float)
LN_BWD(float, bf16)
LN_BWD(bf16, bf16)
