/* test_blas_core.c - the rule of ops/blas_core.h: which OpenBLAS core the
 * products should run on, from the one OpenBLAS chose and the CPU's
 * features. */
#include <stdlib.h>
#include <string.h>

#include "ops/blas_core.h"

#include "check.h"

static int is(const char *got, const char *want)
{
	return want ? got && strcmp(got, want) == 0 : got == NULL;
}

int main(void)
{
	/* a generic fallback on a CPU with AVX2 and FMA, and with AVX-512 */
	CHECK(is(at_blas_better_core("Prescott", 1, 0), "Haswell"));
	CHECK(is(at_blas_better_core("Prescott", 1, 1), "SkylakeX"));
	CHECK(is(at_blas_better_core("Nehalem", 1, 0), "Haswell"));
	CHECK(is(at_blas_better_core("Sandybridge", 1, 1), "SkylakeX"));
	/* a CPU without AVX2 keeps what OpenBLAS chose */
	CHECK(is(at_blas_better_core("Prescott", 0, 0), NULL));
	CHECK(is(at_blas_better_core("Sandybridge", 0, 0), NULL));
	/* a core with AVX2 kernels is kept, AVX-512 or not */
	const char *good[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
			      "SapphireRapids", "Excavator"};
	for (int i = 0; i < 6; i++) {
		CHECK(is(at_blas_better_core(good[i], 1, 0), NULL));
		CHECK(is(at_blas_better_core(good[i], 1, 1), NULL));
	}
	CHECK(is(at_blas_better_core(NULL, 1, 1), NULL)); /* no OpenBLAS */
	/* a core the user set is never second-guessed */
	setenv("OPENBLAS_CORETYPE", "Prescott", 1);
	CHECK(is(at_blas_core_wanted(), NULL));
	unsetenv("OPENBLAS_CORETYPE");
	/* this machine's OpenBLAS: whatever it chose, the rule's answer for
	 * it is one of the two or none */
	const char *w = at_blas_core_wanted();
	CHECK(w == NULL || is(w, "Haswell") || is(w, "SkylakeX"));
	return check_finish("blas_core");
}
