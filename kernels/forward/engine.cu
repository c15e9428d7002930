// engine.cu - the forward engine on the GPU (lib/ops/forward_cuda.h): the
// weights on the device, the KV cache, the buffers of a call, and the
// passes through the one GPU block (block.cu); records of blocks in
// flight are in_flight.cu's, the hooks hooks.cu's.
//
// Two sets of buffers: one grown to the largest call of blocks, logits or
// prefill, and one made once for decoding steps of up to `rows` rows, so
// that a decoding step never allocates.  A decoding step of B rows runs
// eagerly the first time; from the second on it is one CUDA graph,
// recorded then and replayed (its kernels read the rows' positions from
// device memory, so every step is the same graph): some 150 launches of
// a 12-layer model become one.  ANDREA_CUDA_GRAPHS=0 keeps every step
// eager, for comparison; a hook does too.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "forward/engine.cuh"
#include "common/cublas_lazy.cuh"
#include "common/graph.cuh"
#include "model/arch.h"

using namespace fwd_engine;

int fwd_engine::dalloc(void *pp, size_t bytes, const char *what)
{
	return at_cu_alloc((void **)pp, bytes ? bytes : 1, what);
}

// A weight on the device: float as given, or (as_mm) in the products'
// type.  NULL src leaves *dst NULL.
static int upload(at_cuda_fwd *g, void **dst, const float *src, size_t n,
		  int as_mm)
{
	*dst = NULL;
	if (!src)
		return 0;
	void *d;
	size_t es = as_mm ? g->mm : 4;
	TRY(dalloc(&d, n * es, "the model's weights"));
	g->allocs[g->nallocs++] = d;
	*dst = d;
	if (es == 4) {
		CU_CHECK(cudaMemcpy(d, src, n * 4, cudaMemcpyHostToDevice),
			 "copying the weights to the GPU");
		return 0;
	}
	dev_buf<float> tmp;
	TRY(tmp.alloc(n, "the model's weights"));
	CU_CHECK(cudaMemcpy(tmp.p, src, n * 4, cudaMemcpyHostToDevice),
		 "copying the weights to the GPU");
	TRY(at_cu_to_bf16((bf16 *)d, tmp.p, n));
	CU_CHECK(cudaDeviceSynchronize(), "converting the weights to bf16");
	return 0;
}

// Three pieces of n floats side by side (zeros for a NULL one), as the
// q, k, v product wants its weights and biases; *dst stays NULL where all
// three are.
static int upload_three(at_cuda_fwd *g, const float *const src[3], size_t n,
			int as_mm, const void **dst)
{
	*dst = NULL;
	if (!src[0] && !src[1] && !src[2])
		return 0;
	float *cat = (float *)calloc(3 * n, sizeof *cat);
	if (!cat)
		return at_cu_failf("out of host memory");
	for (int i = 0; i < 3; i++)
		if (src[i])
			memcpy(cat + i * n, src[i], n * sizeof *cat);
	void *d;
	int rc = upload(g, &d, cat, 3 * n, as_mm);
	free(cat);
	*dst = d;
	return rc;
}

