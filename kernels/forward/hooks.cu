// hooks.cu - the forward engine's hooks (engine.cu): the device
// activations a pass reports, handed to the caller's host hook as copies
// on the host and, where the hook may change them, copied back.
#include "forward/engine.cuh"

using namespace fwd_engine;

static int host_wants(void *ctx, const char *name, int layer)
{
	return at_hook_wants(((at_cuda_fwd *)ctx)->hook, name, layer);
}

// A copy on the host for the caller's hook, and back onto the device
// where the hook may have changed it.
static int host_hook(void *ctx, const char *name, int layer, void *data,
		     int bf, int rank, const uint64_t *dims)
{
	at_cuda_fwd *g = (at_cuda_fwd *)ctx;
	int want = at_hook_wants(g->hook, name, layer);
	if (want == AT_HOOK_SKIP)
		return 0;
	size_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dims[i];
	if (n > g->h_act_n) {
		cudaFreeHost(g->h_act);
		g->h_act = NULL;
		g->h_act_n = 0;
		CU_CHECK(cudaMallocHost((void **)&g->h_act, n * 4),
			 "pinned memory for an activation");
		g->h_act_n = n;
	}
	float *dev = (float *)data; // the float activation, or its copy
	dev_buf<float> conv;
	if (bf) {
		TRY(conv.alloc(n, "an activation"));
		TRY(at_cu_from_bf16(conv.p, (const bf16 *)data, n));
		dev = conv.p;
	}
	CU_CHECK(cudaMemcpy(g->h_act, dev, n * 4, cudaMemcpyDeviceToHost),
		 "copying an activation from the GPU");
	int rc = g->hook->fn(g->hook->ctx, name, layer, g->h_act, rank, dims);
	if (rc || want != AT_HOOK_WRITE)
		return rc;
	CU_CHECK(cudaMemcpy(dev, g->h_act, n * 4, cudaMemcpyHostToDevice),
		 "copying an activation back to the GPU");
	return bf ? at_cu_to_bf16((bf16 *)data, dev, n) : 0;
}

// Reports the engine's own device activation [B,T,X]: x after layer (-1:
// the embedding), lnf and logits (layer -1).
int fwd_engine::report_btx(const at_cu_hook *h, const char *name, void *data,
		      int bf, int layer, int B, int T, int X)
{
	if (!h)
		return 0;
	uint64_t dims[3] = {(uint64_t)B, (uint64_t)T, (uint64_t)X};
	return h->fn(h->ctx, name, layer, data, bf, 3, dims);
}

int fwd_engine::report_x(at_cuda_fwd *g, const at_cu_hook *h, float *x, int layer,
		    int B, int T)
{
	return report_btx(h, "x", x, 0, layer, B, T, g->C);
}

// The caller's hook as a device hook, or NULL.
const at_cu_hook *fwd_engine::device_hook(at_cuda_fwd *g, const at_hook *hook,
				     at_cu_hook *h)
{
	g->hook = hook;
	if (!hook)
		return NULL;
	h->fn = host_hook;
	h->wants = host_wants;
	h->ctx = g;
	return h;
}
