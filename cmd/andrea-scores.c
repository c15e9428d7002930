/* andrea-scores - attention scores: scores = q . k^T * scale, per head. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/filter.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include "help/andrea-scores.h" /* usage: the --help text */

typedef struct {
	stage_scale scale; /* --scale, --no-scale */
	at_exec exec; /* the device; --tf32: TF32 products on the GPU */
} scores_ctx;

/* The scores as at_stage_scores computes them: into the record. */
static int put_scores(void *w, const void *p, size_t n)
{
	at_filter_put(w, p, n);
	return 0;
}

static void scores_run(at_filter *f, at_tensor *in, at_writer *w)
{
	scores_ctx *s = f->ctx;
	at_tensor *q = &in[0], *k = &in[1];
	at_filter_expect(f, 0, q, 4, "B,H,T,D");
	at_filter_expect(f, 1, k, 4, "B,H,T,D");
	at_filter_expect_like(f, 1, k, q);
	at_filter_expect_count(f, 0, q, 0, 2, INT_MAX, "B*H", "heads");
	int BH = (int)(q->dims[0] * q->dims[1]), T = (int)q->dims[2],
	    D = (int)q->dims[3];
	double scale = stage_scale_of(f, &s->scale, D);
	at_tensor out = {.dtype = AT_F32, .rank = 4,
			 .dims = {q->dims[0], q->dims[1], (uint64_t)T, (uint64_t)T}};
	at_filter_expect_fits(f, 0, "scores", 4, out.dims);
	snprintf(out.name, sizeof out.name, "scores");
	out.attrs = q->attrs;
	at_attr_setf(&out.attrs, "scale", "%.9g", (float)scale);
	/* written as computed (on the CPU a block of rows at a time), so
	 * that the stages downstream start at once */
	at_filter_begin(w, &out);
	at_filter_serial(at_stage_streams(&s->exec, at_work_scores(BH, T, D)));
	stage_check(at_stage_scores(&s->exec, q->data, k->data, BH, T, D,
				    (float)scale, put_scores, w));
	at_filter_serial(0);
	at_filter_end(w);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-scores", &c);
	scores_ctx s = {0};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE),
		CLI_CALL_ARG("scale", 0, stage_scale_opt, &s.scale),
		CLI_CALL("no-scale", 0, stage_scale_opt, &s.scale),
		CLI_FLAG("tf32", 0, &s.exec.tf32),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	s.exec.dev = stage_device_lazy(&c);
	at_filter f = {.inputs = {"q", "k"}, .n_inputs = 2, .run = scores_run,
		       .ctx = &s};
	at_filter_main(&c, &f, operand.v[0]);
	return 0;
}
