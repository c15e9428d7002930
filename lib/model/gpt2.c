/* gpt2.c - GPT-2 checkpoints as andrea parameters (gpt2.h). */
#include "model/gpt2.h"

#include <errno.h>
#ifdef ANDREA_JSON
#include <jansson.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/le.h"
#include "model/arch.h"

/* one-line errors, as the safetensors reader gives them */
#define fail at_import_fail

#ifdef ANDREA_JSON
/* A whole number from 1 to max at key (or at alt, if key is absent). */
static int size_key(const json_t *root, const char *key, const char *alt,
		    int max, int *out, const char *label, char *err,
		    size_t errlen)
{
	const json_t *v = json_object_get(root, key);
	if (!v && alt)
		v = json_object_get(root, alt);
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > max)
		return fail(err, errlen, "%s: '%s' missing or not in 1..%d",
			    label, key, max);
	*out = (int)json_integer_value(v);
	return 0;
}

/* What andrea's architecture fixes, where config.json says otherwise. */
static int check_fixed(const json_t *root, const at_config *c,
		       const char *label, char *err, size_t errlen)
{
	const json_t *v;
	if ((v = json_object_get(root, "layer_norm_epsilon")) &&
	    (!json_is_number(v) ||
	     fabs(json_number_value(v) - AT_LN_EPS) > 1e-12))
		return fail(err, errlen, "%s: layer_norm_epsilon is not 1e-05, "
			    "andrea's LayerNorm epsilon", label);
	if ((v = json_object_get(root, "activation_function")) &&
	    (!json_is_string(v) ||
	     (strcmp(json_string_value(v), "gelu_new") != 0 &&
	      strcmp(json_string_value(v), "gelu_pytorch_tanh") != 0)))
		return fail(err, errlen, "%s: activation_function '%.32s': andrea's "
			    "GELU is the tanh form (gelu_new)", label,
			    json_is_string(v) ? json_string_value(v) : "?");
	if ((v = json_object_get(root, "n_inner")) && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) != 4 * c->d_model))
		return fail(err, errlen, "%s: n_inner is not 4 n_embd (%d), the "
			    "width of andrea's MLP", label, 4 * c->d_model);
	static const struct {
		const char *key;
		int want;
	} flags[] = {{"scale_attn_weights", 1},
		     {"scale_attn_by_inverse_layer_idx", 0},
		     {"reorder_and_upcast_attn", 0}};
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if ((v = json_object_get(root, flags[i].key)) &&
		    (!json_is_boolean(v) || json_is_true(v) != flags[i].want))
			return fail(err, errlen, "%s: %s must be %s for andrea's "
				    "attention", label, flags[i].key,
				    flags[i].want ? "true" : "false");
	return 0;
}
#endif

int at_gpt2_config_parse(const char *json, size_t len, const char *label,
			 at_config *cfg, char *err, size_t errlen)
{
#ifndef ANDREA_JSON
	return fail(err, errlen, "%s: this build has no JSON reader (jansson: "
		    "Debian's libjansson-dev, then make again)", label);
#else
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return fail(err, errlen, "%s: %s (line %d)", label, je.text,
			    je.line);
	int rc = -1;
	if (!json_is_object(root)) {
		fail(err, errlen, "%s: not a JSON object", label);
	} else if (size_key(root, "n_layer", NULL, AT_MAX_LAYERS,
			    &cfg->n_layer, label, err, errlen) == 0 &&
		   size_key(root, "n_head", NULL, AT_MAX_CONFIG, &cfg->n_head,
			    label, err, errlen) == 0 &&
		   size_key(root, "n_embd", NULL, AT_MAX_CONFIG, &cfg->d_model,
			    label, err, errlen) == 0 &&
		   size_key(root, "n_positions", "n_ctx", AT_MAX_CONFIG,
			    &cfg->ctx, label, err, errlen) == 0 &&
		   size_key(root, "vocab_size", NULL, AT_MAX_CONFIG,
			    &cfg->vocab, label, err, errlen) == 0) {
		if (cfg->d_model % cfg->n_head)
			fail(err, errlen, "%s: n_embd %d is not a multiple of "
			     "n_head %d", label, cfg->d_model, cfg->n_head);
		else
			rc = check_fixed(root, cfg, label, err, errlen);
	}
	json_decref(root);
	return rc;
#endif
}

int at_gpt2_config(const char *path, at_config *cfg, char *err, size_t errlen)
{
	char *buf;
	size_t n;
	/* a config.json is a few hundred bytes; 1 MiB is plenty */
	if (at_import_read(path, 1 << 20, &buf, &n, err, errlen) < 0)
		return -1;
	int rc = at_gpt2_config_parse(buf, n, path, cfg, err, errlen);
	free(buf);
	return rc;
}

