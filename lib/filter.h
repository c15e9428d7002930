/* filter.h - the loop every stage filter shares.
 *
 * A stage consumes the records named in `inputs` (one group: q and k, say)
 * and replaces them with what it computes, passing every other record
 * through verbatim and in order.  The outputs go where the group completes.
 * A stream holding several groups (cat a.ats b.ats) is processed group by
 * group.  With --keep the consumed records are written too, before the
 * outputs.
 */
#ifndef ANDREA_FILTER_H
#define ANDREA_FILTER_H

#include "cli.h"

#define AT_FILTER_MAX_INPUTS 4

typedef struct at_filter at_filter;

struct at_filter {
	const char *inputs[AT_FILTER_MAX_INPUTS];
	int n_inputs;
	/* Validates and computes one group (in[i] holds inputs[i]) and writes
	 * the outputs with at_write_tensor; failures call at_filter_die. */
	void (*run)(at_filter *f, at_tensor *in, at_writer *w);
	void *ctx;
	/* filled by at_filter_main, for messages */
	const char *label;
	int index[AT_FILTER_MAX_INPUTS];
};

/* Reads path ("-" or NULL for stdin), writes to the output chosen in c,
 * and exits 1 on any failure.  Options and model are checked before. */
void at_filter_main(cli_common *c, at_filter *f, const char *path);

/* "prog: <stdin>: record N 'name': msg" for input slot i; exits 1. */
_Noreturn void at_filter_die(const at_filter *f, int slot, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Checks dtype f32 and rank of input slot i, naming the record if not. */
void at_filter_expect(const at_filter *f, int slot, const at_tensor *t,
		      int rank, const char *shape_letters);
/* Writes t or dies with the writer's error. */
void at_filter_write(at_writer *w, const at_tensor *t);

#endif
