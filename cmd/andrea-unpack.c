/* andrea-unpack - write each record of a stream as DIR/NAME.npy.
 *
 * A later record of a name already written (the attention of each layer
 * a capture writes) goes to NAME.layerL.headH.npy, from the attributes
 * it has, or failing that NAME.N.npy, N its record number (then .1, .2
 * ... while that is taken): nothing is overwritten.  A name that would
 * leave DIR, or make a file name over NAME_MAX bytes, is refused. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "stream/npy.h"

#include "help/andrea-unpack.h" /* usage: the --help text */

/* A name may not leave DIR: no '/', and not "." or "..". */
static int name_safe(const char *name)
{
	return !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

typedef struct {
	char **names;
	int n;
} written_set;

/* 1 where name was written; else records it and returns 0. */
static int already_written(written_set *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0)
			return 1;
	char **grown = realloc(s->names, (size_t)(s->n + 1) * sizeof *grown);
	if (!grown || !(grown[s->n] = strdup(name)))
		cli_die("out of memory");
	s->names = grown;
	s->n++;
	return 0;
}

/* The file name (without .npy) of record h: its name, or for a name
 * already written, NAME.layerL.headH from its attributes, or NAME.N. */
static void file_name(written_set *s, const at_header *h, int index,
		      char *out, size_t len)
{
	snprintf(out, len, "%s", h->name);
	if (!already_written(s, out))
		return;
	const char *layer = at_attr_get(&h->attrs, "layer");
	const char *head = at_attr_get(&h->attrs, "head");
	snprintf(out, len, "%s%s%s%s%s", h->name, layer ? ".layer" : "",
		 layer ? layer : "", head ? ".head" : "", head ? head : "");
	if ((layer || head) && strchr(out, '/') == NULL &&
	    !already_written(s, out))
		return;
	snprintf(out, len, "%s.%d", h->name, index);
	/* a record named like that one was written: one more .k until free */
	for (int k = 1; already_written(s, out); k++)
		snprintf(out, len, "%s.%d.%d", h->name, index, k);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-unpack", &c);
	const char *dir = ".";
	cli_opt opts[] = {
		CLI_USES(CLI_USE_BASIC),
		CLI_STRING("directory", 'd', &dir),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, CLI_ANY, argc, argv);
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		cli_die("%s: %s", dir, strerror(errno));

	written_set seen = {0};
	int nfiles = operand.n, index = 0; /* records across every FILE */
	for (int f = 0; f < (nfiles ? nfiles : 1); f++) {
		at_reader r;
		cli_open_input(&c, &r, nfiles ? operand.v[f] : "-");
		at_header h;
		int rc;
		while ((rc = at_read_header(&r, &h)) == 1) {
			if (!name_safe(h.name))
				cli_die("%s: record %d '%s': the name would leave %s",
					r.label, h.index, h.name, dir);
			char name[1024];
			file_name(&seen, &h, ++index, name, sizeof name);
			if (strlen(name) + 4 > NAME_MAX)
				cli_die("%s: record %d '%s': the file name %s.npy "
					"would be %zu bytes, over the %d a name may "
					"have", r.label, h.index, h.name, name,
					strlen(name) + 4, NAME_MAX);
			at_tensor t;
			if (at_read_payload(&r, &h, &t) < 0)
				cli_fail(r.err);
			char path[8192], err[256];
			snprintf(path, sizeof path, "%s/%s.npy", dir, name);
			if (at_npy_write(path, &t, err, sizeof err) < 0)
				cli_die("%s: record %d '%s': %s: %s", r.label,
					h.index, h.name, path, err);
			at_tensor_free(&t);
		}
		if (rc < 0)
			cli_fail(r.err);
		at_reader_close(&r);
	}
	for (int i = 0; i < seen.n; i++)
		free(seen.names[i]);
	free(seen.names);
	return 0;
}