static int upload_all(at_cuda_fwd *g, const at_weights *w)
{
	size_t C = g->C, CC = C * C, F = 4 * C;
	void *p;
	TRY(upload(g, &p, w->wte, (size_t)g->V * C, 0));
	g->wte = (float *)p;
	TRY(upload(g, &p, w->wpe, (size_t)g->ctx * C, 0));
	g->wpe = (float *)p;
	TRY(upload(g, &p, w->lnf_w, C, 0));
	g->lnfw = (float *)p;
	TRY(upload(g, &p, w->lnf_w ? w->lnf_b : NULL, C, 0));
	g->lnfb = (float *)p;
	// a tied head multiplies by wte [V,C] transposed: fp32 products read
	// the table itself, bf16 ones a copy in their type
	g->head_tied = w->lnf_w && !w->lm_head;
	const float *head = g->head_tied ? w->wte : w->lm_head;
	if (g->head_tied && g->mm == 4)
		g->lm_head = g->wte;
	else
		TRY(upload(g, &g->lm_head, w->lnf_w ? head : NULL,
			   C * (size_t)g->V, 1));
	for (int l = 0; l < g->L; l++) {
		const at_block_w *b = &w->layer[l];
		at_cu_block_w *d = &g->w[l];
		if (!b->ln1_w)
			continue;
		void *v[11];
		TRY(upload(g, &v[0], b->ln1_w, C, 0));
		TRY(upload(g, &v[1], b->ln1_b, C, 0));
		TRY(upload(g, &v[2], b->ln2_w, C, 0));
		TRY(upload(g, &v[3], b->ln2_b, C, 0));
		const float *wqkv[3] = {b->wq, b->wk, b->wv};
		const float *bqkv[3] = {b->bq, b->bk, b->bv};
		TRY(upload_three(g, wqkv, CC, 1, &d->wqkv));
		TRY(upload_three(g, bqkv, C, 0, (const void **)&d->bqkv));
		TRY(upload(g, &v[5], b->wo, CC, 1));
		TRY(upload(g, &v[6], b->fc, C * F, 1));
		TRY(upload(g, &v[7], b->proj, F * C, 1));
		TRY(upload(g, &v[8], b->bo, C, 0));
		TRY(upload(g, &v[9], b->bfc, F, 0));
		TRY(upload(g, &v[10], b->bproj, C, 0));
		d->ln1w = (float *)v[0];
		d->ln1b = (float *)v[1];
		d->ln2w = (float *)v[2];
		d->ln2b = (float *)v[3];
		d->wo = v[5];
		d->fc = v[6];
		d->proj = v[7];
		d->bo = (float *)v[8];
		d->bfc = (float *)v[9];
		d->bproj = (float *)v[10];
	}
	return 0;
}

static void free_bufs(pass_bufs *b)
{
	void *all[] = {b->x, b->xmid, b->buf3, b->fc, b->att, b->logits, b->ln,
		       b->q, b->kv, b->merged, b->gelu, b->att16, b->tok, b->pos};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		cudaFree(all[i]);
	memset(b, 0, sizeof *b);
}

// Makes b for N positions and S score elements (kept if big enough).
int fwd_engine::make_bufs(at_cuda_fwd *g, pass_bufs *b, size_t N, size_t S)
{
	if (N <= b->N && S <= b->S)
		return 0;
	cudaDeviceSynchronize(); // work in flight may use them
	free_bufs(b);
	size_t C = g->C, F = 4 * C, mm = g->mm;
	size_t V = g->V > 0 ? g->V : 1;
	TRY(dalloc(&b->x, N * C * 4, "the residual stream"));
	TRY(dalloc(&b->xmid, N * C * 4, "the residual stream"));
	TRY(dalloc(&b->buf3, 3 * N * C * 4, "q, k and v"));
	TRY(dalloc(&b->fc, N * F * 4, "the MLP activations"));
	TRY(dalloc(&b->gelu, N * F * mm, "the MLP activations"));
	TRY(dalloc(&b->att, S * 4, "the attention weights"));
	if (g->prec == AT_PREC_BF16)
		TRY(dalloc(&b->att16, S * 2, "the attention weights"));
	TRY(dalloc(&b->ln, N * C * mm, "the LayerNorm outputs"));
	TRY(dalloc(&b->q, 3 * N * C * mm, "q, k and v"));
	TRY(dalloc(&b->merged, N * C * mm, "the attention outputs"));
	TRY(dalloc(&b->logits, N * V * 4, "the logits"));
	TRY(dalloc(&b->tok, N * 4, "the tokens"));
	TRY(dalloc(&b->pos, N * 4, "the positions"));
	b->N = N;
	b->S = S;
	return 0;
}

extern "C" void at_cuda_fwd_free(at_cuda_fwd *g)
{
	if (!g)
		return;
	cudaDeviceSynchronize();
	for (int i = 0; i < g->nallocs; i++)
		cudaFree(g->allocs[i]);
	cudaFree(g->kc);
	cudaFree(g->vc);
	free_bufs(&g->big);
	free_bufs(&g->step);
	cudaFree(g->result);
	cudaFreeHost(g->h_act);
	cudaFreeHost(g->h_tok);
	cudaFreeHost(g->h_pos);
	cudaFreeHost(g->h_logits);
	for (int i = 0; i < 2; i++) {
		cudaFreeHost(g->pieces.h[i]);
		if (g->pieces.ev[i])
			cudaEventDestroy(g->pieces.ev[i]);
	}
	free_in_flight(g);
	if (g->g.h)
		at_cublas.destroy(g->g.h);
	for (int b = 0; g->graph && b <= g->rows; b++)
		if (g->graph[b])
			cudaGraphExecDestroy(g->graph[b]);
	if (g->stream)
		cudaStreamDestroy(g->stream);
	cudaFree(g->blas_ws);
	free(g->graph);
	free(g->steps);
	free(g->allocs);
	free(g->w);
	free(g);
	cudaGetLastError();
}

