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

/* t (a BPE tokenizer) as Hugging Face's files: tokenizer.json, with its
 * added tokens, and vocab.json and merges.txt, which transformers'
 * GPT2TokenizerFast loads (without added tokens but <|endoftext|>).
 * at_gpt2_tok_files_make makes and checks them in memory, before anything
 * is written (label, the model, names it in errors; NULL with err);
 * at_gpt2_tok_files_write writes them into dir (0, or -1 with err). */
typedef struct at_gpt2_tok_files at_gpt2_tok_files;
at_gpt2_tok_files *at_gpt2_tok_files_make(const at_tokenizer *t,
					  const char *label, char *err,
					  size_t errlen);
int at_gpt2_tok_files_write(const at_gpt2_tok_files *f, const char *dir,
			    char *err, size_t errlen);
void at_gpt2_tok_files_free(at_gpt2_tok_files *f);

#endif
