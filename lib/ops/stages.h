/* stages.h - the one CPU/GPU dispatch point of each stage.
 *
 * Each at_stage_<name> does the whole composition of one stage filter on
 * the device the caller resolved (device.h): on the CPU through the ops of
 * ops.h, on the GPU through the host-pointer entries of ops_cuda.h, which
 * copy the inputs over, run the kernels and copy the outputs back.  The
 * commands in cmd/ call these and nothing below them, so a stage's numbers
 * are the same whichever command or library path runs it.
 *
 * Row-major float32, shape letters as in andrea(7).  Every function
 * returns 0, or -1 with a one-line reason in at_stage_error() ("out of
 * memory", or the CUDA failure such as "CUDA: out of memory allocating
 * 4.0 GiB for scores").
 */
#ifndef ANDREA_STAGES_H
#define ANDREA_STAGES_H

#include <stddef.h>
#include <stdint.h>

#include "ops/device.h"

/* Where a stage computes, and how: tf32 != 0 lets the GPU's matrix
 * products round through TF32 tensor cores (the CPU ignores it).  dev
 * AT_DEV_AUTO leaves the choice to the first piece of work: the first
 * at_stage_* or at_stage_streams call gives its size to at_device_auto
 * (device.h), and the process keeps that device. */
typedef struct {
	at_device dev;
	int tf32;
} at_exec;

/* The size of one stage's work, for auto: its multiply-adds, and the
 * bytes its GPU path copies between host and device (inputs, weights and
 * outputs).  One estimate per stage, with the shapes of its entry below;
 * cols = heads * D; wo != 0 for attend's projection. */
typedef struct {
	double madds, bytes;
} at_work;
at_work at_work_embed(int B, int T, int C, int V);
at_work at_work_qkv(int B, int T, int C, int cols);
at_work at_work_scores(int BH, int T, int D);
at_work at_work_mask(size_t n);
at_work at_work_softmax(size_t rows, int n);
at_work at_work_attend(int B, int H, int T, int D, int wo);
at_work at_work_attention(int BH, int T, int D, int causal);

/* The reason the last failing at_stage_* call gave. */
const char *at_stage_error(void);

/* 1 where the stage computes a record of work w piece by piece as it
 * arrives (the CPU), 0 where it needs the record whole (the GPU).  Under
 * auto, the first call decides the device from w: a filter asks when a
 * record's header arrives, before its data. */
int at_stage_streams(const at_exec *e, at_work w);

/* x[B,T,C] = wte[tokens] + wpe[t]; tokens already checked < V. */
int at_stage_embed(const at_exec *e, float *x, const int32_t *tokens,
		   const float *wte, const float *wpe, int V, int B, int T,
		   int C);

/* q, k, v [B,heads,T,D] = split(LN1(x) . wqkv) for x [B,T,C]; wqkv
 * [C, 3*heads*D] holds Wq's, Wk's and Wv's columns side by side; ln_w
 * NULL projects x as given. */
int at_stage_qkv(const at_exec *e, float *q, float *k, float *v,
		 const float *x, const float *ln_w, const float *ln_b,
		 const float *wqkv, int B, int T, int C, int heads, int D);

/* Receives n bytes of a result as it is computed; returns 0, or -1 to
 * stop (the stage then fails with the reason the sink left). */
typedef int at_sink(void *ctx, const void *p, size_t n);

/* scores[BH,T,T] = scale * q[BH,T,D] . k[BH,T,D]^T, handed to sink in
 * order: on the CPU a block of rows (about 4 MiB) at a time as computed,
 * so that the stages downstream start at once; on the GPU in one piece. */
int at_stage_scores(const at_exec *e, const float *q, const float *k,
		    int BH, int T, int D, float scale, at_sink *sink,
		    void *ctx);

/* The causal mask on elements first .. first+n-1 of a [..., T, T] tensor
 * held in s[0, n): fill wherever j > i, nothing else touched.  On the GPU
 * the span must be whole T x T matrices (first and n multiples of T*T). */
int at_stage_mask(const at_exec *e, float *s, uint64_t first, size_t n,
		  int T, float fill);

/* p[rows, n] = the stable row softmax of s (p may be s). */
int at_stage_softmax(const at_exec *e, float *p, const float *s,
		     size_t rows, int n);

/* dst = attn[B,H,T,T] . v[B,H,T,D]: [B,H,T,D]; with merge the heads side
 * by side, [B,T,H*D]; with wo [H*D,H*D] (merge implied) times Wo. */
int at_stage_attend(const at_exec *e, float *dst, const float *attn,
		    const float *v, int B, int H, int T, int D, int merge,
		    const float *wo);

/* The CPU's at_stage_attend in two parts, for probabilities that arrive
 * head by head: out[heads,T,D] = attn . v for the heads at hand, then,
 * once every head is done, dst from out[B,H,T,D] as at_stage_attend
 * makes it (out is dst itself when neither merge nor wo). */
int at_stage_attend_heads(float *out, const float *attn, const float *v,
			  int heads, int T, int D);
int at_stage_attend_join(float *dst, const float *out, int B, int H, int T,
			 int D, int merge, const float *wo);

/* andrea-attention, the four stages scores, mask, softmax and attend in
 * one: out[BH,T,D] = softmax(scale q.k^T, causal unless causal is 0) . v,
 * and lse[BH,T] (if not NULL) each row's log-sum-exp, without the T x T
 * scores (ops.h: at_attention_fused). */
int at_stage_attention(const at_exec *e, float *out, float *lse,
		       const float *q, const float *k, const float *v, int BH,
		       int T, int D, float scale, int causal);

#endif
