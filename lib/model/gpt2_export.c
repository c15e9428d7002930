/* gpt2_export.c - an andrea model as Hugging Face's GPT2LMHeadModel
 * (gpt2.h: at_gpt2_export). */
#include "model/gpt2.h"

#ifdef ANDREA_JSON
#include <jansson.h>
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "model/arch.h"
#include "model/gpt2_tokenizer.h"
#include "text/bytelevel.h"

/* one-line errors, as the safetensors reader gives them */
#define fail at_import_fail

/* The exported tensors: names and data owned here. */
typedef struct {
	at_st_out *t;
	char (*names)[96];
	float **data;
	int n, cap;
} export_set;

/* Adds a zeroed tensor [d0] or [d0,d1] named hf; its data, or NULL. */
static float *add_out(export_set *x, const char *hf, uint64_t d0, uint64_t d1)
{
	if (x->n == x->cap)
		return NULL;
	float *p = calloc(d0 * (d1 ? d1 : 1) + 1, sizeof *p);
	if (!p)
		return NULL;
	int i = x->n++;
	snprintf(x->names[i], sizeof x->names[i], "%s", hf);
	x->data[i] = p;
	x->t[i] = (at_st_out){.name = x->names[i], .rank = d1 ? 2 : 1,
			      .dims = {d0, d1}, .data = p};
	return p;
}

/* m's parameter `name` [d0] or [d0,d1] into dst at column c0 of rows
 * `cols` wide (transposed where transpose: dst is [d1,d0]); an optional
 * one m lacks leaves dst zero. */
static int put_param(const at_model *m, const char *name, uint64_t d0,
		     uint64_t d1, float *dst, uint64_t cols, uint64_t c0,
		     int transpose, char *err, size_t errlen)
{
	if (at_param_optional(name) && !at_model_has(m, name))
		return 0;
	uint64_t dims[2] = {d0, d1};
	at_tensor t;
	if (at_model_param(m, name, d1 ? 2 : 1, dims, &t, err, errlen) < 0)
		return -1;
	const float *src = t.data;
	uint64_t w = d1 ? d1 : d0, rows = d1 ? d0 : 1;
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c = 0; c < w; c++) {
			float v = src[r * w + c];
			if (transpose)
				dst[c * d0 + r] = v;
			else
				dst[r * cols + c0 + c] = v;
		}
	at_tensor_free(&t);
	return 0;
}

#ifdef ANDREA_JSON
/* Writes j to path, whole or not at all (core/atomic_file.h). */
static int write_json(const json_t *j, size_t flags, const char *path,
		      char *err, size_t errlen)
{
	at_afile a;
	char msg[300];
	if (at_afile_open(&a, path) < 0)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	if (json_dumpf(j, a.f, flags) < 0) {
		at_afile_abort(&a);
		return fail(err, errlen, "%s: write error", path);
	}
	if (at_afile_commit(&a, msg, sizeof msg) < 0)
		return fail(err, errlen, "%s: %s", path, msg);
	return 0;
}

static int write_config(const at_config *c, int tied, const char *path,
			char *err, size_t errlen)
{
	json_t *j = json_pack(
		"{s:s, s:[s], s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:s, s:n, "
		"s:b, s:b, s:b, s:f, s:f, s:f, s:f}",
		"model_type", "gpt2", "architectures", "GPT2LMHeadModel",
		"n_layer", c->n_layer, "n_head", c->n_head, "n_embd", c->d_model,
		"n_positions", c->ctx, "n_ctx", c->ctx, "vocab_size", c->vocab,
		"layer_norm_epsilon", 1e-5, "activation_function",
		"gelu_new", "n_inner", "tie_word_embeddings", tied,
		"scale_attn_weights", 1, "reorder_and_upcast_attn", 0,
		"attn_pdrop", 0.0, "embd_pdrop", 0.0, "resid_pdrop", 0.0,
		"initializer_range", 0.02);
	int rc = j ? write_json(j, JSON_INDENT(2), path, err, errlen)
		   : fail(err, errlen, "out of memory");
	json_decref(j);
	return rc;
}
#endif

