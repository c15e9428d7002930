// matmul.cu - the attention's batched products, and the host side of
// andrea-qkv, andrea-scores and andrea-attend.
//
// Every product goes through at_cu_gemm (common/gemm.cuh) on the process's
// handle: full fp32 unless tf32 is asked for.
#include "common/cuda_util.cuh"
#include "common/gemm.cuh"
#include "model/arch.h"

// Products on the process's handle: TF32 when tf32, else full fp32.
static at_cu_gemm_mode mode(int tf32)
{
	return at_cu_gemm_mode{nullptr, tf32 ? AT_PREC_TF32 : AT_PREC_FP32};
}

// s_i = scale * q_i . k_i^T: the scale rides in alpha.
extern "C" int at_cuda_scores_forward(float *s, const float *q, const float *k,
				      int BH, int T, int D, float scale,
				      int tf32)
{
	at_cu_gemm_mode g = mode(tf32);
	long long qs = (long long)T * D, ss = (long long)T * T;
	return at_cu_gemm(&g, 0, 1, T, T, D, scale, q, qs, k, qs, 0.0f, s, ss,
			  BH, "the scores product");
}

extern "C" int at_cuda_attend_forward(float *o, const float *a, const float *v,
				      int BH, int T, int D, int tf32)
{
	at_cu_gemm_mode g = mode(tf32);
	long long as = (long long)T * T, vs = (long long)T * D;
	return at_cu_gemm(&g, 0, 0, T, D, T, 1.0f, a, as, v, vs, 0.0f, o, vs,
			  BH, "the attention product");
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
	at_cu_gemm_mode g = mode(tf32);
	if (at_cu_gemm(&g, 0, 0, (int)rows, (int)(3 * cols), C, 1.0f, dx.p, 0,
		       dw.p, 0, 0.0f, dproj.p, 0, 1, "the q, k, v product") ||
	    at_cu_split_heads<float>(dout.p, dproj.p, 3, B, T, H, D))
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
		    at_cu_merge_heads<float>(dcat.p, dout.p, B, T, H, D))
			return -1;
		res = dcat.p;
	}
	if (wo) {
		at_cu_gemm_mode g = mode(tf32);
		if (dwo.alloc((size_t)C * C, "Wo") || dy.alloc(nv, "y") ||
		    upload(dwo.p, wo, (size_t)C * C, "copying Wo to the GPU") ||
		    at_cu_gemm(&g, 0, 0, B * T, C, C, 1.0f, dcat.p, 0, dwo.p, 0,
			       0.0f, dy.p, 0, 1, "the output projection"))
			return -1;
		res = dy.p;
	}
	return download(out, res, nv, wo ? "computing y" : "computing out");
}
