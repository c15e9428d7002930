/* opts.c - the getopt_long loop of every executable, driven by its table.
 *
 * It allocates nothing and ends the process only through cli.c, so that
 * fuzz/fuzz_argv.c sees every exit. */
#include "cli/opts.h"
#include "core/parallel.h"

#include <stdio.h>
#include <string.h>

/* The common options, bit i of CLI_USE_* being common[i]. */
static const struct {
	const char *name;
	int has_arg;
	int letter; /* short option letter; 0: a long option only */
} common[] = {
	{"help", no_argument, 'h'},
	{"version", no_argument, 0},
	{"output", required_argument, 'o'},
	{"force", no_argument, 'f'},
	{"level", required_argument, 'z'},
	{"threads", required_argument, 0},
	{"no-shuffle", no_argument, 0},
	{"keep", no_argument, 0},
	{"device", required_argument, 0},
	{"model", required_argument, 'm'},
	{"seed", required_argument, 0},
	{"heads", required_argument, 0},
};
#define N_COMMON ((int)(sizeof common / sizeof common[0]))
_Static_assert(1 << (N_COMMON - 1) == CLI_USE_HEADS,
	       "CLI_USE_* follows common[]");

/* getopt_long's codes: a short letter for an option that has one, else
 * COMMON_CODE + i for common[i] and OWN_CODE + i for entry i of a
 * table. */
enum { COMMON_CODE = 0x100, OWN_CODE = 0x200 };

/* getopt_long's code of common[i]. */
static int common_code(int i)
{
	return common[i].letter ? common[i].letter : COMMON_CODE + i;
}

/* The CLI_USE_* bit of the common option of getopt_long's code opt; 0
 * for none. */
static unsigned common_of(int opt)
{
	for (int i = 0; i < N_COMMON; i++)
		if (common_code(i) == opt)
			return 1u << i;
	return 0;
}

/* Long options of one table at most, common ones included. */
#define MAX_OPTS 64

/* The index of the entry that getopt_long's code opt stands for: the one
 * of that short letter or, for a long-only option, the one at
 * opt - OWN_CODE; -1 for a common option or '?'. */
static int entry_of(const cli_opt *opts, int opt)
{
	for (int i = 0; opts[i].kind; i++) {
		const cli_opt *o = &opts[i];
		if (o->kind == CLI_KIND_USES || o->kind == CLI_KIND_ALIAS)
			continue;
		if (o->letter ? o->letter == opt : OWN_CODE + i == opt)
			return i;
	}
	return -1;
}

/* Whether the option of entry o takes an argument. */
static int takes_arg(const cli_opt *o)
{
	switch (o->kind) {
	case CLI_KIND_INT:
	case CLI_KIND_LONG:
	case CLI_KIND_DOUBLE:
	case CLI_KIND_STRING:
	case CLI_KIND_CALL_ARG:
		return 1;
	default:
		return 0;
	}
}

/* Adds one option to getopt_long's lists; a table too long, or one
 * letter twice, is the program's own mistake. */
static void add(struct option *longopts, int *n, char *shortopts,
		const struct option *lo, int letter)
{
	if (letter && strchr(shortopts, letter))
		cli_die("option table: -%c twice", letter);
	if (lo->name) {
		if (*n == MAX_OPTS)
			cli_die("option table: more than %d options", MAX_OPTS);
		longopts[(*n)++] = *lo;
	}
	if (letter) {
		size_t len = strlen(shortopts);
		shortopts[len++] = (char)letter;
		if (lo->has_arg)
			shortopts[len++] = ':';
		shortopts[len] = 0;
	}
}

/* Builds getopt_long's lists from the table: the common options first,
 * in the order of common[], then the table's own. */
/* The CLI_USE_* bits of the table. */
static unsigned uses_of(const cli_opt *opts)
{
	unsigned uses = 0;
	for (int i = 0; opts[i].kind; i++)
		if (opts[i].kind == CLI_KIND_USES)
			uses |= opts[i].uses;
	return uses;
}

