/* capture.h - --capture and --ablate of the whole-model filters: the
 * forward engine's hook (prenorm.h) choosing activations by name, layer
 * and head, writing them as records as they are computed, and knocking
 * heads out.
 *
 * --capture NAME[:LAYERS[:HEADS]] (repeatable): NAME one of the hook's
 * names (capture_names), LAYERS and HEADS lists as -l takes them ("3",
 * "0-2,5", "all"; absent: all).  A record of [B,H,T,*] (q, k, v, scores,
 * attn, out) with HEADS is written one head at a time, [B,1,T,*] with a
 * `head` attribute; every record carries `layer` and the stages'
 * attributes (at_fwd_activation_attrs), and captured=1.
 * --ablate L.H[:mean[=FILE]] (repeatable): head H of layer L's output
 * (out, before Wo) is set to zero, or to its mean over the batch's rows
 * at each position, or to that mean in a reference run's capture FILE,
 * before the rest of the layer uses it.
 * --patch FILE (repeatable): every captured record of FILE (a --capture
 * of another run) replaces that activation of its layer (and
 * head, where it has one) in this run, as soon as it is computed: a
 * clean run's head output into a corrupted run.  Shapes must agree.
 * Only the CPU engine hands the hook the activation itself, so --ablate
 * and --patch need it.
 */
#ifndef ANDREA_CAPTURE_H
#define ANDREA_CAPTURE_H

#include <stdint.h>

#include "ops/forward.h"
#include "ops/prenorm.h"
#include "stream/stream.h"

#define CAPTURE_MAX 64      /* --capture and --ablate options at most */
#define CAPTURE_INDICES 4096 /* layers or heads a list may name */

/* The names --capture takes, in the order a block computes them, then
 * NULL. */
extern const char *const capture_names[];

typedef struct {
	int name;                      /* index into capture_names */
	unsigned char layer[CAPTURE_INDICES], head[CAPTURE_INDICES];
	int heads_given;
	int listed_layers, listed_heads; /* named, not "all": checked */
} capture_spec;

typedef struct {
	capture_spec spec[CAPTURE_MAX];
	int n_spec;
	struct {
		int layer, head, mean;
		float *ref;        /* :mean=FILE: the reference's mean, [T,D] */
		uint64_t ref_T, ref_D;
	} ablate[CAPTURE_MAX];
	int n_ablate;
	at_tensor *patch;              /* --patch records */
	int n_patch;
	at_attrs tag;                  /* added to every record (step, row) */
	/* set by capture_start */
	at_writer *w;
	int L, H, D;
	at_hook hook;
} capture;

/* The option callbacks: ctx is the capture. */
void capture_opt(void *ctx, const char *arg, const char *what);
void ablate_opt(void *ctx, const char *arg, const char *what);
void patch_opt(void *ctx, const char *arg, const char *what);
void capture_free(capture *c);

/* 1 where an option asked for anything. */
int capture_wanted(const capture *c);
/* Checks the options against a model of L layers and H heads of width D
 * and the engine e that will run them (on the GPU, that none needs the
 * CPU), ending the program on a mismatch; then the hook that writes to w
 * (set later with capture_to). */
const at_hook *capture_start(capture *c, int L, int H, int D, const at_fwd *e);
void capture_to(capture *c, at_writer *w);
/* Sets attribute key of every record captured from now on (value NULL:
 * drops it): andrea-generate's step and row. */
void capture_tag(capture *c, const char *key, const char *value);

#endif
