/* fuzz_gpt2config.c - a Hugging Face config.json: at_gpt2_config_parse on
 * the input; a config it accepts must be a usable andrea config. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/gpt2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[600];
	at_config cfg;
	err[0] = 0;
	if (at_gpt2_config_parse((const char *)data, size, "config.json", &cfg,
				 err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	if (cfg.n_layer < 1 || cfg.n_head < 1 || cfg.d_model < 1 ||
	    cfg.ctx < 1 || cfg.vocab < 1 || cfg.d_model % cfg.n_head)
		abort();
	return 0;
}
