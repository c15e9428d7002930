// norm.cu - LayerNorm backward for the training engine (the forward
// pass, shared with the stages, is layernorm.cu).
//
// Backward: one warp per row for dx, then the sums over rows for dw and db
// in two kernels: blocks of 32 columns x 8 row phases make LN_SPLITS
// partial sums per column, and a second kernel adds them in order, so the
// result never depends on timing (no atomics).
#include "train/train_kernels.cuh"


// dx += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
// dxhat = dout * w; dx16 (if not NULL) = bf16(dx).
__global__ static void ln_bwd_dx_kernel(float *dx, bf16 *dx16,
					const float *dout,
					const float *in, const float *w,
					const float *mean, const float *rstd,
					int N, int C)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float *x = in + n * C, *d = dout + n * C;
		float *o = dx + n * C;
		float mu = mean[n], rs = rstd[n];
		float s1 = 0.0f, s2 = 0.0f;
		for (int c = lane; c < C; c += 32) {
			float dxh = d[c] * w[c];
			s1 += dxh;
			s2 += dxh * ((x[c] - mu) * rs);
		}
		float m1 = warp_sum(s1) / C, m2 = warp_sum(s2) / C;
		for (int c = lane; c < C; c += 32) {
			float xh = (x[c] - mu) * rs;
			float v = o[c] + rs * (d[c] * w[c] - m1 - xh * m2);
			o[c] = v;
			if (dx16)
				dx16[n * C + c] = __float2bfloat16(v);
		}
	}
}

// The same for C a multiple of 4 of at most 128 NV, all pointers 16-byte
// aligned: each lane reads its NV float4 of dout, x and w once and keeps
// them in registers for the second pass (at andrea-120m, C = 768: 76 us a
// call against the scalar kernel's 99, ncu).
template <int NV>
__global__ static void ln_bwd_dx_vec_kernel(float *dx, bf16 *dx16,
					    const float *dout, const float *in,
					    const float *w, const float *mean,
					    const float *rstd, int N, int C)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32, C4 = C / 4;
	const float4 *w4 = (const float4 *)w;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float4 *x = (const float4 *)(in + n * C);
		const float4 *d = (const float4 *)(dout + n * C);
		float mu = mean[n], rs = rstd[n];
		float4 xh[NV], dxh[NV]; // x normalized, dout * w
		float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c >= C4)
				continue;
			float4 a = x[c], g = d[c], ww = w4[c];
			xh[k] = make_float4((a.x - mu) * rs, (a.y - mu) * rs,
					    (a.z - mu) * rs, (a.w - mu) * rs);
			dxh[k] = make_float4(g.x * ww.x, g.y * ww.y, g.z * ww.z,
					     g.w * ww.w);
			s1 += dxh[k].x + dxh[k].y + dxh[k].z + dxh[k].w;
			s2 += dxh[k].x * xh[k].x + dxh[k].y * xh[k].y +
			      dxh[k].z * xh[k].z + dxh[k].w * xh[k].w;
		}
		float m1 = warp_sum(s1) / C, m2 = warp_sum(s2) / C;
		float4 *o = (float4 *)(dx + n * C);
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c >= C4)
				continue;
			float4 v = o[c];
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
}

// ln_bwd_dx_vec_kernel<NV> for the smallest NV that holds C, if one does
// (NV up to 10: C up to 1280).
static bool ln_bwd_dx_vec(float *dx, bf16 *dx16, const float *dout,
			  const float *in, const float *w, const float *mean,
			  const float *rstd, int N, int C)
{
	uintptr_t all = (uintptr_t)dx | (uintptr_t)dx16 | (uintptr_t)dout |
			(uintptr_t)in | (uintptr_t)w;
	if (C % 4 || all % 16)
		return false;
	unsigned grid = at_cu_blocks(N, 8);
#define LN_VEC(NV)                                                             	case NV:                                                               		ln_bwd_dx_vec_kernel<NV><<<grid, 256>>>(dx, dx16, dout, in, w, 							mean, rstd, N, C);     		return true
	switch ((C / 4 + 31) / 32) {
		LN_VEC(1); LN_VEC(2); LN_VEC(3); LN_VEC(4); LN_VEC(5); LN_VEC(6);
		LN_VEC(7); LN_VEC(8); LN_VEC(9); LN_VEC(10);
	default:
		return false;
	}
#undef LN_VEC
}

// Block (x: 32 columns, y: 8 row phases); grid (column tiles, LN_SPLITS).
// part[s*C + c] and part[(LN_SPLITS + s)*C + c]: split s's sums for dw, db.
__global__ static void ln_bwd_dwdb_kernel(float *part, const float *dout,
					  const float *in, const float *mean,
					  const float *rstd, int N, int C)
{
	__shared__ float sw[8][33], sb[8][33];
	int c = blockIdx.x * 32 + threadIdx.x, s = blockIdx.y;
	int per = (N + LN_SPLITS - 1) / LN_SPLITS;
	int lo = s * per, hi = min(N, lo + per);
	float aw = 0.0f, ab = 0.0f;
	if (c < C)
		for (int n = lo + threadIdx.y; n < hi; n += 8) {
			float g = dout[(size_t)n * C + c];
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
		part[(size_t)(LN_SPLITS + s) * C + c] = tb;
	}
}

__global__ static void ln_bwd_sum_kernel(float *dw, float *db,
					 const float *part, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C)
		return;
	float tw = 0.0f, tb = 0.0f;
	for (int s = 0; s < LN_SPLITS; s++) {
		tw += part[(size_t)s * C + c];
		tb += part[(size_t)(LN_SPLITS + s) * C + c];
	}
	dw[c] = tw;
	db[c] = tb;
}

int tr_layernorm_bwd(float *dx, bf16 *dx16, float *dw, float *db,
		     const float *dout, const float *in, const float *w,
		     const float *mean, const float *rstd, int N, int C,
		     float *scratch)
{
	if (N == 0 || C == 0)
		return 0;
	if (!ln_bwd_dx_vec(dx, dx16, dout, in, w, mean, rstd, N, C))
		ln_bwd_dx_kernel<<<at_cu_blocks(N, 8), 256>>>(dx, dx16, dout, in,
							       w, mean, rstd, N,
							       C);
	CU_LAUNCHED("LayerNorm backward kernel");
	dim3 grid((C + 31) / 32, LN_SPLITS), block(32, 8);
	ln_bwd_dwdb_kernel<<<grid, block>>>(scratch, dout, in, mean, rstd, N, C);
	CU_LAUNCHED("LayerNorm weight-gradient kernel");
	ln_bwd_sum_kernel<<<(C + 255) / 256, 256>>>(dw, db, scratch, C);
	CU_LAUNCHED("LayerNorm weight-gradient sum kernel");
	return 0;
}
