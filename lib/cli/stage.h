/* stage.h - what the stage filters share beyond the filter loop: opening
 * the model, fetching parameters and choosing the device, all of which end
 * the program with a one-line error on failure. */
#ifndef ANDREA_STAGE_H
#define ANDREA_STAGE_H

#include "cli/cli.h"
#include "ops/device.h"
#include "model/model.h"

/* Opens -m/ANDREA_MODEL or the seeded default (--seed, --heads). */
void stage_open_model(const cli_common *c, at_model *m);
/* Loads an f32 parameter of the given shape. */
void stage_param(const at_model *m, const char *name, at_tensor *t, int rank,
		 ...);
/* Resolves --device.  has_cuda says whether this stage has a CUDA path;
 * auto then falls back to the CPU, an explicit cuda is an error. */
at_device stage_device(const cli_common *c, int has_cuda);
/* --precision P, a cli_opt callback: fp32, tf32 or bf16 (precision.h)
 * into the int at `to`. */
void stage_precision_opt(void *to, const char *arg, const char *what);
/* Ends the program when precision needs the GPU and dev is the CPU. */
void stage_check_precision(at_device dev, int precision);
/* Ends the program with at_stage_error() when rc, the result of one of the
 * at_stage_* calls of ops/stages.h, is negative. */
void stage_check(int rc);
/* Layer index from an attribute, or fallback when absent. */
int stage_layer_attr(const at_tensor *t, int fallback);

#endif
