/* andrea-softmax - attention weights: attn = softmax(scores) along rows. */
#include "filter.h"
#include "ops.h"
#include "ops_cuda.h"
#include "stage.h"

static const char usage[] =
	"usage: andrea-softmax [-f] [-o FILE] [--keep] [--device DEV]\n"
	"                      [-z LEVEL] [--threads N]\n"
	"                      [--no-shuffle] [FILE]\n";

static void softmax_run(at_filter *f, at_tensor *in, at_writer *w)
{
	at_tensor *s = &in[0], out;
	if (s->dtype != AT_F32 || s->rank < 1)
		at_filter_die(f, 0, "expected f32 scores of rank >= 1");
	if (at_tensor_init(&out, "attn", AT_F32, s->rank, s->dims) < 0)
		cli_die("out of memory");
	int n = (int)s->dims[s->rank - 1];
	size_t rows = n ? (size_t)(at_numel(s) / (uint64_t)n) : 0;
	if (*(at_device *)f->ctx == AT_DEV_CUDA)
		stage_cuda_check(at_cuda_softmax_host(out.data, s->data, rows, n));
	else
		at_softmax_rows(out.data, s->data, rows, n);
	out.attrs = s->attrs;
	at_filter_write(w, &out);
	at_tensor_free(&out);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-softmax", &c);
	static const struct option longopts[] = {CLI_COMMON_LONG, CLI_STAGE_LONG, {0}};
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1)
		if (!cli_common_opt(&c, opt, optarg, usage))
			cli_bad_option(argv);
	if (argc - optind > 1)
		cli_usage_error("too many operands (see %s --help)", cli_prog);
	at_device dev = stage_device(&c, 1);
	at_filter f = {.inputs = {"scores"}, .n_inputs = 1, .run = softmax_run,
		       .ctx = &dev};
	at_filter_main(&c, &f, argc > optind ? argv[optind] : NULL);
	return 0;
}
