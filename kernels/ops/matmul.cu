// matmul.cu - the matrix products through cuBLAS, and the host side of
// andrea-qkv, andrea-scores and andrea-attend.
//
// cuBLAS is column-major.  A row-major X[r,c] is the column-major X^T, so
// out = a . op(b) is computed as out^T = op(b)^T . a^T: the operands swap
// places and nothing is transposed in memory.  Matrix products run in
// fp32 unless tf32 is asked for (at_cu_blas sets the math mode).
#include "common/cuda_util.cuh"
#include "common/cublas_lazy.cuh"
#include "model/arch.h"

// cuBLAS grids once limited batches to 65535; larger ones go in pieces.
#define MAX_BATCH 65535

extern "C" int at_cuda_matmul(float *out, const float *a, const float *b,
			      int M, int K, int N, int trans_b, float alpha,
			      int tf32)
{
	if (M == 0 || N == 0)
		return 0;
	if (K == 0) { // BLAS would leave out alone
		CU_CHECK(cudaMemsetAsync(out, 0, (size_t)M * N * sizeof *out),
			 "zeroing a product over K = 0");
		return 0;
	}
	cublasHandle_t h = at_cu_blas(tf32);
	if (!h)
		return -1;
	const float beta = 0.0f;
	BLAS_CHECK(at_cublas.sgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
			       CUBLAS_OP_N, N, M, K, &alpha, b, trans_b ? K : N,
			       a, K, &beta, out, N),
		   "cublasSgemm");
	return 0;
}

// out_i[M,N] = alpha * a_i[M,K] . op(b_i) for i < batch, row-major, with
// the given element strides between consecutive matrices.
static int batched(float *out, const float *a, const float *b, int M, int K,
		   int N, int trans_b, float alpha, int batch, long long sa,
		   long long sb, long long so, int tf32, const char *what)
{
	if (M == 0 || N == 0 || batch == 0)
		return 0;
	if (K == 0) {
		CU_CHECK(cudaMemsetAsync(out, 0, (size_t)batch * so * sizeof *out),
			 what);
		return 0;
	}
	cublasHandle_t h = at_cu_blas(tf32);
	if (!h)
		return -1;
	const float beta = 0.0f;
	for (int i = 0; i < batch; i += MAX_BATCH) {
		int n = batch - i < MAX_BATCH ? batch - i : MAX_BATCH;
		BLAS_CHECK(at_cublas.sgemm_strided_batched(
				   h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
				   CUBLAS_OP_N, N, M, K, &alpha, b + i * sb,
				   trans_b ? K : N, sb, a + i * sa, K, sa, &beta,
				   out + i * so, N, so, n),
			   what);
	}
	return 0;
}

// s_i = scale * q_i . k_i^T: the scale rides in alpha.
extern "C" int at_cuda_scores_forward(float *s, const float *q, const float *k,
				      int BH, int T, int D, float scale,
				      int tf32)
{
	long long qs = (long long)T * D, ss = (long long)T * T;
	return batched(s, q, k, T, D, T, 1, scale, BH, qs, qs, ss, tf32,
		       "cublasSgemmStridedBatched for scores");
}

extern "C" int at_cuda_attend_forward(float *o, const float *a, const float *v,
				      int BH, int T, int D, int tf32)
{
	long long as = (long long)T * T, vs = (long long)T * D;
	return batched(o, a, v, T, T, D, 0, 1.0f, BH, as, vs, vs, tf32,
		       "cublasSgemmStridedBatched for out");
}

static int upload(float *dst, const float *src, size_t n, const char *what)
{
	CU_CHECK(cudaMemcpy(dst, src, n * sizeof *src, cudaMemcpyHostToDevice),
		 what);
	return 0;
}

static int download(float *dst, const float *src, size_t n, const char *what)
{
	CU_CHECK(cudaMemcpy(dst, src, n * sizeof *src, cudaMemcpyDeviceToHost),
		 what);
	return 0;
}

