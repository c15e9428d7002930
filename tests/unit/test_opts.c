/* test_opts.c - unit test of the option table (lib/cli/opts.h): values,
 * the given counts, aliases, abbreviations, the common options and the
 * operands.  The misuse paths exit, and the command tests check them
 * (tests/test_faults.py and the tests of each tool).
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <stdio.h>
#include <string.h>

#include "cli/opts.h"
#include "check.h"

/* What one table fills. */
typedef struct {
	int quiet, norm, layer, calls;
	long count;
	double scale;
	const char *name, *last_arg;
} vals;

/* A CLI_CALL_ARG action: counts its calls and keeps the argument. */
static void note(void *ctx, const char *arg, const char *what)
{
	vals *v = ctx;
	v->calls++;
	v->last_arg = arg;
	CHECK(strcmp(what, "--note") == 0);
}

/* Parses the NULL-terminated words (argv[0] first) by the table opts. */
static cli_operands parse(cli_common *c, cli_opt *opts, char **words)
{
	int argc = 0;
	while (words[argc])
		argc++;
	optind = 0; /* glibc: start getopt afresh */
	cli_init("test_opts", c);
	return cli_parse(c, opts, "usage\n", CLI_ANY, argc, words);
}

/* The table of the tests, over v. */
#define TABLE(v)                                                        \
	{CLI_USES(CLI_USE_COMMON),                                      \
	 CLI_FLAG("quiet", 'q', &(v).quiet),                            \
	 CLI_ALIAS("silent", 'q'),                                      \
	 CLI_UNFLAG("no-norm", 0, &(v).norm),                           \
	 CLI_INT("layer", 'l', &(v).layer, 0, 9),                       \
	 CLI_ALIAS("layers", 'l'),                                      \
	 CLI_LONG(NULL, 'n', &(v).count, 0, 100),                       \
	 CLI_DOUBLE("scale", 0, &(v).scale),                            \
	 CLI_STRING("name", 0, &(v).name),                              \
	 CLI_CALL_ARG("note", 0, note, &(v)),                           \
	 CLI_END}

static void test_values_and_operands(void)
{
	cli_common c;
	vals v = {.norm = 1};
	cli_opt opts[] = TABLE(v);
	char *words[] = {"t", "--lay", "3", "-q", "in", "--silent",
			 "--threads", "4", "-z2", "--sc=2.5", "--name", "x",
			 "-n", "7", "--no-n", "--note", "a", "--note=b",
			 "--", "-out", NULL};
	cli_operands op = parse(&c, opts, words);
	CHECK(v.layer == 3 && v.quiet == 1 && v.norm == 0 && v.count == 7);
	CHECK(v.scale == 2.5 && v.name && strcmp(v.name, "x") == 0);
	CHECK(v.calls == 2 && strcmp(v.last_arg, "b") == 0);
	CHECK(c.ropts.threads == 4 && c.threads_given && c.wopts.level == 2);
	CHECK(op.n == 2 && strcmp(op.v[0], "in") == 0 &&
	      strcmp(op.v[1], "-out") == 0 && op.v[2] == NULL);
	CHECK(cli_given(opts, "quiet") == 2 && cli_given(opts, "silent") == 2);
	CHECK(cli_given(opts, "layer") == 1 && cli_given(opts, "layers") == 1);
	CHECK(cli_given(opts, "note") == 2 && cli_given(opts, "scale") == 1);
	CHECK(cli_given(opts, "nothing") == 0);
}

static void test_later_wins_and_nothing_given(void)
{
	cli_common c;
	vals v = {.norm = 1, .layer = -1};
	cli_opt opts[] = TABLE(v);
	char *words[] = {"t", "-l", "1", "--layers=2", NULL};
	cli_operands op = parse(&c, opts, words);
	CHECK(v.layer == 2 && cli_given(opts, "layer") == 2);
	CHECK(op.n == 0 && op.v[0] == NULL);
	CHECK(v.quiet == 0 && v.norm == 1 && cli_given(opts, "quiet") == 0);

	vals w = {.norm = 1};
	cli_opt none[] = TABLE(w);
	char *bare[] = {"t", NULL};
	op = parse(&c, none, bare);
	CHECK(op.n == 0 && op.v[0] == NULL && cli_given(none, "name") == 0);
	CHECK(w.name == NULL && c.output == NULL);
}

int main(void)
{
	test_values_and_operands();
	test_later_wins_and_nothing_given();
	return check_finish("test_opts");
}
