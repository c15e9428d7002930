/* arch.h - the constants of the ANDREA architecture that every layer and
 * both backends compute with (andrea-model(5) documents them).  No
 * includes and no declarations: the CUDA kernels use it too. */
#ifndef ANDREA_ARCH_H
#define ANDREA_ARCH_H

/* The LayerNorm epsilon of LN1, LN2 and LNf (biased variance). */
#define AT_LN_EPS 1e-5f
/* The token that starts a sequence: bytes are 0..255, BOS follows them,
 * so a byte-level vocabulary has V = AT_BOS + 1. */
#define AT_BOS 256

#endif
