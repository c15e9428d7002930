// attention_tc.cuh - the fused attention on tensor cores (attention_tc.cu,
// attention_tc_bwd.cu), behind at_cuda_attention_forward and
// at_cuda_attention_backward's dispatch (attention.cu, attention_bwd.cu).
// Views as theirs, laid out as at_heads says (ops_cuda.h); tf32 0
// computes each product from fp32 operands split in two TF32 halves
// (three products, about fp32's accuracy), 1 from TF32 operands (one
// product).
#ifndef ANDREA_ATTENTION_TC_CUH
#define ANDREA_ATTENTION_TC_CUH

#include "common/cuda_util.cuh" // at_heads (ops_cuda.h)

// Where row 0 of head bh starts in a view laid out as h (both paths'
// kernels, FMA and tensor-core); its rows are h.ld floats apart.
__device__ __forceinline__ size_t heads_base(at_heads h, int bh, int T,
					     int D)
{
	return (size_t)(bh / h.H) * T * h.ld + (size_t)(bh % h.H) * D;
}

// The layout a dispatch point was given, checked: NULL as {1, D}.
int at_cu_heads_of(at_heads *out, const at_heads *in, int BH, int D);

// Both passes exponentiate in base 2: scores times scale * TC_LOG2E, lse
// (natural log, as the CPU's) times TC_LOG2E.
#define TC_LOG2E 1.4426950408889634f

// 0 where andrea's fused attention, forward and backward, FMA or tensor
// cores, takes BH heads of D values in one call (a grid's y counts the
// heads, shared memory holds D <= 256), else -1 with the reason.
int at_cu_attention_fits(long long BH, int D);

// 1 when the kernels take heads of D values laid out as h and every
// non-NULL pointer of ptrs[n]: D % 4 == 0, D <= 128, rows 16-byte aligned.
int at_cu_attention_tc_takes(int D, at_heads h, const void *const *ptrs,
			     int n);
int at_cu_attention_tc_forward(float *out, float *lse, const float *q,
			       const float *k, const float *v, int BH, int T,
			       int D, float scale, int causal, int tf32,
			       at_heads h);
int at_cu_attention_tc_backward(float *dq, float *dk, float *dv,
				const float *q, const float *k, const float *v,
				const float *dout, const float *lse,
				const float *delta, int BH, int T, int D,
				float scale, int causal, int tf32, at_heads h);

#endif