// LN in place on x, one product with [Wq|Wk|Wv] laid side by side (C x
// 3*H*D), one launch splitting the three into heads.
extern "C" int at_cuda_qkv_host(float *q, float *k, float *v, const float *x,
				const float *ln_w, const float *ln_b,
				const float *wqkv, int B, int T, int C,
				int H, int D, int tf32)
{
	size_t rows = (size_t)B * T, cols = (size_t)H * D, n = rows * cols;
	if (n == 0)
		return 0;
	dev_buf<float> dx, dln, dw, dproj, dout;
	if (dx.alloc(rows * C, "x") || dw.alloc((size_t)C * 3 * cols, "Wq|Wk|Wv") ||
	    dproj.alloc(rows * 3 * cols, "the projection") ||
	    dout.alloc(3 * n, "q, k and v"))
		return -1;
	if (upload(dx.p, x, rows * C, "copying x to the GPU"))
		return -1;
	if (upload(dw.p, wqkv, (size_t)C * 3 * cols, "copying Wq, Wk, Wv to the GPU"))
		return -1;
	if (ln_w) {
		if (dln.alloc(2 * (size_t)C, "LN1") ||
		    upload(dln.p, ln_w, C, "copying LN1 to the GPU") ||
		    upload(dln.p + C, ln_b, C, "copying LN1 to the GPU") ||
		    at_cuda_layernorm_forward(dx.p, dx.p, dln.p, dln.p + C,
					      (int)rows, C, AT_LN_EPS))
			return -1;
	}
	if (at_cuda_matmul(dproj.p, dx.p, dw.p, (int)rows, C, (int)(3 * cols), 0,
			   1.0f, tf32) ||
	    at_cuda_split_heads(dout.p, dproj.p, 3, B, T, H, D))
		return -1;
	return download(q, dout.p, n, "computing q") ||
	       download(k, dout.p + n, n, "computing k") ||
	       download(v, dout.p + 2 * n, n, "computing v") ? -1 : 0;
}

extern "C" int at_cuda_scores_host(float *s, const float *q, const float *k,
				   int BH, int T, int D, float scale, int tf32)
{
	size_t nq = (size_t)BH * T * D, ns = (size_t)BH * T * T;
	if (ns == 0)
		return 0;
	dev_buf<float> dq, dk, ds;
	if (dq.alloc(nq, "q") || dk.alloc(nq, "k") || ds.alloc(ns, "scores") ||
	    upload(dq.p, q, nq, "copying q to the GPU") ||
	    upload(dk.p, k, nq, "copying k to the GPU") ||
	    at_cuda_scores_forward(ds.p, dq.p, dk.p, BH, T, D, scale, tf32) ||
	    download(s, ds.p, ns, "computing scores"))
		return -1;
	return 0;
}

extern "C" int at_cuda_attend_host(float *out, const float *attn,
				   const float *v, int B, int H, int T, int D,
				   int merge, const float *wo, int tf32)
{
	int BH = B * H, C = H * D;
	size_t na = (size_t)BH * T * T, nv = (size_t)BH * T * D;
	if (nv == 0)
		return 0;
	dev_buf<float> da, dv, dout, dcat, dwo, dy;
	if (da.alloc(na, "attn") || dv.alloc(nv, "v") || dout.alloc(nv, "out") ||
	    upload(da.p, attn, na, "copying attn to the GPU") ||
	    upload(dv.p, v, nv, "copying v to the GPU") ||
	    at_cuda_attend_forward(dout.p, da.p, dv.p, BH, T, D, tf32))
		return -1;
	float *res = dout.p;
	if (merge || wo) {
		if (dcat.alloc(nv, "the concatenated heads") ||
		    at_cuda_merge_heads(dcat.p, dout.p, B, T, H, D))
			return -1;
		res = dcat.p;
	}
	if (wo) {
		if (dwo.alloc((size_t)C * C, "Wo") || dy.alloc(nv, "y") ||
		    upload(dwo.p, wo, (size_t)C * C, "copying Wo to the GPU") ||
		    at_cuda_matmul(dy.p, dcat.p, dwo.p, B * T, C, C, 0, 1.0f, tf32))
			return -1;
		res = dy.p;
	}
	return download(out, res, nv, wo ? "computing y" : "computing out");
}
