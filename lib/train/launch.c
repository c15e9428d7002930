/* launch.c - starting and watching the ranks of one host (launch.h). */
#include "train/launch.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

extern char **environ;

static volatile sig_atomic_t passed_on; /* a signal to hand to the ranks */
static volatile sig_atomic_t asked;     /* the last one that came */

static void on_signal(int sig)
{
	passed_on = asked = sig;
}

/* The environment with NCCL_NVLS_ENABLE=0 in place of any other value;
 * the strings are environ's, the array malloc'd. */
static char **rank_environ(void)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = malloc((n + 2) * sizeof *env);
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "NCCL_NVLS_ENABLE=", 17))
			env[k++] = environ[i];
	env[k++] = (char *)"NCCL_NVLS_ENABLE=0";
	env[k] = NULL;
	return env;
}

/* "rank r exited with status s" or "... was killed by signal s". */
static void describe(char *err, size_t errlen, int r, int status)
{
	if (WIFSIGNALED(status))
		snprintf(err, errlen, "rank %d was killed by signal %d (%s)", r,
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(err, errlen, "rank %d exited with status %d", r,
			 WEXITSTATUS(status));
}

static void signal_all(const pid_t *pid, const int *done, int world, int sig)
{
	for (int r = 0; r < world; r++)
		if (pid[r] > 0 && !done[r])
			kill(pid[r], sig);
}

int tr_launch(const char *path, char *const argv[], int world,
	      const char *where, double grace_s, char *err, size_t errlen)
{
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **args = calloc(argc + 7, sizeof *args);
	char **env = rank_environ();
	pid_t *pid = calloc((size_t)world, sizeof *pid);
	int *done = calloc((size_t)world, sizeof *done);
	if (!args || !env || !pid || !done) {
		free(args), free(env), free(pid), free(done);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char rank_s[16], world_s[16];
	snprintf(world_s, sizeof world_s, "%d", world);
	memcpy(args, argv, argc * sizeof *args);
	args[argc] = (char *)"--rank";
	args[argc + 1] = rank_s;
	args[argc + 2] = (char *)"--world";
	args[argc + 3] = world_s;
	args[argc + 4] = (char *)"--init";
	args[argc + 5] = (char *)where;

	struct sigaction sa = {0}, old_int, old_term;
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	passed_on = asked = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	int rc = 0, left = 0;
	err[0] = 0;
	for (int r = 0; r < world; r++) {
		snprintf(rank_s, sizeof rank_s, "%d", r);
		int e = posix_spawn(&pid[r], path, NULL, NULL, args, env);
		if (e) {
			snprintf(err, errlen, "cannot start rank %d (%s): %s", r,
				 path, strerror(e));
			pid[r] = 0;
			rc = -1;
			break;
		}
		left++;
	}
	double kill_at = rc ? at_now() + grace_s : 0; /* 0: nobody failed yet */
	if (rc)
		signal_all(pid, done, world, SIGTERM);
	while (left) {
		int ended = 0; /* the ranks' own pids: no other child is reaped */
		for (int r = 0; r < world; r++) {
			int status;
			if (pid[r] <= 0 || done[r] ||
			    waitpid(pid[r], &status, WNOHANG) != pid[r])
				continue;
			done[r] = 1;
			left--;
			ended = 1;
			/* a rank stopped by a signal handed on ends 128 + it */
			int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			int failed = code != 0 && !(asked && code == 128 + asked);
			if (failed && rc == 0) {
				describe(err, errlen, r, status);
				rc = -1;
				kill_at = at_now() + grace_s;
				signal_all(pid, done, world, SIGTERM);
			}
		}
		if (ended)
			continue;
		if (passed_on) {
			signal_all(pid, done, world, passed_on);
			passed_on = 0;
		}
		if (kill_at > 0 && at_now() >= kill_at) {
			signal_all(pid, done, world, SIGKILL);
			kill_at = 0;
		}
		struct timespec t = {0, 20 * 1000 * 1000};
		nanosleep(&t, NULL);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	free(args), free(env), free(pid), free(done);
	return rc < 0 ? rc : asked;
}