static int warm_up(at_cuda_fwd *g);

static int setup(at_cuda_fwd *g, const at_weights *w)
{
	TRY(at_cublas_load());
	BLAS_CHECK(at_cublas.create(&g->g.h), "creating the cuBLAS handle");
	TRY(dalloc(&g->blas_ws, AT_BLAS_WORKSPACE, "cuBLAS's workspace"));
	BLAS_CHECK(at_cublas.set_workspace(g->g.h, g->blas_ws, AT_BLAS_WORKSPACE),
		   "setting cuBLAS's workspace");
	TRY(upload_all(g, w));
	if (g->rows > 0) {
		size_t n = (size_t)g->L * g->rows * g->ctx * g->C * g->mm;
		TRY(dalloc(&g->kc, n, "the KV cache"));
		TRY(dalloc(&g->vc, n, "the KV cache"));
		TRY(make_bufs(g, &g->step, g->rows,
			      (size_t)g->rows * g->H * g->ctx));
		CU_CHECK(cudaMallocHost((void **)&g->h_tok, g->rows * 4),
			 "pinned memory");
		CU_CHECK(cudaMallocHost((void **)&g->h_pos, g->rows * 4),
			 "pinned memory");
		CU_CHECK(cudaMallocHost((void **)&g->h_logits,
					(size_t)g->rows * g->V * 4),
			 "pinned memory");
		CU_CHECK(cudaStreamCreate(&g->stream), "creating a stream");
		g->graph = (cudaGraphExec_t *)calloc(g->rows + 1, sizeof *g->graph);
		g->steps = (int *)calloc(g->rows + 1, sizeof *g->steps);
		if (!g->graph || !g->steps)
			return at_cu_failf("out of host memory");
		g->graphs = at_cu_graphs_wanted();
	}
	return 0;
}

extern "C" at_cuda_fwd *at_cuda_fwd_new(const at_weights *w, int precision,
					int rows)
{
	at_cuda_fwd *g = (at_cuda_fwd *)calloc(1, sizeof *g);
	if (!g) {
		at_cu_failf("out of host memory");
		return NULL;
	}
	g->C = w->C;
	g->H = w->H;
	g->L = w->L;
	g->V = w->V;
	g->ctx = w->ctx;
	g->prec = precision;
	g->rows = rows;
	g->g.prec = precision;
	g->mm = precision == AT_PREC_BF16 ? 2 : 4;
	g->w = (at_cu_block_w *)calloc((size_t)w->L + 1, sizeof *g->w);
	g->allocs = (void **)calloc((size_t)w->L * 14 + 8, sizeof *g->allocs);
	if (!g->w || !g->allocs) {
		at_cu_failf("out of host memory");
		at_cuda_fwd_free(g);
		return NULL;
	}
	if (setup(g, w) < 0 || warm_up(g) < 0) {
		at_cu_kept_error kept;
		at_cuda_fwd_free(g);
		kept.restore();
		return NULL;
	}
	return g;
}

// ---- passes ----

// Whether a pass of B rows of T positions with no hook and no cache
// (nothing wants the T x T weights) takes the fused attention, as
// training does; the scores, softmax and product apart otherwise.
static int fused_attention(const at_cuda_fwd *g, int B, int T)
{
	return at_cu_fused_attention_takes(g->prec, B, T, g->H, g->C / g->H,
					   g->C, 0);
}

size_t fwd_engine::scores_room(const at_cuda_fwd *g, const at_cu_hook *h,
			       int B, int T)
{
	size_t rows = (size_t)B * g->H * T;
	return !h && fused_attention(g, B, T) ? rows : rows * T;
}

