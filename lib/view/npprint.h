/* npprint.h - tensor values as text, the way NumPy prints arrays.
 *
 * np_print reproduces numpy.array2string with NumPy's default print options
 * (linewidth 75, precision 8, floatmode 'maxprec', threshold 1000,
 * edgeitems 3, sign '-', suppress False): brackets per axis, elements
 * separated by spaces, rows wrapped at 75 columns, one common field width
 * per array, float32 digits chosen as NumPy's Dragon4 chooses them (the
 * shortest string that reads back as the same float32, at most 8 digits
 * after the point, scientific notation when NumPy switches to it).
 */
#ifndef ANDREA_NPPRINT_H
#define ANDREA_NPPRINT_H

#include <stddef.h>
#include <stdio.h>

#include "core/tensor.h"

/* Writes the values of t and a newline.  full prints every element; by
 * default arrays of more than 1000 elements show 3 items at each edge of
 * every axis longer than 6 and "..." between them.  Returns 0, or -1 when
 * out of memory (the output is then cut short). */
int np_print(FILE *out, const at_tensor *t, int full);

/* The shortest decimal that reads back as x, written as Python writes
 * repr(numpy.float32(x)): "0.1", "3.0", "1e-05", "-inf", "nan". */
void np_f32_repr(float x, char *buf, size_t len);

#endif
