/* activations.h - every intermediate of one forward pass, as the records
 * the stage filters write (andrea-train --forward).
 *
 * The forward pass is the trainer's (train.h) on the CPU; the records are
 * named and attributed as the stages name theirs, so that a stage's output
 * can be compared with the one the whole model computes.
 */
#ifndef ANDREA_TRAIN_ACTIVATIONS_H
#define ANDREA_TRAIN_ACTIVATIONS_H

#include <stddef.h>

#include "stream/stream.h"
#include "train/train.h"

/* Runs tok (i32 [B,T]) through m, keeping every activation.  Checks first
 * that tok holds tokens, that T fits m's context and that every id is in
 * m's vocabulary.  Returns 0, or -1 with a one-line reason in err. */
int tr_activations_forward(tr_model *m, const at_tensor *tok, char *err,
			   size_t errlen);

/* Writes tok, then the activations of the last tr_activations_forward
 * over it: x, then per layer q, k, v, scores, attn, out, y and x (with
 * their layer, head count, scale and mask attributes), then logits.  w is
 * not finished.  Returns 0, or -1 with the reason in w->err. */
int tr_activations_write(tr_model *m, const at_tensor *tok, at_writer *w);

#endif