static void build(const cli_opt *opts, struct option *longopts, char *shortopts)
{
	unsigned uses = uses_of(opts);
	int n = 0;
	cli_takes_force = (uses & CLI_USE_FORCE) != 0;
	shortopts[0] = 0;
	for (int i = 0; i < N_COMMON; i++)
		if (uses & 1u << i) {
			struct option lo = {common[i].name, common[i].has_arg,
					    0, common_code(i)};
			add(longopts, &n, shortopts, &lo, common[i].letter);
		}
	for (int i = 0; opts[i].kind; i++) {
		const cli_opt *o = &opts[i];
		if (o->kind == CLI_KIND_USES)
			continue;
		const cli_opt *target = o;
		if (o->kind == CLI_KIND_ALIAS) {
			int t = entry_of(opts, o->letter);
			if (t < 0 || !o->name)
				cli_die("option table: alias of no -%c", o->letter);
			target = &opts[t];
		}
		/* an alias has its entry's code: getopt_long then takes an
		 * abbreviation of both (--lay for --layer and --layers) as one
		 * option */
		struct option lo = {o->name, takes_arg(target) ? required_argument
							     : no_argument,
				    0, o->letter ? o->letter : OWN_CODE + i};
		add(longopts, &n, shortopts, &lo,
		    o->kind == CLI_KIND_ALIAS ? 0 : o->letter);
	}
	longopts[n] = (struct option){0};
}

/* The option as messages name it: "-l/--layer", "--fill" or "-n". */
static void what_str(const cli_opt *o, char *buf, size_t len)
{
	if (o->letter && o->name)
		snprintf(buf, len, "-%c/--%s", o->letter, o->name);
	else if (o->name)
		snprintf(buf, len, "--%s", o->name);
	else
		snprintf(buf, len, "-%c", o->letter);
}

/* Does what entry o says with its argument arg. */
static void take(cli_opt *o, const char *arg)
{
	char what[300];
	what_str(o, what, sizeof what);
	o->given++;
	switch (o->kind) {
	case CLI_KIND_SET:
		*(int *)o->to = 1;
		break;
	case CLI_KIND_CLEAR:
		*(int *)o->to = 0;
		break;
	case CLI_KIND_INT:
		*(int *)o->to = (int)cli_long(arg, o->min, o->max, what);
		break;
	case CLI_KIND_LONG:
		*(long *)o->to = cli_long(arg, o->min, o->max, what);
		break;
	case CLI_KIND_DOUBLE:
		*(double *)o->to = cli_double(arg, what);
		break;
	case CLI_KIND_STRING:
		*(const char **)o->to = arg;
		break;
	case CLI_KIND_CALL:
	case CLI_KIND_CALL_ARG:
		o->fn(o->to, arg, what);
		break;
	default:
		break;
	}
}

cli_operands cli_parse(cli_common *c, cli_opt *opts, const char *usage,
		       int max_operands, int argc, char **argv)
{
	cli_blas_core(argv);
	struct option longopts[MAX_OPTS + 1];
	char shortopts[2 * MAX_OPTS + 1];
	build(opts, longopts, shortopts);
	/* the variables of options a tool does not take are not its business */
	if (uses_of(opts) & CLI_USE_LEVEL)
		cli_env_level(c);
	if ((uses_of(opts) & CLI_USE_DEVICE) && c->device &&
	    strcmp(c->device, "auto") && strcmp(c->device, "cpu") &&
	    strcmp(c->device, "cuda"))
		cli_usage_error("ANDREA_DEVICE='%s': expected auto, cpu or cuda",
				c->device);
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		int i = entry_of(opts, opt);
		unsigned use = common_of(opt);
		if (i >= 0)
			take(&opts[i], optarg);
		else if (use)
			cli_common_opt(c, use, optarg, usage);
		else
			cli_bad_option(argv);
	}
	if (max_operands >= 0 && argc - optind > max_operands)
		cli_usage_error("too many operands (see %s --help)", cli_prog);
	/* the arithmetic's threads follow --threads, as the codec's do */
	at_set_threads(c->ropts.threads);
	return (cli_operands){argc - optind, argv + optind};
}

int cli_given(const cli_opt *opts, const char *name)
{
	for (int i = 0; opts[i].kind; i++) {
		const cli_opt *o = &opts[i];
		if (o->kind == CLI_KIND_USES || !o->name || strcmp(o->name, name))
			continue;
		int t = o->kind == CLI_KIND_ALIAS ? entry_of(opts, o->letter) : i;
		return t < 0 ? 0 : opts[t].given;
	}
	return 0;
}
