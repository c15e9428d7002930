/* launch.h - the ranks of one host as processes of their own (issue 21:
 * andrea-train --gpus N), started and watched by the process that was
 * run: one rank failing stops the others, so that no rank is left
 * waiting in a sum for a peer that is gone. */
#ifndef ANDREA_TRAIN_LAUNCH_H
#define ANDREA_TRAIN_LAUNCH_H

#include <stddef.h>

/* Runs world copies of the program at path, rank r with the arguments
 * argv (argv[0] first, NULL-terminated) followed by "--rank" r "--world"
 * world "--init" where, and NCCL_NVLS_ENABLE=0 in its environment (no
 * NVLink multicast).  Waits for every rank.  When one fails (exits
 * non-zero or is killed) the others get SIGTERM, and SIGKILL grace_s
 * seconds later; SIGINT and SIGTERM sent to this process are passed on to
 * every rank, which may then exit 128 + the signal as well as 0.  Returns
 * 0 when every rank exited 0, the signal's number when one was passed on
 * and every rank ended so, else -1 with the first failure in err ("rank 2
 * was killed by signal 9"). */
int tr_launch(const char *path, char *const argv[], int world,
	      const char *where, double grace_s, char *err, size_t errlen);

#endif
