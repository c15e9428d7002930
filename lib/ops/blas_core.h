/* blas_core.h - which of OpenBLAS's kernels the CPU's products run on.
 *
 * OpenBLAS (built with DYNAMIC_ARCH, as Debian's is) picks its kernels by
 * the CPU's family and model as it loads.  A CPU newer than the library
 * is not in its tables and gets a generic SSE3 kernel ("Prescott") at
 * well under half the speed, although it has AVX2 or AVX-512: Debian's
 * 0.3.21 on a family 6, model 207 CPU ran qkv in 2.41 s against 0.92 s
 * with OPENBLAS_CORETYPE=Haswell.
 *
 * The rule: where the core in use has no AVX2 kernels and the CPU has AVX2
 * and FMA, the products should run on "Haswell", or on "SkylakeX" where
 * the CPU has AVX-512 F, BW, DQ and VL.  OPENBLAS_CORETYPE, which OpenBLAS
 * reads as it loads, is how: the cli layer sets it and starts the program
 * again (cli_parse), unless the user set it.
 */
#ifndef ANDREA_BLAS_CORE_H
#define ANDREA_BLAS_CORE_H

/* The core OpenBLAS chose, or NULL in a build without OpenBLAS. */
const char *at_blas_core(void);
/* The rule: the core to use instead of `core` on a CPU with (avx2_fma)
 * AVX2 and FMA, and (avx512) AVX-512 F, BW, DQ and VL; NULL to keep it. */
const char *at_blas_better_core(const char *core, int avx2_fma, int avx512);
/* The rule for this process's OpenBLAS and CPU; NULL where it asks for
 * nothing, where OPENBLAS_CORETYPE is set, or without OpenBLAS. */
const char *at_blas_core_wanted(void);

#endif
