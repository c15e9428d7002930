// comm.cu - the NCCL communicator (comm.cuh), over NCCL loaded at run time.
#include "common/comm.cuh"
#include "common/cublas_lazy.cuh"
#include "common/cuda_util.cuh"

#ifdef ANDREA_NCCL
#include <cstdlib>
#include <cstring>

#include <nccl.h>

struct at_nccl_api {
	decltype(&ncclGetVersion) version;
	decltype(&ncclGetUniqueId) unique_id;
	decltype(&ncclCommInitRank) init_rank;
	decltype(&ncclCommDestroy) destroy;
	decltype(&ncclCommAbort) comm_abort;
	decltype(&ncclCommGetAsyncError) async_error;
	decltype(&ncclGetErrorString) error_string;
	decltype(&ncclGetLastError) last_error;
	decltype(&ncclAllReduce) all_reduce;
	decltype(&ncclReduceScatter) reduce_scatter;
	decltype(&ncclAllGather) all_gather;
};

static at_nccl_api nccl;

struct at_comm {
	ncclComm_t c;
};

// Loads libnccl once: 0, or -1 with the reason.
static int nccl_load(void)
{
	static int state; // 0 not tried, 1 loaded, -1 failed
	if (state == 0) {
		const at_lazy_sym syms[] = {
			{(void **)&nccl.version, "ncclGetVersion"},
			{(void **)&nccl.unique_id, "ncclGetUniqueId"},
			{(void **)&nccl.init_rank, "ncclCommInitRank"},
			{(void **)&nccl.destroy, "ncclCommDestroy"},
			{(void **)&nccl.comm_abort, "ncclCommAbort"},
			{(void **)&nccl.async_error, "ncclCommGetAsyncError"},
			{(void **)&nccl.error_string, "ncclGetErrorString"},
			{(void **)&nccl.last_error, "ncclGetLastError"},
			{(void **)&nccl.all_reduce, "ncclAllReduce"},
			{(void **)&nccl.reduce_scatter, "ncclReduceScatter"},
			{(void **)&nccl.all_gather, "ncclAllGather"},
		};
		state = -1;
		if (at_lazy_load("libnccl.so." STR(NCCL_MAJOR), syms,
				 sizeof syms / sizeof *syms) < 0)
			return -1;
		state = 1;
	}
	return state > 0 ? 0 : at_cu_failf("NCCL could not be loaded");
}

// NCCL's result r of `what` as 0, or -1 with its reason (and the
// communicator's last message, where there is one).
static int nccl_ok(ncclResult_t r, at_comm *c, const char *what)
{
	if (r == ncclSuccess)
		return 0;
	const char *last = nccl.last_error(c ? c->c : NULL); // may be NULL
	return at_cu_failf("NCCL: %s: %s%s%s", what, nccl.error_string(r),
			   last && *last ? ": " : "", last ? last : "");
}

int at_comm_id(unsigned char id[AT_COMM_ID_BYTES])
{
	TRY(nccl_load());
	ncclUniqueId u;
	TRY(nccl_ok(nccl.unique_id(&u), NULL, "making the communicator's id"));
	memcpy(id, u.internal, AT_COMM_ID_BYTES);
	return 0;
}

at_comm *at_comm_join(const unsigned char id[AT_COMM_ID_BYTES], int rank,
		      int world)
{
	if (nccl_load() < 0)
		return NULL;
	at_comm *c = (at_comm *)calloc(1, sizeof *c);
	if (!c) {
		at_cu_failf("out of host memory");
		return NULL;
	}
	ncclUniqueId u;
	memcpy(u.internal, id, AT_COMM_ID_BYTES);
	ncclResult_t r = nccl.init_rank(&c->c, world, u, rank);
	if (r != ncclSuccess) {
		nccl_ok(r, NULL, "joining the communicator");
		free(c);
		return NULL;
	}
	return c;
}

int at_comm_sum(at_comm *c, void *buf, size_t n, at_comm_type t,
		cudaStream_t s)
{
	ncclDataType_t nt = t == AT_COMM_DOUBLE ? ncclFloat64 : ncclFloat32;
	return nccl_ok(nccl.all_reduce(buf, buf, n, nt, ncclSum, c->c, s), c,
		       "summing over the ranks");
}

int at_comm_sum_scatter(at_comm *c, const float *send, float *recv, size_t n,
			cudaStream_t s)
{
	return nccl_ok(nccl.reduce_scatter(send, recv, n, ncclFloat32, ncclSum,
					   c->c, s),
		       c, "summing over the ranks");
}

int at_comm_gather(at_comm *c, const void *send, void *recv, size_t bytes,
		   cudaStream_t s)
{
	return nccl_ok(nccl.all_gather(send, recv, bytes, ncclUint8, c->c, s), c,
		       "gathering from the ranks");
}

int at_comm_check(at_comm *c)
{
	ncclResult_t async = ncclSuccess;
	TRY(nccl_ok(nccl.async_error(c->c, &async), c, "asking for errors"));
	return nccl_ok(async, c, "a rank failed");
}

void at_comm_free(at_comm *c, int drop)
{
	if (!c)
		return;
	if (drop)
		nccl.comm_abort(c->c);
	else
		nccl.destroy(c->c);
	free(c);
}

#else // no nccl.h at build time

static int no_nccl(void)
{
	return at_cu_failf("this build has no NCCL (nccl.h was not found: "
			   "make NCCL_INC=DIR)");
}

int at_comm_id(unsigned char *) { return no_nccl(); }
at_comm *at_comm_join(const unsigned char *, int, int)
{
	no_nccl();
	return NULL;
}
int at_comm_sum(at_comm *, void *, size_t, at_comm_type, cudaStream_t)
{
	return no_nccl();
}
int at_comm_sum_scatter(at_comm *, const float *, float *, size_t,
			cudaStream_t)
{
	return no_nccl();
}
int at_comm_gather(at_comm *, const void *, void *, size_t, cudaStream_t)
{
	return no_nccl();
}
int at_comm_check(at_comm *) { return no_nccl(); }
void at_comm_free(at_comm *, int) {}

#endif
