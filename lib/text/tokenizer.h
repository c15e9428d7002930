/* tokenizer.h - text to token ids and back.
 *
 * Two kinds.  The byte tokenizer, every model's without one of its own:
 * each byte is a token (0..255) and BOS is 256.  GPT-2's byte-level BPE:
 * the text is cut into pieces by GPT-2's regular expression (PCRE2, with
 * Unicode letters, numbers and spaces), and each piece is encoded by
 * bpe.h.  A byte that is not part of valid UTF-8 ends the piece before it
 * and is a piece of its own; so encoding never loses a byte, and
 * decoding the ids gives the text back byte for byte.  The added tokens
 * (<|endoftext|>) are found in the text first, leftmost and longest, as
 * Hugging Face's tokenizers finds them, and the text between them is
 * encoded as above.
 *
 * A model file carries its tokenizer as records (andrea-model(5)):
 * tokenizer.vocab u8 [N] (the tokens' bytes, one after another; attributes
 * kind=gpt2-bpe, tokens, bos), tokenizer.lengths i32 [n],
 * tokenizer.merges i32 [M,2] (the two tokens of each merge, first rank
 * first) and, where there are any, tokenizer.added i32 [K] (the added
 * tokens' ids).
 */
#ifndef ANDREA_TOKENIZER_H
#define ANDREA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "stream/stream.h"
#include "text/bpe.h"

typedef struct at_tokenizer at_tokenizer;

/* Added tokens a tokenizer holds at most. */
#define AT_TOK_MAX_ADDED 256
/* Bytes one piece of text may have at most (16 MiB): merging one takes
 * some 40 bytes of memory a byte. */
#define AT_TOK_MAX_PIECE (1 << 24)

/* The byte tokenizer. */
at_tokenizer *at_tok_bytes(void);
/* GPT-2's tokenizer over bpe (which it then owns), with bos the token that
 * starts a sequence (-1: none) and the n_added tokens added[] found in
 * text as they are.  NULL with err on failure. */
at_tokenizer *at_tok_gpt2(at_bpe *bpe, int bos, const int32_t *added,
			  int n_added, char *err, size_t errlen);
void at_tok_free(at_tokenizer *t);

int at_tok_is_bpe(const at_tokenizer *t);
const at_bpe *at_tok_bpe(const at_tokenizer *t); /* NULL for bytes */
int at_tok_size(const at_tokenizer *t);          /* ids with text: 0..size-1 */
int at_tok_bos(const at_tokenizer *t);           /* -1: none */
/* The added tokens' ids, in order, into *ids; their count. */
int at_tok_added(const at_tokenizer *t, const int32_t **ids);
/* Where it is the byte tokenizer's: "bytes"; else "gpt2-bpe". */
const char *at_tok_kind(const at_tokenizer *t);

/* The ids of the n bytes s into out (room for n ids, never more needed);
 * their count, or -1 with err (out of memory; a piece over
 * AT_TOK_MAX_PIECE; a BPE tokenizer in a build without PCRE2). */
long at_tok_encode(at_tokenizer *t, const unsigned char *s, size_t n,
		   int32_t *out, char *err, size_t errlen);
/* The bytes of token id, their count in *len; BOS of the byte tokenizer
 * has none (*len 0).  NULL for an id outside 0..size-1. */
const unsigned char *at_tok_piece(const at_tokenizer *t, int id, size_t *len);

/* The records' names, in their order: 3 always, the 4th (added) only
 * where the tokenizer has added tokens. */
#define AT_TOK_RECORDS 4
const char *at_tok_record_name(int i);
/* Writes t's records (none for the byte tokenizer).  0 or -1 (the
 * writer's err). */
int at_tok_write(const at_tokenizer *t, at_writer *w);
/* The tokenizer of those records (added may be NULL: none), checked
 * (at_bpe_new's checks, the lengths' sum, merges and added ids in
 * range).  NULL with err. */
at_tokenizer *at_tok_from_records(const at_tensor *vocab,
				  const at_tensor *lengths,
				  const at_tensor *merges,
				  const at_tensor *added, char *err,
				  size_t errlen);

#endif
