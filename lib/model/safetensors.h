/* safetensors.h - reading Hugging Face's safetensors files.
 *
 * The format: 8 bytes, a little-endian N; N bytes of JSON mapping each
 * tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets into the bytes after the header), and an optional
 * "__metadata__" object of strings; then the data.  at_st_open checks what
 * the format's own reader checks: the header's size (at most
 * AT_ST_MAX_HEADER, within the file), that it is a JSON object without
 * duplicate names, each dtype one of the format's, each shape's bytes
 * equal to its range, and the ranges, in order, covering the data exactly
 * (inside the file, no overlaps, no holes).  Tensors are read as float32:
 * F32, and BF16 and F16 converted; another dtype is an error when read.
 * JSON goes through jansson.
 */
#ifndef ANDREA_SAFETENSORS_H
#define ANDREA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/tensor.h"

/* The official reader's cap on the header (100 MB). */
#define AT_ST_MAX_HEADER 100000000u

typedef struct {
	char name[AT_MAX_NAME + 1];
	char dtype[8];       /* as the file spells it: "F32", "BF16", ... */
	int elem;            /* bytes an element */
	int rank;
	uint64_t dims[AT_MAX_RANK];
	uint64_t begin, end; /* bytes [begin, end) of the data */
} at_st_entry;

typedef struct {
	FILE *f;
	char path[4096];
	uint64_t data_start; /* file offset of the data */
	uint64_t data_len;
	at_st_entry *entries; /* in the order of their data */
	int n;
} at_st;

/* Opens path and checks its header; 0, or -1 with err naming the file
 * (and the tensor).  A PyTorch pickle is refused here by name. */
int at_st_open(at_st *st, const char *path, char *err, size_t errlen);
/* The header's checks alone, on `len` bytes of JSON describing data_len
 * bytes of data (at_st_open's second half; the fuzz target's entry). */
int at_st_parse(at_st *st, const char *json, size_t len, uint64_t data_len,
		char *err, size_t errlen);
void at_st_close(at_st *st);

/* The entry named `name`, or NULL. */
const at_st_entry *at_st_find(const at_st *st, const char *name);
/* Elements of e (the product of its dims). */
uint64_t at_st_count(const at_st_entry *e);
/* Reads e into out (at_st_count floats), converting BF16 and F16. */
int at_st_read_f32(const at_st *st, const at_st_entry *e, float *out,
		   char *err, size_t errlen);

/* One float32 tensor for at_st_write. */
typedef struct {
	const char *name;
	int rank;
	uint64_t dims[AT_MAX_RANK];
	const float *data;
} at_st_out;

/* Writes the n tensors to path as a safetensors file (F32, in the order
 * given, the header padded with spaces to a multiple of 8 bytes), through
 * a temporary file renamed into place; 0, or -1 with err. */
int at_st_write(const char *path, const at_st_out *t, int n, char *err,
		size_t errlen);

/* Formats a reader's error into err on one line (a file's bytes in it,
 * such as a tensor's name, cannot break it); returns -1. */
int at_import_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The whole of the file at path, if under cap bytes, into *buf (malloc'd,
 * NUL-terminated) and *n; 0, or -1 with err naming the file. */
int at_import_read(const char *path, size_t cap, char **buf, size_t *n,
		   char *err, size_t errlen);

/* 1 where the first bytes of a file are a Python pickle or a zip of them
 * (torch.save, nanoGPT's ckpt.pt, PyTorch's .bin). */
int at_is_pickle(const unsigned char *head, size_t n);

#endif
