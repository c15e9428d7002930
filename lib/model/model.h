/* model.h - ANDREA model parameters: from a model file or the seeded default.
 *
 * A model file is a stream of named parameters (andrea-model(5) lists the names)
 * plus, optionally, a `config` record whose attributes hold n_layer, n_head,
 * d_model, ctx and vocab.  A tool loads only the parameters it asks for, so
 * a file holding just those (say, one made with andrea-pack) is a valid
 * model.  Without a file every parameter is drawn from the counter-based
 * generator of philox.h under a seed: andrea-120m shapes with V = 257.
 */
#ifndef ANDREA_MODEL_H
#define ANDREA_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "model/arch.h"
#include "stream/stream.h"
#include "core/tensor.h"
#include "text/tokenizer.h"

#define AT_DEFAULT_SEED 1337

typedef struct {
	int n_layer, n_head, d_model, ctx, vocab; /* L H C T V; 0 = unknown */
} at_config;

typedef struct {
	char name[AT_MAX_NAME + 1];
	long offset;
	int index;
} at_model_entry;

typedef struct {
	at_config cfg;
	int seeded;      /* no file: parameters come from the generator */
	uint64_t seed;
	int has_config;  /* the file carried a config record */
	int layers_held; /* 1 + the highest layer with a record in the file */
	char path[4096];
	at_model_entry *entries;
	int n_entries;
	at_read_opts ropts; /* caps and threads for reading parameters */
} at_model;

/* Fills c with a preset: tiny, andrea-12m, andrea-120m, andrea-480m
 * (V = 257).  Returns -1 for an unknown name. */
int at_config_preset(const char *name, at_config *c);

/* Opens path (NULL: the seeded default under seed).  heads > 0 gives
 * n_head for a file without a config (and must agree with one that has
 * it).  Reads only record headers, so path must be seekable.  Returns 0
 * or -1 with err. */
int at_model_open(at_model *m, const char *path, uint64_t seed, int heads,
		  const at_read_opts *ro, char *err, size_t errlen);
void at_model_close(at_model *m);

/* Loads parameter `name` as f32 with exactly the shape given (rank dims),
 * or fails naming the parameter, the shape found and the one expected. */
int at_model_param(const at_model *m, const char *name, int rank,
		   const uint64_t *dims, at_tensor *out, char *err,
		   size_t errlen);
/* Loads the record `name` of m's file as it is stored (any dtype or
 * shape, under the reader's caps).  0, or -1 with err. */
int at_model_record(const at_model *m, const char *name, at_tensor *out,
		    char *err, size_t errlen);
/* m's tokenizer: the one its tokenizer.* records hold (tokenizer.h), or
 * the byte tokenizer where it has none.  NULL with err. */
at_tokenizer *at_model_tokenizer(const at_model *m, char *err, size_t errlen);
/* 1 where m holds the parameter `name`; the seeded model holds every
 * parameter of andrea-model(5) but the optional biases. */
int at_model_has(const at_model *m, const char *name);
/* 1 where `name` is one of the optional parameters (the products'
 * biases: layers.L.attn.bq, ...), which a model without them does
 * without. */
int at_param_optional(const char *name);

/* Checks that the config knows what a stage needs: C, H (with C % H == 0),
 * and that layer is in range when the layer count is known. */
int at_model_need_heads(const at_model *m, char *err, size_t errlen);
int at_model_check_layer(const at_model *m, int layer, char *err,
			 size_t errlen);
/* Checks, before the parameters are allocated, that a file holds layers
 * 0..need-1 at least as far as its records go (a config of n_layer=4096
 * over no parameters would otherwise size allocations for them); need is
 * cfg.n_layer for a tool that reads every layer. */
int at_model_check_held(const at_model *m, int need, char *err,
			size_t errlen);
/* Makes a tokens tensor of rank 1, [T], the batch of one row [1,T]. */
void at_tokens_as_batch(at_tensor *t);
/* Checks tokens [B,T] for a model of cfg: T within the context (when the
 * config knows it) and every id in 0..V-1.  Returns 0, or -1 with err
 * ("token 300 at [0,4] is not in 0..256 (V=257)"). */
int at_tokens_check(const at_config *cfg, const int32_t *id, uint64_t B,
		    uint64_t T, char *err, size_t errlen);

/* The most layers a config may have (andrea-block's -l too), and the
 * largest value of its other fields (n_head, d_model, ctx, vocab), for a
 * model file and every importer alike. */
#define AT_MAX_LAYERS 4096
#define AT_MAX_CONFIG (1 << 24)

/* The config as attributes of a `config` record, and back. */
void at_config_to_attrs(const at_config *c, at_attrs *a);
/* Writes the config record of c (i32, shape [0], c in its attributes). */
int at_config_write(at_writer *w, const at_config *c);
/* A config record's attributes into c: every field present, n_layer in
 * 1..4096 and the others in 1..16777216, d_model a multiple of n_head
 * (model files and checkpoints alike).  -1 with err filled if not. */
int at_config_from_attrs(const at_attrs *a, at_config *c, char *err,
			 size_t errlen);

#endif
