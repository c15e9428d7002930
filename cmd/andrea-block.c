/* andrea-block - the residual stream through whole transformer blocks.
 *
 * x += Attn(LN1(x)); x += MLP(LN2(x)) for each layer given with -l, in
 * the order given.  -l takes a layer, a range A-B, an open range A-, a
 * comma-separated list of those, or `all`; it may be repeated.  --capture
 * writes chosen activations as they are computed, ahead of the x they
 * lead to; --ablate knocks heads out (cli/capture.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/capture.h"
#include "cli/filter.h"
#include "cli/stage.h"
#include "ops/weights.h"

#include "help/andrea-block.h" /* usage: the --help text */

#define MAX_RANGES 64
#define MAX_LAYERS 4096

typedef struct {
	int lo, hi; /* hi -1: through the model's last layer */
} range;

typedef struct {
	range ranges[MAX_RANGES];
	int n_ranges;
	at_model model;
	at_loaded weights;   /* the layers named, each once */
	int *order;          /* the layers in the order they run */
	int n_blocks;
	int precision;
	stage_engine engine;
	at_tensor pending;   /* the header of the record in flight, no data */
	int has_pending;
	capture cap;         /* --capture, --ablate */
	int hooked;          /* the engine has the capture's hook */
} block_ctx;

/* Parses a non-negative layer number at *p, advancing it; -1 if none. */
static int layer_number(const char **p)
{
	char *end;
	if (**p < '0' || **p > '9')
		return -1;
	long l = strtol(*p, &end, 10);
	if (l > 1 << 20)
		return -1;
	*p = end;
	return (int)l;
}

/* Adds the ranges of one -l argument to the block_ctx at ctx: "N", "A-B",
 * "A-", "all", comma separated.  Bad syntax is a usage error. */
static void parse_layers(void *ctx, const char *arg, const char *what)
{
	block_ctx *b = ctx;
	const char *p = arg;
	for (;;) {
		range r;
		if (strncmp(p, "all", 3) == 0 && (p[3] == ',' || !p[3])) {
			r.lo = 0, r.hi = -1;
			p += 3;
		} else {
			if ((r.lo = layer_number(&p)) < 0)
				goto bad;
			r.hi = r.lo;
			if (*p == '-') {
				p++;
				r.hi = *p == ',' || !*p ? -1 : layer_number(&p);
				if (r.hi == -1 && *p && *p != ',')
					goto bad;
				if (r.hi >= 0 && r.hi < r.lo)
					cli_usage_error("-l %s: range %d-%d runs "
							"backwards", arg, r.lo, r.hi);
			}
		}
		if (b->n_ranges == MAX_RANGES)
			cli_usage_error("-l: more than %d layer ranges", MAX_RANGES);
		b->ranges[b->n_ranges++] = r;
		if (!*p)
			return;
		if (*p++ != ',')
			goto bad;
	}
bad:
	cli_usage_error("-l '%s': expected LAYER, A-B, A-, all, or a "
			"comma-separated list of them", arg);
}

/* Expands the ranges against the model, checks every layer and loads
 * all their parameters, so that nothing is written before all is known
 * to be there; then puts them where the blocks will run. */
static void load_blocks(block_ctx *b)
{
	char err[700];
	int n_layer = b->model.cfg.n_layer, n = 0;
	for (int i = 0; i < b->n_ranges; i++) {
		range r = b->ranges[i];
		if (r.hi < 0 && n_layer <= 0)
			cli_die("%s: the number of layers is unknown, so -l cannot "
				"run to the last one", b->model.path);
		int hi = r.hi < 0 ? n_layer - 1 : r.hi;
		if (r.lo > hi)
			cli_die("-l %d-: the model has %d layers (0..%d)", r.lo,
				n_layer, n_layer - 1);
		n += hi - r.lo + 1;
		if (n > MAX_LAYERS)
			cli_die("-l: more than %d blocks to run", MAX_LAYERS);
		b->ranges[i].hi = hi;
	}
	unsigned char *want = calloc((size_t)n_layer + 1, 1);
	if (!want || !(b->order = calloc((size_t)n, sizeof *b->order)))
		cli_die("out of memory");
	for (int i = 0; i < b->n_ranges; i++)
		for (int l = b->ranges[i].lo; l <= b->ranges[i].hi; l++) {
			if (at_model_check_layer(&b->model, l, err, sizeof err) < 0)
				cli_die("%s", err);
			want[l] = 1;
			b->order[b->n_blocks++] = l;
		}
	capture_check_run(&b->cap, want, n_layer, b->model.cfg.n_head);
	if (at_weights_load(&b->weights, &b->model, AT_LOAD_LAYERS, want, err,
			    sizeof err) < 0)
		cli_die("%s", err);
	free(want);
}

/* The multiply-adds of the blocks over x [B,T,C], and the bytes their
 * GPU path copies, in *bytes: what auto decides by. */