/* The checkpoint's tensors under one prefix ("transformer." or none). */
typedef struct {
	const at_st *st;
	const char *prefix;
	char *err;
	size_t errlen;
	unsigned char *used; /* [st->n]: the entries find has handed out */
} source;

/* The tensor `name` (under the prefix), checked to be [d0] or [d0,d1]. */
static const at_st_entry *find(const source *s, const char *name, uint64_t d0,
			       uint64_t d1)
{
	char full[AT_MAX_NAME + 1];
	snprintf(full, sizeof full, "%s%s", s->prefix, name);
	const at_st_entry *e = at_st_find(s->st, full);
	if (!e) {
		fail(s->err, s->errlen, "%s: no tensor '%s'", s->st->path, full);
		return NULL;
	}
	int rank = d1 ? 2 : 1;
	if (e->rank != rank || e->dims[0] != d0 || (d1 && e->dims[1] != d1)) {
		char want[64];
		uint64_t dims[2] = {d0, d1};
		at_shape_str(rank, dims, want, sizeof want);
		char got[128];
		at_shape_str(e->rank, e->dims, got, sizeof got);
		fail(s->err, s->errlen, "%s: '%s' is %s, the config says %s",
		     s->st->path, full, got, want);
		return NULL;
	}
	s->used[e - s->st->entries] = 1;
	return e;
}

/* 0 where every tensor of the file went into the model or is a buffer
 * that is no parameter (h.N.attn.bias, h.N.attn.masked_bias: the causal
 * mask); else -1 naming the first other one, which would be lost. */
static int all_used(const source *s, const at_config *cfg)
{
	size_t pre = strlen(s->prefix);
	for (int i = 0; i < s->st->n; i++) {
		const char *name = s->st->entries[i].name;
		int l, at = 0;
		if (s->used[i] ||
		    (strncmp(name, s->prefix, pre) == 0 &&
		     sscanf(name + pre, "h.%d.attn.%n", &l, &at) == 1 && at &&
		     (!strcmp(name + pre + at, "bias") ||
		      !strcmp(name + pre + at, "masked_bias"))))
			continue;
		return fail(s->err, s->errlen, "%s: tensor '%s' has no place in "
			    "the model the config describes (%d layers), and "
			    "would be lost", s->st->path, name, cfg->n_layer);
	}
	return 0;
}

