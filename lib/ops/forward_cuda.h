/* forward_cuda.h - the forward engine on a CUDA GPU (kernels/forward/),
 * behind forward.h.
 *
 * The weights go to the device once, at at_cuda_fwd_new (with bf16
 * copies in AT_PREC_BF16); the KV cache ([rows,H,ctx,D] per layer, in the
 * products' type) and the buffers of the largest batch seen stay there.
 * Every call takes and returns host memory and waits for the device.
 * Decoding replays one CUDA graph per batch size: the step reads each
 * row's position from device memory, so the same graph serves every
 * step.  Functions return 0, or -1 with the reason in at_cuda_error()
 * (a hook's non-zero value is passed back).
 */
#ifndef ANDREA_FORWARD_CUDA_H
#define ANDREA_FORWARD_CUDA_H

#include <stdint.h>

#include "ops/forward.h"

typedef struct at_cuda_fwd at_cuda_fwd;

at_cuda_fwd *at_cuda_fwd_new(const at_weights *w, int precision, int rows);
void at_cuda_fwd_free(at_cuda_fwd *g);

int at_cuda_fwd_blocks(at_cuda_fwd *g, float *x, int B, int T,
		       const int *layers, int n, const at_hook *hook);
/* at_cuda_fwd_blocks without waiting (no hook): x is copied into pinned
 * memory before it returns, the copies and the blocks run on the device
 * meanwhile.  Up to two records may be in flight; _end waits for the
 * oldest and returns its result, valid until the next _begin (NULL on
 * failure). */
int at_cuda_fwd_blocks_begin(at_cuda_fwd *g, const float *x, int B, int T,
			     const int *layers, int n);
const float *at_cuda_fwd_blocks_end(at_cuda_fwd *g);
/* at_fwd_head: the logits of x [N,C] to sink in pieces of whole rows;
 * AT_CUDA_SINK_STOPPED where the sink returned -1. */
#define AT_CUDA_SINK_STOPPED (-2)
int at_cuda_fwd_head(at_cuda_fwd *g, const float *x, int N, at_sink *sink,
		     void *ctx);
int at_cuda_fwd_logits(at_cuda_fwd *g, float *logits, const int32_t *tokens,
		       int B, int T, const at_hook *hook);
/* Encodes tokens [T] into cache row `row` from position 0. */
int at_cuda_fwd_prefill(at_cuda_fwd *g, int row, const int32_t *tokens,
			int T, float *logits, const at_hook *hook);
/* One position for rows 0..B-1, row b at position pos[b]. */
int at_cuda_fwd_decode(at_cuda_fwd *g, const int32_t *tokens, const int *pos,
		       int B, float *logits, const at_hook *hook);

#endif
