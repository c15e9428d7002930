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

/* One -a NAME:KEY=VALUE, split: a key holds no ':' and a name no '=', so
 * NAME ends at the last ':' before the first '='. */
typedef struct {
	const char *arg;
	size_t name_len;
	char key[AT_MAX_KEY + 2];
	const char *value;
} attr_opt;

/* The -a arguments, in the order given. */
typedef struct {
	attr_opt *v;
	int n;
} attr_list;

/* Splits one -a argument into the attr_list at ctx. */
static void add_attr(void *ctx, const char *arg, const char *what)
{
	attr_list *l = ctx;
	attr_opt *a = &l->v[l->n++];
	const char *eq = strchr(arg, '='), *colon = NULL;
	for (const char *p = arg; eq && p < eq; p++)
		if (*p == ':')
			colon = p;
	if (!colon || colon == arg || colon + 1 == eq ||
	    (size_t)(eq - colon - 1) > AT_MAX_KEY)
		cli_usage_error("-a '%s': expected NAME:KEY=VALUE", arg);
	a->arg = arg;
	a->name_len = (size_t)(colon - arg);
	snprintf(a->key, sizeof a->key, "%.*s", (int)(eq - colon - 1), colon + 1);
	a->value = eq + 1;
}

/* Whether -a a is for the record named by the len bytes at name. */
static int names(const attr_opt *a, const char *name, size_t len)
{
	return len == a->name_len && strncmp(a->arg, name, len) == 0;
}

/* Applies every -a that names t. */
static void apply_attrs(at_tensor *t, const attr_list *l)
{
	for (int i = 0; i < l->n; i++)
		if (names(&l->v[i], t->name, strlen(t->name)) &&
		    at_attr_set(&t->attrs, l->v[i].key, l->v[i].value) < 0)
			cli_usage_error("-a '%s': bad key or value, or too many "
					"attributes", l->v[i].arg);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-pack", &c);
	/* static: a usage error exits with these still in use, and a
	 * leak checker must see them as held, not lost */
	static attr_opt *attrs;
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
	int n = operand.n;
	if (n == 0)
		cli_usage_error("no NAME=FILE.npy operand (see %s --help)", cli_prog);
	/* every -a names an operand, and no two set one key of one name */
	for (int i = 0; i < al.n; i++) {
		int used = 0;
		for (int j = 0; j < n && !used; j++) {
			const char *eq = strchr(operand.v[j], '=');
			used = eq && names(&attrs[i], operand.v[j],
					   (size_t)(eq - operand.v[j]));
		}
		if (!used)
			cli_usage_error("-a '%s': names no NAME=FILE operand",
					attrs[i].arg);
		for (int j = 0; j < i; j++)
			if (names(&attrs[j], attrs[i].arg, attrs[i].name_len) &&
			    !strcmp(attrs[j].key, attrs[i].key))
				cli_usage_error("-a '%s': sets %s of that name again "
						"(after -a '%s')", attrs[i].arg,
						attrs[i].key, attrs[j].arg);
	}

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
		apply_attrs(&t[i], &al);
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
