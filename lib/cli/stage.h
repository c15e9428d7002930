/* stage.h - what the stage filters share beyond the filter loop: opening
 * the model, fetching parameters and choosing the device, all of which end
 * the program with a one-line error on failure. */
#ifndef ANDREA_STAGE_H
#define ANDREA_STAGE_H

#include "cli/cli.h"
#include "cli/filter.h"
#include "ops/device.h"
#include "model/model.h"
#include "ops/forward.h"
#include "ops/weights.h"

/* Opens -m/ANDREA_MODEL or the seeded default (--seed, --heads). */
void stage_open_model(const cli_common *c, at_model *m);
/* Loads an f32 parameter of the given shape. */
void stage_param(const at_model *m, const char *name, at_tensor *t, int rank,
		 ...);
/* Resolves --device for a tool whose every piece of work goes through
 * ops/stages.h: cpu and cuda now (cuda without a usable GPU ends the
 * program), auto as AT_DEV_AUTO, for the first at_stage_* call to decide
 * by its size (nothing of CUDA is touched before). */
at_device stage_device_lazy(const cli_common *c);
/* Resolves --device now.  has_cuda says whether the tool has a CUDA path:
 * without one auto is the CPU (nothing of CUDA touched) and an explicit
 * cuda is an error; with one auto takes the GPU where one is usable, as
 * at_device_auto decides for work of unknown size (for tools that do not
 * give it the size of their work). */
at_device stage_device(const cli_common *c, int has_cuda);
/* Resolves --device for whole-model work of `madds` multiply-adds whose
 * GPU path copies `bytes` (the weights, in and out): auto decides by that
 * size (at_device_auto; with a precision other than fp32, the GPU when
 * one is usable).  Ends the program when precision needs the GPU and the
 * CPU was chosen. */
at_device stage_device_sized(const cli_common *c, int precision,
			     double madds, double bytes);
/* --scale S or --no-scale (a scale of 1), given once at most: the
 * attention scale of andrea-scores and andrea-attention. */
typedef struct {
	int fixed;
	double scale;
} stage_scale;
/* The option callback (CLI_CALL_ARG "scale", CLI_CALL "no-scale"). */
void stage_scale_opt(void *to, const char *arg, const char *what);
/* The scale for q of D values (filter f's input slot 0): the option's,
 * else 1/sqrt(D), which D = 0 has not (an error naming the record). */
double stage_scale_of(at_filter *f, const stage_scale *s, int D);
/* Checks --device and --precision before any input is read: ends the
 * program on a bad device name, or on a precision other than fp32 with
 * --device cpu (auto is decided later, by stage_device_sized). */
void stage_check_device(const cli_common *c, int precision);
/* --precision P, a cli_opt callback: fp32, tf32 or bf16 (precision.h)
 * into the int at `to`. */
void stage_precision_opt(void *to, const char *arg, const char *what);
/* Ends the program when precision needs the GPU and dev is the CPU. */
void stage_check_precision(at_device dev, int precision);
/* The forward engine of a whole-model stage (andrea-block, andrea-logits),
 * begun as soon as its device is known so that the GPU's start overlaps
 * the wait for input: at stage_engine_init for --device cpu or cuda (or a
 * precision only the GPU has), at stage_engine_prepare (a record's header
 * has arrived, its payload has not) for auto, which decides by the size
 * of the work; otherwise at the first stage_engine_get. */
typedef struct {
	const cli_common *c;
	const at_weights *w;
	int precision;
	at_fwd_start *start; /* begun, not yet taken */
	at_fwd *engine;
} stage_engine;
void stage_engine_init(stage_engine *s, const cli_common *c,
		       const at_weights *w, int precision);
/* For work of `madds` multiply-adds copying `bytes` (stage_device_sized). */
void stage_engine_prepare(stage_engine *s, double madds, double bytes);
/* The engine, made now if it was not begun; ends the program on failure. */
at_fwd *stage_engine_get(stage_engine *s, double madds, double bytes);
void stage_engine_free(stage_engine *s);
/* Ends the program with at_stage_error() when rc, the result of one of the
 * at_stage_* calls of ops/stages.h, is negative. */
void stage_check(int rc);

/* The analysis tools' set-up (andrea-heads, -lens, -patch).  Each ends
 * the program on failure.  stage_open_model, then the model's heads
 * checked (at_model_need_heads). */
void stage_open_model_heads(const cli_common *c, at_model *m);
/* Tokens t [B,T] that one pass of m can run: some positions, at most
 * 2^24 of them, T within the context, every id below V; label names t. */
void stage_check_tokens(const at_model *m, const at_tensor *t,
			const char *label);
/* Every weight of m into w, then the fp32 forward engine, without a
 * cache, for a pass over `positions` positions (T tokens a row) with the
 * head over `head_rows` rows, on the device --device resolves for it
 * (stage_device_sized). */
at_fwd *stage_whole_model(const cli_common *c, const at_model *m,
			  at_loaded *w, double positions, int T,
			  double head_rows);

#endif