// Layer l over x [B,T,C] (device) in place; k, v: the layer's cache, or
// NULL for q's neighbours in b.
int fwd_engine::block(at_cuda_fwd *g, pass_bufs *b, const at_cu_hook *h, int l,
		 const at_cu_kv *kv, void *k, void *v, float *x, int B, int T)
{
	size_t BTC = (size_t)B * T * g->C;
	at_cu_block_acts a = {};
	a.ln1 = a.ln2 = b->ln;
	a.q = b->q;
	a.k = k ? k : (char *)b->q + BTC * g->mm;
	a.v = v ? v : (char *)b->q + 2 * BTC * g->mm;
	if (!h && !kv && fused_attention(g, B, T)) {
		a.lse = b->att; // the rows' log-sum-exp, in the weights' room
	} else {
		a.att = b->att;
		a.att16 = b->att16;
	}
	a.merged = b->merged;
	a.xmid = b->xmid;
	a.fc = b->fc;
	a.gelu = b->gelu;
	a.buf3 = b->buf3;
	a.hook = h;
	a.layer = l;
	size_t results = BTC * g->H; // the heads' shares of y, where wanted
	if (h && h->wants(h->ctx, "result", l) != AT_HOOK_SKIP) {
		if (results > g->result_n) {
			cudaFree(g->result);
			g->result = NULL;
			g->result_n = 0;
			TRY(dalloc(&g->result, results * 4, "the heads' results"));
			g->result_n = results;
		}
		a.result = g->result;
	}
	TRY(at_cu_block_fwd(&g->g, &g->w[l], &a, kv, x, x, B, T, g->C, g->H));
	return report_x(g, h, x, l, B, T);
}

// The head on N = B*T rows of x (device) into b->logits, its LayerNorm
// and logits reported to h.
static int head(at_cuda_fwd *g, pass_bufs *b, const at_cu_hook *h,
		const float *x, int N, int T)
{
	int C = g->C, bf = g->prec == AT_PREC_BF16;
	TRY(g->prec == AT_PREC_BF16
		    ? at_cu_layernorm_fwd<bf16>((bf16 *)b->ln, NULL, NULL, x,
						g->lnfw, g->lnfb, N, C, AT_LN_EPS)
		    : at_cu_layernorm_fwd<float>((float *)b->ln, NULL, NULL, x,
						 g->lnfw, g->lnfb, N, C,
						 AT_LN_EPS));
	TRY(report_btx(h, "lnf", b->ln, bf, -1, N / T, T, C));
	TRY(at_cu_gemm(&g->g, 0, g->head_tied, N, g->V, C, 1.0f, b->ln, 0,
		       g->lm_head, 0, 0.0f, b->logits, 0, 1, "the head product"));
	return report_btx(h, "logits", b->logits, 0, -1, N / T, T, g->V);
}

// The first product of each shape costs cuBLAS the loading of its
// kernels: some 100 ms in all on the H200, which the first record would
// otherwise pay on top of its work.  One pass of the first loaded layer
// and the head over zeros (a prompt's worth of rows, the sizes common work
// takes) pays it while the engine is made, on a thread of its own where
// the caller began it early (forward.h: at_fwd_begin).
static int warm_up(at_cuda_fwd *g)
{
	int T = g->ctx < 1024 ? g->ctx : 1024, l = 0;
	while (l < g->L && !g->w[l].ln1w)
		l++;
	if (T < 1 || (l == g->L && !g->lnfw))
		return 0;
	TRY(make_bufs(g, &g->big, T, scores_room(g, NULL, 1, T)));
	pass_bufs *b = &g->big;
	CU_CHECK(cudaMemset(b->x, 0, (size_t)T * g->C * 4), "warming up");
	if (l < g->L)
		TRY(block(g, b, NULL, l, NULL, NULL, NULL, b->x, 1, T));
	if (g->lnfw)
		TRY(head(g, b, NULL, b->x, T, T));
	CU_CHECK(cudaDeviceSynchronize(), "warming up");
	return 0;
}

extern "C" int at_cuda_fwd_blocks(at_cuda_fwd *g, float *x, int B, int T,
				  const int *layers, int n, const at_hook *hook)
{
	size_t N = (size_t)B * T, bytes = N * g->C * 4;
	at_cu_hook hd;
	const at_cu_hook *h = device_hook(g, hook, &hd);
	TRY(make_bufs(g, &g->big, N, scores_room(g, h, B, T)));
	pass_bufs *b = &g->big;
	CU_CHECK(cudaMemcpy(b->x, x, bytes, cudaMemcpyHostToDevice),
		 "copying x to the GPU");
	for (int i = 0; i < n; i++)
		TRY(block(g, b, h, layers[i], NULL, NULL, NULL, b->x, B, T));
	CU_CHECK(cudaMemcpy(x, b->x, bytes, cudaMemcpyDeviceToHost),
		 "running the blocks");
	return 0;
}

// Rows of logits per piece copied back: 16 MiB, or one row.
static size_t piece_rows(const at_cuda_fwd *g, int N)
{
	size_t rows = ((size_t)16 << 20) / ((size_t)g->V * 4);
	return rows < 1 ? 1 : rows > (size_t)N ? (size_t)N : rows;
}

