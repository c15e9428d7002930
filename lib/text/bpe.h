/* bpe.h - byte-pair encoding over bytes: a vocabulary of byte strings and
 * a ranked list of merges, applied to one piece of text at a time.
 *
 * A piece starts as one token a byte (the vocabulary must hold every
 * single byte); then, while any adjacent pair of tokens has a merge, the
 * pair whose merge ranks first (the leftmost of equals) becomes the token
 * spelt by the two together.  This is the rule of GPT-2's encoder and of
 * Hugging Face's tokenizers.  Pieces of up to BPE_CACHE_PIECE bytes are
 * remembered, so one at_bpe is for one thread at a time.
 */
#ifndef ANDREA_BPE_H
#define ANDREA_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct at_bpe at_bpe;

/* The vocabulary: token i is the len[i] bytes that follow token i-1's in
 * bytes.  Every token at least one byte, none twice, every byte a token
 * of its own.  NULL with err on failure ("token 7 repeats token 3"). */
at_bpe *at_bpe_new(const unsigned char *bytes, const uint32_t *len, int n,
		   char *err, size_t errlen);
void at_bpe_free(at_bpe *b);

/* Adds the merge of tokens a and b, ranked after those added before; the
 * two spelt together must be a token.  0, or -1 with err. */
int at_bpe_add_merge(at_bpe *b, int32_t a, int32_t c, char *err,
		     size_t errlen);

int at_bpe_size(const at_bpe *b);    /* tokens */
int at_bpe_merges(const at_bpe *b);  /* merges */
/* The bytes of token id (0 <= id < size), their count in *len. */
const unsigned char *at_bpe_token(const at_bpe *b, int id, size_t *len);
/* The merge of rank r as its two tokens. */
void at_bpe_merge(const at_bpe *b, int r, int32_t *a, int32_t *c);
/* The token spelt by s[0, n), or -1. */
int at_bpe_find(const at_bpe *b, const unsigned char *s, size_t n);

/* The tokens of the piece s[0, n) into out (room for n); their count.
 * Returns -1 only when out of memory (a piece over BPE_SHORT bytes). */
long at_bpe_encode(at_bpe *b, const unsigned char *s, size_t n, int32_t *out);

#endif