/* Reads e whole as float32 (caller frees). */
static float *read_all(const source *s, const at_st_entry *e)
{
	float *p = malloc(at_st_count(e) * sizeof *p + 1);
	if (!p) {
		fail(s->err, s->errlen, "out of memory reading '%s'", e->name);
		return NULL;
	}
	if (at_st_read_f32(s->st, e, p, s->err, s->errlen) < 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* Hands put the andrea parameter `name` [d0] or [d0,d1] made of columns
 * [c0, c0 + d1) of the rows of src (cols wide; a vector when d1 is 0),
 * or of src transposed where transpose is set ([d1,d0] stored). */
static int emit(const char *name, const float *src, uint64_t cols, uint64_t c0,
		uint64_t d0, uint64_t d1, int transpose, at_param_sink *put,
		void *ctx, const source *s)
{
	uint64_t dims[2] = {d0, d1};
	at_tensor t;
	if (at_tensor_init(&t, name, AT_F32, d1 ? 2 : 1, dims) < 0)
		return fail(s->err, s->errlen, "out of memory for '%s'", name);
	float *out = t.data;
	uint64_t w = d1 ? d1 : d0, rows = d1 ? d0 : 1;
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c = 0; c < w; c++)
			out[r * w + c] = transpose ? src[c * d0 + r]
						   : src[r * cols + c0 + c];
	int rc = put(ctx, &t);
	at_tensor_free(&t);
	return rc;
}

/* One HF tensor to one andrea parameter of the same shape. */
static int copy(const source *s, const char *hf, const char *name, uint64_t d0,
		uint64_t d1, at_param_sink *put, void *ctx)
{
	const at_st_entry *e = find(s, hf, d0, d1);
	float *p = e ? read_all(s, e) : NULL;
	if (!p)
		return -1;
	int rc = emit(name, p, d1 ? d1 : d0, 0, d0, d1, 0, put, ctx, s);
	free(p);
	return rc;
}

/* c_attn's weight [C,3C] and bias [3C] into Wq, Wk, Wv and bq, bk, bv. */
static int split_qkv(const source *s, int l, uint64_t C, at_param_sink *put,
		     void *ctx)
{
	char hf[96], name[64];
	static const char qkv[] = "qkv";
	for (int bias = 0; bias < 2; bias++) {
		snprintf(hf, sizeof hf, "h.%d.attn.c_attn.%s", l,
			 bias ? "bias" : "weight");
		const at_st_entry *e = find(s, hf, bias ? 3 * C : C,
					    bias ? 0 : 3 * C);
		float *p = e ? read_all(s, e) : NULL;
		if (!p)
			return -1;
		int rc = 0;
		for (int m = 0; m < 3 && rc == 0; m++) {
			snprintf(name, sizeof name, "layers.%d.attn.%c%c", l,
				 bias ? 'b' : 'w', qkv[m]);
			rc = bias ? emit(name, p + m * C, C, 0, C, 0, 0, put, ctx, s)
				  : emit(name, p, 3 * C, m * C, C, C, 0, put, ctx, s);
		}
		free(p);
		if (rc)
			return rc;
	}
	return 0;
}

static int import_layer(const source *s, int l, uint64_t C, at_param_sink *put,
			void *ctx)
{
	static const struct {
		const char *hf, *name;
		int rows, cols; /* in C: 1, or 4 for F; cols 0: a vector */
	} plain[] = {{"ln_1.weight", "ln1.weight", 1, 0},
		     {"ln_1.bias", "ln1.bias", 1, 0},
		     {"attn.c_proj.weight", "attn.wo", 1, 1},
		     {"attn.c_proj.bias", "attn.bo", 1, 0},
		     {"ln_2.weight", "ln2.weight", 1, 0},
		     {"ln_2.bias", "ln2.bias", 1, 0},
		     {"mlp.c_fc.weight", "mlp.fc", 1, 4},
		     {"mlp.c_fc.bias", "mlp.bfc", 4, 0},
		     {"mlp.c_proj.weight", "mlp.proj", 4, 1},
		     {"mlp.c_proj.bias", "mlp.bproj", 1, 0}};
	if (split_qkv(s, l, C, put, ctx) < 0)
		return -1;
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		char hf[96], name[64];
		snprintf(hf, sizeof hf, "h.%d.%s", l, plain[i].hf);
		snprintf(name, sizeof name, "layers.%d.%s", l, plain[i].name);
		if (copy(s, hf, name, plain[i].rows * C, plain[i].cols * C, put,
			 ctx) < 0)
			return -1;
	}
	return 0;
}

static int import_all(const at_st *st, const at_config *cfg,
		      at_param_sink *put, void *ctx, unsigned char *used,
		      char *err, size_t errlen)
{
	source s = {st, "transformer.", err, errlen, used};
	if (!at_st_find(st, "transformer.wte.weight"))
		s.prefix = "";
	uint64_t C = (uint64_t)cfg->d_model, V = (uint64_t)cfg->vocab;
	if (copy(&s, "wte.weight", "wte", V, C, put, ctx) < 0 ||
	    copy(&s, "wpe.weight", "wpe", (uint64_t)cfg->ctx, C, put, ctx) < 0)
		return -1;
	for (int l = 0; l < cfg->n_layer; l++)
		if (import_layer(&s, l, C, put, ctx) < 0)
			return -1;
	if (copy(&s, "ln_f.weight", "lnf.weight", C, 0, put, ctx) < 0 ||
	    copy(&s, "ln_f.bias", "lnf.bias", C, 0, put, ctx) < 0)
		return -1;
	/* an untied head: HF's Linear weight [V,C], andrea's lm_head [C,V] */
	const at_st_entry *head = at_st_find(st, "lm_head.weight");
	if (!head)
		return all_used(&s, cfg);
	source top = {st, "", err, errlen, used};
	if (!(head = find(&top, "lm_head.weight", V, C)))
		return -1;
	float *p = read_all(&top, head);
	float *wte = p ? read_all(&s, find(&s, "wte.weight", V, C)) : NULL;
	if (!wte) {
		free(p);
		return -1;
	}
	/* a file may hold the tied head's copy of wte: that stays tied */
	int tied = memcmp(p, wte, V * C * sizeof *p) == 0, rc = 0;
	free(wte);
	if (!tied)
		rc = emit("lm_head", p, C, 0, C, V, 1, put, ctx, &top);
	free(p);
	return rc ? rc : all_used(&s, cfg);
}

int at_gpt2_import(const at_st *st, const at_config *cfg, at_param_sink *put,
		   void *ctx, char *err, size_t errlen)
{
	unsigned char *used = calloc((size_t)st->n + 1, 1);
	if (!used)
		return fail(err, errlen, "out of memory");
	int rc = import_all(st, cfg, put, ctx, used, err, errlen);
	free(used);
	return rc;
}

