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
/* Token id of b spelt in the byte-level alphabet, in *buf (grown as
 * needed, *cap its size); NULL when out of memory. */
static const char *spelt(const at_bpe *b, int id, char **buf, size_t *cap)
{
	size_t len;
	const unsigned char *p = at_bpe_token(b, id, &len);
	if (2 * len + 1 > *cap) {
		free(*buf);
		if (!(*buf = malloc(*cap = 2 * len + 1))) {
			*cap = 0;
			return NULL;
		}
	}
	at_bytelevel_encode(p, len, *buf);
	return *buf;
}

/* GPT-2's merges.txt of b: a version line, then each merge's two tokens
 * spelt in the byte-level alphabet. */
static int write_merges(const at_bpe *b, const char *path, char *err,
			size_t errlen)
{
	at_afile a;
	char msg[300], *buf = NULL;
	size_t cap = 0;
	if (at_afile_open(&a, path) < 0)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	fputs("#version: 0.2\n", a.f);
	for (int r = 0; r < at_bpe_merges(b); r++) {
		int32_t x[2];
		at_bpe_merge(b, r, &x[0], &x[1]);
		for (int k = 0; k < 2; k++) {
			if (!spelt(b, x[k], &buf, &cap)) {
				at_afile_abort(&a);
				return fail(err, errlen, "out of memory");
			}
			fputs(buf, a.f);
			fputc(k ? '\n' : ' ', a.f);
		}
	}
	free(buf);
	if (at_afile_commit(&a, msg, sizeof msg) < 0)
		return fail(err, errlen, "%s: %s", path, msg);
	return 0;
}

/* Moves the added token id of b in the vocabulary v from its spelling to
 * its text as it is, as the added tokens are found in text: 0; -1 where
 * that text is not UTF-8 without NUL or is another token's spelling; -2
 * when out of memory. */
static int added_as_text(const at_bpe *b, int id, json_t *v, char **buf,
			 size_t *cap)
{
	size_t len;
	const unsigned char *p = at_bpe_token(b, id, &len);
	if (memchr(p, 0, len))
		return -1;
	json_t *text = json_stringn((const char *)p, len);
	if (!text) { /* not UTF-8, unless the unchecked string fails too */
		json_t *raw = json_stringn_nocheck((const char *)p, len);
		int oom = !raw;
		json_decref(raw);
		return oom ? -2 : -1;
	}
	const char *s = json_string_value(text);
	int rc = spelt(b, id, buf, cap) ? 0 : -2;
	if (rc == 0 && strcmp(s, *buf) != 0) /* <|endoftext|> is spelt as it is */
		rc = json_object_get(v, s) ? -1 :
		     json_object_del(v, *buf) ||
				     json_object_set_new(v, s, json_integer(id))
			     ? -2 : 0;
	json_decref(text);
	return rc;
}

/* Hugging Face's tokenizer.json of t, whose vocab.json is vocab: GPT-2's
 * pipeline and the added tokens, which vocab.json and merges.txt cannot
 * carry (but <|endoftext|>, by convention), the one that starts a
 * sequence special; label names the model in errors.  NULL with err. */
