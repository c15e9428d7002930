/* precision.h - the precisions a model's products can compute in, as
 * --precision names them (andrea-train, andrea-block, andrea-logits,
 * andrea-generate).
 *
 * AT_PREC_FP32 computes every product in full fp32 (the CPU's only
 * mode); AT_PREC_TF32 lets cuBLAS round the operands of products to TF32;
 * AT_PREC_BF16 feeds products bf16 operands and accumulates in fp32.  Elementwise work,
 * LayerNorm statistics and softmax stay fp32 in every mode.
 */
#ifndef ANDREA_PRECISION_H
#define ANDREA_PRECISION_H

enum { AT_PREC_FP32 = 0, AT_PREC_TF32 = 1, AT_PREC_BF16 = 2 };

/* The precision named "fp32", "tf32" or "bf16"; -1 for another name. */
int at_precision_parse(const char *name);
/* The name of a precision; "?" for another value. */
const char *at_precision_name(int precision);

#endif
