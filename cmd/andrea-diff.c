/* andrea-diff - compare two andrea streams record by record.
 *
 * Exit status follows cmp(1): 0 when the streams hold the same records
 * (names, dtypes, shapes, and values within tolerance), 1 when they
 * differ, 2 on trouble (an unreadable file, a bad or truncated stream, a
 * bad option).  Both inputs are read in lockstep, so at most one record
 * pair is in memory; with --by-name each record of A is compared with the
 * record of B of the same name and layer and head attributes (the n-th
 * such of B for the n-th of A), B read through an index of its headers,
 * so B must be a file.  Every record is reported, so the exit status does
 * not depend on -q: a stream that breaks after a difference is trouble.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "view/compare.h"

#include "help/andrea-diff.h" /* usage: the --help text */

static int quiet;

/* Prints one report line unless -q. */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	if (quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A tolerance into the double at ctx: a finite number >= 0. */
static void tolerance(void *ctx, const char *arg, const char *what)
{
	double d = cli_double(arg, what);
	if (!(d >= 0) || isinf(d))
		cli_usage_error("%s '%s': expected a finite number >= 0", what,
				arg);
	*(double *)ctx = d;
}

/* Reads the next header of r; 1 with h filled, 0 at the end of r. */
static int next_header(at_reader *r, at_header *h)
{
	int rc = at_read_header(r, h);
	if (rc < 0)
		cli_die("%s", r->err);
	return rc;
}

/* Reads past a payload not compared, checked all the same: a damaged
 * stream is trouble (status 2) wherever the damage is. */
static void skip_payload(at_reader *r, const at_header *h)
{
	if (at_check_payload(r, h) < 0)
		cli_die("%s", r->err);
}

/* Reads the rest of r after its current header h and returns the number
 * of tensor records r holds in all. */
static int count_rest(at_reader *r, at_header *h)
{
	do
		skip_payload(r, h);
	while (next_header(r, h));
	return r->records;
}

/* Reports a record pair whose names, dtypes or shapes differ; returns 1
 * if they do (the payloads are then skipped, not decompressed), else 0. */
static int header_differs(at_reader *ra, const at_header *ha, at_reader *rb,
			  const at_header *hb)
{
	const char *what[3];
	int n = 0;
	int same_name = strcmp(ha->name, hb->name) == 0;
	if (!same_name)
		what[n++] = "name";
	if (ha->dtype != hb->dtype)
		what[n++] = "dtype";
	if (ha->rank != hb->rank ||
	    memcmp(ha->dims, hb->dims, (size_t)ha->rank * sizeof *ha->dims))
		what[n++] = "shape";
	if (n == 0)
		return 0;
	skip_payload(ra, ha);
	skip_payload(rb, hb);

	char fields[64], sa[200], sb[200], side_a[600], side_b[600];
	snprintf(fields, sizeof fields, "%s%s%s%s%s", what[0],
		 n == 3 ? ", " : n == 2 ? " and " : "", n > 1 ? what[1] : "",
		 n == 3 ? " and " : "", n == 3 ? what[2] : "");
	at_shape_str(ha->rank, ha->dims, sa, sizeof sa);
	at_shape_str(hb->rank, hb->dims, sb, sizeof sb);
	if (same_name) {
		snprintf(side_a, sizeof side_a, "%s %s", at_dtype_name(ha->dtype), sa);
		snprintf(side_b, sizeof side_b, "%s %s", at_dtype_name(hb->dtype), sb);
		report("record %d '%s': %s differ%s: %s in %s, %s in %s",
		       ha->index, ha->name, fields, n == 1 ? "s" : "", side_a,
		       ra->label, side_b, rb->label);
	} else {
		snprintf(side_a, sizeof side_a, "'%s' %s %s", ha->name,
			 at_dtype_name(ha->dtype), sa);
		snprintf(side_b, sizeof side_b, "'%s' %s %s", hb->name,
			 at_dtype_name(hb->dtype), sb);
		report("record %d: %s differ%s: %s in %s, %s in %s", ha->index,
		       fields, n == 1 ? "s" : "", side_a, ra->label, side_b,
		       rb->label);
	}
	return 1;
}

/* Compares the values of a record pair with matching headers and reports
 * them; returns 1 if some value is not close. */
static int values_differ(at_reader *ra, const at_header *ha, at_reader *rb,
			 const at_header *hb, const at_tol *tol, int threads)
{
	at_tensor a, b;
	if (at_read_payload(ra, ha, &a) < 0)
		cli_die("%s", ra->err);
	if (at_read_payload(rb, hb, &b) < 0)
		cli_die("%s", rb->err);
	at_diff_stats s;
	at_compare(&a, &b, tol, threads, &s);

	char verdict[300], abs_err[300], rel_err[300], at[200];
	if (s.ndiff) {
		at_index_str(b.rank, b.dims, s.first_diff, at, sizeof at);
		snprintf(verdict, sizeof verdict,
			 "%llu of %llu values differ, first at %s",
			 (unsigned long long)s.ndiff, (unsigned long long)s.n, at);
	} else {
		snprintf(verdict, sizeof verdict, "equal");
	}
	snprintf(abs_err, sizeof abs_err, "max abs err %.6g", s.max_abs);
	if (s.max_abs > 0) {
		at_index_str(b.rank, b.dims, s.max_abs_at, at, sizeof at);
		snprintf(abs_err + strlen(abs_err), sizeof abs_err - strlen(abs_err),
			 " at %s", at);
	}
	snprintf(rel_err, sizeof rel_err, "max rel err %.6g", s.max_rel);
	if (s.max_rel > 0) {
		at_index_str(b.rank, b.dims, s.max_rel_at, at, sizeof at);
		snprintf(rel_err + strlen(rel_err), sizeof rel_err - strlen(rel_err),
			 " at %s", at);
	}
	report("record %d '%s': %s; %s; %s", ha->index, ha->name, verdict,
	       abs_err, rel_err);
	at_tensor_free(&a);
	at_tensor_free(&b);
	return s.ndiff > 0;
}

/* A record as --by-name matches it: its name, and its layer and head
 * attributes ("" where it has none). */
typedef struct {
	char name[AT_MAX_NAME + 1], layer[AT_MAX_VALUE + 1], head[AT_MAX_VALUE + 1];
	long offset;
	int index, used;
} b_entry;

static void record_key(const at_header *h, b_entry *e)
{
	const char *layer = at_attr_get(&h->attrs, "layer");
	const char *head = at_attr_get(&h->attrs, "head");
	snprintf(e->name, sizeof e->name, "%s", h->name);
	snprintf(e->layer, sizeof e->layer, "%s", layer ? layer : "");
	snprintf(e->head, sizeof e->head, "%s", head ? head : "");
}

/* The same name, and layer and head equal (exact) or equal where both
 * records have them (not exact). */
static int same_record(const b_entry *a, const b_entry *b, int exact)
{
	if (strcmp(a->name, b->name) != 0)
		return 0;
	if (exact)
		return strcmp(a->layer, b->layer) == 0 && strcmp(a->head, b->head) == 0;
	return (!a->layer[0] || !b->layer[0] || strcmp(a->layer, b->layer) == 0) &&
	       (!a->head[0] || !b->head[0] || strcmp(a->head, b->head) == 0);
}

/* The headers of rb, which must be a file, from its start. */
static b_entry *index_b(at_reader *rb, int *n)
{
	b_entry *e = NULL;
	at_header h;
	*n = 0;
	for (;;) {
		long offset = ftell(rb->f);
		if (!next_header(rb, &h))
			break;
		b_entry *grown = realloc(e, (size_t)(*n + 1) * sizeof *e);
		if (!grown)
			cli_die("out of memory");
		e = grown;
		record_key(&h, &e[*n]);
		e[*n].offset = offset;
		e[*n].index = h.index;
		e[*n].used = 0;
		(*n)++;
		skip_payload(rb, &h);
	}
	return e;
}

/* --by-name: each record of A against its namesake of B. */
static int diff_by_name(at_reader *ra, at_reader *rb, const at_tol *tol,
			int threads)
{
	if (rb->f == stdin || fseek(rb->f, 0, SEEK_CUR) != 0)
		cli_die("%s: --by-name reads B by its index, so B must be a file "
			"(A may be a pipe)", rb->label);
	int nb, differ = 0;
	b_entry *b = index_b(rb, &nb);
	at_header ha, hb;
	while (next_header(ra, &ha)) {
		b_entry a;
		record_key(&ha, &a);
		b_entry *m = NULL; /* the same attributes first, then the fewer */
		for (int exact = 1; exact >= 0 && !m; exact--)
			for (int i = 0; i < nb && !m; i++)
				if (!b[i].used && same_record(&a, &b[i], exact))
					m = &b[i];
		if (!m) {
			report("record %d '%s': not in %s", ha.index, ha.name, rb->label);
			skip_payload(ra, &ha);
			differ = 1;
			continue;
		}
		m->used = 1;
		rb->records = m->index - 1;
		if (fseek(rb->f, m->offset, SEEK_SET) != 0 || next_header(rb, &hb) != 1)
			cli_die("%s: cannot seek back to record %d", rb->label, m->index);
		if (!header_differs(ra, &ha, rb, &hb))
			differ |= values_differ(ra, &ha, rb, &hb, tol, threads);
		else
			differ = 1;
	}
	for (int i = 0; i < nb; i++)
		if (!b[i].used) {
			report("%s: record %d '%s': not in %s", rb->label, b[i].index,
			       b[i].name, ra->label);
			differ = 1;
		}
	free(b);
	return differ;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-diff", &c);
	cli_failure_status = 2; /* 1 means "different" here */
	at_tol tol = AT_TOL_DEFAULT;
	int by_name = 0;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_BASIC),
		CLI_FLAG("quiet", 'q', &quiet),
		CLI_ALIAS("silent", 'q'),
		CLI_CALL_ARG("rtol", 0, tolerance, &tol.rtol),
		CLI_CALL_ARG("atol", 0, tolerance, &tol.atol),
		CLI_FLAG("equal-nan", 0, &tol.equal_nan),
		CLI_FLAG("by-name", 0, &by_name),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, CLI_ANY, argc, argv);
	if (operand.n != 2)
		cli_usage_error("expected two operands A and B, got %d (see %s "
				"--help)", operand.n, cli_prog);
	const char *path_a = operand.v[0], *path_b = operand.v[1];
	cli_stdin_once((const char *const *)operand.v, 2);

	at_reader ra, rb;
	cli_open_input(&c, &ra, path_a);
	cli_open_input(&c, &rb, path_b);
	int differ = 0;
	if (by_name) {
		differ = diff_by_name(&ra, &rb, &tol, c.ropts.threads);
		at_reader_close(&ra);
		at_reader_close(&rb);
		cli_finish_text();
		return differ;
	}
	for (;;) {
		at_header ha, hb;
		int more_a = next_header(&ra, &ha);
		int more_b = next_header(&rb, &hb);
		if (more_a && more_b) {
			if (!header_differs(&ra, &ha, &rb, &hb))
				differ |= values_differ(&ra, &ha, &rb, &hb, &tol,
							c.ropts.threads);
			else
				differ = 1;
			continue;
		}
		if (more_a || more_b) {
			int na = more_a ? count_rest(&ra, &ha) : ra.records;
			int nb = more_b ? count_rest(&rb, &hb) : rb.records;
			report("%s has %d record%s, %s has %d", ra.label, na,
			       na == 1 ? "" : "s", rb.label, nb);
			differ = 1;
		}
		break;
	}
	at_reader_close(&ra);
	at_reader_close(&rb);
	cli_finish_text();
	return differ;
}
