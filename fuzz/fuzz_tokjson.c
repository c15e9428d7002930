/* fuzz_tokjson.c - Hugging Face's tokenizer.json: the input through
 * at_gpt2_tokenizer_json_parse; a tokenizer it accepts must pass
 * fuzz_tok_check on a few texts and on the input. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/gpt2_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1200];
	err[0] = 0;
	at_tokenizer *t = at_gpt2_tokenizer_json_parse((const char *)data, size,
						       "tokenizer.json", err,
						       sizeof err);
	fuzz_tok_result(t, err, data, size);
	return 0;
}
