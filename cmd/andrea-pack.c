/* andrea-pack - write .npy arrays as an andrea stream.
 *
 * Every NAME=FILE.npy operand is read and checked before the first byte is
 * written, so a bad operand leaves no partial stream behind.  --cast takes
 * NumPy's default float64 and int64 as float32 and int32.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "stream/npy.h"

#include "help/andrea-pack.h" /* usage: the --help text */

/* Applies every -a NAME:KEY=VALUE that names t. */
static void apply_attrs(at_tensor *t, char **attrs, int n)
{
	for (int i = 0; i < n; i++) {
		const char *colon = strchr(attrs[i], ':');
		size_t len = strlen(t->name);
		if (!colon || (size_t)(colon - attrs[i]) != len ||
		    strncmp(attrs[i], t->name, len) != 0)
			continue;
		char kv[AT_MAX_KEY + AT_MAX_VALUE + 2];
		snprintf(kv, sizeof kv, "%s", colon + 1);
		char *eq = strchr(kv, '=');
		if (!eq)
			cli_usage_error("-a '%s': expected NAME:KEY=VALUE", attrs[i]);
		*eq = 0;
		if (at_attr_set(&t->attrs, kv, eq + 1) < 0)
			cli_usage_error("-a '%s': bad key or value, or too many "
					"attributes", attrs[i]);
	}
}

/* The -a arguments, in the order given. */
typedef struct {
	char **v;
	int n;
} attr_list;

/* Keeps one -a argument in the attr_list at ctx. */
static void add_attr(void *ctx, const char *arg, const char *what)
{
	attr_list *l = ctx;
	l->v[l->n++] = (char *)arg;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-pack", &c);
	/* static: a usage error exits with these still in use, and a
	 * leak checker must see them as held, not lost */
	static char **attrs;
	static at_tensor *t;
	attrs = calloc((size_t)argc, sizeof *attrs);
	if (!attrs)
		cli_die("out of memory");
	attr_list al = {attrs, 0};
	int cast = 0;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON),
		CLI_CALL_ARG("attr", 'a', add_attr, &al),
		CLI_FLAG("cast", 0, &cast),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, CLI_ANY, argc, argv);
	int n = operand.n, nattrs = al.n;
	if (n == 0)
		cli_usage_error("no NAME=FILE.npy operand (see %s --help)", cli_prog);

	t = calloc((size_t)n, sizeof *t);
	if (!t)
		cli_die("out of memory");
	for (int i = 0; i < n; i++) {
		const char *arg = operand.v[i];
		const char *eq = strchr(arg, '=');
		if (!eq || !at_name_valid(arg, (size_t)(eq - arg)))
			cli_usage_error("'%s': expected NAME=FILE.npy with a name of "
					"1-255 bytes and no whitespace", arg);
		char err[256];
		if (at_npy_read(eq + 1, &t[i], c.ropts.max_bytes, cast, err,
				sizeof err) < 0)
			cli_die("%s: %s", eq + 1, err);
		snprintf(t[i].name, sizeof t[i].name, "%.*s", (int)(eq - arg), arg);
		apply_attrs(&t[i], attrs, nattrs);
	}
	for (int i = 0; i < nattrs; i++) {
		int used = 0;
		for (int j = 0; j < n && !used; j++) {
			size_t len = strlen(t[j].name);
			used = strncmp(attrs[i], t[j].name, len) == 0 &&
			       attrs[i][len] == ':';
		}
		if (!used)
			cli_usage_error("-a '%s': names no NAME=FILE operand", attrs[i]);
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
	free(attrs);
	return 0;
}
