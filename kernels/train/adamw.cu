// adamw.cu - the global gradient norm, the whole AdamW update in one
// kernel, and the padded copies of parameters the products read.
//
// The norm: NORM_BLOCKS blocks each sum a fixed strided share of g^2 in
// double, a second kernel adds the partial sums in order; the same result
// on every run.  The update: one block per chunk of one parameter (the
// chunk table is made once on the host), so each block knows its weight
// decay without a search; the clipping factor is computed on the device
// from the norm, so the host never waits between backward and update.
#include "train/train_kernels.cuh"

// Four elements a load over the first n4 * 4 (g aligned to four), then
// one at a time: one float a thread took 0.165 ms a step at andrea-120m.
template <typename G>
__global__ static void sumsq_kernel(double *partial, const G *g, size_t n4,
				    size_t n)
{
	__shared__ double sh[256];
	double s = 0.0;
	size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t stride = (size_t)gridDim.x * blockDim.x;
	for (size_t i = i0; i < n4; i += stride) {
		float4 v = load4_as(g + 4 * i);
		s += (double)v.x * v.x + (double)v.y * v.y +
		     (double)v.z * v.z + (double)v.w * v.w;
	}
	for (size_t i = 4 * n4 + i0; i < n; i += stride) {
		double v = as_float(g[i]);
		s += v * v;
	}
	s = block_sum_double(s, sh);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s;
}

__global__ static void sumsq_final_kernel(double *out, const double *partial)
{
	__shared__ double sh[NORM_BLOCKS];
	double total = block_sum_double(partial[threadIdx.x], sh);
	if (threadIdx.x == 0)
		*out = total;
}

template <typename G>
int tr_sumsq(const G *g, size_t n, double *out, double *partial)
{
	size_t n4 = aligned4(g) ? n / 4 : 0;
	sumsq_kernel<G><<<NORM_BLOCKS, 256, 0, at_cu_stream>>>(partial, g, n4,
								n);
	CU_LAUNCHED("gradient norm kernel");
	sumsq_final_kernel<<<1, NORM_BLOCKS, 0, at_cu_stream>>>(out, partial);
	CU_LAUNCHED("gradient norm sum kernel");
	return 0;
}
template int tr_sumsq<float>(const float *, size_t, double *, double *);
template int tr_sumsq<bf16>(const bf16 *, size_t, double *, double *);

// The arithmetic of tr_adamw_update (lib/train/adamw.c), element by
// element.
template <typename G>
__global__ static void adamw_kernel(const G *g, float *p, bf16 *p16,
				    float *m1, float *m2, size_t mom_base,
				    const tr_piece *pieces, float lr, float b1,
				    float b2, float nb1, float nb2, float eps,
				    float wd, float c1, float c2, double clip,
				    const double *normsq)
{
	tr_piece pc = pieces[blockIdx.x];
	float wdj = pc.decay ? wd : 0.0f; // exactly wd or 0, as on the CPU
	double norm = sqrt(*normsq);
	float gs = (float)(clip > 0 && norm > clip ? clip / norm : 1.0);
	for (unsigned k = threadIdx.x; k < pc.len; k += blockDim.x) {
		size_t j = pc.start + k, jm = j - mom_base;
		float gj = as_float(g[j]) * gs;
		float a = b1 * m1[jm] + nb1 * gj;
		float b = b2 * m2[jm] + nb2 * gj * gj;
		m1[jm] = a;
		m2[jm] = b;
		float mh = a / c1, vh = b / c2;
		float w = p[j];
		w -= lr * (mh / (sqrtf(vh) + eps) + wdj * w);
		p[j] = w;
		if (p16)
			p16[j] = __float2bfloat16(w);
	}
}

