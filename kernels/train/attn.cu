// attn.cu - the causal softmax's backward (its forward is
// kernels/forward/block.cu's).
//
// One warp per row: one dot product over the keys j <= i, then one write
// of scale * a * (da - dot), zeros beyond.
#include "train/train_kernels.cuh"

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
	softmax_bwd_kernel<OUT><<<at_cu_blocks(rows, 8), 256, 0, at_cu_stream>>>(
		ds, da, a, rows, T, scale);
	CU_LAUNCHED("causal softmax backward kernel");
	return 0;
}
template int tr_softmax_causal_bwd<float>(float *, const float *,
					  const float *, size_t, int, float);
template int tr_softmax_causal_bwd<bf16>(bf16 *, const float *, const float *,
					 size_t, int, float);
