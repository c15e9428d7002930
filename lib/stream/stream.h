/* stream.h - the andrea stream: self-delimiting tensor records closed by an
 * end record.  man/man5/andrea-stream.5 gives the byte layout; this header
 * is the C view of it.
 *
 * Reading:  at_reader_open, then at_read_header until it returns 0; after
 * each header call exactly one of at_read_payload (decompress into a tensor),
 * at_copy_record (pass through verbatim) or at_skip_payload.
 * Writing:  at_writer_open, at_write_tensor / at_copy_record ..., then
 * at_writer_finish, which writes the end record and flushes.
 * Every function returns 0 on success and -1 on failure, with a one-line
 * message naming the input and record in r->err or w->err.
 */
#ifndef ANDREA_STREAM_H
#define ANDREA_STREAM_H

#include <stdint.h>
#include <stdio.h>

#include "core/atomic_file.h"
#include "core/tensor.h"

#define AT_MAGIC "ATSR"
#define AT_VERSION 1
#define AT_KIND_TENSOR 1
#define AT_KIND_END 2
#define AT_FLAG_SHUFFLE 1u

#define AT_FIXED_HEADER 16
#define AT_CHUNK_HEADER 16
#define AT_MAX_CHUNK (4u << 20)        /* raw bytes in one chunk */
#define AT_DEFAULT_CHUNK (1u << 20)
#define AT_MAX_DIM (1ull << 40)
#define AT_DEFAULT_MAX_BYTES (8ull << 30) /* ANDREA_MAX_BYTES overrides */
#define AT_MEMCHECK_MIN (64ull << 20) /* decoding more checks MemAvailable */
#define AT_MAX_HEADER                                                    \
	(AT_FIXED_HEADER + 8 * AT_MAX_RANK + AT_MAX_NAME + AT_MAX_ATTR_BYTES + 4)

#define AT_ERR_LEN 512

/* One record's header as read, with its exact bytes for verbatim copies. */
typedef struct {
	int index; /* 1-based position among the tensor records of the input */
	at_dtype dtype;
	int rank;
	uint64_t dims[AT_MAX_RANK];
	char name[AT_MAX_NAME + 1];
	at_attrs attrs;
	unsigned flags;
	uint32_t chunk_raw;
	uint64_t nbytes;
	size_t raw_len;
	unsigned char raw[AT_MAX_HEADER];
} at_header;

typedef struct {
	int threads;        /* chunk (de)compression threads, >= 1 */
	uint64_t max_bytes; /* largest tensor a reader accepts */
} at_read_opts;

typedef struct {
	int level;          /* 0 stored, 1 adaptive (codec.c), 2..9 zlib level */
	int shuffle;        /* byte-shuffle multi-byte dtypes before deflate */
	int threads;
	uint32_t chunk_raw; /* raw bytes per chunk */
} at_write_opts;

struct at_pump; /* pump.h */

typedef struct at_reader {
	FILE *f;
	int owns_file;
	struct at_pump *pump; /* reading ahead, where f is a pipe */
	int read_err;         /* errno of a failed read, or 0 */
	char label[256];   /* "<stdin>" or the path, for messages */
	at_read_opts opts;
	int records;       /* tensor records seen so far */
	int seen_end;      /* the last record read was an end record */
	uint64_t offset;   /* bytes consumed so far */
	char err[AT_ERR_LEN];
} at_reader;

/* The record a writer is in the middle of (at_record_begin .. _end). */
typedef struct {
	int open;
	char name[AT_MAX_NAME + 1];
	size_t elem;
	uint32_t chunk_raw;
	at_write_opts eff;      /* the writer's options as this record uses them */
	uint64_t nbytes, done;  /* payload bytes promised and encoded so far */
	unsigned char *stage;   /* room for `threads` chunks of put bytes */
	size_t staged;          /* bytes waiting in stage */
	unsigned char *out;     /* encoded chunks of one batch, with headers */
	unsigned char *scratch; /* chunk_raw bytes per thread */
	size_t bound;           /* room for one encoded chunk */
} at_record_out;

typedef struct at_writer {
	FILE *f;
	int owns_file;
	struct at_pump *pump; /* writing behind, where f is a pipe */
	char label[256];
	at_write_opts opts;
	at_afile file;     /* a file opened by name (owns_file) */
	at_record_out rec;
	char err[AT_ERR_LEN];
} at_writer;

/* Options from the environment: ANDREA_THREADS, ANDREA_MAX_BYTES,
 * ANDREA_ZLEVEL.  Invalid values fall back to the defaults; the command
 * line parser (cli.h) reports them. */
void at_read_opts_default(at_read_opts *o);
void at_write_opts_default(at_write_opts *o);

/* path NULL or "-" reads stdin.  Returns -1 with err filled when the file
 * cannot be opened. */
int at_reader_open(at_reader *r, const char *path, const at_read_opts *o);
void at_reader_close(at_reader *r);

