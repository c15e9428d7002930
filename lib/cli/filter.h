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

#include "cli/cli.h"

#define AT_FILTER_MAX_INPUTS 4

typedef struct at_filter at_filter;

struct at_filter {
	const char *inputs[AT_FILTER_MAX_INPUTS];
	int n_inputs;
	/* Validates and computes one group (in[i] holds inputs[i]) and writes
	 * the outputs with at_write_tensor; failures call at_filter_die. */
	void (*run)(at_filter *f, at_tensor *in, at_writer *w);
	/* Optional, for one-input filters: validates the record from its
	 * header and writes the output while the payload arrives (with
	 * at_filter_stream), so that the stages of a pipeline overlap;
	 * returns 0 when it did, or 1 to have the payload read and run
	 * called as usual (a device that needs the record whole).  Unused
	 * with --keep, which writes the whole input record first. */
	int (*stream)(at_filter *f, at_reader *r, const at_header *h,
		      at_writer *w);
	/* Optional, for filters of several inputs: called instead of reading
	 * the payload of the record that completes a group (in[] holds the
	 * other inputs, slot is the arriving one's), to consume that payload
	 * as it arrives and write the outputs; returns 0 when it did, or 1
	 * to have the payload read and run called as usual.  Unused with
	 * --keep. */
	int (*stream_last)(at_filter *f, at_tensor *in, int slot, at_reader *r,
			   const at_header *h, at_writer *w);
	/* Optional: called with each input's header before its payload is
	 * read, to prepare what the group will need while it arrives (no
	 * errors here: run reports them). */
	void (*prepare)(at_filter *f, int slot, const at_header *h);
	/* Optional, for a run that leaves its outputs pending (a GPU still
	 * computing them while the next group is read): writes them.
	 * at_filter_main calls it before anything else it writes (a record
	 * passed through, --keep's inputs), at the end of the input, and
	 * before ending the program on an error (at_filter_die, a failed
	 * input), so that the order holds and nothing computed is lost. */
	void (*drain)(at_filter *f, at_writer *w);
	/* Set by a run that leaves outputs pending: records passed through
	 * meanwhile are then held (up to 64 MiB) and written after them at
	 * the next drain, instead of draining first.  Cleared by a drain. */
	int pending;
	void *ctx;
	/* filled by at_filter_main: for messages, and the codec threads of
	 * a record read as it arrives (0: the configured count) */
	const char *label;
	uint64_t max_bytes; /* the cap a reader takes (ANDREA_MAX_BYTES) */
	int index[AT_FILTER_MAX_INPUTS];
	int stream_threads;
	at_writer *out;
	int draining;
};

/* Reads path ("-" or NULL for stdin), writes to the output chosen in c,
 * and exits 1 on any failure.  Options and model are checked before. */
void at_filter_main(cli_common *c, at_filter *f, const char *path);

/* Writes what f's run left pending (its drain), then the records passed
 * through behind it; a run that begins new work calls it to write the
 * old. */
void at_filter_drain(at_filter *f);

/* "prog: <stdin>: record N 'name': msg" for input slot i; exits 1. */
_Noreturn void at_filter_die(at_filter *f, int slot, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Ends the program, naming input slot i, where the f32 output `name` of
 * shape dims would pass the cap a reader takes (an output larger than
 * its inputs: the scores' T x T, the embedding's C per token). */
void at_filter_expect_fits(at_filter *f, int slot, const char *name,
			   int rank, const uint64_t *dims);
/* Checks that input slot i, t, has the shape of ref (slot 0's) and no
 * layer, head or norm attribute other than ref's: records of one head
 * (q, k, v), naming the record if not. */
void at_filter_expect_like(at_filter *f, int slot, const at_tensor *t,
			   const at_tensor *ref);
/* The same check of the attributes alone, for records of one head whose
 * shapes differ (attn and v). */
void at_filter_expect_same_head(at_filter *f, int slot, const at_tensor *t,
				const at_tensor *ref);
/* Ends the program, naming input slot i, where the product of t's sizes
 * [lo, hi) passes max: INT_MAX where the ops count it in int (a tensor
 * of no elements passes the byte cap however large its other sizes), or
 * a tool's own limit.  "what=N unit is more than this tool handles",
 * what as "B*H", unit as "heads". */
void at_filter_expect_count(at_filter *f, int slot, const at_tensor *t,
			    int lo, int hi, uint64_t max, const char *what,
			    const char *unit);
/* Checks dtype f32 and rank of input slot i, naming the record if not. */
void at_filter_expect(at_filter *f, int slot, const at_tensor *t,
		      int rank, const char *shape_letters);
/* Writes t or dies with the writer's error. */
void at_filter_write(at_writer *w, const at_tensor *t);
/* at_record_begin, _put and _end (stream.h), dying with the writer's
 * error: for outputs written piece by piece as they are computed. */
void at_filter_begin(at_writer *w, const at_tensor *header);
void at_filter_put(at_writer *w, const void *p, size_t n);
void at_filter_end(at_writer *w);

/* The arithmetic of a streaming stage runs on one thread (for the codec's
 * threads see at_filter_payload_begin): the stages of a pipeline overlap
 * and keep the cores busy, and a piece or two at a time is too little to
 * share.  at_filter_serial(1) sets this and at_filter_serial(0) restores
 * the count before. */
void at_filter_serial(int on);

/* at_payload_begin (stream.h) for a record read as it arrives, dying on
 * failure.  Its chunks are decoded on f->stream_threads threads: where
 * the input is a pipe and no thread count was given, half the
 * configured count, at least one.  A stage reading a pipe as it arrives
 * shares the processors with the stage feeding it, and parallel bursts
 * of a chunk or two then cost more than they give (a six-stage pipeline
 * on two cores ran 13-22% faster with one codec thread in its streaming
 * stages; bench/README.md). */
void at_filter_payload_begin(at_filter *f, at_reader *r, const at_header *h,
			     at_payload_in *in);

/* The in-place transform of a streaming filter: buf holds `units`
 * consecutive units (elements, rows) of the record, the first of them
 * unit number `first`. */
typedef void at_stream_fn(void *ctx, float *buf, size_t units,
			  uint64_t first);
/* Reads record h's payload as it arrives, in pieces of whole units of
 * `unit` bytes (about 1 MiB at a time, at least one unit), applies fn to
 * each and writes the results as the payload of a record with out's
 * header, the same size; the codec, both ways, on f->stream_threads
 * threads.  A failure of the input after the output has
 * begun leaves that record without its end (an error downstream). */
void at_filter_stream(at_filter *f, at_reader *r, const at_header *h,
		      at_writer *w, const at_tensor *out, size_t unit,
		      at_stream_fn *fn, void *ctx);

#endif
