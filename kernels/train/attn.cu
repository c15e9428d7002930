// train_attn.cu - the head transposes and the causal softmax of the
// training engine, forward and backward.
//
// The softmax kernels take one warp per row.  Forward, mask + scale +
// softmax in one kernel: an online maximum and sum over the row's keys
// j <= i (the masked ones are never read), then one write of the whole
// row, zeros beyond the diagonal.  Backward: one dot product over the
// same keys, then one write of scale * a * (da - dot), also zeros beyond.
#include "train/train_kernels.cuh"

// Thread per element of out [GB,H,T,D]; writes are contiguous, reads
// contiguous along D.
template <typename OUT>
__global__ static void split_kernel(OUT *out, const float *in, int T, int H,
				    int D, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int d = (int)(i % D);
		size_t r = i / D; // (gb * H + h) * T + t
		int t = (int)(r % T);
		int h = (int)((r / T) % H);
		size_t gb = r / ((size_t)T * H);
		store_as(out + i, in[((gb * T + t) * H + h) * D + d]);
	}
}

// Thread per element of out [GB,T,H*D].
template <typename OUT>
__global__ static void merge_kernel(OUT *out, const float *in, int T, int H,
				    int D, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int d = (int)(i % D);
		size_t r = i / D; // (gb * T + t) * H + h
		int h = (int)(r % H);
		int t = (int)((r / H) % T);
		size_t gb = r / ((size_t)H * T);
		store_as(out + i, in[((gb * H + h) * T + t) * D + d]);
	}
}

template <typename OUT>
int tr_split_heads(OUT *out, const float *in, int GB, int T, int H, int D)
{
	size_t n = (size_t)GB * T * H * D;
	if (n == 0)
		return 0;
	split_kernel<OUT><<<at_cu_blocks(n, 256), 256>>>(out, in, T, H, D, n);
	CU_LAUNCHED("head split kernel");
	return 0;
}

template <typename OUT>
int tr_merge_heads(OUT *out, const float *in, int GB, int T, int H, int D)
{
	size_t n = (size_t)GB * T * H * D;
	if (n == 0)
		return 0;
	merge_kernel<OUT><<<at_cu_blocks(n, 256), 256>>>(out, in, T, H, D, n);
	CU_LAUNCHED("head merge kernel");
	return 0;
}
template int tr_split_heads<float>(float *, const float *, int, int, int, int);
template int tr_split_heads<bf16>(bf16 *, const float *, int, int, int, int);
template int tr_merge_heads<float>(float *, const float *, int, int, int, int);
template int tr_merge_heads<bf16>(bf16 *, const float *, int, int, int, int);

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
