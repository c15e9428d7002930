/* fuzz_checkpoint.c - andrea-train's checkpoints (--checkpoint FILE on
 * resuming): tr_checkpoint_read_head on the input as a file (the
 * train_state and config records), then, where the config's parameters
 * are few enough to hold, the layout it implies and
 * tr_checkpoint_read_body into it (parameters, both moments, the
 * tokenizer's records), as train_run's resume() reads them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "stream/stream.h"
#include "train/train.h"

/* The layout's floats are allocated four times (parameters, gradients,
 * two moments): past this, the body is not read. */
#define MAX_FLOATS (1u << 20)

/* One line, not empty: what every refusal must say. */
static void one_line(const char *err)
{
	if (!err[0] || strchr(err, '\n'))
		abort();
}

/* The floats of the layout tr_model_init makes (andrea-model(5)). */
static uint64_t floats_of(const at_config *c, int biases, int tied)
{
	uint64_t C = (uint64_t)c->d_model, V = (uint64_t)c->vocab,
		 T = (uint64_t)c->ctx, L = (uint64_t)c->n_layer;
	uint64_t layer = 12 * C * C + 4 * C + (biases ? 9 * C : 0);
	return V * C * (tied ? 1 : 2) + T * C + L * layer + 2 * C;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	at_read_opts ro = {.threads = 1, .max_bytes = FUZZ_MAX_BYTES};
	at_reader r;
	if (at_reader_open(&r, fuzz_tmpfile(data, size), &ro) < 0) {
		one_line(r.err);
		return 0;
	}
	char err[1200] = "";
	tr_state st;
	at_config cfg;
	memset(&st, 0, sizeof st);
	if (tr_checkpoint_read_head(&r, &st, &cfg, err, sizeof err) < 0) {
		one_line(err);
		goto out;
	}
	uint64_t floats = floats_of(&cfg, st.biases, st.tied);
	if (floats > MAX_FLOATS)
		goto out;
	tr_model m;
	if (tr_model_init(&m, &cfg, st.biases, st.tied) < 0)
		abort(); /* a few MiB at most: no reason to fail */
	if (m.total != floats) /* the cap above counted another layout */
		abort();
	float *mom1 = calloc(m.total, sizeof *mom1);
	float *mom2 = calloc(m.total, sizeof *mom2);
	if (!mom1 || !mom2)
		abort();
	err[0] = 0;
	if (tr_checkpoint_read_body(&r, &m, mom1, mom2, err, sizeof err) < 0)
		one_line(err);
	else if (m.tok)
		fuzz_tok_check(m.tok, data, size > 256 ? 256 : size);
	free(mom1);
	free(mom2);
	tr_model_free(&m);
out:
	at_reader_close(&r);
	return 0;
}
