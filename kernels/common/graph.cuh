// graph.cuh - a run of launches recorded once as a CUDA graph and then
// replayed in one launch: a decoding step (forward/engine.cu) and a
// training step (train/engine.cu), whose hundreds of small kernels
// otherwise each pay the host's launch and the gap between kernels.
#ifndef ANDREA_COMMON_GRAPH_CUH
#define ANDREA_COMMON_GRAPH_CUH

#include "common/cuda_util.cuh"

// Whether graphs are wanted: ANDREA_CUDA_GRAPHS=0 runs every step eagerly.
int at_cu_graphs_wanted(void);

// Records what launch(ctx) puts on at_cu_stream, pointed at `stream`
// meanwhile (the legacy stream cannot be captured), into *exec.  Where
// recording fails, *exec is NULL and the error is dropped: the caller
// runs the launches eagerly, where a real failure then reports itself.
// Everything launch(ctx) allocates or plans must exist already (run it
// once eagerly first), and it must not synchronize.  The graph's small
// memsets become fill kernels (at_cu_graph_fills).
void at_cu_record(cudaStream_t stream, int (*launch)(void *), void *ctx,
		  cudaGraphExec_t *exec);

// Replaces each memset node of g of one row of at most AT_GRAPH_FILL_MAX
// bytes (the 4-byte flags that cuBLASLt, before its cooperative Hopper
// kernels, and cuDNN zero before a call) by a kernel node that writes the
// same bytes, with the same edges: replayed, it idles the device less.
#define AT_GRAPH_FILL_MAX 256
cudaError_t at_cu_graph_fills(cudaGraph_t g);

#endif
