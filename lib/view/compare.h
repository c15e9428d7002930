/* compare.h - elementwise comparison of two tensors with NumPy's isclose
 * rule, for andrea-diff and the kernel check harnesses.
 *
 * Values are compared in double precision: a is close to b when
 *	|a - b| <= atol + rtol * |b|  and b is finite,  or  a == b,
 * or, with equal_nan, when both are NaN.  This is numpy.isclose(a, b) on
 * arrays converted to float64: b is the reference, infinities are close
 * only to the same infinity, NaN is close to nothing unless equal_nan.
 */
#ifndef ANDREA_COMPARE_H
#define ANDREA_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

typedef struct {
	double rtol;   /* relative tolerance, finite and >= 0 */
	double atol;   /* absolute tolerance, finite and >= 0 */
	int equal_nan; /* NaN is close to NaN */
} at_tol;

/* What at_compare found.  Errors are taken over the element pairs where a
 * and b are both finite (the relative one also needs b != 0); a maximum
 * is 0, with no position, when no pair qualifies or all errors are 0.
 * Positions are flat row-major indices; ties go to the first. */
typedef struct {
	uint64_t n;          /* elements compared */
	uint64_t ndiff;      /* elements not close */
	uint64_t first_diff; /* the first of them, when ndiff > 0 */
	double max_abs;      /* largest |a - b| */
	uint64_t max_abs_at;
	double max_rel;      /* largest |a - b| / |b| */
	uint64_t max_rel_at;
} at_diff_stats;

#define AT_TOL_DEFAULT {1e-5, 1e-8, 0}

/* The isclose rule above for one pair. */
int at_isclose(double a, double b, const at_tol *tol);

/* Compares a against b element by element, using up to threads threads
 * for large tensors.  The caller has checked that both hold the same
 * number of elements; their dtypes may differ. */
void at_compare(const at_tensor *a, const at_tensor *b, const at_tol *tol,
		int threads, at_diff_stats *s);

/* Writes the multi-index of flat position flat in shape dims as "[1,0,3]"
 * ("[]" for rank 0) into buf. */
void at_index_str(int rank, const uint64_t *dims, uint64_t flat, char *buf,
		  size_t len);

#endif
