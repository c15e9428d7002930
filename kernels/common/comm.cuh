// comm.cuh - one NCCL communicator of data-parallel training (issue 21):
// the ranks' sums and gathers of device buffers on a stream.  NCCL is
// resolved at run time, as cuBLAS is (cublas_lazy.cuh): no tool is linked
// against it, and a build or a machine without it only loses training on
// several GPUs.  Built with NCCL where nccl.h is (the Makefile's NCCL=1,
// which defines ANDREA_NCCL); without it every call fails with the
// reason.
#ifndef ANDREA_COMM_CUH
#define ANDREA_COMM_CUH

#include <cstddef>

#include <cuda_runtime.h>

// The id that joins the ranks into one communicator: made once (by the
// process that starts the others), handed to every rank.
#define AT_COMM_ID_BYTES 128

struct at_comm;

// A fresh id into id.  0, or -1 with the reason in at_cuda_error().
int at_comm_id(unsigned char id[AT_COMM_ID_BYTES]);

// Rank `rank` of `world` joins the communicator of id on the current
// device; it returns once every rank has joined.  NULL with the reason.
at_comm *at_comm_join(const unsigned char id[AT_COMM_ID_BYTES], int rank,
		      int world);

// What a sum adds: the gradients' floats, or the doubles of the loss and
// the gradient's squared norm.
enum at_comm_type { AT_COMM_FLOAT, AT_COMM_DOUBLE };

// buf (n elements of type t) = the sum over the ranks of their buf.
int at_comm_sum(at_comm *c, void *buf, size_t n, at_comm_type t,
		cudaStream_t s);

// recv (n floats) = this rank's n of the sum over the ranks of their
// send (world * n floats; rank r gets elements [r n, (r + 1) n)).
int at_comm_sum_scatter(at_comm *c, const float *send, float *recv, size_t n,
			cudaStream_t s);

// recv (world * bytes) = every rank's send (bytes), in rank order.
int at_comm_gather(at_comm *c, const void *send, void *recv, size_t bytes,
		   cudaStream_t s);

// 0 while the communicator is sound; -1 with the reason once NCCL has
// found a failure (a peer gone, a network error) in work already issued.
int at_comm_check(at_comm *c);

// Ends the communicator: with drop, aborted (its work in flight dropped,
// as after a failed peer), else destroyed in order.
void at_comm_free(at_comm *c, int drop);

#endif
