// cudnn_graph.cu - building and running cuDNN backend graphs
// (cudnn_graph.cuh).
#ifdef ANDREA_CUDNN
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cuda_util.cuh"
#include "common/cudnn_graph.cuh"
#include "common/tune.cuh"

// Records the first failure: what was being done, cuDNN's status and its
// own last message.
static void fail(dnn_graph *g, cudnnStatus_t s, const char *fmt, ...)
{
	if (g->status != CUDNN_STATUS_SUCCESS)
		return;
	g->status = s;
	char what[96], detail[128] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	at_cudnn.last_error(detail, sizeof detail);
	char *nl = strchr(detail, '\n');
	if (nl)
		*nl = 0;
	snprintf(g->why, sizeof g->why, "%s: %s%s%s", what,
		 at_cudnn.error_string(s), *detail ? ": " : "", detail);
}

static dnn_t make(dnn_graph *g, cudnnBackendDescriptorType_t type)
{
	dnn_t d = NULL;
	if (g->status != CUDNN_STATUS_SUCCESS)
		return NULL;
	if (g->nmade == DNN_MAX_DESCS) {
		fail(g, CUDNN_STATUS_NOT_SUPPORTED, "too many descriptors");
		return NULL;
	}
	cudnnStatus_t s = at_cudnn.make(type, &d);
	if (s != CUDNN_STATUS_SUCCESS) {
		fail(g, s, "making descriptor type %d", (int)type);
		return NULL;
	}
	return g->made[g->nmade++] = d;
}

static void set(dnn_graph *g, dnn_t d, cudnnBackendAttributeName_t name,
		cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
	if (g->status != CUDNN_STATUS_SUCCESS)
		return;
	cudnnStatus_t s = at_cudnn.set(d, name, type, n, v);
	if (s != CUDNN_STATUS_SUCCESS)
		fail(g, s, "setting attribute %d", (int)name);
}

