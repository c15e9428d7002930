// graph.cu - recording launches as a CUDA graph (graph.cuh).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/graph.cuh"

int at_cu_graphs_wanted(void)
{
	const char *e = getenv("ANDREA_CUDA_GRAPHS");
	return !(e && strcmp(e, "0") == 0);
}

// What a memset node of `width` elements of `elem` bytes writes.
__global__ static void fill_kernel(void *dst, unsigned value, unsigned elem,
				   size_t width)
{
	for (size_t i = threadIdx.x; i < width; i += blockDim.x) {
		if (elem == 4)
			((uint32_t *)dst)[i] = value;
		else if (elem == 2)
			((uint16_t *)dst)[i] = (uint16_t)value;
		else
			((uint8_t *)dst)[i] = (uint8_t)value;
	}
}

// The nodes beside `node`, its dependencies (out 0) or dependents (out
// 1), into a new array (*v, freed by the caller) of *n.
static cudaError_t edges_of(cudaGraphNode_t node, int out,
			    cudaGraphNode_t **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	cudaError_t e = out ? cudaGraphNodeGetDependentNodes(node, NULL, NULL, n)
			    : cudaGraphNodeGetDependencies(node, NULL, NULL, n);
	if (e != cudaSuccess || *n == 0)
		return e;
	if (!(*v = (cudaGraphNode_t *)malloc(*n * sizeof **v)))
		return cudaErrorMemoryAllocation;
	return out ? cudaGraphNodeGetDependentNodes(node, *v, NULL, n)
		   : cudaGraphNodeGetDependencies(node, *v, NULL, n);
}

// Replaces memset node m (params p) by a fill kernel node with its edges.
static cudaError_t fill_instead(cudaGraph_t g, cudaGraphNode_t m,
				const cudaMemsetParams *p)
{
	cudaGraphNode_t *in = NULL, *out = NULL, *from = NULL, k;
	size_t nin = 0, nout = 0;
	void *dst = p->dst;
	unsigned value = p->value, elem = p->elementSize;
	size_t width = p->width;
	void *args[] = {&dst, &value, &elem, &width};
	cudaKernelNodeParams kp = {};
	kp.func = (void *)fill_kernel;
	kp.gridDim = dim3(1);
	kp.blockDim = dim3(64);
	kp.kernelParams = args;
	cudaError_t e = edges_of(m, 0, &in, &nin);
	if (e == cudaSuccess)
		e = edges_of(m, 1, &out, &nout);
	if (e == cudaSuccess)
		e = cudaGraphAddKernelNode(&k, g, in, nin, &kp);
	if (e == cudaSuccess && nout > 0) {
		if (!(from = (cudaGraphNode_t *)malloc(nout * sizeof *from)))
			e = cudaErrorMemoryAllocation;
		for (size_t i = 0; e == cudaSuccess && i < nout; i++)
			from[i] = k;
		if (e == cudaSuccess)
			e = cudaGraphAddDependencies(g, from, out, NULL, nout);
	}
	if (e == cudaSuccess)
		e = cudaGraphDestroyNode(m);
	free(in);
	free(out);
	free(from);
	return e;
}

// In a replayed graph a memset node idles the device about 3 us around it
// (about 1.2 us before, 1.7 after, 0.8 its own, where two kernels follow
// each other in 0.3 or overlap), and cuBLASLt and cuDNN put one before
// most of their calls (about 130 in andrea-120m's training step); a fill
// kernel in its place runs in about 1 us, with no gap (bench/README.md).
cudaError_t at_cu_graph_fills(cudaGraph_t g)
{
	size_t n = 0;
	cudaError_t e = cudaGraphGetNodes(g, NULL, &n);
	if (e != cudaSuccess || n == 0)
		return e;
	cudaGraphNode_t *nodes = (cudaGraphNode_t *)malloc(n * sizeof *nodes);
	if (!nodes)
		return cudaErrorMemoryAllocation;
	e = cudaGraphGetNodes(g, nodes, &n);
	for (size_t i = 0; e == cudaSuccess && i < n; i++) {
		cudaGraphNodeType t;
		cudaMemsetParams p;
		if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess ||
		    t != cudaGraphNodeTypeMemset ||
		    cudaGraphMemsetNodeGetParams(nodes[i], &p) != cudaSuccess ||
		    p.height != 1 || p.width * p.elementSize > AT_GRAPH_FILL_MAX)
			continue;
		e = fill_instead(g, nodes[i], &p);
	}
	free(nodes);
	return e;
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
	    at_cu_graph_fills(graph) == cudaSuccess &&
	    cudaGraphInstantiate(exec, graph, 0) != cudaSuccess)
		*exec = NULL;
	if (graph)
		cudaGraphDestroy(graph);
	cudaGetLastError();
}