// The pinned pieces of the head's logits, for `rows` rows each.
static int piece_room(at_cuda_fwd *g, size_t rows)
{
	head_pieces *p = &g->pieces;
	if (!p->ev[0])
		for (int i = 0; i < 2; i++)
			CU_CHECK(cudaEventCreateWithFlags(&p->ev[i],
							  cudaEventDisableTiming),
				 "creating an event");
	size_t n = rows * g->V;
	if (n <= p->n)
		return 0;
	for (int i = 0; i < 2; i++) {
		cudaFreeHost(p->h[i]);
		p->h[i] = NULL;
	}
	p->n = 0;
	for (int i = 0; i < 2; i++)
		CU_CHECK(cudaMallocHost((void **)&p->h[i], n * 4),
			 "pinned memory for the logits");
	p->n = n;
	return 0;
}

// Starts the copy of rows [r, r + n) of the logits into piece i.
static int piece_copy(at_cuda_fwd *g, const float *logits, size_t r,
		      size_t n, int i)
{
	head_pieces *p = &g->pieces;
	CU_CHECK(cudaMemcpyAsync(p->h[i], logits + r * g->V, n * g->V * 4,
				 cudaMemcpyDeviceToHost, at_cu_stream),
		 "computing the logits");
	CU_CHECK(cudaEventRecord(p->ev[i], at_cu_stream), "computing the logits");
	return 0;
}

extern "C" int at_cuda_fwd_head(at_cuda_fwd *g, const float *x, int N,
				at_sink *sink, void *ctx)
{
	TRY(make_bufs(g, &g->big, N, 0));
	size_t rows = piece_rows(g, N);
	TRY(piece_room(g, rows));
	pass_bufs *b = &g->big;
	CU_CHECK(cudaMemcpy(b->x, x, (size_t)N * g->C * 4,
			    cudaMemcpyHostToDevice), "copying x to the GPU");
	TRY(head(g, b, NULL, b->x, N, N));
	// piece k goes through host buffer k % 2: the next one copies while
	// the sink takes this one
	head_pieces *p = &g->pieces;
	auto rows_at = [&](size_t r) {
		return (size_t)N - r < rows ? (size_t)N - r : rows;
	};
	TRY(piece_copy(g, b->logits, 0, rows_at(0), 0));
	for (size_t r = 0, k = 0; r < (size_t)N; r += rows, k++) {
		size_t next = r + rows;
		if (next < (size_t)N)
			TRY(piece_copy(g, b->logits, next, rows_at(next),
				       (int)(k + 1) % 2));
		CU_CHECK(cudaEventSynchronize(p->ev[k % 2]), "computing the logits");
		if (sink(ctx, p->h[k % 2], rows_at(r) * g->V * 4) < 0) {
			cudaStreamSynchronize(at_cu_stream);
			return AT_CUDA_SINK_STOPPED;
		}
	}
	return 0;
}

// The embedding of tokens [B,T] and every layer (with cache row `row`
// when kv), leaving x in g->big.x; the head is the caller's.
static int whole(at_cuda_fwd *g, const at_cu_hook *h, const int32_t *tokens,
		 int B, int T, const at_cu_kv *kv, int row)
{
	pass_bufs *b = &g->big;
	size_t N = (size_t)B * T;
	CU_CHECK(cudaMemcpy(b->tok, tokens, N * 4, cudaMemcpyHostToDevice),
		 "copying the tokens to the GPU");
	TRY(at_cuda_embed_forward(b->x, b->tok, g->wte, g->wpe, B, T, g->C));
	TRY(report_x(g, h, b->x, -1, B, T));
	size_t layer = (size_t)g->rows * g->ctx * g->C * g->mm;
	size_t off = (size_t)row * g->ctx * g->C * g->mm;
	for (int l = 0; l < g->L; l++) {
		void *k = kv ? (char *)g->kc + l * layer + off : NULL;
		void *v = kv ? (char *)g->vc + l * layer + off : NULL;
		TRY(block(g, b, h, l, kv, k, v, b->x, B, T));
	}
	return 0;
}

