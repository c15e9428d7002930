/* check.h - what the C unit tests share: CHECK(cond) counts a passed or a
 * failed check, printing the failed one with its file and line, and
 * check_finish(name) prints "name: N passed, M failed" and returns the
 * exit status (1 when anything failed). */
#ifndef ANDREA_TEST_CHECK_H
#define ANDREA_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                      \
	do {                                                             \
		if (cond) {                                              \
			passed++;                                        \
		} else {                                                 \
			failed++;                                        \
			printf("%s:%d: failed: %s\n", __FILE__, __LINE__, \
			       #cond);                                   \
		}                                                        \
	} while (0)

static inline int check_finish(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, passed, failed);
	return failed != 0;
}

#endif
