/* tensor.c - dtypes, shapes and tensor allocation. */
#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t at_dtype_size(at_dtype dt)
{
	switch (dt) {
	case AT_F32:
	case AT_I32:
		return 4;
	case AT_U8:
		return 1;
	default:
		return 0;
	}
}

const char *at_dtype_name(int dt)
{
	switch (dt) {
	case AT_F32: return "f32";
	case AT_I32: return "i32";
	case AT_U8: return "u8";
	case AT_BF16: return "bf16";
	case AT_F16: return "f16";
	default: return NULL;
	}
}

at_dtype at_dtype_parse(const char *s)
{
	for (int dt = AT_F32; dt <= AT_U8; dt++)
		if (strcmp(s, at_dtype_name(dt)) == 0)
			return (at_dtype)dt;
	return (at_dtype)0;
}

int at_shape_numel(int rank, const uint64_t *dims, uint64_t *numel)
{
	uint64_t n = 1;
	/* a zero dimension makes the product 0 however large the others */
	for (int i = 0; i < rank; i++)
		if (dims[i] == 0) {
			*numel = 0;
			return 0;
		}
	for (int i = 0; i < rank; i++) {
		if (dims[i] != 0 && n > UINT64_MAX / dims[i])
			return -1;
		n *= dims[i];
	}
	*numel = n;
	return 0;
}

uint64_t at_numel(const at_tensor *t)
{
	uint64_t n = 0;
	at_shape_numel(t->rank, t->dims, &n);
	return n;
}

double at_elem(const at_tensor *t, uint64_t i)
{
	switch (t->dtype) {
	case AT_F32:
		return ((const float *)t->data)[i];
	case AT_I32:
		return ((const int32_t *)t->data)[i];
	default:
		return ((const uint8_t *)t->data)[i];
	}
}

size_t at_nbytes(const at_tensor *t)
{
	return (size_t)at_numel(t) * at_dtype_size(t->dtype);
}

void at_shape_str(int rank, const uint64_t *dims, char *buf, size_t len)
{
	size_t off = 0;
	off += (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < rank && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%llu",
					i ? "," : "", (unsigned long long)dims[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

int at_name_valid(const char *name, size_t len)
{
	if (len < 1 || len > AT_MAX_NAME)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c <= 0x20 || c == 0x7f)
			return 0;
	}
	return 1;
}

int at_tensor_init(at_tensor *t, const char *name, at_dtype dt, int rank,
		   const uint64_t *dims)
{
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", name);
	t->dtype = dt;
	t->rank = rank;
	for (int i = 0; i < rank; i++)
		t->dims[i] = dims[i];
	size_t n = at_nbytes(t);
	/* calloc(0) may return NULL; keep a valid pointer for empty tensors */
	t->data = calloc(n ? n : 1, 1);
	return t->data ? 0 : -1;
}

void at_tensor_free(at_tensor *t)
{
	free(t->data);
	t->data = NULL;
}