extern "C" int at_cuda_fwd_logits(at_cuda_fwd *g, float *logits,
				  const int32_t *tokens, int B, int T,
				  const at_hook *hook)
{
	size_t N = (size_t)B * T;
	at_cu_hook hd;
	const at_cu_hook *h = device_hook(g, hook, &hd);
	TRY(make_bufs(g, &g->big, N, scores_room(g, h, B, T)));
	TRY(whole(g, h, tokens, B, T, NULL, 0));
	TRY(head(g, &g->big, h, g->big.x, (int)N, T));
	CU_CHECK(cudaMemcpy(logits, g->big.logits, N * g->V * 4,
			    cudaMemcpyDeviceToHost), "computing the logits");
	return 0;
}

extern "C" int at_cuda_fwd_prefill(at_cuda_fwd *g, int row,
				   const int32_t *tokens, int T, float *logits,
				   const at_hook *hook)
{
	TRY(make_bufs(g, &g->big, T, (size_t)T * g->H * T));
	at_cu_hook hd;
	const at_cu_hook *h = device_hook(g, hook, &hd);
	at_cu_kv kv = {g->ctx, 0, NULL};
	TRY(whole(g, h, tokens, 1, T, &kv, row));
	if (!logits) {
		CU_CHECK(cudaDeviceSynchronize(), "encoding the prompt");
		return 0;
	}
	pass_bufs *b = &g->big;
	TRY(head(g, b, h, b->x + (size_t)(T - 1) * g->C, 1, 1));
	CU_CHECK(cudaMemcpy(logits, b->logits, (size_t)g->V * 4,
			    cudaMemcpyDeviceToHost), "encoding the prompt");
	return 0;
}

// The launches of one decoding step of B rows, on at_cu_stream: tokens
// and positions in g->step's device buffers, logits left in its logits.
static int decode_launches(at_cuda_fwd *g, const at_cu_hook *h, int B)
{
	pass_bufs *b = &g->step;
	TRY(at_cu_embed_at(b->x, b->tok, b->pos, g->wte, g->wpe, B, g->C));
	TRY(report_x(g, h, b->x, -1, B, 1));
	at_cu_kv kv = {g->ctx, 0, b->pos};
	size_t layer = (size_t)g->rows * g->ctx * g->C * g->mm;
	for (int l = 0; l < g->L; l++)
		TRY(block(g, b, h, l, &kv, (char *)g->kc + l * layer,
			  (char *)g->vc + l * layer, b->x, B, 1));
	return head(g, b, h, b->x, B, 1);
}

struct decode_rec {
	at_cuda_fwd *g;
	int B;
};

static int decode_rec_launches(void *ctx)
{
	decode_rec *r = (decode_rec *)ctx;
	return decode_launches(r->g, NULL, r->B);
}

// Records the step of B rows as a graph; with graphs turned off if
// recording fails (the step then runs eagerly, as before).
static void record(at_cuda_fwd *g, int B)
{
	decode_rec r = {g, B};
	at_cu_record(g->stream, decode_rec_launches, &r, &g->graph[B]);
	if (!g->graph[B])
		g->graphs = 0;
}

extern "C" int at_cuda_fwd_decode(at_cuda_fwd *g, const int32_t *tokens,
				  const int *pos, int B, float *logits,
				  const at_hook *hook)
{
	pass_bufs *b = &g->step;
	at_cu_hook hd;
	const at_cu_hook *h = device_hook(g, hook, &hd);
	int graph = g->graphs && !h && g->steps[B]++ > 0;
	if (graph && !g->graph[B])
		record(g, B);
	graph = graph && g->graph[B];
	cudaStream_t st = graph ? g->stream : 0;
	memcpy(g->h_tok, tokens, B * 4);
	memcpy(g->h_pos, pos, B * 4);
	CU_CHECK(cudaMemcpyAsync(b->tok, g->h_tok, B * 4, cudaMemcpyHostToDevice,
				 st), "copying the tokens to the GPU");
	CU_CHECK(cudaMemcpyAsync(b->pos, g->h_pos, B * 4, cudaMemcpyHostToDevice,
				 st), "copying the positions to the GPU");
	if (graph)
		CU_CHECK(cudaGraphLaunch(g->graph[B], st), "a decoding step");
	else
		TRY(decode_launches(g, h, B));
	size_t n = (size_t)B * g->V;
	CU_CHECK(cudaMemcpyAsync(g->h_logits, b->logits, n * 4,
				 cudaMemcpyDeviceToHost, st), "a decoding step");
	CU_CHECK(cudaStreamSynchronize(st), "a decoding step");
	memcpy(logits, g->h_logits, n * 4);
	return 0;
}