/* ---- llm.c's checkpoints ---- */

#define LLMC_HEADER 256

int at_llmc_is(const unsigned char *head, size_t n)
{
	return n >= 4 && le32(head) == AT_LLMC_MAGIC;
}

/* The header's fields: version, context, V, L, heads, C, padded V, and
 * the bytes of an element. */
typedef struct {
	int version, ctx, V, L, H, C, Vp, elem;
} llmc_header;

/* Elements of the parameters after wte, in llm.c's order. */
static uint64_t llmc_rest(const llmc_header *h)
{
	uint64_t C = (uint64_t)h->C, L = (uint64_t)h->L;
	return (uint64_t)h->ctx * C + L * (C * 2 + 3 * C * C + 3 * C + C * C +
					  C * 3 + 4 * C * C + 4 * C + 4 * C * C + C) +
	       2 * C;
}

static int llmc_header_read(FILE *f, const char *path, llmc_header *h,
			    char *err, size_t errlen)
{
	unsigned char raw[LLMC_HEADER * 4];
	if (fread(raw, 1, sizeof raw, f) != sizeof raw || !at_llmc_is(raw, 4))
		return fail(err, errlen, "%s: not an llm.c checkpoint (its 1024-"
			    "byte header, magic %d)", path, AT_LLMC_MAGIC);
	int32_t v[8];
	for (int i = 0; i < 8; i++)
		v[i] = (int32_t)le32(raw + 4 * i);
	*h = (llmc_header){.version = v[1], .ctx = v[2], .V = v[3], .L = v[4],
			   .H = v[5], .C = v[6], .Vp = v[1] == 1 ? v[3] : v[7]};
	h->elem = h->version == 5 ? 2 : 4;
	if (h->version != 1 && h->version != 3 && h->version != 5)
		return fail(err, errlen, "%s: llm.c checkpoint version %d (andrea "
			    "reads 1, 3: float32, and 5: bfloat16)", path,
			    h->version);
	int *sizes[] = {&h->ctx, &h->V, &h->L, &h->H, &h->C};
	for (int i = 0; i < 5; i++) {
		int max = sizes[i] == &h->L ? AT_MAX_LAYERS : AT_MAX_CONFIG;
		if (*sizes[i] < 1 || *sizes[i] > max)
			return fail(err, errlen, "%s: header field %d is %d, not in "
				    "1..%d", path, i + 2, *sizes[i], max);
	}
	if (h->C % h->H)
		return fail(err, errlen, "%s: C %d is not a multiple of the %d "
			    "heads", path, h->C, h->H);
	if (h->version != 1 && h->Vp == 0) /* the padded V from the file's size */
		h->Vp = -1;
	else if (h->Vp < h->V || h->Vp > AT_MAX_CONFIG)
		return fail(err, errlen, "%s: padded vocabulary %d, less than V %d "
			    "or too large", path, h->Vp, h->V);
	return 0;
}

/* Opens path and reads its header, checking the file holds exactly the
 * parameters it describes (fills a padded V of 0 from the size). */
static FILE *llmc_open(const char *path, llmc_header *h, char *err,
		       size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (llmc_header_read(f, path, h, err, errlen) < 0 ||
	    fseeko(f, 0, SEEK_END) != 0) {
		fclose(f);
		return NULL;
	}
	uint64_t have = (uint64_t)ftello(f) - LLMC_HEADER * 4, C = (uint64_t)h->C;
	uint64_t rest = llmc_rest(h) * (uint64_t)h->elem;
	if (h->Vp < 0 && have > rest && (have - rest) % (C * h->elem) == 0)
		h->Vp = (int)((have - rest) / (C * h->elem));
	uint64_t want = ((uint64_t)(h->Vp > 0 ? h->Vp : h->V) * C) * h->elem + rest;
	if (have != want || h->Vp < h->V) {
		fail(err, errlen, "%s: %llu bytes of parameters, the header's shapes "
		     "need %llu", path, (unsigned long long)have,
		     (unsigned long long)want);
		fclose(f);
		return NULL;
	}
	fseeko(f, LLMC_HEADER * 4, SEEK_SET);
	return f;
}

int at_llmc_config(const char *path, at_config *cfg, char *err, size_t errlen)
{
	llmc_header h;
	FILE *f = llmc_open(path, &h, err, errlen);
	if (!f)
		return -1;
	fclose(f);
	*cfg = (at_config){.n_layer = h.L, .n_head = h.H, .d_model = h.C,
			   .ctx = h.ctx, .vocab = h.V};
	return 0;
}

