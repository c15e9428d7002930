// layernorm.cu - LayerNorm forward, for the stages (andrea-qkv's LN1) and
// the training engine (which keeps each row's statistics for its backward
// pass and may write bf16).
//
// One warp per row, two passes in fp32: the mean, then the biased variance
// of (x - mean), as the CPU op does it in double; the row is read twice,
// the second time from L1/L2, and written once.  Where C is a multiple of
// 4 of at most 1280 and the rows are aligned, each lane keeps its float4s
// of the row in registers and the row is read once.
//
// With add (bf16, the training engine's residual branch), the row is
// first in + add, written to sum: the residual add of the block before,
// in the same pass as the LayerNorm after it.
#include "common/cuda_util.cuh"

typedef __nv_bfloat16 bf16;

template <int NV, typename OUT>
__global__ static void __launch_bounds__(256)
layernorm_vec_kernel(OUT *out, float *mean, float *rstd, float *sum_out,
		     const float *in, const bf16 *add, const float *w,
		     const float *b, int N, int C, float eps)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32, C4 = C / 4;
	const float4 *w4 = (const float4 *)w, *b4 = (const float4 *)b;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float4 *x = (const float4 *)(in + n * C);
		float4 v[NV];
		float sum = 0.0f;
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			v[k] = c < C4 ? x[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
			if (add && c < C4) {
				float4 y = load4_as(add + n * C + 4 * c);
				v[k] = make_float4(v[k].x + y.x, v[k].y + y.y,
						   v[k].z + y.z, v[k].w + y.w);
				((float4 *)(sum_out + n * C))[c] = v[k];
			}
			sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
		}
		float mu = warp_sum(sum) / C, sq = 0.0f;
#pragma unroll
		for (int k = 0; k < NV; k++)
			if (lane + 32 * k < C4) {
				float a = v[k].x - mu, e = v[k].y - mu;
				float f = v[k].z - mu, g = v[k].w - mu;
				sq += (a * a + e * e) + (f * f + g * g);
			}
		float rs = rsqrtf(warp_sum(sq) / C + eps);
#pragma unroll
		for (int k = 0; k < NV; k++) {
			int c = lane + 32 * k;
			if (c >= C4)
				continue;
			float4 ww = w4[c], bb = b4[c];
			store4_as(out + n * C + 4 * c,
				  make_float4((v[k].x - mu) * rs * ww.x + bb.x,
					      (v[k].y - mu) * rs * ww.y + bb.y,
					      (v[k].z - mu) * rs * ww.z + bb.z,
					      (v[k].w - mu) * rs * ww.w + bb.w));
		}
		if (lane == 0 && mean) {
			mean[n] = mu;
			rstd[n] = rs;
		}
	}
}

// layernorm_vec_kernel<NV> for the smallest NV that holds C, if one does.
template <typename OUT>
static bool layernorm_vec(OUT *out, float *mean, float *rstd, float *sum,
			  const float *in, const bf16 *add, const float *w,
			  const float *b, int N, int C, float eps,
			  unsigned grid, unsigned bs)
{
	if (C % 4 || !aligned4(out) || !aligned4(in) || !aligned4(w) ||
	    !aligned4(b) || !aligned4(add) || !aligned4(sum))
		return false;
#define LN_VEC(NV)                                                     \
	layernorm_vec_kernel<NV, OUT><<<grid, bs, 0, at_cu_stream>>>(  \
		out, mean, rstd, sum, in, add, w, b, N, C, eps)
	AT_NV_LAUNCH(C, LN_VEC)
#undef LN_VEC
	return false;
}

template <typename OUT>
__global__ static void layernorm_kernel(OUT *out, float *mean, float *rstd,
					float *sum_out, const float *in,
					const bf16 *add, const float *w,
					const float *b, int N, int C, float eps)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float *x = in + n * C;
		OUT *o = out + n * C;
		if (add) { // each lane reads back only what it wrote
			float *s = sum_out + n * C;
			for (int c = lane; c < C; c += 32)
				s[c] = x[c] + as_float(add[n * C + c]);
			x = s;
		}
		float sum = 0.0f;
		for (int c = lane; c < C; c += 32)
			sum += x[c];
		float mu = warp_sum(sum) / C;
		float sq = 0.0f;
		for (int c = lane; c < C; c += 32) {
			float d = x[c] - mu;
			sq += d * d;
		}
		float rs = rsqrtf(warp_sum(sq) / C + eps);
		for (int c = lane; c < C; c += 32)
			store_as(o + c, (x[c] - mu) * rs * w[c] + b[c]);
		if (lane == 0 && mean) {
			mean[n] = mu;
			rstd[n] = rs;
		}
	}
}

template <typename OUT>
int at_cu_layernorm_add_fwd(OUT *out, float *mean, float *rstd, float *sum,
			    const float *in, const bf16 *add, const float *w,
			    const float *b, int N, int C, float eps)
{
	if (N == 0 || C == 0)
		return 0;
	const unsigned bs = 256, wpb = bs / 32, grid = at_cu_blocks(N, wpb);
	if (!layernorm_vec(out, mean, rstd, sum, in, add, w, b, N, C, eps, grid,
			   bs))
		layernorm_kernel<OUT><<<grid, bs, 0, at_cu_stream>>>(
			out, mean, rstd, sum, in, add, w, b, N, C, eps);
	CU_LAUNCHED("LayerNorm kernel");
	return 0;
}
template int at_cu_layernorm_add_fwd<float>(float *, float *, float *,
					    float *, const float *,
					    const bf16 *, const float *,
					    const float *, int, int, float);
template int at_cu_layernorm_add_fwd<bf16>(bf16 *, float *, float *, float *,
					   const float *, const bf16 *,
					   const float *, const float *, int,
					   int, float);

template <typename OUT>
int at_cu_layernorm_fwd(OUT *out, float *mean, float *rstd, const float *in,
			const float *w, const float *b, int N, int C, float eps)
{
	return at_cu_layernorm_add_fwd<OUT>(out, mean, rstd, NULL, in, NULL, w,
					    b, N, C, eps);
}
template int at_cu_layernorm_fwd<float>(float *, float *, float *,
					const float *, const float *,
					const float *, int, int, float);
template int at_cu_layernorm_fwd<__nv_bfloat16>(__nv_bfloat16 *, float *,
						float *, const float *,
						const float *, const float *,
						int, int, float);

extern "C" int at_cuda_layernorm_forward(float *out, const float *in,
					 const float *w, const float *b, int N,
					 int C, float eps)
{
	return at_cu_layernorm_fwd<float>(out, NULL, NULL, in, w, b, N, C, eps);
}
