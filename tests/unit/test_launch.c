/* test_launch.c - unit test of the ranks' launcher (lib/train/launch.h),
 * with sh scripts for ranks: every rank gets its --rank, --world and
 * --init and NCCL_NVLS_ENABLE=0; one rank failing (a status, a signal)
 * stops the others within the grace period, SIGKILL for one that ignores
 * SIGTERM; a SIGTERM to the launcher reaches every rank, and ranks that
 * then end 128 + SIGTERM did as asked.
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/launch.h"
#include "check.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The ranks run `sh -c script sh`, so the launcher's arguments are $1 ..
 * $6: --rank R --world W --init WHERE. */
static int run(const char *script, int world, double grace, char *err,
	       size_t errlen, double *took)
{
	char *argv[] = {(char *)"sh", (char *)"-c", (char *)script,
			(char *)"sh", NULL};
	double t0 = now();
	int rc = tr_launch("/bin/sh", argv, world, "file:/tmp/x", grace, err,
			   errlen);
	*took = now() - t0;
	return rc;
}

int main(void)
{
	char err[300], dir[] = "/tmp/andrea-launch-XXXXXX", script[1200];
	double took;
	if (!mkdtemp(dir))
		return 1;
	setenv("NCCL_NVLS_ENABLE", "1", 1); /* the ranks must see 0 */
	/* every rank its arguments: each writes them to a file of its own */
	snprintf(script, sizeof script,
		 "[ \"$1 $3 $4 $5 $6\" = \"--rank --world 3 --init file:/tmp/x\" ]"
		 " && [ \"$NCCL_NVLS_ENABLE\" = 0 ] && echo ok > %s/rank$2",
		 dir);
	CHECK(run(script, 3, 1.0, err, sizeof err, &took) == 0);
	for (int r = 0; r < 3; r++) {
		char path[600];
		snprintf(path, sizeof path, "%s/rank%d", dir, r);
		CHECK(access(path, F_OK) == 0);
	}
	CHECK(run("[ $2 = 3 ]", 4, 1.0, err, sizeof err, &took) < 0);
	CHECK(strstr(err, "exited with status 1") && !strstr(err, "rank 3"));
	/* one fails at once: the sleeping others are stopped by SIGTERM */
	CHECK(run("[ $2 = 1 ] && exit 3; exec sleep 30", 4, 5.0, err, sizeof err,
		  &took) < 0);
	CHECK(strstr(err, "rank 1 exited with status 3"));
	CHECK(took < 4.0);
	CHECK(run("[ $2 = 2 ] && kill -9 $$; exec sleep 30", 3, 5.0, err,
		  sizeof err, &took) < 0);
	CHECK(strstr(err, "rank 2 was killed by signal 9"));
	CHECK(took < 4.0);
	/* a rank that ignores SIGTERM (once it has said so: rank 0 waits)
	 * gets SIGKILL after the grace period */
	CHECK(run("[ $2 = 0 ] && sleep 0.3 && exit 4; trap '' TERM; "
		  "exec sleep 30", 2, 0.5, err, sizeof err, &took) < 0);
	CHECK(strstr(err, "rank 0 exited with status 4"));
	CHECK(took >= 0.8 && took < 4.0);
	/* a SIGTERM to the launcher is passed on to the ranks */
	pid_t me = getpid();
	if (fork() == 0) {
		usleep(300000);
		kill(me, SIGTERM);
		_exit(0);
	}
	snprintf(script, sizeof script,
		 "trap 'echo term > %s/term$2; kill $!; exit 0' TERM; "
		 "sleep 30 >/dev/null 2>&1 & wait",
		 dir);
	CHECK(run(script, 2, 5.0, err, sizeof err, &took) == SIGTERM);
	CHECK(took < 4.0);
	for (int r = 0; r < 2; r++) {
		char path[600];
		snprintf(path, sizeof path, "%s/term%d", dir, r);
		CHECK(access(path, F_OK) == 0);
	}
	/* ranks that end 128 + the signal handed on did as asked; any other
	 * status is still a failure */
	for (int k = 0; k < 2; k++) {
		if (fork() == 0) {
			usleep(300000);
			kill(me, SIGTERM);
			_exit(0);
		}
		snprintf(script, sizeof script,
			 "trap 'kill $!; exit %d' TERM; "
			 "sleep 30 >/dev/null 2>&1 & wait",
			 k ? 5 : 128 + SIGTERM);
		int rc = run(script, 2, 5.0, err, sizeof err, &took);
		CHECK(k ? rc < 0 && strstr(err, "status 5") : rc == SIGTERM);
	}
	CHECK(tr_launch("/nonexistent/andrea", (char *[]){(char *)"x", NULL}, 2,
			"file:/tmp/x", 1.0, err, sizeof err) < 0);
	CHECK(strstr(err, "rank 0") != NULL);
	char cmd[100];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return check_finish("test_launch");
}
