// nccl_check.cu - the NCCL communicator (common/comm.cuh) against sums on
// the host: one rank alone, then the machine's GPUs as ranks in processes
// of their own (this program again, the communicator's id and the rank in
// the environment, the way andrea-train is to start its ranks): sums,
// sums scattered, gathers, of 1, 1000 and 262147 floats, and no write
// past the end of a result.  Without NCCL it says so and checks nothing.
#include "harness.cuh"
#include "common/comm.cuh"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

#define ENV_RANK "ANDREA_NCCL_CHECK_RANK"
#define ENV_WORLD "ANDREA_NCCL_CHECK_WORLD"
#define ENV_SEED "ANDREA_NCCL_CHECK_SEED"
#define ENV_ID "ANDREA_NCCL_CHECK_ID"
#define WAIT_S 120 // the longest the ranks may take

// Element i of rank r's data under seed: in [-1, 1), the same in every
// process, so that each rank computes the whole sum's oracle itself.
static float value(uint64_t seed, int r, size_t i)
{
	uint64_t z = seed + 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1) +
		     0xBF58476D1CE4E5B9ull * (uint64_t)i;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (float)(z >> 40) / (float)(1 << 23) - 1.0f;
}

// The sum over the ranks of element i, in double.
static float rank_sum(uint64_t seed, int world, size_t i)
{
	double s = 0;
	for (int q = 0; q < world; q++)
		s += value(seed, q, i);
	return (float)s;
}

static void check_rank(at_comm *c, int rank, int world, uint64_t seed)
{
	char what[160];
	for (size_t n : {(size_t)1, (size_t)1000, (size_t)262147}) {
		size_t scattered = 1 << 20, gathered = 2 << 20; // index offsets
		std::vector<float> mine(n), want(n);
		for (size_t i = 0; i < n; i++) {
			mine[i] = value(seed, rank, i);
			want[i] = rank_sum(seed, world, i);
		}
		float *d = h_upload(mine);
		H_OP(at_comm_sum(c, d, n, AT_COMM_FLOAT, 0));
		snprintf(what, sizeof what, "sum rank %d of %d n=%zu", rank,
			 world, n);
		h_compare(what, d, want.data(), n, 1e-6);
		H_CUDA(cudaFree(d));

		std::vector<float> send(world * n);
		for (size_t j = 0; j < send.size(); j++)
			send[j] = value(seed, rank, scattered + j);
		for (size_t i = 0; i < n; i++)
			want[i] = rank_sum(seed, world, scattered + rank * n + i);
		float *ds = h_upload(send), *dr = h_dev(n);
		H_OP(at_comm_sum_scatter(c, ds, dr, n, 0));
		snprintf(what, sizeof what, "sum scattered rank %d of %d n=%zu",
			 rank, world, n);
		h_compare(what, dr, want.data(), n, 1e-6);
		H_CUDA(cudaFree(ds));
		H_CUDA(cudaFree(dr));

		std::vector<float> all(world * n);
		for (size_t i = 0; i < n; i++)
			mine[i] = value(seed, rank, gathered + i);
		for (int q = 0; q < world; q++)
			for (size_t i = 0; i < n; i++)
				all[q * n + i] = value(seed, q, gathered + i);
		float *dm = h_upload(mine), *da = h_dev(world * n);
		H_OP(at_comm_gather(c, dm, da, n * sizeof(float), 0));
		snprintf(what, sizeof what, "gather rank %d of %d n=%zu", rank,
			 world, n);
		h_compare(what, da, all.data(), world * n, 0.0);
		H_CUDA(cudaFree(dm));
		H_CUDA(cudaFree(da));
	}
	// doubles (the loss, the norm's square): summed exactly here
	double mine2[2] = {rank + 0.25, 1e-12 * (rank + 1)}, *dd, got[2];
	H_CUDA(cudaMalloc((void **)&dd, sizeof mine2));
	H_CUDA(cudaMemcpy(dd, mine2, sizeof mine2, cudaMemcpyHostToDevice));
	H_OP(at_comm_sum(c, dd, 2, AT_COMM_DOUBLE, 0));
	H_CUDA(cudaMemcpy(got, dd, sizeof got, cudaMemcpyDeviceToHost));
	H_CUDA(cudaFree(dd));
	double want2[2] = {world * (world - 1) / 2.0 + 0.25 * world,
			   1e-12 * world * (world + 1) / 2.0};
	snprintf(what, sizeof what, "sum of doubles rank %d of %d", rank, world);
	h_result(got[0] == want2[0] && fabs(got[1] - want2[1]) <= 1e-27, what,
		 "");
	snprintf(what, sizeof what, "no error pending rank %d of %d", rank,
		 world);
	int rc = at_comm_check(c);
	h_result(rc == 0, what, rc ? at_cuda_error() : "");
}