static json_t *tokenizer_doc(const at_tokenizer *t, const json_t *vocab,
			     const char *label, char *err, size_t errlen)
{
	const at_bpe *b = at_tok_bpe(t);
	const int32_t *added;
	int n_added = at_tok_added(t, &added), bad = -1;
	json_t *v = json_deep_copy(vocab), *list = json_array(),
	       *merges = json_array(), *doc = NULL;
	char *buf = NULL;
	size_t cap = 0, len;
	int oom = !v || !list || !merges;
	for (int i = 0; !oom && bad < 0 && i < n_added; i++) {
		const char *p = (const char *)at_bpe_token(b, added[i], &len);
		int rc = added_as_text(b, added[i], v, &buf, &cap);
		if (rc == -1)
			bad = added[i];
		else
			oom = rc < 0 || json_array_append_new(list, json_pack(
				"{s:i, s:s%, s:b, s:b, s:b, s:b, s:b}", "id",
				added[i], "content", p, len, "single_word", 0,
				"lstrip", 0, "rstrip", 0, "normalized", 0, "special",
				added[i] == at_tok_bos(t))) < 0;
	}
	for (int r = 0; !oom && bad < 0 && r < at_bpe_merges(b); r++) {
		int32_t x[2];
		at_bpe_merge(b, r, &x[0], &x[1]);
		json_t *pair = json_array();
		for (int k = 0; k < 2 && !oom; k++)
			oom = !pair || !spelt(b, x[k], &buf, &cap) ||
			      json_array_append_new(pair, json_string(buf)) < 0;
		if (oom)
			json_decref(pair);
		else
			oom = json_array_append_new(merges, pair) < 0;
	}
	free(buf);
	if (!oom && bad < 0)
		doc = json_pack(
			"{s:s, s:n, s:n, s:O, s:n, s:{s:s, s:b, s:b, s:b}, s:n, "
			"s:{s:s, s:b, s:b, s:b}, s:{s:s, s:n, s:n, s:n, s:n, s:b, "
			"s:b, s:b, s:O, s:O}}",
			"version", "1.0", "truncation", "padding", "added_tokens",
			list, "normalizer", "pre_tokenizer", "type", "ByteLevel",
			"add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1,
			"post_processor", "decoder", "type", "ByteLevel",
			"add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1,
			"model", "type", "BPE", "dropout", "unk_token",
			"continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
			0, "byte_fallback", 0, "ignore_merges", 0, "vocab", v,
			"merges", merges);
	json_decref(v);
	json_decref(list);
	json_decref(merges);
	if (bad >= 0)
		fail(err, errlen, "%s: record 'tokenizer.added': added token %d "
		     "is not UTF-8 text without NUL, or its text is another "
		     "token's spelling", label, bad);
	else if (!doc)
		fail(err, errlen, "out of memory");
	return doc;
}

struct at_gpt2_tok_files {
	const at_tokenizer *t;
	json_t *vocab, *doc; /* vocab.json and tokenizer.json */
};

void at_gpt2_tok_files_free(at_gpt2_tok_files *f)
{
	if (!f)
		return;
	json_decref(f->vocab);
	json_decref(f->doc);
	free(f);
}

at_gpt2_tok_files *at_gpt2_tok_files_make(const at_tokenizer *t,
					  const char *label, char *err,
					  size_t errlen)
{
	const at_bpe *b = at_tok_bpe(t);
	at_gpt2_tok_files *f = calloc(1, sizeof *f);
	char *buf = NULL;
	size_t cap = 0;
	int rc = f && (f->vocab = json_object()) ? 0 : -1;
	/* every token spelt in the alphabet */
	for (int i = 0; rc == 0 && i < at_bpe_size(b); i++)
		rc = spelt(b, i, &buf, &cap)
			     ? json_object_set_new(f->vocab, buf, json_integer(i))
			     : -1;
	free(buf);
	if (rc < 0) {
		fail(err, errlen, "out of memory");
	} else if ((f->doc = tokenizer_doc(t, f->vocab, label, err, errlen))) {
		f->t = t;
		return f;
	}
	at_gpt2_tok_files_free(f);
	return NULL;
}

int at_gpt2_tok_files_write(const at_gpt2_tok_files *f, const char *dir,
			    char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	int rc = write_json(f->doc, JSON_COMPACT | JSON_ENSURE_ASCII, path, err,
			    errlen);
	snprintf(path, sizeof path, "%s/vocab.json", dir);
	if (rc == 0)
		rc = write_json(f->vocab, JSON_COMPACT | JSON_ENSURE_ASCII, path,
				err, errlen);
	snprintf(path, sizeof path, "%s/merges.txt", dir);
	return rc == 0 ? write_merges(at_tok_bpe(f->t), path, err, errlen) : rc;
}

#else /* no JSON writer: nothing of a tokenizer can be written */

struct at_gpt2_tok_files {
	int none;
};

void at_gpt2_tok_files_free(at_gpt2_tok_files *f)
{
	(void)f;
}

at_gpt2_tok_files *at_gpt2_tok_files_make(const at_tokenizer *t,
					  const char *label, char *err,
					  size_t errlen)
{
	(void)t;
	fail(err, errlen, "%s: this build has no JSON writer (jansson: "
	     "Debian's libjansson-dev, then make again)", label);
	return NULL;
}

int at_gpt2_tok_files_write(const at_gpt2_tok_files *f, const char *dir,
			    char *err, size_t errlen)
{
	(void)f;
	return fail(err, errlen, "%s: this build has no JSON writer", dir);
}
#endif
