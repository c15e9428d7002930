/* fuzz_vocab.c - vocab.json and merges.txt: the input up to its first NUL
 * byte as the vocabulary, the rest as the merges, through
 * at_gpt2_tokenizer_parse; a tokenizer it accepts must pass
 * fuzz_tok_check on a few texts and on the input. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/gpt2_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t vn = nul ? (size_t)(nul - data) : size;
	const char *merges = nul ? (const char *)nul + 1 : "";
	size_t mn = nul ? size - vn - 1 : 0;
	char err[1200];
	err[0] = 0;
	at_tokenizer *t = at_gpt2_tokenizer_parse((const char *)data, vn,
						  "vocab.json", merges, mn,
						  "merges.txt", err, sizeof err);
	fuzz_tok_result(t, err, data, size);
	return 0;
}
