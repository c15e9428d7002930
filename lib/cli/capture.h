/* capture.h - --capture, --ablate and --patch of the whole-model
 * filters: the forward engine's hook (prenorm.h) choosing activations by
 * name, layer, head and position, writing them as records as they are
 * computed, knocking heads out and putting other runs' activations in.
 *
 * --capture NAME[:LAYERS[:HEADS]][@POSITIONS] (repeatable): NAME one of
 * the hook's names (capture_names; embed, lnf and logits are the model's
 * and take no LAYERS), LAYERS and HEADS lists as -l takes them ("3",
 * "0-2,5", "all"; absent: all), POSITIONS such a list of positions along
 * T (the query rows of scores and attn).  A record of [B,H,T,*] (q, k,
 * v, scores, attn, out, result) with HEADS is written one head at a time,
 * [B,1,T,*] with a `head` attribute; with POSITIONS it holds only those
 * below the pass's T, named by a `positions` attribute.  Every record
 * carries `layer` (but the model's), the stages' attributes
 * (at_fwd_activation_header), and captured=1.
 * --ablate L.H[@POSITIONS][:mean[=FILE]] (repeatable): head H of layer
 * L's output (out, before Wo) is set to zero, or to its mean over the
 * batch's rows at each position, or to that mean in a reference run's
 * capture FILE, before the rest of the layer uses it; at POSITIONS only.
 * --patch FILE[@POSITIONS] (repeatable): every captured record of FILE (a
 * --capture of another run) replaces that activation of its layer (and
 * head, and positions, where it has them) in this run, as soon as it is
 * computed: a clean run's head output into a corrupted run; @POSITIONS
 * puts back only those.  Shapes must agree.  Patches come after the
 * ablations, so a head both ablated and patched is the patch's.
 * The hook's wants (capture_wants) asks the engine for only what these
 * need, and on the GPU copies back what --ablate and --patch change.
 */
#ifndef ANDREA_CAPTURE_H
#define ANDREA_CAPTURE_H

#include <stdint.h>

#include "core/positions.h"
#include "ops/forward.h"
#include "ops/prenorm.h"
#include "stream/stream.h"

#define CAPTURE_MAX 64      /* --capture and --ablate options at most */
#define CAPTURE_INDICES 4096 /* layers or heads a list may name */
#define CAPTURE_MAX_POSITION (1 << 24)

/* The names --capture takes, in the order a block computes them, then
 * NULL. */
extern const char *const capture_names[];

typedef struct {
	int name;                      /* index into capture_names */
	unsigned char layer[CAPTURE_INDICES], head[CAPTURE_INDICES];
	int heads_given;
	int listed_layers, listed_heads; /* named, not "all": checked */
	at_positions pos;
} capture_spec;

typedef struct {
	capture_spec spec[CAPTURE_MAX];
	int n_spec;
	struct {
		int layer, head, mean;
		at_positions pos;
		float *ref;        /* :mean=FILE: the reference's mean, [T,D] */
		uint64_t ref_T, ref_D;
		const char *ref_path; /* FILE (in argv) */
	} ablate[CAPTURE_MAX];
	int n_ablate;
	at_tensor *patch;              /* --patch records */
	int n_patch;
	/* each --patch FILE: its first record and its @POSITIONS */
	int patch_first[CAPTURE_MAX], n_patch_files;
	at_positions patch_pos[CAPTURE_MAX];
	int decoding;                  /* set by the caller: the engine decodes */
	int blocks_only;               /* ... it runs no embedding or head */
	at_attrs tag;                  /* added to every record (step, row) */
	/* set by capture_start */
	at_writer *w;
	int L, H, D;
	at_hook hook;
	const at_hook *next;           /* the caller's own, after these */
} capture;

/* Whether name is among the n of set; CAPTURE_AMONG for an array. */
int capture_among(const char *name, const char *const *set, size_t n);
#define CAPTURE_AMONG(name, set) capture_among(name, set, sizeof set / sizeof *set)
/* Whether name is the model's (embed, lnf, logits), not a layer's. */
int capture_of_the_model(const char *name);

/* The option callbacks (capture_opts.c): ctx is the capture. */
void capture_opt(void *ctx, const char *arg, const char *what);
void ablate_opt(void *ctx, const char *arg, const char *what);
void patch_opt(void *ctx, const char *arg, const char *what);
void capture_free(capture *c);

/* Appends the captures (capture_is_record) among the records r reads to
 * *list, *n counting them; how many, or -1 with r's error (those read
 * before it stay in the list). */
int capture_read_records(at_reader *r, at_tensor **list, int *n);
/* Whether a record of a --patch or --ablate :mean= file is a capture:
 * named as capture_names, float32, captured=1, and with a layer unless
 * it is the model's (not the tokens or the output x of the run). */
int capture_is_record(const at_header *h);
/* Puts --patch record p (the whole activation, or head `head` of it;
 * every position, or those of its positions attribute) into data, an
 * activation of rank (3 or 4) and dims, where sel (NULL: all) has the
 * position; -1 with the reason in err where its shape, head or positions
 * do not fit, data untouched. */
int capture_patch(const at_tensor *p, const at_positions *sel, float *data,
		  int rank, const uint64_t *dims, char *err, size_t errlen);

/* --ablate L.H:mean=FILE's reference: the mean over the batch of head h
 * of the first capture of out for layer l at every position among
 * list[0..n) that holds data, [T,D], into *ref (malloc'd); -1 where there
 * is none. */
int capture_reference_mean(const at_tensor *list, int n, int l, int h,
			   float **ref, uint64_t *T, uint64_t *D);

/* 1 where an option asked for anything. */
int capture_wanted(const capture *c);
/* Checks the options against a model of L layers and H heads of width D
 * and the engine e that will run them (on the GPU's decoding steps, that
 * it reports what they name), ending the program on a mismatch; then the
 * hook that writes to w (set later with capture_to) and, once the options
 * are done with an activation, hands it to next (NULL: none), the tool's
 * own hook: what next sees is ablated and patched. */
const at_hook *capture_start(capture *c, int L, int H, int D, const at_fwd *e,
			     const at_hook *next);
void capture_to(capture *c, at_writer *w);
/* For a tool that runs only some layers (andrea-block's -l), before any
 * input: capture_start's checks against a model of L layers and H heads,
 * then ends the program where an --ablate, a --capture that lists its
 * layers or a --patch record names a layer outside run[0..L), which would
 * otherwise do nothing without a word. */
void capture_check_run(const capture *c, const unsigned char *run, int L,
		       int H);
/* Sets attribute key of every record captured from now on (value NULL:
 * drops it): andrea-generate's step and row. */
void capture_tag(capture *c, const char *key, const char *value);

#endif
