/* blas_core.c - the rule of blas_core.h. */
#include "ops/blas_core.h"

#include <stdlib.h>
#include <string.h>

#ifdef ANDREA_CBLAS
char *openblas_get_corename(void);
#endif

/* OpenBLAS's x86-64 cores with AVX2 kernels (its corename strings). */
static const char *const avx2_cores[] = {
	"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids",
	"Excavator",
};

const char *at_blas_core(void)
{
#ifdef ANDREA_CBLAS
	return openblas_get_corename();
#else
	return NULL;
#endif
}

const char *at_blas_better_core(const char *core, int avx2_fma, int avx512)
{
	if (!core || !avx2_fma)
		return NULL;
	for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
		if (strcmp(core, avx2_cores[i]) == 0)
			return NULL;
	return avx512 ? "SkylakeX" : "Haswell";
}

const char *at_blas_core_wanted(void)
{
	const char *set = getenv("OPENBLAS_CORETYPE");
	if (set && *set)
		return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	int avx2_fma = __builtin_cpu_supports("avx2") &&
		       __builtin_cpu_supports("fma");
	int avx512 = __builtin_cpu_supports("avx512f") &&
		     __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512dq") &&
		     __builtin_cpu_supports("avx512vl");
	return at_blas_better_core(at_blas_core(), avx2_fma, avx512);
#else
	return NULL;
#endif
}
