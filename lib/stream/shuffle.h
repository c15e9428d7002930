/* shuffle.h - the byte shuffle of the stream format, fast.
 *
 * Shuffling n bytes of elem-byte elements gathers byte b of every element
 * into plane b: out[b * (n / elem) + i] = in[i * elem + b].  Unshuffling is
 * the inverse.  Bytes past the last whole element are copied unchanged;
 * in and out do not overlap.
 */
#ifndef ANDREA_SHUFFLE_H
#define ANDREA_SHUFFLE_H

#include <stddef.h>

void at_shuffle(const unsigned char *in, unsigned char *out, size_t n,
		size_t elem);
void at_unshuffle(const unsigned char *in, unsigned char *out, size_t n,
		  size_t elem);

#endif
