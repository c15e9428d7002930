/* activations.h - every intermediate of one forward pass, as the records
 * the stage filters write (andrea-train --forward).
 *
 * The forward pass is the forward engine's (ops/forward.h) on the CPU or
 * the GPU; its hook writes each activation as it is computed, named and
 * attributed as the stages name theirs, so that a stage's output can be
 * compared with the one the whole model computes, and no more than one
 * layer's activations are held at a time.
 */
#ifndef ANDREA_TRAIN_ACTIVATIONS_H
#define ANDREA_TRAIN_ACTIVATIONS_H

#include <stddef.h>

#include "ops/device.h"
#include "stream/stream.h"
#include "train/train.h"

/* Runs tok (i32 [B,T]) through m on dev in precision and writes tok,
 * then x, per layer q, k, v, scores, attn, out, y and x (with their layer,
 * head count, scale and mask attributes), then logits to w (not
 * finished).  Checks first that tok holds tokens, that T fits m's context
 * and that every id is in m's vocabulary.  Returns 0, or -1 with a
 * one-line reason in err (a write error: w->err). */
int tr_activations_run(const tr_model *m, const at_tensor *tok, at_device dev,
		       int precision, at_writer *w, char *err, size_t errlen);

#endif
