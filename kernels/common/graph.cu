// graph.cu - recording launches as a CUDA graph (graph.cuh).
#include <cstdlib>
#include <cstring>

#include "common/graph.cuh"

int at_cu_graphs_wanted(void)
{
	const char *e = getenv("ANDREA_CUDA_GRAPHS");
	return !(e && strcmp(e, "0") == 0);
}

void at_cu_record(cudaStream_t stream, int (*launch)(void *), void *ctx,
		  cudaGraphExec_t *exec)
{
	*exec = NULL;
	// thread-local: another thread's CUDA calls do not break the capture
	if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) !=
	    cudaSuccess) {
		cudaGetLastError();
		return;
	}
	cudaStream_t was = at_cu_stream;
	at_cu_stream = stream;
	int rc = launch(ctx);
	at_cu_stream = was;
	cudaGraph_t graph = NULL;
	cudaError_t e = cudaStreamEndCapture(stream, &graph);
	if (rc == 0 && e == cudaSuccess &&
	    cudaGraphInstantiate(exec, graph, 0) != cudaSuccess)
		*exec = NULL;
	if (graph)
		cudaGraphDestroy(graph);
	cudaGetLastError();
}
