// loss.cu - softmax + cross-entropy (and its gradient) in one pass over
// the logits (a warp a row, or a block a row for wide ones), the mean of
// the losses, GELU forward and backward, and the gradient of
// the embedding tables.
#include "train/train_kernels.cuh"

// One warp per row of logits (float, or bf16 in bf16 mode), four columns
// a lane at a time (ld and Vd multiples of 4, rows aligned: the engine
// pads the vocabulary to 8; one float a lane took 0.49 ms a step at
// andrea-120m, V 8449): an online maximum and sum of exponentials, the
// row's loss, then (with grad) (softmax - onehot) * inv written over the
// logits.  Each lane reads and writes only its own columns, so the one
// hazard is z[t], which every lane reads before any writes.  Columns V ..
// Vd - 1 get zeros.  bf16 logits halve the bytes of both passes, as the
// compiled PyTorch model's autocast product does.
template <typename T>
__global__ static void ce_kernel(T *logits, size_t ld, float *losses,
				 const int32_t *targets, int N, int V, int Vd,
				 float inv, int grad)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t n = (size_t)blockIdx.x * wpb + threadIdx.x / 32; n < (size_t)N;
	     n += (size_t)gridDim.x * wpb) {
		T *z = logits + n * ld;
		float m = -INFINITY, l = 0.0f; // online, as warp_softmax_stats
		for (int j = 4 * lane; j < V; j += 128) {
			float4 q = load4_as(z + j);
			float v4[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
			for (int c = 0; c < 4; c++) {
				if (j + c >= V)
					break;
				float v = v4[c];
				if (v > m) {
					l = l * expf(m - v) + 1.0f;
					m = v;
				} else {
					l += expf(v - m);
				}
			}
		}
		float M = warp_max(m);
		float L = warp_sum(m == -INFINITY ? 0.0f : l * expf(m - M));
		int t = targets[n];
		float zt = as_float(z[t]);
		__syncwarp(); // every lane has read z[t] before any overwrites it
		if (lane == 0)
			losses[n] = logf(L) + M - zt;
		if (!grad)
			continue;
		float rl = 1.0f / L;
		for (int j = 4 * lane; j < Vd; j += 128) {
			float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			if (j < V) {
				float4 q = load4_as(z + j);
				float v4[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
				for (int c = 0; c < 4; c++)
					if (j + c < V)
						p[c] = expf(v4[c] - M) * rl;
			}
#pragma unroll
			for (int c = 0; c < 4; c++)
				if (j + c == t)
					p[c] -= 1.0f;
			store4_as(z + j, make_float4(p[0] * inv, p[1] * inv,
						     p[2] * inv, p[3] * inv));
		}
	}
}

#define CE_THREADS 256

// ce_kernel's work with one block a row and the row in registers, NC
// float4s a thread (column 4 (threadIdx.x + i CE_THREADS) in the i-th):
// the logits are read from memory once and written once, where the warp
// a row reads them twice (0.32 ms a step at andrea-120m, V 8449, bf16).
// Thread 0 reads z[t] before the first reduction's barrier, and every
// write comes after the second's.
template <typename T, int NC>
__global__ static void __launch_bounds__(CE_THREADS)
ce_row_kernel(T *logits, size_t ld, float *losses, const int32_t *targets,
	      int V, int Vd, float inv, int grad)
{
	__shared__ float sh[CE_THREADS / 32];
	T *z = logits + blockIdx.x * ld;
	int t = targets[blockIdx.x];
	float zt = threadIdx.x == 0 ? as_float(z[t]) : 0.0f;
	float x[NC][4];
	float m = -INFINITY;
#pragma unroll
	for (int i = 0; i < NC; i++) {
		int j = 4 * ((int)threadIdx.x + i * CE_THREADS);
		float4 q = j < Vd ? load4_as(z + j)
				  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		float v4[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
		for (int c = 0; c < 4; c++) {
			x[i][c] = j + c < V ? v4[c] : -INFINITY; // pads: none
			m = fmaxf(m, x[i][c]);
		}
	}
	float M = group_max<CE_THREADS>(m, sh);
	float l = 0.0f;
#pragma unroll
	for (int i = 0; i < NC; i++)
#pragma unroll
		for (int c = 0; c < 4; c++) {
			x[i][c] = expf(x[i][c] - M); // 0 past V
			l += x[i][c];
		}
	float L = group_sum<CE_THREADS>(l, sh);
	if (threadIdx.x == 0)
		losses[blockIdx.x] = logf(L) + M - zt;
	if (!grad)
		return;
	float rl = 1.0f / L;
#pragma unroll
	for (int i = 0; i < NC; i++) {
		int j = 4 * ((int)threadIdx.x + i * CE_THREADS);
		if (j >= Vd)
			continue;
		float p[4];
#pragma unroll
		for (int c = 0; c < 4; c++)
			p[c] = (x[i][c] * rl - (j + c == t ? 1.0f : 0.0f)) * inv;
		store4_as(z + j, make_float4(p[0], p[1], p[2], p[3]));
	}
}

// Rows of 2048 to 16384 logits take a block each (registers enough for
// the row, a block's worth of work), others a warp.
static bool ce_by_rows(int Vd)
{
	return Vd >= 2048 && Vd <= 16 * 4 * CE_THREADS;
}

template <typename T>
int tr_crossentropy(T *logits, size_t ld, float *losses,
		    const int32_t *targets, int N, int V, int Vd, float inv,
		    int grad)
{
	if (N == 0)
		return 0;
	if (ld % 4 || Vd % 4 || !aligned4(logits))
		return at_cu_failf("the loss wants rows of whole float4s "
				   "(ld %zu, %d columns)", ld, Vd);
	if (!ce_by_rows(Vd)) {
		ce_kernel<T><<<at_cu_blocks(N, 8), 256, 0, at_cu_stream>>>(
			logits, ld, losses, targets, N, V, Vd, inv, grad);
		CU_LAUNCHED("cross-entropy kernel");
		return 0;
	}
	int nc = (Vd / 4 + CE_THREADS - 1) / CE_THREADS; // 2 .. 16
#define CE_ROWS(NC)                                                        \
	ce_row_kernel<T, NC><<<N, CE_THREADS, 0, at_cu_stream>>>(           \
		logits, ld, losses, targets, V, Vd, inv, grad)
	if (nc <= 2)
		CE_ROWS(2);
	else if (nc <= 4)
		CE_ROWS(4);
	else if (nc <= 6)
		CE_ROWS(6);
	else if (nc <= 9)
		CE_ROWS(9);
	else if (nc <= 12)
		CE_ROWS(12);
	else
		CE_ROWS(16);
#undef CE_ROWS
	CU_LAUNCHED("cross-entropy kernel");
	return 0;
}
template int tr_crossentropy<float>(float *, size_t, float *, const int32_t *,
				    int, int, int, float, int);
template int tr_crossentropy<bf16>(bf16 *, size_t, float *, const int32_t *,
				   int, int, int, float, int);

// One block of 1024 threads: strided sums in double, then a fixed tree.
__global__ static void mean_kernel(double *out, const float *x, int N)
{
	__shared__ double sh[1024];
	double s = 0.0;
	for (int i = threadIdx.x; i < N; i += blockDim.x)
		s += x[i];
	s = block_sum_double(s, sh);
	if (threadIdx.x == 0)
		*out = s / N;
}

int tr_mean(double *out, const float *losses, int N)
{
	mean_kernel<<<1, 1024, 0, at_cu_stream>>>(out, losses, N);
	CU_LAUNCHED("mean kernel");
	return 0;
}


// din = dout GELU'(in), act = GELU(in) unless NULL: four at a time over
// the first n4 * 4, one at a time from there to n.
template <typename OUT>
__global__ static void gelu_bwd_kernel(OUT *din, OUT *act, const float *in,
				       const float *dout, size_t n4, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	for (size_t i = i0; i < n4; i += stride) {
		float4 x = ((const float4 *)in)[i], dy = ((const float4 *)dout)[i];
		if (act)
			store4_as(act + 4 * i,
				  make_float4(gelu_tanh(x.x), gelu_tanh(x.y),
					      gelu_tanh(x.z), gelu_tanh(x.w)));
		store4_as(din + 4 * i, make_float4(dy.x * gelu_tanh_grad(x.x),
						   dy.y * gelu_tanh_grad(x.y),
						   dy.z * gelu_tanh_grad(x.z),
						   dy.w * gelu_tanh_grad(x.w)));
	}
	for (size_t i = n4 * 4 + i0; i < n; i += stride) {
		if (act)
			store_as(act + i, gelu_tanh(in[i]));
		store_as(din + i, dout[i] * gelu_tanh_grad(in[i]));
	}
}

template <typename OUT>
int tr_gelu_bwd(OUT *din, OUT *act, const float *in, const float *dout,
		size_t n)
{
	if (n == 0)
		return 0;
	bool vec = aligned4(din) && aligned4(act) && aligned4(in) &&
		   aligned4(dout); // act may be NULL, which is aligned
	size_t n4 = vec ? n / 4 : 0;
	gelu_bwd_kernel<OUT><<<at_cu_blocks(n4 ? n4 : n, 256), 256, 0, at_cu_stream>>>(
		din, act, in, dout, n4, n);
	CU_LAUNCHED("GELU backward kernel");
	return 0;
}
template int tr_gelu_bwd<float>(float *, float *, const float *,
				const float *, size_t);
template int tr_gelu_bwd<bf16>(bf16 *, bf16 *, const float *, const float *,
			       size_t);

// GELU(x) in the tanh form, as x sigmoid(2u) = x / (1 + e^(-2u)),
// u = GELU_K (x + 0.044715 x^3), with the fast exponential: its error is
// far below the bf16 rounding of the result.
__device__ __forceinline__ float gelu_fast(float x)
{
	float u = GELU_K * (x + 0.044715f * x * x * x);
	return x / (1.0f + __expf(-2.0f * u));
}

// out = GELU(in), bf16 both: eight at a time over the first n8 * 8, one
// at a time from there to n.
__global__ static void gelu_again_kernel(bf16 *out, const bf16 *in, size_t n8,
					 size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	for (size_t i = i0; i < n8; i += stride) {
		uint4 v = ((const uint4 *)in)[i], r;
		const bf16 *x = (const bf16 *)&v;
		bf16 *y = (bf16 *)&r;
		for (int k = 0; k < 8; k++)
			y[k] = __float2bfloat16(gelu_fast(__bfloat162float(x[k])));
		((uint4 *)out)[i] = r;
	}
	for (size_t i = n8 * 8 + i0; i < n; i += stride)
		out[i] = __float2bfloat16(gelu_fast(__bfloat162float(in[i])));
}

int tr_gelu_again(bf16 *out, const bf16 *in, size_t n)
{
	if (n == 0)
		return 0;
	int aligned = ((uintptr_t)out | (uintptr_t)in) % 16 == 0;
	size_t n8 = aligned ? n / 8 : 0;
	gelu_again_kernel<<<at_cu_blocks(n8 ? n8 : n, 256), 256, 0, at_cu_stream>>>(
		out, in, n8, n);
	CU_LAUNCHED("GELU kernel");
	return 0;
}

// Thread per (t, c): the rows b add in order.
template <typename G>
__global__ static void dwpe_kernel(G *dwpe, const float *dx, int B, int T,
				   int C)
{
	size_t n = (size_t)T * C;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float s = 0.0f;
		for (int b = 0; b < B; b++)
			s += dx[(size_t)b * n + i];
		store_as(dwpe + i, s);
	}
}

// Block per token id; its positions (sorted on the host) add in order,
// onto head's row where there is one.
template <typename G>
__global__ static void dwte_kernel(G *dwte, const float *head,
				   const float *dx, const int *off,
				   const int *pos, int C, int V)
{
	for (int v = blockIdx.x; v < V; v += gridDim.x) {
		int lo = off[v], hi = off[v + 1];
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			size_t i = (size_t)v * C + c;
			float s = head ? head[i] : 0.0f;
			for (int k = lo; k < hi; k++)
				s += dx[(size_t)pos[k] * C + c];
			store_as(dwte + i, s);
		}
	}
}

template <typename G>
int tr_embed_bwd(G *dwte, G *dwpe, const float *head, const float *dx,
		 const int *off, const int *pos, int B, int T, int C, int V)
{
	size_t n = (size_t)T * C;
	if (n == 0)
		return 0;
	dwpe_kernel<G><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(
		dwpe, dx, B, T, C);
	CU_LAUNCHED("position-embedding gradient kernel");
	dwte_kernel<G><<<V < 65535 ? V : 65535, 128, 0, at_cu_stream>>>(
		dwte, head, dx, off, pos, C, V);
	CU_LAUNCHED("token-embedding gradient kernel");
	return 0;
}
template int tr_embed_bwd<float>(float *, float *, const float *,
				 const float *, const int *, const int *, int,
				 int, int, int);
template int tr_embed_bwd<bf16>(bf16 *, bf16 *, const float *, const float *,
				const int *, const int *, int, int, int, int);
