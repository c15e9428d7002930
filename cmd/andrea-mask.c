/* andrea-mask - the causal mask: scores[..., i, j] = fill for every j > i. */
#include <limits.h>
#include <math.h>

#include "cli/filter.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include "help/andrea-mask.h" /* usage: the --help text */

typedef struct {
	float fill;
	at_exec exec;
	int T;      /* of the record being streamed */
} mask_ctx;

/* Checks that s (data unused) is f32 [...,T,T], returns T and adds the
 * attributes of the mask. */
static int mask_check(at_filter *f, at_tensor *s, float fill)
{
	if (s->dtype != AT_F32 || s->rank < 2 ||
	    s->dims[s->rank - 1] != s->dims[s->rank - 2])
		at_filter_die(f, 0, "expected f32 [...,T,T] scores");
	at_filter_expect_count(f, 0, s, s->rank - 1, s->rank, INT_MAX, "T",
			       "keys a row");
	at_filter_expect_count(f, 0, s, 0, s->rank - 2, INT_MAX,
			       s->rank == 4 ? "B*H" : "the leading sizes' product",
			       "T x T matrices");
	at_attr_set(&s->attrs, "mask", "causal");
	at_attr_setf(&s->attrs, "fill", "%.9g", fill);
	return (int)s->dims[s->rank - 1];
}

static void mask_run(at_filter *f, at_tensor *in, at_writer *w)
{
	const mask_ctx *mc = f->ctx;
	at_tensor *s = &in[0];
	int T = mask_check(f, s, mc->fill);
	stage_check(at_stage_mask(&mc->exec, s->data, 0, at_numel(s), T,
				  mc->fill));
	at_filter_write(w, s);
}

/* Where the stage streams, chunk by chunk as the scores arrive. */
static void mask_piece(void *ctx, float *buf, size_t n, uint64_t first)
{
	const mask_ctx *mc = ctx;
	stage_check(at_stage_mask(&mc->exec, buf, first, n, mc->T, mc->fill));
}

static int mask_stream(at_filter *f, at_reader *r, const at_header *h,
		       at_writer *w)
{
	mask_ctx *mc = f->ctx;
	at_tensor out;
	at_tensor_from_header(&out, h);
	mc->T = mask_check(f, &out, mc->fill);
	if (!at_stage_streams(&mc->exec, at_work_mask(at_numel(&out))))
		return 1;
	at_filter_stream(f, r, h, w, &out, sizeof(float), mask_piece, mc);
	return 0;
}

/* --fill F into the float at ctx: a number that float32 holds, or an
 * infinity. */
static void fill_opt(void *ctx, const char *arg, const char *what)
{
	float *fill = ctx;
	double d = cli_double(arg, what);
	*fill = (float)d;
	if (isinf(*fill) && !isinf(d))
		cli_usage_error("--fill %s: beyond float32's range (use -inf)",
				arg);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-mask", &c);
	mask_ctx mc = {.fill = -INFINITY};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE),
		CLI_CALL_ARG("fill", 0, fill_opt, &mc.fill),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	mc.exec.dev = stage_device_lazy(&c);
	at_filter f = {.inputs = {"scores"}, .n_inputs = 1, .run = mask_run,
		       .stream = mask_stream,
		       .ctx = &mc};
	at_filter_main(&c, &f, operand.v[0]);
	return 0;
}