// An attribute that is one descriptor (an operation's operand, say).
static void set_desc(dnn_graph *g, dnn_t d, cudnnBackendAttributeName_t name,
		     dnn_t value)
{
	set(g, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
}

static void finalize(dnn_graph *g, dnn_t d, const char *what)
{
	if (g->status != CUDNN_STATUS_SUCCESS)
		return;
	cudnnStatus_t s = at_cudnn.finalize(d);
	if (s != CUDNN_STATUS_SUCCESS)
		fail(g, s, "finalizing %s", what);
}

// An operation descriptor of type, finalized by the caller via op_done.
static void op_done(dnn_graph *g, dnn_t op, const char *what)
{
	finalize(g, op, what);
	if (g->status != CUDNN_STATUS_SUCCESS)
		return;
	if (g->nops == DNN_MAX_OPS)
		return fail(g, CUDNN_STATUS_NOT_SUPPORTED, "too many operations");
	g->ops[g->nops++] = op;
}

void dnn_init(dnn_graph *g, cudnnHandle_t handle)
{
	memset(g, 0, sizeof *g);
	g->handle = handle;
	g->next_uid = 1000;
}

void dnn_free(dnn_graph *g)
{
	for (int i = g->nmade - 1; i >= 0; i--)
		at_cudnn.destroy(g->made[i]);
	g->nmade = g->nops = 0;
	g->plan = NULL;
}

dnn_t dnn_tensor(dnn_graph *g, cudnnDataType_t type, const int64_t dim[4],
		 const int64_t stride[4], int64_t uid, int flags)
{
	dnn_t t = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
	bool virt = flags & DNN_VIRTUAL, by_value = flags & DNN_BY_VALUE;
	int64_t align = 16;
	if (!uid)
		uid = g->next_uid++;
	set(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
	set(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
	set(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride);
	set(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	set(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
	set(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
	set(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1,
	    &by_value);
	if (flags & DNN_F16x16) {
		cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
		set(g, t, CUDNN_ATTR_TENSOR_REORDERING_MODE,
		    CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &r);
	}
	finalize(g, t, "a tensor");
	return t;
}

dnn_t dnn_scalar(dnn_graph *g, int64_t uid)
{
	static const int64_t one[4] = {1, 1, 1, 1};
	return dnn_tensor(g, CUDNN_DATA_FLOAT, one, one, uid, DNN_BY_VALUE);
}

void dnn_pointwise(dnn_graph *g, cudnnPointwiseMode_t mode,
		   cudnnDataType_t prec, dnn_t x, dnn_t b, dnn_t t, dnn_t y,
		   int64_t axis)
{
	dnn_t pw = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
	set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (axis >= 0)
		set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	finalize(g, pw, "a pointwise descriptor");
	dnn_t op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
	set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
	set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
	if (b)
		set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
	if (t)
		set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
	set_desc(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
	op_done(g, op, "a pointwise operation");
}

void dnn_reduce(dnn_graph *g, cudnnReduceTensorOp_t op_kind, dnn_t x, dnn_t y)
{
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	dnn_t r = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
	set(g, r, CUDNN_ATTR_REDUCTION_OPERATOR,
	    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op_kind);
	set(g, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	finalize(g, r, "a reduction descriptor");
	dnn_t op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
	set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
	set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
	set_desc(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
	op_done(g, op, "a reduction");
}

void dnn_matmul(dnn_graph *g, dnn_t a, dnn_t b, dnn_t c)
{
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	dnn_t mm = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
	set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	finalize(g, mm, "a matmul descriptor");
	dnn_t op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
	set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
	set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
	set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
	set_desc(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
	op_done(g, op, "a matmul");
}

void dnn_reshape(dnn_graph *g, dnn_t x, dnn_t y)
{
	dnn_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
	set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
	set_desc(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
	op_done(g, op, "a reshape");
}

#define MAX_CONFIGS 16

int dnn_plan(dnn_graph *g, int most)
{
	dnn_t graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
	    &g->handle);
	set(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
	finalize(g, graph, "the operation graph");
	dnn_t heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
	cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
	set_desc(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
	set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	finalize(g, heur, "the engine heuristics");
	dnn_t cfg[MAX_CONFIGS];
	for (int i = 0; i < MAX_CONFIGS; i++)
		cfg[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
	int64_t n = 0;
	if (g->status == CUDNN_STATUS_SUCCESS) {
		cudnnStatus_t s = at_cudnn.get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
					       CUDNN_TYPE_BACKEND_DESCRIPTOR,
					       MAX_CONFIGS, &n, cfg);
		if (s != CUDNN_STATUS_SUCCESS)
			fail(g, s, "asking the heuristics for engines");
		else if (n == 0)
			fail(g, CUDNN_STATUS_NOT_SUPPORTED, "no engine for the graph");
	}
	// The first `most` configurations that finalize, a refusal tried
	// past; of them, those that need no more workspace than the first.
	cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
	for (int64_t i = 0; i < n && g->nplans < most &&
			    g->status == CUDNN_STATUS_SUCCESS; i++) {
		dnn_t plan = make(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
		set(g, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
		    &g->handle);
		set(g, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
		if (g->status != CUDNN_STATUS_SUCCESS)
			break;
		cudnnStatus_t s = at_cudnn.finalize(plan);
		if (s != CUDNN_STATUS_SUCCESS) {
			last = s;
			continue;
		}
		int64_t ws = 0, got = 0;
		s = at_cudnn.get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
				 CUDNN_TYPE_INT64, 1, &got, &ws);
		if (s != CUDNN_STATUS_SUCCESS)
			fail(g, s, "asking a plan's workspace");
		else if (g->nplans == 0 || ws <= g->workspace) {
			if (g->nplans == 0)
				g->workspace = ws;
			g->plans[g->nplans++] = plan;
		}
	}
	if (g->status == CUDNN_STATUS_SUCCESS && n > 0 && g->nplans == 0)
		fail(g, last, "finalizing a plan (%d engines tried)", (int)n);
	g->plan = g->nplans ? g->plans[0] : NULL;
	return g->status == CUDNN_STATUS_SUCCESS && g->plan ? 0 : -1;
}

// One try of dnn_tune: the graph's plans, run by the caller.
struct dnn_try {
	dnn_graph *g;
	int (*run)(void *ctx);
	void *ctx;
};

static int run_plan(int i, void *c)
{
	dnn_try *t = (dnn_try *)c;
	t->g->plan = t->g->plans[i];
	return t->run(t->ctx);
}

int dnn_tune(dnn_graph *g, double flop, int (*run)(void *ctx), void *ctx,
	     const char *what)
{
	if (!at_cu_tune_now(&g->tuned, flop) || g->nplans < 2)
		return 0;
	dnn_try t = {g, run, ctx};
	int best = at_cu_fastest(g->nplans, run_plan, &t, what,
				 "cuDNN engine configuration");
	g->plan = g->plans[best >= 0 ? best : 0];
	return 0;
}

int dnn_execute(dnn_graph *g, int n, const int64_t *uids, void *const *ptrs,
		void *workspace)
{
	dnn_t pack = NULL;
	cudnnStatus_t s = at_cudnn.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
					&pack);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
				 CUDNN_TYPE_INT64, n, uids);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
				 CUDNN_TYPE_VOID_PTR, n, ptrs);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
				 CUDNN_TYPE_VOID_PTR, 1, &workspace);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.finalize(pack);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.set_stream(g->handle, at_cu_stream);
	if (s == CUDNN_STATUS_SUCCESS)
		s = at_cudnn.execute(g->handle, g->plan, pack);
	if (pack)
		at_cudnn.destroy(pack);
	if (s != CUDNN_STATUS_SUCCESS) {
		char detail[128] = "";
		at_cudnn.last_error(detail, sizeof detail);
		return at_cu_failf("cuDNN: running the fused attention: %s %s",
				   at_cudnn.error_string(s), detail);
	}
	return 0;
}
#endif
