// cudnn_graph.cuh - a small layer over cuDNN's backend descriptors: build an
// operation graph of tensors and operations, find the engines that run
// it (and time them, to keep the fastest), execute it with a variant pack
// of pointers.
//
// Every descriptor made while building lives as long as the graph (the
// plan is only used while they exist).  The first failing call is kept in
// the graph (status and a one-line reason) and every later call does
// nothing, so a builder writes its operations straight through and checks
// once, at dnn_plan.
#ifndef ANDREA_CUDNN_GRAPH_CUH
#define ANDREA_CUDNN_GRAPH_CUH
#ifdef ANDREA_CUDNN

#include <stdint.h>

#include "common/cudnn_lazy.cuh"

#define DNN_MAX_DESCS 160
#define DNN_MAX_OPS 48
#define DNN_MAX_PLANS 8

typedef cudnnBackendDescriptor_t dnn_t;

struct dnn_graph {
	cudnnHandle_t handle;
	dnn_t made[DNN_MAX_DESCS];
	int nmade;
	dnn_t ops[DNN_MAX_OPS];
	int nops;
	int64_t next_uid;                // of the virtual tensors
	cudnnStatus_t status;
	char why[256];
	dnn_t plan;                      // after dnn_plan: the one run
	dnn_t plans[DNN_MAX_PLANS];      // the candidates (dnn_plan)
	int nplans;
	int tuned;                       // dnn_tune has chosen
	int64_t workspace;               // bytes, for any candidate
};

// Flags of dnn_tensor.
enum { DNN_VIRTUAL = 1, DNN_BY_VALUE = 2, DNN_F16x16 = 4 };

void dnn_init(dnn_graph *g, cudnnHandle_t handle);
void dnn_free(dnn_graph *g);
// A 4-d tensor; uid 0 for a virtual one (numbered by the graph).
dnn_t dnn_tensor(dnn_graph *g, cudnnDataType_t type, const int64_t dim[4],
		 const int64_t stride[4], int64_t uid, int flags);
// A float scalar [1,1,1,1] passed by value (its host address goes in the
// variant pack).
dnn_t dnn_scalar(dnn_graph *g, int64_t uid);
// y = mode(x[, b[, t]]) in compute type prec; axis >= 0 for GEN_INDEX.
void dnn_pointwise(dnn_graph *g, cudnnPointwiseMode_t mode,
		   cudnnDataType_t prec, dnn_t x, dnn_t b, dnn_t t, dnn_t y,
		   int64_t axis);
// y = op over the dimensions where y has extent 1.
void dnn_reduce(dnn_graph *g, cudnnReduceTensorOp_t op, dnn_t x, dnn_t y);
void dnn_matmul(dnn_graph *g, dnn_t a, dnn_t b, dnn_t c);
void dnn_reshape(dnn_graph *g, dnn_t x, dnn_t y);
// Finalize the graph and keep the plans of the first `most` engine
// configurations (heuristics mode A) that finalize and need no more
// workspace than the first, which g->plan runs: 0, or -1 with g->why.
int dnn_plan(dnn_graph *g, int most);
// Once (g->tuned), for an operation of `flop` operations: times g's
// plans (common/tune.cuh's at_cu_fastest; run(ctx) executes g->plan once
// on the caller's operands, which must be safe to repeat) and keeps the
// fastest in g->plan.  Nothing while the stream is being recorded.
int dnn_tune(dnn_graph *g, double flop, int (*run)(void *ctx), void *ctx,
	     const char *what);
// Run the plan on at_cu_stream: n tensors by uid and address.
int dnn_execute(dnn_graph *g, int n, const int64_t *uids, void *const *ptrs,
		void *workspace);

#endif
#endif
