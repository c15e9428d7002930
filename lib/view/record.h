/* record.h - one line about a record, as andrea-show prints it: its
 * head ("name dtype [shape]"), its attributes, a value of its dtype, and
 * the summary line of its finite values (record.c). */
#ifndef ANDREA_RECORD_H
#define ANDREA_RECORD_H

#include <stddef.h>
#include <stdio.h>

#include "core/tensor.h"

/* "name dtype [shape]", without a newline. */
void rec_head(FILE *f, const at_tensor *t);
/* " k=v k=v" where the record has attributes. */
void rec_attrs(FILE *f, const at_tensor *t);
/* A value of dtype dt for display: the shortest float32, or an integer. */
void rec_value(at_dtype dt, double v, char *buf, size_t len);
/* The summary line: head, finite min, max, mean and population std (in
 * double), the NaN and inf counts, attributes, newline. */
void rec_summary(FILE *f, const at_tensor *t);

#endif
