/* tensor.h - the in-memory tensor every andrea tool passes around.
 *
 * A tensor is a named, row-major array of rank 0..8 with a small set of
 * key=value attributes.  Shape letters follow docs/ARCHITECTURE.md (B T C H D V L F).
 */
#ifndef ANDREA_TENSOR_H
#define ANDREA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/attrs.h"

#define AT_MAX_RANK 8
#define AT_MAX_NAME 255

/* On-disk dtype codes (man/man5/andrea-stream.5).  BF16 and F16 are
 * reserved: the format has room for them, this version rejects them. */
typedef enum {
	AT_F32 = 1,
	AT_I32 = 2,
	AT_U8 = 3,
	AT_BF16 = 4,
	AT_F16 = 5,
} at_dtype;

typedef struct {
	at_dtype dtype;
	int rank;
	uint64_t dims[AT_MAX_RANK];
	char name[AT_MAX_NAME + 1];
	at_attrs attrs;
	void *data; /* at_nbytes() bytes, owned by the tensor */
} at_tensor;

/* Size of one element, or 0 for a dtype this version does not support. */
size_t at_dtype_size(at_dtype dt);
/* "f32", "i32", "u8", ... or NULL for an unknown code. */
const char *at_dtype_name(int dt);
/* Parses "f32"/"i32"/"u8"; returns 0 when unknown. */
at_dtype at_dtype_parse(const char *s);

/* Element count of a shape; returns -1 if it overflows uint64. */
int at_shape_numel(int rank, const uint64_t *dims, uint64_t *numel);
uint64_t at_numel(const at_tensor *t);
/* Element i of t as a double: exact for every supported dtype. */
double at_elem(const at_tensor *t, uint64_t i);
size_t at_nbytes(const at_tensor *t);

/* Writes "[2,3,4]" (or "[]" for rank 0) into buf. */
void at_shape_str(int rank, const uint64_t *dims, char *buf, size_t len);

/* Names are 1..255 bytes with no whitespace, control bytes or DEL. */
int at_name_valid(const char *name, size_t len);

/* Sets name, dtype and shape, and allocates zeroed data.  The caller has
 * checked the size against its caps.  Returns 0, or -1 when out of memory. */
int at_tensor_init(at_tensor *t, const char *name, at_dtype dt, int rank,
		   const uint64_t *dims);
void at_tensor_free(at_tensor *t);

#endif
