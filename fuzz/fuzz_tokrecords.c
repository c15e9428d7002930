/* fuzz_tokrecords.c - a model file's tokenizer records: at_model_open on
 * the input as a model file, then at_model_tokenizer (tokenizer.vocab,
 * .lengths and .merges through at_tok_from_records, or the byte
 * tokenizer where there are none); a tokenizer it gives must pass
 * fuzz_tok_check on a few texts and on the input. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	at_read_opts ro = {.threads = 1, .max_bytes = FUZZ_MAX_BYTES};
	at_model m;
	char err[1200];
	err[0] = 0;
	if (at_model_open(&m, fuzz_tmpfile(data, size), 1, 0, &ro, err,
			  sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	err[0] = 0;
	at_tokenizer *t = at_model_tokenizer(&m, err, sizeof err);
	at_model_close(&m);
	fuzz_tok_result(t, err, data, size);
	return 0;
}
