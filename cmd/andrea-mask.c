/* andrea-mask - the causal mask: scores[..., i, j] = fill for every j > i. */
#include <math.h>

#include "filter.h"
#include "ops.h"
#include "ops_cuda.h"
#include "stage.h"

static const char usage[] =
	"usage: andrea-mask [-f] [-o FILE] [--fill F] [--keep] [--device DEV]\n"
	"                   [-z LEVEL] [--threads N]\n"
	"                   [--no-shuffle] [FILE]\n";

enum { OPT_FILL = CLI_FIRST_OWN };

typedef struct {
	float fill;
	at_device dev;
} mask_ctx;

static void mask_run(at_filter *f, at_tensor *in, at_writer *w)
{
	const mask_ctx *mc = f->ctx;
	float fill = mc->fill;
	at_tensor *s = &in[0];
	if (s->dtype != AT_F32 || s->rank < 2 ||
	    s->dims[s->rank - 1] != s->dims[s->rank - 2])
		at_filter_die(f, 0, "expected f32 [...,T,T] scores");
	int T = (int)s->dims[s->rank - 1];
	int BH = T ? (int)(at_numel(s) / ((uint64_t)T * T)) : 0;
	if (mc->dev == AT_DEV_CUDA)
		stage_cuda_check(at_cuda_mask_host(s->data, BH, T, fill));
	else
		at_mask_causal(s->data, BH, T, fill);
	at_attr_set(&s->attrs, "mask", "causal");
	at_attr_setf(&s->attrs, "fill", "%.9g", fill);
	at_filter_write(w, s);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-mask", &c);
	static const struct option longopts[] = {
		CLI_COMMON_LONG, CLI_STAGE_LONG,
		{"fill", required_argument, 0, OPT_FILL},
		{0}};
	mask_ctx mc = {.fill = -INFINITY};
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1) {
		if (opt == OPT_FILL) {
			double d = cli_double(optarg, "--fill");
			mc.fill = (float)d;
			if (isinf(mc.fill) && !isinf(d))
				cli_usage_error("--fill %s: beyond float32's range "
						"(use -inf)", optarg);
		}
		else if (!cli_common_opt(&c, opt, optarg, usage))
			cli_bad_option(argv);
	}
	if (argc - optind > 1)
		cli_usage_error("too many operands (see %s --help)", cli_prog);
	mc.dev = stage_device(&c, 1);
	at_filter f = {.inputs = {"scores"}, .n_inputs = 1, .run = mask_run,
		       .ctx = &mc};
	at_filter_main(&c, &f, argc > optind ? argv[optind] : NULL);
	return 0;
}
