/* andrea-attention - the attention of q, k and v in one stage: out =
 * softmax(mask(q . k^T * scale)) . v per head, what andrea-scores,
 * -mask, -softmax and -attend compute in turn, without the T x T scores
 * (so without their memory); --lse adds each row's log-sum-exp.
 */
#include "cli/filter.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include <limits.h>
#include <math.h>

#include "help/andrea-attention.h" /* usage: the --help text */

typedef struct {
	stage_scale scale; /* --scale, --no-scale */
	int no_mask, lse;
	at_exec exec;
} attention_ctx;

static void attention_run(at_filter *f, at_tensor *in, at_writer *w)
{
	attention_ctx *a = f->ctx;
	for (int i = 0; i < 3; i++)
		at_filter_expect(f, i, &in[i], 4, "B,H,T,D");
	for (int i = 1; i < 3; i++) /* one head's q, k and v */
		at_filter_expect_like(f, i, &in[i], &in[0]);
	at_filter_expect_same_head(f, 2, &in[2], &in[1]); /* q may have none */
	const at_tensor *q = &in[0];
	/* heads of no values pass the byte cap at any B, H and T, yet their
	 * lse holds B*H*T floats */
	at_filter_expect_count(f, 0, q, 0, 2, INT_MAX, "B*H", "heads");
	if (a->lse)
		at_filter_expect_fits(f, 0, "lse", 3, q->dims);
	int BH = (int)(q->dims[0] * q->dims[1]), T = (int)q->dims[2],
	    D = (int)q->dims[3];
	double scale = stage_scale_of(f, &a->scale, D);
	at_tensor out, lse = {0};
	if (at_tensor_init(&out, "out", AT_F32, 4, q->dims) < 0 ||
	    (a->lse && at_tensor_init(&lse, "lse", AT_F32, 3, q->dims) < 0))
		cli_die("out of memory");
	out.attrs = q->attrs;
	at_attr_setf(&out.attrs, "scale", "%.9g", (float)scale);
	if (a->no_mask) {
		at_attr_set(&out.attrs, "mask", "none");
	} else { /* what andrea-mask sets, so that out says it as theirs */
		at_attr_set(&out.attrs, "mask", "causal");
		at_attr_setf(&out.attrs, "fill", "%.9g", -INFINITY);
	}
	lse.attrs = out.attrs;
	stage_check(at_stage_attention(&a->exec, out.data, a->lse ? lse.data : NULL,
				       in[0].data, in[1].data, in[2].data, BH,
				       T, D, (float)scale, !a->no_mask));
	at_filter_write(w, &out);
	if (a->lse)
		at_filter_write(w, &lse);
	at_tensor_free(&out);
	at_tensor_free(&lse);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-attention", &c);
	attention_ctx a = {0};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE),
		CLI_CALL_ARG("scale", 0, stage_scale_opt, &a.scale),
		CLI_CALL("no-scale", 0, stage_scale_opt, &a.scale),
		CLI_FLAG("no-mask", 0, &a.no_mask),
		CLI_FLAG("lse", 0, &a.lse),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	a.exec.dev = stage_device_lazy(&c);
	at_filter f = {.inputs = {"q", "k", "v"}, .n_inputs = 3,
		       .run = attention_run, .ctx = &a};
	at_filter_main(&c, &f, operand.v[0]);
	return 0;
}
