/* labels.h - the words beside a map (andrea-show's --labels and figure
 * axes): the tokens that name its rows and columns, and the names the
 * `axes` attribute gives a record's axes. */
#ifndef ANDREA_LABELS_H
#define ANDREA_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "text/tokenizer.h"

/* The text of each token of batch row b of tokens ([B,T] i32), spelt in
 * GPT-2's byte-level alphabet (a space is U+0120, a newline U+010A) or,
 * with ascii, in ASCII for the PNG's font (a space '_', a backslash and
 * the bytes outside '!'..'~' as \xHH); the byte tokenizer's BOS is <bos>; a
 * padded row's positions past its length (the `lengths` attribute) are
 * "", holding no token.  T
 * labels in one malloc'd block into *out.  Returns 1, 0 where tokens has
 * no such row of T (*out NULL), or -1 when out of memory. */
int hm_token_labels(const at_tokenizer *tok, const at_tensor *tokens,
		    uint64_t b, uint64_t T, int ascii, char ***out);

/* label cut to at most n characters into buf (n + 1 bytes), never
 * inside a \xHH escape of the ASCII spelling: a cut there ends before its
 * backslash, so that no label shows half a byte.  Returns buf. */
const char *hm_label_cut(const char *label, int n, char *buf);

/* The name of t's axis a from its `axes` attribute (a name an axis,
 * comma separated, as andrea-heads, -lens and -patch write) into name
 * (len bytes); 0 where t has none for it. */
int hm_axis_name(const at_tensor *t, int a, char *name, size_t len);

/* The leading axis of t that runs along a batch's rows: the one its
 * `axes` attribute names `row` (andrea-lens's depth,row,position,rank),
 * else the first. */
int hm_row_axis(const at_tensor *t);

#endif
