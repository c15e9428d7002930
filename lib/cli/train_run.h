/* train_run.h - andrea-train's training run: a fresh start (seeded, -m
 * MODEL or --tokenizer) or --resume of a checkpoint, the steps on the
 * engine (lib/train/engine.h) with evaluation, progress and --log
 * (train_report.h), the checkpoint and model written every --save-every
 * steps, at the end and on SIGINT or SIGTERM; of several ranks, rank 0
 * writes and reports. */
#ifndef ANDREA_TRAIN_RUN_H
#define ANDREA_TRAIN_RUN_H

#include <stddef.h>

#include "cli/train_opts.h"
#include "ops/device.h"
#include "train/engine.h"

/* The checkpoint's path: --checkpoint, or MODEL.ckpt; a fresh run must
 * not overwrite one without -f.  A model, checkpoint or --dump-grads
 * that is a directory, a terminal or the --data file is refused, and so
 * are a MODEL.ckpt beside a device, a --log that is the data, and any two
 * of -o, the checkpoint, --log and --dump-grads naming one file. */
void train_checkpoint_path(const train_options *o, char *ckpt, size_t len);

/* The run on `device` (ranks: this process's place among several, or
 * NULL alone); returns the exit status: 0, or 128 + the signal that
 * stopped it. */
int train_run(train_options *o, at_device device, const tr_ranks *ranks);

#endif
