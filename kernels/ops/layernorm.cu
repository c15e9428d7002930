// layernorm.cu - LayerNorm forward, for the stages (andrea-qkv's LN1) and
// the training engine (which keeps each row's statistics for its backward
// pass and may write bf16).
//
// One warp per row, two passes in fp32: the mean, then the biased variance
// of (x - mean), as the CPU op does it in double; the row is read twice,
// the second time from L1/L2, and written once.
#include "common/cuda_util.cuh"

template <typename OUT>
__global__ static void layernorm_kernel(OUT *out, float *mean, float *rstd,
					const float *in, const float *w,
					const float *b, int N, int C, float eps)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		const float *x = in + n * C;
		OUT *o = out + n * C;
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
int at_cu_layernorm_fwd(OUT *out, float *mean, float *rstd, const float *in,
			const float *w, const float *b, int N, int C, float eps)
{
	if (N == 0 || C == 0)
		return 0;
	const unsigned bs = 256, wpb = bs / 32;
	layernorm_kernel<OUT><<<at_cu_blocks(N, wpb), bs, 0, at_cu_stream>>>(out, mean, rstd, in,
							    w, b, N, C, eps);
	CU_LAUNCHED("LayerNorm kernel");
	return 0;
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
