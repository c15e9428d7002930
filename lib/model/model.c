/* model.c - model files, configs and the seeded default model. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "stream/stream.h"


static const struct {
	const char *name;
	at_config cfg;
} presets[] = {
	{"tiny", {2, 4, 64, 128, 257}},
	{"andrea-12m", {6, 12, 384, 1024, 257}},
	{"andrea-120m", {12, 12, 768, 1024, 257}},
	{"andrea-480m", {16, 24, 1536, 1024, 257}},
};

int at_config_preset(const char *name, at_config *c)
{
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
		if (strcmp(name, presets[i].name) == 0) {
			*c = presets[i].cfg;
			return 0;
		}
	return -1;
}

void at_config_to_attrs(const at_config *c, at_attrs *a)
{
	at_attr_setf(a, "n_layer", "%d", c->n_layer);
	at_attr_setf(a, "n_head", "%d", c->n_head);
	at_attr_setf(a, "d_model", "%d", c->d_model);
	at_attr_setf(a, "ctx", "%d", c->ctx);
	at_attr_setf(a, "vocab", "%d", c->vocab);
}

int at_config_write(at_writer *w, const at_config *c)
{
	static int32_t none;
	at_tensor t = {.dtype = AT_I32, .rank = 1, .data = &none};
	snprintf(t.name, sizeof t.name, "config");
	at_config_to_attrs(c, &t.attrs);
	return at_write_tensor(w, &t);
}

int at_config_from_attrs(const at_attrs *a, at_config *c, char *err,
			 size_t errlen)
{
	static const char *keys[] = {"n_layer", "n_head", "d_model", "ctx", "vocab"};
	int *fields[] = {&c->n_layer, &c->n_head, &c->d_model, &c->ctx, &c->vocab};
	for (int i = 0; i < 5; i++) {
		long v, max = i == 0 ? AT_MAX_LAYERS : AT_MAX_CONFIG;
		if (at_attr_long(a, keys[i], &v) != 0 || v < 1 || v > max) {
			snprintf(err, errlen, "config: %s missing or not in 1..%ld",
				 keys[i], max);
			return -1;
		}
		*fields[i] = (int)v;
	}
	if (c->d_model % c->n_head) {
		snprintf(err, errlen, "config: d_model=%d is not a multiple of n_head=%d",
			 c->d_model, c->n_head);
		return -1;
	}
	return 0;
}

/* A dimension as a config field: 0 (unknown) when beyond AT_MAX_CONFIG. */
static int field(uint64_t d)
{
	return d <= AT_MAX_CONFIG ? (int)d : 0;
}

/* Fills unknown config fields from a parameter's shape (config-less files).
 * A layer number is taken only when it is all digits and below AT_MAX_CONFIG,
 * so "layers.2147483647.x" cannot overflow the count. */
static void infer_from(at_config *c, const at_header *h)
{
	const char *n = h->name;
	if (strcmp(n, "wte") == 0 && h->rank == 2) {
		c->vocab = c->vocab ? c->vocab : field(h->dims[0]);
		c->d_model = c->d_model ? c->d_model : field(h->dims[1]);
	} else if (strcmp(n, "wpe") == 0 && h->rank == 2) {
		c->ctx = c->ctx ? c->ctx : field(h->dims[0]);
		c->d_model = c->d_model ? c->d_model : field(h->dims[1]);
	} else if (strcmp(n, "lm_head") == 0 && h->rank == 2) {
		c->d_model = c->d_model ? c->d_model : field(h->dims[0]);
		c->vocab = c->vocab ? c->vocab : field(h->dims[1]);
	} else if (strncmp(n, "layers.", 7) == 0 && h->rank >= 1) {
		long layer = 0;
		const char *p = n + 7;
		while (*p >= '0' && *p <= '9' && layer < AT_MAX_CONFIG)
			layer = layer * 10 + (*p++ - '0');
		if (p > n + 7 && *p == '.' && layer < AT_MAX_CONFIG &&
		    layer + 1 > c->n_layer)
			c->n_layer = (int)layer + 1;
		if (strstr(n, ".attn.w") && h->rank == 2 && !c->d_model)
			c->d_model = field(h->dims[0]);
	}
}

