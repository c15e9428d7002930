/* andrea-softmax - attention weights: attn = softmax(scores) along rows. */
#include <limits.h>
#include <stdio.h>

#include "cli/filter.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include "help/andrea-softmax.h" /* usage: the --help text */

/* Checks the scores (data unused); returns the row length. */
static int softmax_check(at_filter *f, const at_tensor *s)
{
	if (s->dtype != AT_F32 || s->rank < 1)
		at_filter_die(f, 0, "expected f32 scores of rank >= 1");
	at_filter_expect_count(f, 0, s, s->rank - 1, s->rank, INT_MAX, "T",
			       "keys a row");
	return (int)s->dims[s->rank - 1];
}

static void softmax_run(at_filter *f, at_tensor *in, at_writer *w)
{
	at_tensor *s = &in[0], out;
	int n = softmax_check(f, s);
	if (at_tensor_init(&out, "attn", AT_F32, s->rank, s->dims) < 0)
		cli_die("out of memory");
	size_t rows = n ? (size_t)(at_numel(s) / (uint64_t)n) : 0;
	stage_check(at_stage_softmax(f->ctx, out.data, s->data, rows, n));
	out.attrs = s->attrs;
	at_filter_write(w, &out);
	at_tensor_free(&out);
}

/* Where the stage streams, whole rows at a time as the scores arrive. */
typedef struct {
	const at_exec *exec;
	int n;
} softmax_rows;

static void softmax_piece(void *ctx, float *buf, size_t rows, uint64_t first)
{
	const softmax_rows *sr = ctx;
	stage_check(at_stage_softmax(sr->exec, buf, buf, rows, sr->n));
}

static int softmax_stream(at_filter *f, at_reader *r, const at_header *h,
			  at_writer *w)
{
	at_tensor out;
	at_tensor_from_header(&out, h);
	int n = softmax_check(f, &out);
	size_t rows = n ? (size_t)(at_numel(&out) / (uint64_t)n) : 0;
	if (!at_stage_streams(f->ctx, at_work_softmax(rows, n)))
		return 1;
	snprintf(out.name, sizeof out.name, "attn");
	/* an empty row length leaves nothing to read: any unit will do */
	size_t unit = (n ? (size_t)n : 1) * sizeof(float);
	softmax_rows sr = {f->ctx, n};
	at_filter_stream(f, r, h, w, &out, unit, softmax_piece, &sr);
	return 0;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-softmax", &c);
	cli_opt opts[] = {CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE), CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	at_exec exec = {.dev = stage_device_lazy(&c)};
	at_filter f = {.inputs = {"scores"}, .n_inputs = 1, .run = softmax_run,
		       .stream = softmax_stream,
		       .ctx = &exec};
	at_filter_main(&c, &f, operand.v[0]);
	return 0;
}
