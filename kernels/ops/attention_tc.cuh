// attention_tc.cuh - the fused attention on tensor cores (attention_tc.cu,
// attention_tc_bwd.cu), behind at_cuda_attention_forward and
// at_cuda_attention_backward's dispatch (attention.cu, attention_bwd.cu).
// Views as theirs, [BH,T,D] contiguous; tf32 0 computes each product from
// fp32 operands split in two TF32 halves (three products, about fp32's
// accuracy), 1 from TF32 operands (one product).
#ifndef ANDREA_ATTENTION_TC_CUH
#define ANDREA_ATTENTION_TC_CUH

// Both passes exponentiate in base 2: scores times scale * TC_LOG2E, lse
// (natural log, as the CPU's) times TC_LOG2E.
#define TC_LOG2E 1.4426950408889634f

// 1 when the kernels take heads of D values and every non-NULL pointer of
// ptrs[n]: D % 4 == 0, D <= 128, 16-byte aligned.
int at_cu_attention_tc_takes(int D, const void *const *ptrs, int n);
int at_cu_attention_tc_forward(float *out, float *lse, const float *q,
			       const float *k, const float *v, int BH, int T,
			       int D, float scale, int causal, int tf32);
int at_cu_attention_tc_backward(float *dq, float *dk, float *dv,
				const float *q, const float *k, const float *v,
				const float *dout, const float *lse,
				const float *delta, int BH, int T, int D,
				float scale, int causal, int tf32);

#endif
