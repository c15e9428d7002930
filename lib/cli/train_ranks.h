/* train_ranks.h - andrea-train on several GPUs (andrea-train(1), SEVERAL
 * GPUS): --gpus N starts N ranks of the program on this host and watches
 * them; --rank, --world and --init (or the rank and size an mpirun or
 * srun puts in the environment, with --init) make this process one rank
 * of a run that may span hosts. */
#ifndef ANDREA_CLI_TRAIN_RANKS_H
#define ANDREA_CLI_TRAIN_RANKS_H

#include "train/engine.h"

/* The options, as parsed (0, -1 or NULL: not given). */
typedef struct {
	int gpus;            /* --gpus N */
	int rank, world;     /* --rank R, --world W: -1 when not given */
	const char *init;    /* --init file:PATH | tcp://HOST:PORT */
	int shard;           /* --shard-optimizer */
	double timeout_s;    /* --timeout SECONDS: 0 when not given */
} cli_ranks;

#define CLI_RANKS_TIMEOUT_S 60.0 /* --timeout's default */

/* What the options make of this process. */
enum { CLI_ALONE, CLI_LAUNCHER, CLI_RANK };

/* Checks the options' combinations (usage errors otherwise; one_gpu, if
 * not NULL, an option given that a run on several ranks cannot have) and
 * that device (--device, NULL: auto) is not the CPU, and says what this
 * process is.  For CLI_RANK it fills *out (its rank and world from the
 * environment where --rank and --world are not given, its GPU the host's
 * local rank), makes that GPU the process's before anything else touches
 * CUDA, and names the program "andrea-train: rank R" for ranks other
 * than 0, so that their messages say whose they are. */
int cli_ranks_resolve(const cli_ranks *r, const char *device,
		      const char *one_gpu, tr_ranks *out);

/* --gpus N: runs N ranks of this program with argv less its --gpus, each
 * given --rank, --world and --init through a fresh file; waits for them
 * and returns the exit status for main (1 with a message when a rank
 * failed: the others are stopped; 128 + the signal when SIGINT or SIGTERM
 * stopped the run). */
int cli_ranks_launch(const cli_ranks *r, int argc, char **argv);

#endif
