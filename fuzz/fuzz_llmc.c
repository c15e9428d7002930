/* fuzz_llmc.c - llm.c's checkpoints: at_llmc_config on the input as a
 * file, then, where its header and size agree, at_llmc_import into a sink
 * that checks each parameter's shape against the config. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/gpt2.h"

static int check_param(void *ctx, const at_tensor *t)
{
	const at_config *c = ctx;
	if (t->rank < 1 || t->rank > 2 || t->dims[0] == 0 ||
	    t->dims[0] > (uint64_t)4 * c->d_model + (uint64_t)c->vocab + c->ctx)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1200];
	at_config cfg;
	const char *path = fuzz_tmpfile(data, size);
	err[0] = 0;
	if (at_llmc_config(path, &cfg, err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	err[0] = 0;
	if (at_llmc_import(path, check_param, &cfg, err, sizeof err) < 0 &&
	    (!err[0] || strchr(err, '\n')))
		abort();
	return 0;
}