/* Returns 1 with h filled, 0 at the clean end of the input, -1 on error. */
int at_read_header(at_reader *r, at_header *h);
/* Decompresses the payload into t, which takes h's name, shape and
 * attributes.  t is left empty on failure.  A tensor of AT_MEMCHECK_MIN
 * bytes or more that exceeds MemAvailable + SwapFree is refused before
 * anything is allocated or read. */
int at_read_payload(at_reader *r, const at_header *h, at_tensor *t);
/* 0 where h's payload is within the cap (ANDREA_MAX_BYTES) a record held
 * whole must be, as at_read_payload checks; else -1 with r->err.  For a
 * record read as it arrives that is held much of the way all the same. */
int at_payload_within_cap(at_reader *r, const at_header *h);
/* Reads past the payload, checking each chunk's header but decompressing
 * nothing (a damaged chunk passes); at_check_payload decodes it, a batch
 * of chunks at a time, and checks all as at_read_payload does. */
int at_skip_payload(at_reader *r, const at_header *h);
int at_check_payload(at_reader *r, const at_header *h);
/* Reads on to the first record named `name`, skipping the others: 1 with
 * its header in h (the payload still to read), 0 when the input ends
 * without one, -1 on error (r->err). */
int at_find_record(at_reader *r, const char *name, at_header *h);
/* t gets h's name, dtype, shape and attributes, and no data. */
void at_tensor_from_header(at_tensor *t, const at_header *h);

/* A payload read as it arrives, instead of at_read_payload: chunks are
 * decoded one per thread at a time, and at_payload_read hands out the
 * next n bytes of the tensor, in pieces of any size.  Errors fill r->err;
 * at_payload_end frees what begin took, whether or not all was read. */
typedef struct {
	at_reader *r;
	const at_header *h;
	void *bufs;             /* the decoder's batch buffers */
	unsigned char *batch;   /* decoded bytes of the current batch */
	size_t have, pos;       /* bytes in batch, bytes handed out */
	uint64_t next;          /* the next chunk to read */
} at_payload_in;
int at_payload_begin(at_reader *r, const at_header *h, at_payload_in *in);
int at_payload_read(at_payload_in *in, void *p, size_t n);
/* The bytes decoded and not yet handed out, without a copy: *p points
 * into the reader's buffer (writable, valid until the next call), and
 * they count as handed out.  Returns their number: whole chunks (a
 * batch of them), 0 at the end of the payload, -1 on error. */
int64_t at_payload_view(at_payload_in *in, unsigned char **p);
void at_payload_end(at_payload_in *in);
/* Copies header and chunks to w byte for byte, checking every chunk header
 * but decompressing nothing. */
int at_copy_record(at_reader *r, const at_header *h, struct at_writer *w);

int at_writer_open(at_writer *w, const char *path, const at_write_opts *o);
/* Wraps an open stream (stdout) without taking ownership. */
void at_writer_wrap(at_writer *w, FILE *f, const char *label,
		    const at_write_opts *o);
int at_write_tensor(at_writer *w, const at_tensor *t);
/* A record written as its payload is produced: at_record_begin writes the
 * header of t (name, dtype, dims, attributes; t->data is not used), then
 * at_record_put takes the payload bytes in order, in pieces of any size,
 * and encodes every chunk as soon as `threads` chunks are complete;
 * at_record_end encodes the rest and checks that exactly the tensor's
 * bytes came.  A program that fails in between leaves a record without
 * its end, which every reader reports as an error. */
int at_record_begin(at_writer *w, const at_tensor *t);
int at_record_put(at_writer *w, const void *p, size_t n);
int at_record_end(at_writer *w);
/* Writes raw bytes (used for verbatim copies). */
int at_writer_put(at_writer *w, const void *p, size_t n);
/* Writes the end record and flushes; closes the file if the writer owns it
 * and renames it into place. */
int at_writer_finish(at_writer *w);
/* Drops a partly written file: the temporary is removed, an earlier file of
 * that name is left as it was. */
void at_writer_abort(at_writer *w);

/* Low-level chunk codec, shared by the reader, the writer and the
 * benchmarks.  Encodes raw_len bytes of raw into out (room for
 * at_chunk_bound(raw_len) bytes); returns the stored length. */
size_t at_chunk_bound(size_t raw_len);
size_t at_chunk_encode(const unsigned char *raw, size_t raw_len,
		       unsigned char *out, size_t elem, const at_write_opts *o,
		       unsigned char *scratch);
/* Decodes stored bytes into raw (raw_len bytes).  Returns 0, or -1 with a
 * reason in err.  scratch holds raw_len bytes when elem > 1 and shuffled. */
int at_chunk_decode(const unsigned char *stored, size_t stored_len,
		    unsigned char *raw, size_t raw_len, size_t elem,
		    int shuffled, uint32_t crc, unsigned char *scratch,
		    char *err, size_t errlen);

#endif
