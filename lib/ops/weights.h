/* weights.h - a model's weights read from a model (model.h) for the
 * forward engine (forward.h).
 *
 * Only the parts asked for are loaded, each checked against the model's
 * C, H, V and ctx by name (andrea-model(5)): andrea-logits needs only
 * the head, andrea-block only its layers.
 */
#ifndef ANDREA_WEIGHTS_H
#define ANDREA_WEIGHTS_H

#include <stddef.h>

#include "core/tensor.h"
#include "model/model.h"
#include "ops/forward.h"

/* What at_weights_load reads. */
enum {
	AT_LOAD_EMBED = 1,  /* wte, wpe */
	AT_LOAD_LAYERS = 2, /* the layers (all, or those asked for) */
	AT_LOAD_HEAD = 4,   /* lnf, lm_head */
	AT_LOAD_ALL = 7
};

typedef struct {
	at_weights w;     /* what the engine takes: pointers into t */
	at_block_w *layer; /* w.layer, L entries */
	at_tensor *t;     /* the loaded tensors, owned */
	int n;
} at_loaded;

/* Loads the parts `what` names from m, with AT_LOAD_LAYERS every layer l
 * with layers[l] != 0 (layers NULL: all of them), whose C and H must be known.
 * Returns 0, or -1 with err naming the first parameter that is missing or
 * misshapen; nothing stays allocated then. */
int at_weights_load(at_loaded *lw, const at_model *m, int what,
		    const unsigned char *layers, char *err, size_t errlen);
void at_weights_free(at_loaded *lw);

#endif