/* The next n elements of f as float32 (bfloat16 widened); caller frees. */
static float *llmc_group(FILE *f, const llmc_header *h, uint64_t n,
			 const char *path, const char *what, char *err,
			 size_t errlen)
{
	float *out = malloc(n * sizeof *out + 1);
	unsigned char buf[1 << 16];
	size_t per = sizeof buf / (size_t)h->elem;
	for (uint64_t i = 0; out && i < n;) {
		size_t k = n - i < per ? (size_t)(n - i) : per;
		if (fread(buf, (size_t)h->elem, k, f) != k) {
			free(out);
			fail(err, errlen, "%s: '%s': the file ends inside it", path,
			     what);
			return NULL;
		}
		for (size_t j = 0; j < k; j++, i++) {
			uint32_t bits = h->elem == 4 ? le32(buf + 4 * j)
						     : (uint32_t)le16(buf + 2 * j) << 16;
			memcpy(&out[i], &bits, 4);
		}
	}
	if (!out)
		fail(err, errlen, "out of memory reading '%s'", what);
	return out;
}

int at_llmc_import(const char *path, at_param_sink *put, void *ctx, char *err,
		   size_t errlen)
{
	llmc_header h;
	FILE *f = llmc_open(path, &h, err, errlen);
	if (!f)
		return -1;
	uint64_t C = (uint64_t)h.C, L = (uint64_t)h.L;
	/* llm.c's sixteen groups, in its order; per layer: its elements */
	static const char *const names[16] = {
		"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw",
		"attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb",
		"lnfw", "lnfb"};
	uint64_t n[16] = {(uint64_t)h.Vp * C, (uint64_t)h.ctx * C, C, C,
			  3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C,
			  4 * C * C, C, C, C};
	float *g[16] = {0};
	int rc = 0;
	for (int i = 0; i < 16 && rc == 0; i++)
		if (!(g[i] = llmc_group(f, &h, n[i] * (i >= 2 && i < 14 ? L : 1),
					path, names[i], err, errlen)))
			rc = -1;
	fclose(f);
	source s = {NULL, "", err, errlen, NULL};
	if (rc == 0)
		rc = emit("wte", g[0], C, 0, (uint64_t)h.V, C, 0, put, ctx, &s) ||
		     emit("wpe", g[1], C, 0, (uint64_t)h.ctx, C, 0, put, ctx, &s)
			     ? -1 : 0;
	for (uint64_t l = 0; rc == 0 && l < L; l++) {
		char name[64];
		const float *qkvw = g[4] + l * n[4], *qkvb = g[5] + l * n[5];
		/* each Linear weight [out, in] becomes andrea's [in, out] */
		struct {
			const char *name;
			const float *src;
			uint64_t d0, d1;
			int transpose;
		} part[] = {
			{"ln1.weight", g[2] + l * C, C, 0, 0},
			{"ln1.bias", g[3] + l * C, C, 0, 0},
			{"attn.wq", qkvw, C, C, 1},
			{"attn.wk", qkvw + C * C, C, C, 1},
			{"attn.wv", qkvw + 2 * C * C, C, C, 1},
			{"attn.bq", qkvb, C, 0, 0},
			{"attn.bk", qkvb + C, C, 0, 0},
			{"attn.bv", qkvb + 2 * C, C, 0, 0},
			{"attn.wo", g[6] + l * n[6], C, C, 1},
			{"attn.bo", g[7] + l * C, C, 0, 0},
			{"ln2.weight", g[8] + l * C, C, 0, 0},
			{"ln2.bias", g[9] + l * C, C, 0, 0},
			{"mlp.fc", g[10] + l * n[10], C, 4 * C, 1},
			{"mlp.bfc", g[11] + l * n[11], 4 * C, 0, 0},
			{"mlp.proj", g[12] + l * n[12], 4 * C, C, 1},
			{"mlp.bproj", g[13] + l * C, C, 0, 0}};
		for (size_t i = 0; rc == 0 && i < sizeof part / sizeof part[0];
		     i++) {
			snprintf(name, sizeof name, "layers.%llu.%s",
				 (unsigned long long)l, part[i].name);
			rc = emit(name, part[i].src, part[i].d1 ? part[i].d1 : part[i].d0,
				  0, part[i].d0, part[i].d1, part[i].transpose, put,
				  ctx, &s);
		}
	}
	if (rc == 0)
		rc = emit("lnf.weight", g[14], C, 0, C, 0, 0, put, ctx, &s) ||
		     emit("lnf.bias", g[15], C, 0, C, 0, 0, put, ctx, &s) ? -1 : 0;
	for (int i = 0; i < 16; i++)
		free(g[i]);
	return rc;
}