template <typename G>
int tr_adamw(const G *g, float *p, bf16 *p16, float *m1, float *m2,
	     size_t mom_base, const tr_piece *pieces, int npieces, float lr,
	     double beta1, double beta2, float eps, float wd, float c1,
	     float c2, double clip, const double *normsq)
{
	if (npieces == 0)
		return 0;
	// 1 - beta in double, then float, as the CPU's tr_adamw_update
	adamw_kernel<G><<<npieces, 256, 0, at_cu_stream>>>(
		g, p, p16, m1, m2, mom_base, pieces, lr, (float)beta1,
		(float)beta2, (float)(1.0 - beta1), (float)(1.0 - beta2), eps,
		wd, c1, c2, clip, normsq);
	CU_LAUNCHED("AdamW kernel");
	return 0;
}
#define ADAMW(G)                                                               \
	template int tr_adamw<G>(const G *, float *, bf16 *, float *, float *, \
				 size_t, const tr_piece *, int, float, double, \
				 double, float, float, float, float, double,   \
				 const double *);
ADAMW(float)
ADAMW(bf16)

// Block row r (of a stride of rows), threads across its columns: no
// division per element (the head's copies run every step).
template <typename OUT>
__global__ static void copy_rows_kernel(OUT *dst, size_t ld, const float *src,
					size_t lds, int rows, int cols)
{
	for (int r = blockIdx.y; r < rows; r += gridDim.y)
		for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols;
		     c += gridDim.x * blockDim.x)
			store_as(dst + r * ld + c, src[r * lds + c]);
}

template <typename OUT>
int tr_copy_rows(OUT *dst, size_t ld, const float *src, size_t lds, int rows,
		 int cols)
{
	if (rows == 0 || cols == 0)
		return 0;
	dim3 grid((cols + 255) / 256, rows < 65535 ? rows : 65535);
	copy_rows_kernel<OUT><<<grid, 256, 0, at_cu_stream>>>(dst, ld, src, lds,
							      rows, cols);
	CU_LAUNCHED("parameter copy kernel");
	return 0;
}
template int tr_copy_rows<float>(float *, size_t, const float *, size_t, int,
				 int);
template int tr_copy_rows<bf16>(bf16 *, size_t, const float *, size_t, int,
				int);

// Three matrices [rows, cols] one after the other (apart) and side by
// side in [rows, 3 cols] (side): to_side copies apart into side, else side
// into apart.  One block a row of one matrix (blockIdx.x = row * 3 +
// matrix), four columns a thread (one move of 16 or 8 bytes) where the
// rows allow: no division per element (the 64-bit divisions of a flat
// index cost four times the copy's memory time at andrea-120m).
template <typename T> struct four_of; // four elements as one move
template <> struct four_of<float> { typedef float4 t; };
template <> struct four_of<bf16> { typedef uint2 t; };

template <typename T>
__global__ static void three_kernel(T *side, T *apart, int rows, int cols,
				    int to_side, int vec4)
{
	typedef typename four_of<T>::t four;
	int r = blockIdx.x / 3, m = blockIdx.x % 3;
	T *s = side + ((size_t)r * 3 + m) * cols;
	T *a = apart + ((size_t)m * rows + r) * cols;
	T *to = to_side ? s : a;
	const T *from = to_side ? a : s;
	if (vec4)
		for (int c = 4 * (int)threadIdx.x; c < cols; c += 4 * blockDim.x)
			*(four *)(to + c) = *(const four *)(from + c);
	else
		for (int c = threadIdx.x; c < cols; c += blockDim.x)
			to[c] = from[c];
}

template <typename T>
static int three(T *side, T *apart, int rows, int cols, int to_side)
{
	if (rows == 0 || cols == 0)
		return 0;
	int vec4 = cols % 4 == 0 && aligned4(side) && aligned4(apart);
	three_kernel<T><<<3 * rows, 128, 0, at_cu_stream>>>(side, apart, rows,
							    cols, to_side, vec4);
	CU_LAUNCHED("parameter layout kernel");
	return 0;
}

template <typename T>
int tr_cat_three(T *dst, const T *src, int rows, int cols)
{
	return three(dst, (T *)src, rows, cols, 1);
}

template <typename T>
int tr_split_three(T *dst, const T *src, int rows, int cols)
{
	return three((T *)src, dst, rows, cols, 0);
}
template int tr_cat_three<float>(float *, const float *, int, int);
template int tr_cat_three<bf16>(bf16 *, const bf16 *, int, int);
template int tr_split_three<float>(float *, const float *, int, int);
template int tr_split_three<bf16>(bf16 *, const bf16 *, int, int);
