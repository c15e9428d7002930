/* train_ranks.c - andrea-train's ranks (train_ranks.h). */
#include "cli/train_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "train/launch.h"
#include "train/rendezvous.h"

/* How long the launcher lets the other ranks end after one failed
 * before it kills them. */
#define GRACE_S 10.0

/* A run of `world` ranks (more than one: one_gpu is misuse) on device. */
static void check_ranks(int world, const char *flag, const char *device,
			const char *one_gpu)
{
	if (one_gpu && world > 1)
		cli_usage_error("%s is for one GPU: it cannot run on %d ranks",
				one_gpu, world);
	if (device && !strcmp(device, "cpu"))
		cli_die("%s: training on several ranks needs a GPU (--device "
			"cuda)", flag);
}

int cli_ranks_resolve(const cli_ranks *r, const char *device,
		      const char *one_gpu, tr_ranks *out)
{
	int ranked = r->rank >= 0 || r->world >= 0;
	if (r->gpus && (ranked || r->init))
		cli_usage_error("--gpus starts the ranks itself: it excludes "
				"--rank, --world and --init");
	if (!r->gpus && !ranked && !r->init) {
		if (r->shard || r->timeout_s)
			cli_usage_error("--%s is for training on several GPUs "
					"(--gpus or --init)",
					r->shard ? "shard-optimizer" : "timeout");
		return CLI_ALONE;
	}
	if (r->gpus) {
		check_ranks(r->gpus, "--gpus", device, one_gpu);
		return CLI_LAUNCHER;
	}
	if (!r->init)
		cli_usage_error("--rank and --world need --init (file:PATH or "
				"tcp://HOST:PORT)");
	*out = (tr_ranks){.rank = r->rank, .world = r->world,
			  .shard = r->shard, .init = r->init,
			  .timeout_s = r->timeout_s ? r->timeout_s
						    : CLI_RANKS_TIMEOUT_S};
	if (!ranked) {
		char err[300];
		int rc = tr_rank_from_env(&out->rank, &out->world, err,
					  sizeof err);
		if (rc < 0)
			cli_die("%s", err);
		if (rc == 0)
			cli_usage_error("--init needs --rank and --world, or the "
					"rank and size of an mpirun or srun in "
					"the environment");
	} else if (r->rank < 0 || r->world < 0) {
		cli_usage_error("--rank and --world go together");
	} else if (r->rank >= r->world) {
		cli_usage_error("--rank %d: expected 0 .. %d (--world %d)",
				r->rank, r->world - 1, r->world);
	}
	check_ranks(out->world, "--init", device, one_gpu);
	out->gpu = tr_local_rank(out->rank);
	tr_engine_use_gpu(out->gpu); /* before the device probe makes a context */
	if (out->rank > 0) {
		static char prog[64];
		snprintf(prog, sizeof prog, "%s: rank %d", cli_prog, out->rank);
		cli_prog = prog;
	}
	return CLI_RANK;
}

/* Whether argv[i] is getopt_long's --gpus: the name or an abbreviation
 * of it ("--gp"), with "=N" or followed by N. */
static int is_gpus(const char *a, int *with_value)
{
	size_t n = strcspn(a, "=");
	*with_value = a[n] == '=';
	return n >= 3 && n <= 6 && strncmp(a, "--gpus", n) == 0;
}

int cli_ranks_launch(const cli_ranks *r, int argc, char **argv)
{
	int have = tr_engine_gpus(); /* no CUDA context: the ranks need it */
	if (r->gpus > have)
		cli_die("--gpus %d: this host has %d GPU%s", r->gpus, have,
			have == 1 ? "" : "s");
	char **args = calloc((size_t)argc + 1, sizeof *args);
	if (!args)
		cli_die("out of memory");
	/* argv less --gpus N, and less a "--" (training takes no operands,
	 * and the ranks' options follow) */
	int n = 0;
	for (int i = 0; i < argc; i++) {
		int with_value;
		if (i > 0 && is_gpus(argv[i], &with_value)) {
			i += !with_value; /* and its N */
			continue;
		}
		if (strcmp(argv[i], "--") == 0)
			break;
		args[n++] = argv[i];
	}
	const char *tmp = getenv("TMPDIR");
	char dir[4096], where[4200], err[600];
	snprintf(dir, sizeof dir, "%s/andrea-train-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		cli_die("cannot make a folder for the ranks' rendezvous in %s: %m",
			tmp && *tmp ? tmp : "/tmp");
	snprintf(where, sizeof where, "file:%s/id", dir);
	int rc = tr_launch("/proc/self/exe", args, r->gpus, where, GRACE_S, err,
			   sizeof err);
	unlink(where + 5); /* left behind where rank 0 failed early */
	rmdir(dir);
	free(args);
	if (rc < 0) {
		fprintf(stderr, "%s: %s; the other ranks were stopped\n", cli_prog,
			err);
		return 1;
	}
	return rc ? 128 + rc : 0; /* stopped by a signal: rank 0 has said so */
}
