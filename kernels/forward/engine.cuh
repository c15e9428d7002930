// engine.cuh - what the forward engine's files share (engine.cu: the
// engine and its passes; in_flight.cu: records of blocks in flight).
#ifndef ANDREA_FORWARD_ENGINE_CUH
#define ANDREA_FORWARD_ENGINE_CUH

#include <pthread.h>

#include "forward/forward_kernels.cuh"

extern "C" {
#include "ops/forward_cuda.h"
}

// The buffers of a pass over N = B*T positions with up to S score
// elements.
struct pass_bufs {
	size_t N, S;             // what they were made for
	float *x, *xmid, *buf3, *fc, *att, *logits;
	void *ln, *q, *kv, *merged, *gelu; // mm
	bf16 *att16;
	int32_t *tok;
	int *pos;
};

// One record of blocks begun and not yet ended (at_cuda_fwd_blocks_begin):
// its x on the device and its bytes in pinned host memory both ways, and
// what to run on it.
struct blocks_slot {
	float *dx, *h_in, *h_out;
	size_t cap;              // bytes each holds
	const int *layers;
	int n, B, T, rc;
};

// The records in flight run on a thread of their own, which launches
// them and waits for them, so that the caller's thread only copies bytes
// (x into pinned memory, the result out of it) and reads and writes the
// stream while the GPU computes.
struct blocks_worker {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	long queued, run, taken; // records so far: begun, computed, ended
	int started, stop;
};

// The head's logits on their way back (at_cuda_fwd_head): two pinned
// pieces of n floats, each with the event of its copy.
struct head_pieces {
	float *h[2];
	size_t n;
	cudaEvent_t ev[2];
};

struct at_cuda_fwd {
	int C, H, L, V, ctx, prec, rows;
	at_cu_gemm_mode g;
	size_t mm;               // bytes of an mm element
	// weights (device); a layer that was not given has w[l].ln1w NULL
	float *wte, *wpe, *lnfw, *lnfb;
	void *lm_head;           // [C,V], or [V,C] where head_tied (wte's)
	int head_tied;
	at_cu_block_w *w;
	void **allocs;           // every weight allocation, for freeing
	int nallocs;
	// the KV cache: L x [rows,H,ctx,D] each, mm
	void *kc, *vc;
	pass_bufs big, step;
	float *result;           // the heads' results, where a hook wants them
	size_t result_n;
	// host staging: hooks' copies, decoding's tokens and positions
	float *h_act;
	size_t h_act_n;
	int32_t *h_tok;
	int *h_pos;
	float *h_logits;
	head_pieces pieces;
	const at_hook *hook;     // the caller's, for the device hook
	// decoding steps as graphs (see above)
	cudaStream_t stream;     // where they are recorded and replayed
	cudaGraphExec_t *graph;  // [rows + 1]: the step of B rows, once made
	int *steps;              // [rows + 1]: steps of B rows run so far
	int graphs;              // 0: every step eager
	void *blas_ws;           // cuBLAS's workspace: recording allocates none
	blocks_slot slot[2];     // records of blocks in flight: slot[first] oldest
	int first;
	blocks_worker work;
};

namespace fwd_engine {
// a device allocation, named in the error
int dalloc(void *pp, size_t bytes, const char *what);
// makes b for N positions and S score elements (kept if big enough)
int make_bufs(at_cuda_fwd *g, pass_bufs *b, size_t N, size_t S);
// the score elements a pass of B rows of T positions with hook h and no
// KV cache needs: each head's T x T weights, or with the fused attention
// (no hook) each row's log-sum-exp alone
size_t scores_room(const at_cuda_fwd *g, const at_cu_hook *h, int B, int T);
// layer l over x [B,T,C] (device) in place; k, v: the layer's cache, or
// NULL for q's neighbours in b
int block(at_cuda_fwd *g, pass_bufs *b, const at_cu_hook *h, int l,
	  const at_cu_kv *kv, void *k, void *v, float *x, int B, int T);
// stops the worker of records in flight and frees their buffers
void free_in_flight(at_cuda_fwd *g);
// hooks.cu: the caller's hook as a device hook (h filled), or NULL
const at_cu_hook *device_hook(at_cuda_fwd *g, const at_hook *hook,
			      at_cu_hook *h);
// reports the engine's own device activation [B,T,X]: x after layer (-1:
// the embedding), lnf and logits (layer -1)
int report_btx(const at_cu_hook *h, const char *name, void *data, int bf,
	       int layer, int B, int T, int X);
// x [B,T,C] after layer
int report_x(at_cuda_fwd *g, const at_cu_hook *h, float *x, int layer, int B,
	     int T);
}

#endif
