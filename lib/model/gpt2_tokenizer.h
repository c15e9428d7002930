/* gpt2_tokenizer.h - GPT-2's tokenizer files as an andrea tokenizer.
 *
 * Two spellings of the same byte-level BPE: vocab.json (each token, in
 * bytelevel.h's alphabet, to its id 0..n-1) with merges.txt (one merge a
 * line, "A B", first rank first, after an optional "#version" line); and
 * Hugging Face's tokenizer.json, which holds both (model.vocab and
 * model.merges, as "A B" strings or [A, B] pairs) with the pipeline
 * around them, checked to be GPT-2's: a BPE model without dropout,
 * unknown token, byte fallback, word affixes or ignore_merges; added
 * tokens without lstrip, rstrip or single_word; no normalizer; a
 * ByteLevel pre-tokenizer with its regular expression and no prefix
 * space.  BOS is <|endoftext|> where the vocabulary has it, else the
 * first special added token, else none.
 */
#ifndef ANDREA_GPT2_TOKENIZER_H
#define ANDREA_GPT2_TOKENIZER_H

#include <stddef.h>

#include "text/tokenizer.h"

/* vocab.json and merges.txt; NULL with err naming the file, the line or
 * the token. */
at_tokenizer *at_gpt2_tokenizer_files(const char *vocab_path,
				      const char *merges_path, char *err,
				      size_t errlen);
/* The same on bytes in memory (the fuzz target's entry); the labels name
 * them in errors. */
at_tokenizer *at_gpt2_tokenizer_parse(const char *vocab, size_t vocab_len,
				      const char *vocab_label,
				      const char *merges, size_t merges_len,
				      const char *merges_label, char *err,
				      size_t errlen);
/* tokenizer.json. */
at_tokenizer *at_gpt2_tokenizer_json(const char *path, char *err,
				     size_t errlen);
at_tokenizer *at_gpt2_tokenizer_json_parse(const char *json, size_t len,
					   const char *label, char *err,
					   size_t errlen);

/* Writes t (a BPE tokenizer) into dir as tokenizer.json, with its added
 * tokens, and as vocab.json and merges.txt, which transformers'
 * GPT2TokenizerFast loads (without added tokens but <|endoftext|>).  0, or
 * -1 with err. */
int at_gpt2_tokenizer_export(const at_tokenizer *t, const char *dir,
			     char *err, size_t errlen);

#endif
