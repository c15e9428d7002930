/* gpt2.h - GPT-2 checkpoints as andrea parameters.
 *
 * Hugging Face's GPT-2 (GPT2LMHeadModel or GPT2Model saved as
 * model.safetensors, with its config.json): the names under an optional
 * "transformer." prefix, Conv1D weights stored [in, out] as andrea's are,
 * the fused c_attn [C,3C] split into Wq, Wk, Wv (and its bias into bq,
 * bk, bv), every product's bias kept (andrea-model(5)), and the head tied
 * to wte unless the file holds lm_head.weight ([V,C], written transposed).
 */
#ifndef ANDREA_GPT2_H
#define ANDREA_GPT2_H

#include <stddef.h>

#include "core/tensor.h"
#include "model/model.h"
#include "model/safetensors.h"

/* Reads config.json at path into cfg, checking what andrea's architecture
 * fixes (the LayerNorm epsilon, the tanh GELU, 4C hidden units, plain
 * 1/sqrt(D) scaling).  0, or -1 with err naming the file and the key. */
int at_gpt2_config(const char *path, at_config *cfg, char *err,
		   size_t errlen);
/* The same on `len` bytes of JSON (the fuzz target's entry); label names
 * it in errors. */
int at_gpt2_config_parse(const char *json, size_t len, const char *label,
			 at_config *cfg, char *err, size_t errlen);

/* Receives one andrea parameter; returns 0, or -1 to stop. */
typedef int at_param_sink(void *ctx, const at_tensor *t);

/* Every parameter of the checkpoint in st, checked against cfg (each
 * tensor's shape, none missing), as andrea parameters in andrea-model(5)'s
 * order, one at a time to put.  0, or -1 with err naming the file and the
 * tensor. */
int at_gpt2_import(const at_st *st, const at_config *cfg, at_param_sink *put,
		   void *ctx, char *err, size_t errlen);

/* Writes the model m (andrea-model(5)) into the directory dir (made if
 * missing, once m is known to hold its layers) as Hugging Face's
 * GPT2LMHeadModel: model.safetensors (Wq, Wk, Wv fused into c_attn, zero
 * biases where m has none, lm_head.weight [V,C] where its head is not
 * tied) and config.json (tie_word_embeddings false then).  0, or -1 with
 * err. */
int at_gpt2_export(const at_model *m, const char *dir, char *err,
		   size_t errlen);

/* llm.c's GPT-2 checkpoints (gpt2_124M.bin and kin, as its train_gpt2
 * writes them): 256 little-endian int32 (AT_LLMC_MAGIC; the version, 3
 * for float32 or 5 for bfloat16 parameters with the vocabulary padded, 1
 * for float32 unpadded; the context, V, L, the heads, C; the padded V),
 * then the parameters in its order, each a PyTorch Linear weight [out, in]
 * (written transposed as andrea's [in, out]), the head tied to wte. */
#define AT_LLMC_MAGIC 20240326
/* 1 where the first bytes are an llm.c checkpoint's. */
int at_llmc_is(const unsigned char *head, size_t n);
/* The config of the checkpoint at path (its header, checked against the
 * file's size) into cfg; 0, or -1 with err naming the file. */
int at_llmc_config(const char *path, at_config *cfg, char *err, size_t errlen);
/* Every parameter of that checkpoint, as at_gpt2_import hands them. */
int at_llmc_import(const char *path, at_param_sink *put, void *ctx, char *err,
		   size_t errlen);

#endif