/* Whether m has a record that only a model file holds: its config, a
 * parameter of andrea-model(5) or its tokenizer (an activation stream has
 * tokens, x, q ... and none of these). */
static int holds_a_model(const at_model *m)
{
	static const char *const whole[] = {"config", "wte", "wpe", "lm_head"};
	static const char *const prefix[] = {"layers.", "lnf.", "tokenizer."};
	for (int i = 0; i < m->n_entries; i++) {
		const char *n = m->entries[i].name;
		for (size_t k = 0; k < sizeof whole / sizeof whole[0]; k++)
			if (strcmp(n, whole[k]) == 0)
				return 1;
		for (size_t k = 0; k < sizeof prefix / sizeof prefix[0]; k++)
			if (strncmp(n, prefix[k], strlen(prefix[k])) == 0)
				return 1;
	}
	return 0;
}

/* Whether the config record agrees with the shapes of the parameters
 * the file holds (got: what they say, 0 where they say nothing): one that
 * claims a wider model, a larger vocabulary or a longer context would size
 * allocations for what is not there. */
static int config_agrees(const at_model *m, const at_config *got, char *err,
			 size_t errlen)
{
	static const char *const what[] = {"d_model", "vocab", "ctx"};
	const int said[] = {m->cfg.d_model, m->cfg.vocab, m->cfg.ctx};
	const int held[] = {got->d_model, got->vocab, got->ctx};
	for (int i = 0; i < 3; i++)
		if (held[i] && held[i] != said[i]) {
			snprintf(err, errlen, "%s: config: %s=%d but the "
				 "parameters have %d", m->path, what[i], said[i],
				 held[i]);
			return 0;
		}
	return 1;
}

int at_model_check_held(const at_model *m, int need, char *err,
			size_t errlen)
{
	if (m->seeded || m->layers_held >= need)
		return 0;
	snprintf(err, errlen, "%s: config: n_layer=%d but the file holds %d "
		 "layers", m->path, m->cfg.n_layer, m->layers_held);
	return -1;
}

int at_model_open(at_model *m, const char *path, uint64_t seed, int heads,
		  const at_read_opts *ro, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	m->seed = seed;
	m->ropts = *ro;
	if (!path) {
		m->seeded = 1;
		m->has_config = 1;
		at_config_preset("andrea-120m", &m->cfg);
		if (heads > 0 && heads != m->cfg.n_head) {
			snprintf(err, errlen, "--heads %d: the default model has %d heads",
				 heads, m->cfg.n_head);
			return -1;
		}
		return 0;
	}
	snprintf(m->path, sizeof m->path, "%s", path);
	at_reader r;
	if (at_reader_open(&r, path, ro) < 0) {
		snprintf(err, errlen, "%s", r.err);
		return -1;
	}
	at_header *h = malloc(sizeof *h);
	int rc;
	at_config inferred = {0};
	while (h && (rc = at_read_header(&r, h)) == 1) {
		long offset = (long)(r.offset - h->raw_len);
		if (strcmp(h->name, "config") == 0) {
			char why[200];
			if (at_config_from_attrs(&h->attrs, &m->cfg, why, sizeof why) < 0) {
				snprintf(err, errlen, "%s: record %d: %s", path,
					 h->index, why);
				goto fail;
			}
			m->has_config = 1;
		} else {
			infer_from(&inferred, h);
		}
		at_model_entry *e = realloc(m->entries,
					    (size_t)(m->n_entries + 1) * sizeof *e);
		if (!e)
			break;
		m->entries = e;
		e += m->n_entries++;
		snprintf(e->name, sizeof e->name, "%s", h->name);
		e->offset = offset;
		e->index = h->index;
		if (at_skip_payload(&r, h) < 0)
			break;
	}
	if (!h || rc != 0) {
		snprintf(err, errlen, "%s", h ? r.err : "out of memory");
		goto fail;
	}
	free(h);
	at_reader_close(&r);
	m->layers_held = inferred.n_layer;
	if (m->layers_held > AT_MAX_LAYERS) {
		snprintf(err, errlen, "%s: a record of layer %d: a model has at "
			 "most %d layers", path, m->layers_held - 1, AT_MAX_LAYERS);
		at_model_close(m);
		return -1;
	}
	if (!holds_a_model(m)) {
		snprintf(err, errlen, "%s is not a model file: none of its %d "
			 "records (the first '%s') is a model's (andrea-model(5))",
			 path, m->n_entries, m->n_entries ? m->entries[0].name : "-");
		at_model_close(m);
		return -1;
	}
	if (!m->has_config) {
		m->cfg = inferred;
		m->cfg.n_head = heads > 0 ? heads : 0;
	} else if (!config_agrees(m, &inferred, err, errlen)) {
		at_model_close(m);
		return -1;
	} else if (heads > 0 && heads != m->cfg.n_head) {
		snprintf(err, errlen, "--heads %d: %s's config says n_head=%d", heads,
			 path, m->cfg.n_head);
		at_model_close(m);
		return -1;
	}
	return 0;
fail:
	free(h);
	at_reader_close(&r);
	at_model_close(m);
	return -1;
}