// A rank of a spawned world: its id, rank and seed from the environment.
static int rank_main(int rank)
{
	h_prog = "nccl-check";
	int world = atoi(getenv(ENV_WORLD));
	uint64_t seed = strtoull(getenv(ENV_SEED), NULL, 10);
	const char *hex = getenv(ENV_ID);
	unsigned char id[AT_COMM_ID_BYTES];
	for (int i = 0; i < AT_COMM_ID_BYTES; i++)
		sscanf(hex + 2 * i, "%2hhx", &id[i]);
	H_CUDA(cudaSetDevice(rank));
	at_comm *c = at_comm_join(id, rank, world);
	if (!c) {
		fprintf(stderr, "nccl-check: rank %d of %d: %s\n", rank, world,
			at_cuda_error());
		return 1;
	}
	check_rank(c, rank, world, seed);
	at_comm_free(c, 0);
	return h_failed ? 1 : 0;
}

// world ranks, one process and one GPU each, joined by a fresh id.
static void spawn_world(int world)
{
	unsigned char id[AT_COMM_ID_BYTES];
	H_OP(at_comm_id(id));
	char hex[2 * AT_COMM_ID_BYTES + 1], num[32];
	for (int i = 0; i < AT_COMM_ID_BYTES; i++)
		sprintf(hex + 2 * i, "%02x", id[i]);
	setenv(ENV_ID, hex, 1);
	snprintf(num, sizeof num, "%d", world);
	setenv(ENV_WORLD, num, 1);
	snprintf(num, sizeof num, "%llu", (unsigned long long)h_state);
	setenv(ENV_SEED, num, 1);
	std::vector<pid_t> pids(world, 0);
	for (int r = 0; r < world; r++) {
		snprintf(num, sizeof num, "%d", r);
		setenv(ENV_RANK, num, 1);
		char *args[] = {(char *)"nccl-check", NULL};
		if (posix_spawn(&pids[r], "/proc/self/exe", NULL, NULL, args,
				environ) != 0)
			pids[r] = 0;
	}
	unsetenv(ENV_RANK);
	std::vector<int> status(world, -1); // -1: not (yet) ended
	int left = 0;
	for (pid_t p : pids)
		left += p != 0;
	for (int t = 0; t < 10 * WAIT_S && left; t++) { // every 0.1 s
		for (int r = 0; r < world; r++) {
			int st;
			if (pids[r] && status[r] < 0 &&
			    waitpid(pids[r], &st, WNOHANG) == pids[r]) {
				status[r] = st;
				left--;
			}
		}
		if (left)
			usleep(100000);
	}
	for (int r = 0; r < world; r++) {
		char what[80], detail[80];
		snprintf(what, sizeof what, "rank %d of %d in a process of its own",
			 r, world);
		bool ok = pids[r] && status[r] >= 0 && WIFEXITED(status[r]) &&
			  WEXITSTATUS(status[r]) == 0;
		if (!pids[r])
			snprintf(detail, sizeof detail, "could not be started");
		else if (status[r] < 0) {
			kill(pids[r], SIGKILL);
			waitpid(pids[r], NULL, 0);
			snprintf(detail, sizeof detail, "still running after %d s",
				 WAIT_S);
		} else
			snprintf(detail, sizeof detail, "exit status %d",
				 WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1);
		h_result(ok, what, detail);
	}
}

int main(int argc, char **argv)
{
	setenv("NCCL_NVLS_ENABLE", "0", 1); // no NVLink multicast, ever
	if (getenv(ENV_RANK))
		return rank_main(atoi(getenv(ENV_RANK)));
	h_init(argc, argv, "nccl-check");
	unsigned char id[AT_COMM_ID_BYTES];
	if (at_comm_id(id) < 0) {
		printf("nccl-check: no NCCL here (%s); nothing checked\n",
		       at_cuda_error());
		return h_finish();
	}
	at_comm *c = at_comm_join(id, 0, 1);
	if (!c) {
		h_result(false, "one rank alone", at_cuda_error());
		return h_finish();
	}
	check_rank(c, 0, 1, h_state);
	at_comm_free(c, 0);
	int gpus = 0;
	H_CUDA(cudaGetDeviceCount(&gpus));
	for (int world = 2; world <= gpus; world *= 2)
		spawn_world(world);
	if (gpus < 2)
		printf("nccl-check: one GPU: no ranks in processes of their "
		       "own\n");
	return h_finish();
}
