// device_check.cu - the error path: an allocation far beyond the device
// becomes the one-line message the stages print, leaves nothing sticky
// behind, and the poison kernel fills what it is given; a graph's small
// memsets replay as fill kernels that write the same bytes.
#include "harness.cuh"
#include "common/graph.cuh"

// A graph of memset nodes one after the other into buf (of `bytes`, set
// to 0x5a first), with fills as at_cu_record makes them: each node's
// bytes as cudaMemset would write them, nothing beside them, and only
// the large node left a memset.
static void check_graph_fills(void)
{
	struct {
		unsigned elem, value;
		size_t off, width;
	} set[] = {{1, 0xab, 0, 5},     {2, 0x1234, 8, 70},
		   {4, 0, 160, 64},     {4, 7, 432, 1},
		   {4, 0xdeadbeef, 448, 3}, {1, 0x11, 512, AT_GRAPH_FILL_MAX},
		   {4, 0x22, 1024, 1024}};
	const int n = sizeof set / sizeof *set;
	const size_t bytes = 8192;
	unsigned char *buf;
	H_CUDA(cudaMalloc(&buf, bytes));
	H_CUDA(cudaMemset(buf, 0x5a, bytes));
	std::vector<unsigned char> want(bytes, 0x5a);
	cudaGraph_t g;
	H_CUDA(cudaGraphCreate(&g, 0));
	cudaGraphNode_t prev = NULL;
	for (int i = 0; i < n; i++) {
		cudaMemsetParams p = {};
		p.dst = buf + set[i].off;
		p.elementSize = set[i].elem;
		p.width = set[i].width;
		p.height = 1;
		p.value = set[i].value;
		cudaGraphNode_t node;
		H_CUDA(cudaGraphAddMemsetNode(&node, g, prev ? &prev : NULL,
					      prev ? 1 : 0, &p));
		prev = node;
		for (size_t k = 0; k < set[i].width * set[i].elem; k++)
			want[set[i].off + k] =
				(unsigned char)(set[i].value >> (8 * (k % set[i].elem)));
	}
	cudaError_t e = at_cu_graph_fills(g);
	size_t count = 0, memsets = 0, kernels = 0;
	H_CUDA(cudaGraphGetNodes(g, NULL, &count));
	std::vector<cudaGraphNode_t> nodes(count);
	H_CUDA(cudaGraphGetNodes(g, nodes.data(), &count));
	for (cudaGraphNode_t node : nodes) {
		cudaGraphNodeType t;
		H_CUDA(cudaGraphNodeGetType(node, &t));
		memsets += t == cudaGraphNodeTypeMemset;
		kernels += t == cudaGraphNodeTypeKernel;
	}
	cudaGraphExec_t exec;
	H_CUDA(cudaGraphInstantiate(&exec, g, 0));
	H_CUDA(cudaGraphLaunch(exec, 0));
	H_CUDA(cudaDeviceSynchronize());
	std::vector<unsigned char> back(bytes);
	H_CUDA(cudaMemcpy(back.data(), buf, bytes, cudaMemcpyDeviceToHost));
	size_t wrong = 0;
	for (size_t k = 0; k < bytes; k++)
		wrong += back[k] != want[k];
	char detail[200];
	snprintf(detail, sizeof detail,
		 "%s; %zu memset and %zu kernel nodes; %zu of %zu bytes wrong",
		 cudaGetErrorString(e), memsets, kernels, wrong, bytes);
	h_result(e == cudaSuccess && memsets == 1 && kernels == (size_t)n - 1 &&
			 wrong == 0,
		 "a graph's small memsets replay as fills", detail);
	H_CUDA(cudaGraphExecDestroy(exec));
	H_CUDA(cudaGraphDestroy(g));
	H_CUDA(cudaFree(buf));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "device-check");
	char detail[600];

	// 2^20 rows of 2^20: 4 TiB of scores; the host pointers are never
	// touched because the device allocation fails first
	int rc = at_cuda_softmax_host(NULL, NULL, (size_t)1 << 20, 1 << 20);
	const char *want = "CUDA: out of memory allocating 4.0 TiB for scores";
	snprintf(detail, sizeof detail, "rc %d, \"%s\"", rc, at_cuda_error());
	h_result(rc == -1 && strcmp(at_cuda_error(), want) == 0,
		 "out of memory is one line", detail);

	// the device still works afterwards
	std::vector<float> s = h_randn(3 * 5), p(s.size()), ref(s.size());
	at_softmax_rows(ref.data(), s.data(), 3, 5);
	rc = at_cuda_softmax_host(p.data(), s.data(), 3, 5);
	double err = 0;
	for (size_t i = 0; i < p.size(); i++)
		err = fmax(err, fabs(p[i] - ref[i]));
	snprintf(detail, sizeof detail, "rc %d, max abs err %.1e", rc, err);
	h_result(rc == 0 && err < 1e-6, "the GPU works after the failure", detail);

	// the poison kernel, over a grid-stride loop's worth
	size_t n = h_full ? (size_t)65535 * 16 * 256 + 7 : ((size_t)1 << 20) + 7;
	float *d;
	H_CUDA(cudaMalloc(&d, n * sizeof *d));
	H_CUDA(cudaMemset(d, 0, n * sizeof *d));
	H_OP(at_cuda_poison(d, n));
	std::vector<float> back = h_download(d, n);
	size_t nan = 0;
	for (float x : back)
		nan += std::isnan(x);
	snprintf(detail, sizeof detail, "%zu of %zu NaN", nan, n);
	h_result(nan == n, "poison fills every element", detail);
	H_CUDA(cudaFree(d));
	check_graph_fills();
	return h_finish();
}
