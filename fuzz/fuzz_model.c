/* fuzz_model.c - the model loader: at_model_open on the input as a model
 * file (config record, shape inference, caps), then the checks a stage
 * makes and at_model_param for the parameters of layer 0 at the shapes
 * the config implies, as andrea-qkv and andrea-attend ask for them. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int heads = data[0] & 7; /* 0: from the config */
	at_read_opts ro = {.threads = 1 + ((data[0] >> 3) & 1),
			   .max_bytes = FUZZ_MAX_BYTES};
	at_model m;
	char err[700];
	if (at_model_open(&m, fuzz_tmpfile(data + 1, size - 1), 1, heads, &ro,
			  err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	if (at_model_need_heads(&m, err, sizeof err) == 0 &&
	    at_model_check_layer(&m, 0, err, sizeof err) == 0) {
		uint64_t C = (uint64_t)m.cfg.d_model, V = (uint64_t)m.cfg.vocab,
			 T = (uint64_t)m.cfg.ctx;
		static const char *mats[] = {"layers.0.attn.wq", "layers.0.attn.wk",
					     "layers.0.attn.wv", "layers.0.attn.wo"};
		static const char *vecs[] = {"layers.0.ln1.weight",
					     "layers.0.ln1.bias"};
		struct {
			const char *name;
			int rank;
			uint64_t dims[2];
		} want[8] = {{"wte", 2, {V, C}}, {"wpe", 2, {T, C}}};
		int n = 2;
		for (int i = 0; i < 4; i++)
			want[n].name = mats[i], want[n].rank = 2,
			want[n].dims[0] = C, want[n++].dims[1] = C;
		for (int i = 0; i < 2; i++)
			want[n].name = vecs[i], want[n].rank = 1,
			want[n++].dims[0] = C;
		for (int i = 0; i < n; i++) {
			at_tensor t;
			err[0] = 0;
			if (at_model_param(&m, want[i].name, want[i].rank,
					   want[i].dims, &t, err, sizeof err) < 0) {
				if (!err[0] || strchr(err, '\n'))
					abort();
				continue;
			}
			if (t.dtype != AT_F32 || t.rank != want[i].rank ||
			    memcmp(t.dims, want[i].dims,
				   (size_t)t.rank * sizeof t.dims[0]) != 0)
				abort();
			at_tensor_free(&t);
		}
	}
	at_model_close(&m);
	return 0;
}
