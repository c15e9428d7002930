/* positions.h - a set of positions along T written as ranges: "3",
 * "0-2,5".  The @POSITIONS of --capture, --ablate and --patch, and the
 * `positions` attribute of the query rows a capture keeps, which
 * andrea-show reads to draw their mask where it is.
 */
#ifndef ANDREA_POSITIONS_H
#define ANDREA_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

#define AT_POSITION_RANGES 32 /* ranges of one list */

/* Positions as ranges lo..hi (both included); n = 0: every position. */
typedef struct {
	int n;
	int lo[AT_POSITION_RANGES], hi[AT_POSITION_RANGES];
} at_positions;

/* The list at s[0..len), each end at most max, into ps; -1 for bad
 * syntax, more than AT_POSITION_RANGES ranges or over 100 characters. */
int at_positions_parse(const char *s, size_t len, long max,
		       at_positions *ps);
/* Whether t is in the set (every t where it is empty). */
int at_positions_has(const at_positions *ps, size_t t);
/* How many positions the set names (0 where it is empty: every one). */
uint64_t at_positions_count(const at_positions *ps);
/* The i-th position of the set in the order of its ranges, or -1 past
 * its end (i itself where the set is empty). */
long at_positions_nth(const at_positions *ps, uint64_t i);

#endif
