// attn.cu - the causal softmax of the training engine, forward and
// backward (the head transposes are the stages', kernels/ops/heads.cu).
//
// The softmax kernels take one warp per row.  Forward, mask + scale +
// softmax in one kernel: an online maximum and sum over the row's keys
// j <= i (the masked ones are never read), then one write of the whole
// row, zeros beyond the diagonal.  Backward: one dot product over the
// same keys, then one write of scale * a * (da - dot), also zeros beyond.
#include "train/train_kernels.cuh"

__global__ static void softmax_fwd_kernel(float *s, bf16 *s16, size_t rows,
					  int T, float scale)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t r = (size_t)blockIdx.x * wpb + threadIdx.x / 32; r < rows;
	     r += (size_t)gridDim.x * wpb) {
		float *x = s + r * T;
		int n = (int)(r % T) + 1;
		float M, L;
		warp_softmax_stats(x, n, scale, &M, &L);
		float inv = 1.0f / L;
		for (int j = lane; j < T; j += 32) {
			float p = j < n ? expf(x[j] * scale - M) * inv : 0.0f;
			x[j] = p;
			if (s16)
				s16[r * T + j] = __float2bfloat16(p);
		}
	}
}

int tr_softmax_causal_fwd(float *s, bf16 *s16, size_t rows, int T,
			  float scale)
{
	if (rows == 0)
		return 0;
	softmax_fwd_kernel<<<at_cu_blocks(rows, 8), 256>>>(s, s16, rows, T,
							    scale);
	CU_LAUNCHED("causal softmax kernel");
	return 0;
}

template <typename OUT>
__global__ static void softmax_bwd_kernel(OUT *ds, const float *da,
					  const float *a, size_t rows, int T,
					  float scale)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t r = (size_t)blockIdx.x * wpb + threadIdx.x / 32; r < rows;
	     r += (size_t)gridDim.x * wpb) {
		const float *ar = a + r * T, *dr = da + r * T;
		OUT *o = ds + r * T;
		int n = (int)(r % T) + 1;
		float dot = 0.0f;
		for (int j = lane; j < n; j += 32)
			dot += ar[j] * dr[j];
		dot = warp_sum(dot);
		for (int j = lane; j < T; j += 32)
			store_as(o + j, j < n ? scale * ar[j] * (dr[j] - dot)
					      : 0.0f);
	}
}

template <typename OUT>
int tr_softmax_causal_bwd(OUT *ds, const float *da, const float *a,
			  size_t rows, int T, float scale)
{
	if (rows == 0)
		return 0;
	softmax_bwd_kernel<OUT><<<at_cu_blocks(rows, 8), 256>>>(ds, da, a, rows,
								 T, scale);
	CU_LAUNCHED("causal softmax backward kernel");
	return 0;
}
template int tr_softmax_causal_bwd<float>(float *, const float *,
					  const float *, size_t, int, float);
template int tr_softmax_causal_bwd<bf16>(bf16 *, const float *, const float *,
					 size_t, int, float);