int at_gpt2_export(const at_model *m, const char *dir, char *err,
		   size_t errlen)
{
#ifndef ANDREA_JSON
	(void)m;
	return fail(err, errlen, "%s: this build has no JSON writer (jansson: "
		    "Debian's libjansson-dev, then make again)", dir);
#else
	const at_config *cfg = &m->cfg;
	if (at_model_check_held(m, cfg->n_layer, err, errlen) < 0)
		return -1;
	if (mkdir(dir, 0777) != 0 && errno != EEXIST)
		return fail(err, errlen, "%s: %s", dir, strerror(errno));
	uint64_t C = (uint64_t)cfg->d_model, V = (uint64_t)cfg->vocab;
	int L = cfg->n_layer, cap = 16 * L + 8, tied = !at_model_has(m, "lm_head");
	export_set x = {calloc((size_t)cap, sizeof *x.t),
			calloc((size_t)cap, sizeof *x.names),
			calloc((size_t)cap, sizeof *x.data), 0, cap};
	int rc = x.t && x.names && x.data ? 0 : fail(err, errlen, "out of memory");
	const char *pre = "transformer.";
	char hf[96], nm[64];
	float *p;
#define OUT(d0, d1, ...)                                                     \
	(snprintf(hf, sizeof hf, __VA_ARGS__),                                 \
	 (p = add_out(&x, hf, d0, d1)) ? 0 : fail(err, errlen, "out of memory"))
#define PARAM(d0, d1, cols, c0, tr, ...)                                     \
	(snprintf(nm, sizeof nm, __VA_ARGS__),                                 \
	 put_param(m, nm, d0, d1, p + (c0), cols, 0, tr, err, errlen))
	if (!rc)
		rc = OUT(V, C, "%swte.weight", pre) || PARAM(V, C, C, 0, 0, "wte") ||
		     OUT((uint64_t)cfg->ctx, C, "%swpe.weight", pre) ||
		     PARAM((uint64_t)cfg->ctx, C, C, 0, 0, "wpe");
	static const char qkv[] = "qkv";
	for (int l = 0; !rc && l < L; l++) {
		rc = OUT(C, 0, "%sh.%d.ln_1.weight", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.ln1.weight", l) ||
		     OUT(C, 0, "%sh.%d.ln_1.bias", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.ln1.bias", l) ||
		     OUT(C, 3 * C, "%sh.%d.attn.c_attn.weight", pre, l);
		for (int k = 0; !rc && k < 3; k++) /* columns k C .. of c_attn */
			rc = put_param(m, (snprintf(nm, sizeof nm,
						    "layers.%d.attn.w%c", l, qkv[k]),
					   nm), C, C, p, 3 * C, (uint64_t)k * C, 0,
				       err, errlen);
		rc = rc || OUT(3 * C, 0, "%sh.%d.attn.c_attn.bias", pre, l);
		for (int k = 0; !rc && k < 3; k++)
			rc = PARAM(C, 0, C, (uint64_t)k * C, 0, "layers.%d.attn.b%c",
				   l, qkv[k]);
		rc = rc || OUT(C, C, "%sh.%d.attn.c_proj.weight", pre, l) ||
		     PARAM(C, C, C, 0, 0, "layers.%d.attn.wo", l) ||
		     OUT(C, 0, "%sh.%d.attn.c_proj.bias", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.attn.bo", l) ||
		     OUT(C, 0, "%sh.%d.ln_2.weight", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.ln2.weight", l) ||
		     OUT(C, 0, "%sh.%d.ln_2.bias", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.ln2.bias", l) ||
		     OUT(C, 4 * C, "%sh.%d.mlp.c_fc.weight", pre, l) ||
		     PARAM(C, 4 * C, 4 * C, 0, 0, "layers.%d.mlp.fc", l) ||
		     OUT(4 * C, 0, "%sh.%d.mlp.c_fc.bias", pre, l) ||
		     PARAM(4 * C, 0, 4 * C, 0, 0, "layers.%d.mlp.bfc", l) ||
		     OUT(4 * C, C, "%sh.%d.mlp.c_proj.weight", pre, l) ||
		     PARAM(4 * C, C, C, 0, 0, "layers.%d.mlp.proj", l) ||
		     OUT(C, 0, "%sh.%d.mlp.c_proj.bias", pre, l) ||
		     PARAM(C, 0, C, 0, 0, "layers.%d.mlp.bproj", l);
	}
	rc = rc || OUT(C, 0, "%sln_f.weight", pre) ||
	     PARAM(C, 0, C, 0, 0, "lnf.weight") ||
	     OUT(C, 0, "%sln_f.bias", pre) || PARAM(C, 0, C, 0, 0, "lnf.bias");
	/* an untied head: andrea's lm_head [C,V] is HF's Linear weight [V,C] */
	if (!rc && !tied)
		rc = OUT(V, C, "lm_head.weight") ||
		     PARAM(C, V, V, 0, 1, "lm_head");
#undef OUT
#undef PARAM
	char path[4200];
	if (!rc) {
		snprintf(path, sizeof path, "%s/model.safetensors", dir);
		rc = at_st_write(path, x.t, x.n, err, errlen);
	}
	if (!rc) {
		snprintf(path, sizeof path, "%s/config.json", dir);
		rc = write_config(cfg, tied, path, err, errlen);
	}
	for (int i = 0; i < x.n; i++)
		free(x.data[i]);
	free(x.t);
	free(x.names);
	free(x.data);
	return rc ? -1 : 0;
#endif
}

#ifdef ANDREA_JSON
/* GPT-2's merges.txt of b: a version line, then each merge's two tokens
 * spelt in the byte-level alphabet. */
static int write_merges(const at_bpe *b, const char *path, char *err,
			size_t errlen)
{
	at_afile a;
	char msg[300];
	if (at_afile_open(&a, path) < 0)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	fputs("#version: 0.2\n", a.f);
	for (int r = 0; r < at_bpe_merges(b); r++) {
		int32_t x[2];
		at_bpe_merge(b, r, &x[0], &x[1]);
		for (int k = 0; k < 2; k++) {
			size_t len;
			const unsigned char *p = at_bpe_token(b, x[k], &len);
			char piece[2 * 256 + 1], *s = 2 * len < sizeof piece ? piece
							  : malloc(2 * len + 1);
			if (!s) {
				at_afile_abort(&a);
				return fail(err, errlen, "out of memory");
			}
			at_bytelevel_encode(p, len, s);
			fputs(s, a.f);
			fputc(k ? '\n' : ' ', a.f);
			if (s != piece)
				free(s);
		}
	}
	if (at_afile_commit(&a, msg, sizeof msg) < 0)
		return fail(err, errlen, "%s: %s", path, msg);
	return 0;
}
#endif

int at_gpt2_tokenizer_export(const at_tokenizer *t, const char *dir,
			     char *err, size_t errlen)
{
#ifndef ANDREA_JSON
	return fail(err, errlen, "%s: this build has no JSON writer (jansson: "
		    "Debian's libjansson-dev, then make again)", dir);
#else
	const at_bpe *b = at_tok_bpe(t);
	char path[4200];
	json_t *vocab = json_object();
	char *spelt = NULL;
	size_t cap = 0, len;
	int rc = vocab ? 0 : -1;
	/* every token spelt in the alphabet (a token of 2n bytes at most) */
	for (int i = 0; rc == 0 && i < at_bpe_size(b); i++) {
		const unsigned char *p = at_bpe_token(b, i, &len);
		if (2 * len + 1 > cap) {
			free(spelt);
			if (!(spelt = malloc(cap = 2 * len + 1)))
				rc = -1;
		}
		if (rc == 0) {
			at_bytelevel_encode(p, len, spelt);
			rc = json_object_set_new(vocab, spelt, json_integer(i));
		}
	}
	snprintf(path, sizeof path, "%s/vocab.json", dir);
	if (rc < 0)
		fail(err, errlen, "out of memory");
	else
		rc = write_json(vocab, JSON_COMPACT | JSON_ENSURE_ASCII, path, err,
				errlen);
	json_decref(vocab);
	snprintf(path, sizeof path, "%s/merges.txt", dir);
	if (rc == 0)
		rc = write_merges(b, path, err, errlen);
	free(spelt);
	return rc;
#endif
}
