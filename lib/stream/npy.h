/* npy.h - NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * Only little-endian float32, int32 and uint8 data are accepted ('<f4',
 * '<i4', '|u1'), and, cast when asked, NumPy's default float64 and int64
 * ('<f8' to float32, '<i8' to int32); Fortran-order arrays are converted
 * to row-major.  Pickled
 * object arrays, structured dtypes, big-endian data and every other dtype
 * are refused: nothing in a .npy file is ever executed.
 */
#ifndef ANDREA_NPY_H
#define ANDREA_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* Reads path into t (its name is left empty).  With cast, float64 and
 * int64 data become float32 and int32 (an int64 outside int32, or a
 * finite float64 beyond float32, is an error).  Returns 0, or -1 with a
 * one-line reason in err.  Tensors over max_bytes (as stored) are refused unread. */
int at_npy_read(const char *path, at_tensor *t, uint64_t max_bytes, int cast,
		char *err, size_t errlen);
/* Parses a header dict such as "{'descr': '<f4', 'fortran_order': False,
 * 'shape': (3, 4), }" (wide: 1 for '<f8' and '<i8', whose dt is then what
 * they cast to); exposed for the fuzzers. */
int at_npy_parse_header(const char *h, size_t len, at_dtype *dt, int *wide,
			int *fortran, int *rank, uint64_t *dims, char *err,
			size_t errlen);
/* Writes t as a version 1.0 .npy file (C order), the way np.save does,
 * whole or not at all (core/atomic_file.h). */
int at_npy_write(const char *path, const at_tensor *t, char *err,
		 size_t errlen);

#endif