void at_model_close(at_model *m)
{
	free(m->entries);
	m->entries = NULL;
	m->n_entries = 0;
}

int at_model_need_heads(const at_model *m, char *err, size_t errlen)
{
	const at_config *c = &m->cfg;
	if (c->n_head <= 0) {
		snprintf(err, errlen, "%s has no config: give the number of heads "
			 "with --heads N", m->path);
		return -1;
	}
	if (c->d_model <= 0 || c->d_model % c->n_head) {
		snprintf(err, errlen, "%s: d_model=%d is not a multiple of n_head=%d",
			 m->seeded ? "default model" : m->path, c->d_model, c->n_head);
		return -1;
	}
	return 0;
}

int at_model_check_layer(const at_model *m, int layer, char *err,
			 size_t errlen)
{
	if (layer < 0) {
		snprintf(err, errlen, "layer %d out of range: layers count "
			 "from 0", layer);
		return -1;
	}
	if (m->cfg.n_layer > 0 && layer >= m->cfg.n_layer) {
		snprintf(err, errlen, "layer %d out of range: the model has %d "
			 "layers (0..%d)", layer, m->cfg.n_layer, m->cfg.n_layer - 1);
		return -1;
	}
	return 0;
}

void at_tokens_as_batch(at_tensor *t)
{
	if (t->rank == 1) {
		t->rank = 2;
		t->dims[1] = t->dims[0];
		t->dims[0] = 1;
	}
}

int at_tokens_check(const at_config *cfg, const int32_t *id, uint64_t B,
		    uint64_t T, char *err, size_t errlen)
{
	if (cfg->ctx > 0 && T > (uint64_t)cfg->ctx) {
		snprintf(err, errlen, "T=%llu exceeds the model's context of %d",
			 (unsigned long long)T, cfg->ctx);
		return -1;
	}
	for (uint64_t i = 0; i < B * T; i++)
		if (id[i] < 0 || id[i] >= cfg->vocab) {
			snprintf(err, errlen, "token %d at [%llu,%llu] is not in "
				 "0..%d (V=%d)", id[i], (unsigned long long)(i / T),
				 (unsigned long long)(i % T), cfg->vocab - 1,
				 cfg->vocab);
			return -1;
		}
	return 0;
}

/* LayerNorm weights (the only "*.weight" names) start at 1 and their biases
 * at 0; every matrix is drawn from N(0, 0.02^2). */
static void seeded_param(const at_model *m, const char *name, at_tensor *t)
{
	size_t n = (size_t)at_numel(t);
	float *p = t->data;
	size_t len = strlen(name);
	if (len > 7 && strcmp(name + len - 7, ".weight") == 0)
		for (size_t i = 0; i < n; i++)
			p[i] = 1.0f;
	else if (len > 5 && strcmp(name + len - 5, ".bias") == 0)
		memset(p, 0, n * sizeof *p);
	else
		at_seeded_normal(m->seed, name, 0.02, p, n);
}

int at_param_optional(const char *name)
{
	static const char *const biases[] = {"attn.bq", "attn.bk", "attn.bv",
					     "attn.bo", "mlp.bfc", "mlp.bproj"};
	const char *dot = strncmp(name, "layers.", 7) == 0 ? strchr(name + 7, '.')
							  : NULL;
	for (size_t i = 0; dot && i < sizeof biases / sizeof biases[0]; i++)
		if (strcmp(dot + 1, biases[i]) == 0)
			return 1;
	return 0;
}

