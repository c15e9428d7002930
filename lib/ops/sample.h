/* sample.h - drawing the next token from a row of logits.
 *
 * Uniform draws come from the counter-based generator of philox.h, so a
 * seed fixes every draw: draw n (0, 1, 2, ...) of row r (a sequence of a
 * batch) is Philox4x32-10 of counter (n mod 2^32, n div 2^32, r, 0) under
 * key seed ^ FNV-1a("sample"), low half first; its first two words r0, r1
 * give u = (r0 * 2^21 + (r1 >> 11)) / 2^53, a double in [0, 1).
 */
#ifndef ANDREA_SAMPLE_H
#define ANDREA_SAMPLE_H

#include <stdint.h>

/* The n-th uniform draw in [0, 1) of row `row` under seed. */
double at_sample_uniform(uint64_t seed, uint32_t row, uint64_t n);

/* The index of the largest logit, the
 * lowest index among equals; NaN entries are ignored.  -1 when every
 * entry is NaN. */
int at_argmax(const float *logits, int V);

/* Draws a token from softmax(logits / temperature) restricted to the
 * top_k largest logits (top_k <= 0 or >= V: all of them; equal logits at
 * the boundary are kept lowest index first), and then to the fewest of
 * those, largest first, whose probabilities (the weights below over the
 * kept ones' total) sum to top_p or more (top_p >= 1: all of them; at
 * least one is kept).  temperature 0 or top_k 1 is at_argmax.  Otherwise
 * the weights exp((l - max) / temperature) are summed in double, and the
 * token is the first kept id, in increasing order, at which the running
 * sum exceeds u times the total (a logit of -inf weighs 0).  scratch
 * holds V ints.  Returns -1 when a logit is NaN or the largest is
 * infinite (+inf, or every one -inf). */
int at_sample(const float *logits, int V, double temperature, int top_k,
	      double top_p, double u, int *scratch);

#endif
