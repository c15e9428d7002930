/* andrea-pack - write .npy arrays as an andrea stream.
 *
 * Every NAME=FILE.npy operand is read and checked before the first byte is
 * written, so a bad operand leaves no partial stream behind.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "npy.h"

static const char usage[] =
	"usage: andrea-pack [-f] [-o FILE] [-z LEVEL] [--threads N] [--no-shuffle]\n"
	"                   NAME=FILE.npy ...\n";

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-pack", &c);
	static const struct option longopts[] = {CLI_COMMON_LONG, {0}};
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, longopts, NULL)) != -1)
		if (!cli_common_opt(&c, opt, optarg, usage))
			cli_bad_option(argv);
	int n = argc - optind;
	if (n == 0)
		cli_usage_error("no NAME=FILE.npy operand (see %s --help)", cli_prog);

	at_tensor *t = calloc((size_t)n, sizeof *t);
	if (!t)
		cli_die("out of memory");
	for (int i = 0; i < n; i++) {
		const char *arg = argv[optind + i];
		const char *eq = strchr(arg, '=');
		if (!eq || !at_name_valid(arg, (size_t)(eq - arg)))
			cli_usage_error("'%s': expected NAME=FILE.npy with a name of "
					"1-255 bytes and no whitespace", arg);
		char err[256];
		if (at_npy_read(eq + 1, &t[i], c.ropts.max_bytes, err, sizeof err) < 0)
			cli_die("%s: %s", eq + 1, err);
		snprintf(t[i].name, sizeof t[i].name, "%.*s", (int)(eq - arg), arg);
	}
	at_writer w;
	cli_open_output(&c, &w);
	for (int i = 0; i < n; i++) {
		if (at_write_tensor(&w, &t[i]) < 0)
			cli_fail(w.err);
		at_tensor_free(&t[i]);
	}
	cli_finish_output(&w);
	free(t);
	return 0;
}