static double work(const block_ctx *b, double B, double T, double *bytes)
{
	return at_fwd_work(b->weights.w.C, b->weights.w.V, B * T, b->n_blocks,
			   T / 2.0, 0, bytes);
}

/* Auto's engine begins while the first x arrives. */
static void block_prepare(at_filter *f, int slot, const at_header *h)
{
	block_ctx *b = f->ctx;
	double bytes, madds;
	if (h->rank == 3) {
		madds = work(b, (double)h->dims[0], (double)h->dims[1], &bytes);
		stage_engine_prepare(&b->engine, madds, bytes);
	}
}

/* Writes the record in flight once the engine has it (filter.h: drain). */
static void block_drain(at_filter *f, at_writer *w)
{
	block_ctx *b = f->ctx;
	if (!b->has_pending)
		return;
	b->has_pending = 0;
	char err[600];
	const float *x = at_fwd_blocks_end(b->engine.engine, err, sizeof err);
	if (!x)
		cli_die("%s", err);
	b->pending.data = (void *)x;
	at_filter_write(w, &b->pending);
	b->pending.data = NULL;
}

/* Checks one x and begins every block on it; writes the record before it,
 * which the GPU computed while this one arrived, and leaves this one in
 * flight while the next arrives. */
static void block_run(at_filter *f, at_tensor *in, at_writer *w)
{
	block_ctx *b = f->ctx;
	at_tensor *x = &in[0];
	at_filter_expect(f, 0, x, 3, "B,T,C");
	int B = (int)x->dims[0], T = (int)x->dims[1], C = (int)x->dims[2];
	if (C != b->model.cfg.d_model)
		at_filter_die(f, 0, "C=%d but the model has C=%d", C,
			      b->model.cfg.d_model);
	at_filter_expect_count(f, 0, x, 0, 2, 1u << 30, "B*T", "rows");
	if (B == 0 || T == 0) { /* no rows: nothing to compute or capture */
		at_filter_drain(f);
		at_attr_setf(&x->attrs, "layer", "%d",
			     b->order[b->n_blocks - 1]);
		at_filter_write(w, x);
		return;
	}
	char err[600];
	double bytes, madds = work(b, B, T, &bytes);
	at_fwd *e = stage_engine_get(&b->engine, madds, bytes);
	if (capture_wanted(&b->cap)) {
		/* captured records go out as computed: the record before
		 * first, then this one's activations, then its x */
		at_filter_drain(f);
		if (!b->hooked) {
			const at_config *cfg = &b->model.cfg;
			at_fwd_set_hook(e, capture_start(&b->cap, cfg->n_layer,
							 cfg->n_head,
							 C / cfg->n_head, e, NULL));
			b->hooked = 1;
		}
		capture_to(&b->cap, w);
	}
	int rc = at_fwd_blocks_begin(e, x->data, B, T, b->order, b->n_blocks,
				     err, sizeof err);
	if (rc < 0)
		at_filter_die(f, 0, "%s", err);
	if (rc > 0) /* the capture's writer failed */
		cli_fail(w->err);
	at_filter_drain(f);
	b->pending = *x;
	b->pending.data = NULL;
	at_attr_setf(&b->pending.attrs, "layer", "%d", b->order[b->n_blocks - 1]);
	b->has_pending = 1;
	f->pending = 1;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-block", &c);
	block_ctx b = {0};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE | CLI_USE_MODEL),
		CLI_CALL_ARG("layer", 'l', parse_layers, &b),
		CLI_ALIAS("layers", 'l'),
		CLI_CALL_ARG("precision", 0, stage_precision_opt, &b.precision),
		CLI_CALL_ARG("capture", 0, capture_opt, &b.cap),
		CLI_CALL_ARG("ablate", 0, ablate_opt, &b.cap),
		CLI_CALL_ARG("patch", 0, patch_opt, &b.cap),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (b.n_ranges == 0)
		b.ranges[b.n_ranges++] = (range){0, 0};
	/* a bad --device or --precision fails before any input */
	stage_check_device(&c, b.precision);
	stage_open_model(&c, &b.model);
	char err[600];
	if (at_model_need_heads(&b.model, err, sizeof err) < 0)
		cli_die("%s", err);
	b.cap.blocks_only = 1;
	load_blocks(&b);
	stage_engine_init(&b.engine, &c, &b.weights.w, b.precision);
	at_filter f = {.inputs = {"x"}, .n_inputs = 1, .run = block_run,
		       .prepare = block_prepare, .drain = block_drain, .ctx = &b};
	at_filter_main(&c, &f, operand.v[0]);
	stage_engine_free(&b.engine);
	capture_free(&b.cap);
	at_weights_free(&b.weights);
	free(b.order);
	at_model_close(&b.model);
	return 0;
}