int at_model_has(const at_model *m, const char *name)
{
	if (m->seeded)
		return !at_param_optional(name);
	for (int i = 0; i < m->n_entries; i++)
		if (strcmp(m->entries[i].name, name) == 0)
			return 1;
	return 0;
}

/* The record of m named `name`, its header read into h and r left at its
 * payload; 0, or -1 with err (r closed). */
static int seek_record(const at_model *m, const char *name, at_reader *r,
		       at_header *h, const char *want, char *err,
		       size_t errlen)
{
	const at_model_entry *e = NULL;
	for (int i = 0; i < m->n_entries && !e; i++)
		if (strcmp(m->entries[i].name, name) == 0)
			e = &m->entries[i];
	if (!e) {
		snprintf(err, errlen, "%s: no parameter '%s' %s", m->path, name, want);
		return -1;
	}
	if (at_reader_open(r, m->path, &m->ropts) < 0) {
		snprintf(err, errlen, "%s", r->err);
		return -1;
	}
	r->records = e->index - 1;
	if (fseek(r->f, e->offset, SEEK_SET) != 0 || at_read_header(r, h) != 1) {
		snprintf(err, errlen, "%s", r->err[0] ? r->err :
			 "cannot seek in the model file (it must be a regular file)");
		at_reader_close(r);
		return -1;
	}
	return 0;
}

int at_model_param(const at_model *m, const char *name, int rank,
		   const uint64_t *dims, at_tensor *out, char *err,
		   size_t errlen)
{
	char want[128], got[128];
	at_shape_str(rank, dims, want, sizeof want);
	if (m->seeded) {
		if (at_tensor_init(out, name, AT_F32, rank, dims) < 0) {
			snprintf(err, errlen, "%s: out of memory", name);
			return -1;
		}
		seeded_param(m, name, out);
		return 0;
	}
	at_reader r;
	at_header *h = malloc(sizeof *h);
	int rc = -1;
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (seek_record(m, name, &r, h, want, err, errlen) < 0) {
		free(h);
		return -1;
	}
	at_shape_str(h->rank, h->dims, got, sizeof got);
	if (h->dtype != AT_F32 || h->rank != rank ||
	    memcmp(h->dims, dims, (size_t)rank * sizeof *dims) != 0) {
		snprintf(err, errlen, "%s: record %d '%s': %s %s, but the model "
			 "needs f32 %s", m->path, h->index, name,
			 at_dtype_name(h->dtype), got, want);
		goto out;
	}
	if (at_read_payload(&r, h, out) < 0) {
		snprintf(err, errlen, "%s", r.err);
		goto out;
	}
	rc = 0;
out:
	free(h);
	at_reader_close(&r);
	return rc;
}

int at_model_record(const at_model *m, const char *name, at_tensor *out,
		    char *err, size_t errlen)
{
	at_reader r;
	at_header *h = malloc(sizeof *h);
	int rc = -1;
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (seek_record(m, name, &r, h, "", err, errlen) == 0) {
		rc = at_read_payload(&r, h, out);
		if (rc < 0)
			snprintf(err, errlen, "%s", r.err);
		at_reader_close(&r);
	}
	free(h);
	return rc;
}

at_tokenizer *at_model_tokenizer(const at_model *m, char *err, size_t errlen)
{
	if (m->seeded || !at_model_has(m, "tokenizer.vocab")) {
		at_tokenizer *t = at_tok_bytes();
		if (!t)
			snprintf(err, errlen, "out of memory");
		return t;
	}
	at_tensor rec[AT_TOK_RECORDS] = {{0}};
	at_tokenizer *t = NULL;
	char why[300];
	int n = at_model_has(m, at_tok_record_name(3)) ? 4 : 3, i = 0;
	while (i < n && at_model_record(m, at_tok_record_name(i), &rec[i], err,
					 errlen) == 0)
		i++;
	if (i == n && !(t = at_tok_from_records(&rec[0], &rec[1], &rec[2],
						 n == 4 ? &rec[3] : NULL, why,
						 sizeof why)))
		snprintf(err, errlen, "%s: %s", m->path, why);
	for (int k = 0; k < AT_TOK_RECORDS; k++)
		at_tensor_free(&rec[k]);
	return t;
}
