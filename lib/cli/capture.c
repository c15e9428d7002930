/* capture.c - --capture and --ablate (capture.h). */
#include "cli/capture.h"

#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ops/forward.h"

const char *const capture_names[] = {"ln1",  "q",  "k",   "v",   "scores",
				     "attn", "out", "y",   "xmid", "ln2",
				     "fc",   "gelu", "mlp", "x",   NULL};

/* The names of [B,H,T,*] tensors, which --capture may cut by head, and
 * those the GPU engine reports. */
static const char *const per_head[] = {"q", "k", "v", "scores", "attn", "out"};
static const char *const on_the_gpu[] = {"q", "k", "v", "scores", "attn",
					 "out", "y", "x"};

static int among(const char *name, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, set[i]) == 0)
			return 1;
	return 0;
}
#define AMONG(name, set) among(name, set, sizeof set / sizeof *set)

/* "3", "0-2,5", "all" into the set (all: every index); 1 for a list
 * of indices, 0 for all, -1 for bad syntax. */
static int parse_list(const char *s, size_t len, unsigned char *set)
{
	if (len == 3 && strncmp(s, "all", 3) == 0) {
		memset(set, 1, CAPTURE_INDICES);
		return 0;
	}
	const char *p = s, *end = s + len;
	while (p < end) {
		char *q;
		long lo = strtol(p, &q, 10), hi = lo;
		if (q == p || lo < 0 || lo >= CAPTURE_INDICES)
			return -1;
		if (q < end && *q == '-') {
			p = q + 1;
			hi = strtol(p, &q, 10);
			if (q == p || hi < lo || hi >= CAPTURE_INDICES)
				return -1;
		}
		for (long i = lo; i <= hi; i++)
			set[i] = 1;
		if (q < end && *q != ',')
			return -1;
		p = q + (q < end);
		if (q < end && p == end)
			return -1; /* a trailing comma */
	}
	return len ? 1 : -1;
}

void capture_opt(void *ctx, const char *arg, const char *what)
{
	capture *c = ctx;
	if (c->n_spec == CAPTURE_MAX)
		cli_usage_error("%s: more than %d of them", what, CAPTURE_MAX);
	capture_spec *s = &c->spec[c->n_spec];
	memset(s, 0, sizeof *s);
	const char *colon = strchr(arg, ':');
	size_t nlen = colon ? (size_t)(colon - arg) : strlen(arg);
	s->name = -1;
	for (int i = 0; capture_names[i]; i++)
		if (strlen(capture_names[i]) == nlen &&
		    strncmp(arg, capture_names[i], nlen) == 0)
			s->name = i;
	if (s->name < 0)
		cli_usage_error("%s '%s': no activation of that name (ln1, q, k, "
				"v, scores, attn, out, y, xmid, ln2, fc, gelu, "
				"mlp, x)", what, arg);
	const char *layers = colon ? colon + 1 : NULL;
	const char *heads = layers ? strchr(layers, ':') : NULL;
	size_t llen = layers ? (heads ? (size_t)(heads - layers) : strlen(layers)) : 0;
	s->listed_layers = layers ? parse_list(layers, llen, s->layer)
				  : parse_list("all", 3, s->layer);
	if (s->listed_layers < 0)
		cli_usage_error("%s '%s': expected NAME[:LAYERS[:HEADS]], each list "
				"like 3, 0-2,5 or all", what, arg);
	if (heads) {
		if (!AMONG(capture_names[s->name], per_head))
			cli_usage_error("%s '%s': %s has no heads to pick (only q, "
					"k, v, scores, attn and out have)", what,
					arg, capture_names[s->name]);
		if ((s->listed_heads = parse_list(heads + 1, strlen(heads + 1),
						  s->head)) < 0)
			cli_usage_error("%s '%s': expected NAME[:LAYERS[:HEADS]], "
					"each list like 3, 0-2,5 or all", what, arg);
		s->heads_given = 1;
	}
	c->n_spec++;
}

/* The index of name in capture_names, or -1. */
static int name_index(const char *name)
{
	for (int i = 0; capture_names[i]; i++)
		if (strcmp(name, capture_names[i]) == 0)
			return i;
	return -1;
}

/* Appends the captured records (captured=1, with a layer) of the file
 * at path to *list; how many. */
static int read_captures(const char *path, const char *what, at_tensor **list,
			 int *n)
{
	if (strcmp(path, "-") == 0)
		cli_usage_error("%s -: standard input carries the stream to run; "
				"give the captures as a file", what);
	cli_common none = {0};
	at_read_opts_default(&none.ropts);
	at_reader r;
	cli_open_input(&none, &r, path);
	at_header h;
	int rc, kept = 0;
	while ((rc = at_read_header(&r, &h)) == 1) {
		long layer;
		const char *captured = at_attr_get(&h.attrs, "captured");
		if (name_index(h.name) < 0 || h.dtype != AT_F32 || !captured ||
		    strcmp(captured, "1") != 0 ||
		    at_attr_long(&h.attrs, "layer", &layer) != 0) {
			if (at_skip_payload(&r, &h) < 0)
				cli_fail(r.err);
			continue; /* the tokens, the output x: not captures */
		}
		at_tensor *grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
		if (!grown)
			cli_die("out of memory");
		*list = grown;
		if (at_read_payload(&r, &h, &grown[*n]) < 0)
			cli_fail(r.err);
		(*n)++;
		kept++;
	}
	if (rc < 0)
		cli_fail(r.err);
	at_reader_close(&r);
	if (!kept)
		cli_die("%s %s: no captured activations (records of --capture) in "
			"it", what, path);
	return kept;
}

void patch_opt(void *ctx, const char *arg, const char *what)
{
	capture *c = ctx;
	read_captures(arg, what, &c->patch, &c->n_patch);
}

/* --ablate L.H:mean=FILE: the mean over the batch of head h's out in
 * layer l of the captures of path, [T,D], into ablation a. */
static void reference_mean(capture *c, int a, const char *path,
			   const char *what)
{
	at_tensor *list = NULL;
	int n = 0, l = c->ablate[a].layer, h = c->ablate[a].head;
	read_captures(path, what, &list, &n);
	const at_tensor *t = NULL;
	uint64_t hh = 0;
	for (int i = 0; i < n && !t; i++) {
		long layer, head = -1;
		at_attr_long(&list[i].attrs, "layer", &layer);
		at_attr_long(&list[i].attrs, "head", &head);
		if (strcmp(list[i].name, "out") != 0 || layer != l || list[i].rank != 4 ||
		    (head >= 0 ? head != h : list[i].dims[1] <= (uint64_t)h))
			continue;
		t = &list[i];
		hh = head >= 0 ? 0 : (uint64_t)h;
	}
	if (!t)
		cli_die("%s %d.%d:mean=%s: no capture of out for layer %d head %d "
			"in it", what, l, h, path, l, h);
	uint64_t B = t->dims[0], H = t->dims[1], TD = t->dims[2] * t->dims[3];
	float *ref = malloc(TD * sizeof *ref + 1);
	if (!ref)
		cli_die("out of memory");
	for (uint64_t i = 0; i < TD; i++) {
		double sum = 0.0;
		for (uint64_t b = 0; b < B; b++)
			sum += ((const float *)t->data)[(b * H + hh) * TD + i];
		ref[i] = (float)(sum / (double)B);
	}
	c->ablate[a].ref = ref;
	c->ablate[a].ref_T = t->dims[2];
	c->ablate[a].ref_D = t->dims[3];
	for (int i = 0; i < n; i++)
		at_tensor_free(&list[i]);
	free(list);
}

void ablate_opt(void *ctx, const char *arg, const char *what)
{
	capture *c = ctx;
	if (c->n_ablate == CAPTURE_MAX)
		cli_usage_error("%s: more than %d of them", what, CAPTURE_MAX);
	char *p, *q;
	long l = strtol(arg, &p, 10), h = -1;
	if (p != arg && *p == '.')
		h = strtol(p + 1, &q, 10);
	else
		q = p;
	int mean = strcmp(q, ":mean") == 0, from = strncmp(q, ":mean=", 6) == 0;
	if (p == arg || l < 0 || h < 0 || q == p + 1 ||
	    (*q && !mean && !(from && q[6])) || l >= CAPTURE_INDICES ||
	    h >= CAPTURE_INDICES)
		cli_usage_error("%s '%s': expected LAYER.HEAD, LAYER.HEAD:mean or "
				"LAYER.HEAD:mean=FILE", what, arg);
	int a = c->n_ablate++;
	c->ablate[a].layer = (int)l;
	c->ablate[a].head = (int)h;
	c->ablate[a].mean = mean || from;
	c->ablate[a].ref = NULL;
	if (from)
		reference_mean(c, a, q + 6, what);
}

void capture_free(capture *c)
{
	for (int i = 0; i < c->n_ablate; i++)
		free(c->ablate[i].ref);
	for (int i = 0; i < c->n_patch; i++)
		at_tensor_free(&c->patch[i]);
	free(c->patch);
	c->patch = NULL;
	c->n_patch = 0;
}

int capture_wanted(const capture *c)
{
	return c->n_spec || c->n_ablate || c->n_patch;
}

/* Puts patch p (the whole activation, or head `head` of it) into data,
 * or dies where the shapes disagree. */
static void patch_in(const at_tensor *p, float *data, int rank,
		     const uint64_t *dims)
{
	long head = -1;
	at_attr_long(&p->attrs, "head", &head);
	int one_head = head >= 0 && rank == 4;
	int same = p->rank == rank;
	for (int i = 0; same && i < rank; i++)
		same = p->dims[i] == (i == 1 && one_head ? 1 : dims[i]);
	if (!same || (one_head && (uint64_t)head >= dims[1])) {
		char want[128], got[128];
		at_shape_str(rank, dims, want, sizeof want);
		at_shape_str(p->rank, p->dims, got, sizeof got);
		cli_die("--patch: '%s' of layer %s%s%s is %s, but this run's is %s",
			p->name, at_attr_get(&p->attrs, "layer"),
			one_head ? " head " : "", one_head ?
			at_attr_get(&p->attrs, "head") : "", got, want);
	}
	if (!one_head) {
		memcpy(data, p->data, at_nbytes(p));
		return;
	}
	size_t B = dims[0], H = dims[1], TX = dims[2] * dims[3];
	for (size_t b = 0; b < B; b++)
		memcpy(data + (b * H + (size_t)head) * TX,
		       (const float *)p->data + b * TX, TX * sizeof *data);
}

/* Head h of a [B,H,T,X] activation zeroed, set to its mean over b, or
 * to ref [T,X] (a reference run's mean). */
static void knock_out(float *data, const uint64_t *dims, int h, int mean,
		      const float *ref)
{
	size_t B = dims[0], H = dims[1], TX = dims[2] * dims[3];
	for (size_t i = 0; i < TX; i++) {
		double sum = 0.0;
		for (size_t b = 0; mean && !ref && b < B; b++)
			sum += data[(b * H + h) * TX + i];
		float v = ref ? ref[i] : mean ? (float)(sum / (double)B) : 0.0f;
		for (size_t b = 0; b < B; b++)
			data[(b * H + h) * TX + i] = v;
	}
}

/* Writes activation `name` of layer as one record, or, for heads, one
 * record of each head [B,1,T,X]. */
static int put(capture *c, const capture_spec *s, const char *name, int layer,
	       const float *data, int rank, const uint64_t *dims)
{
	at_tensor t;
	memset(&t, 0, sizeof t);
	t.dtype = AT_F32;
	t.rank = rank;
	memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
	snprintf(t.name, sizeof t.name, "%s", name);
	at_fwd_activation_attrs(&t.attrs, name, layer, c->H, c->D);
	at_attr_set(&t.attrs, "captured", "1"); /* what --patch takes */
	for (int i = 0; i < c->tag.n; i++)
		at_attr_set(&t.attrs, c->tag.key[i], c->tag.value[i]);
	if (!s->heads_given) {
		t.data = (void *)data;
		return at_write_tensor(c->w, &t) < 0 ? 1 : 0;
	}
	size_t B = dims[0], H = dims[1], TX = dims[2] * dims[3];
	t.dims[1] = 1;
	float *one = malloc(B * TX * sizeof *one + 1);
	if (!one)
		cli_die("out of memory");
	t.data = one;
	int rc = 0;
	for (size_t h = 0; h < H && h < CAPTURE_INDICES && !rc; h++) {
		if (!s->head[h])
			continue;
		for (size_t b = 0; b < B; b++)
			memcpy(one + b * TX, data + (b * H + h) * TX, TX * sizeof *one);
		at_attr_setf(&t.attrs, "head", "%zu", h);
		rc = at_write_tensor(c->w, &t) < 0 ? 1 : 0;
	}
	free(one);
	return rc;
}

static int on_activation(void *ctx, const char *name, int layer, float *data,
			 int rank, const uint64_t *dims)
{
	capture *c = ctx;
	if (layer < 0 || layer >= CAPTURE_INDICES)
		return 0;
	for (int i = 0; i < c->n_patch; i++) {
		long l;
		if (strcmp(c->patch[i].name, name) == 0 &&
		    at_attr_long(&c->patch[i].attrs, "layer", &l) == 0 && l == layer)
			patch_in(&c->patch[i], data, rank, dims);
	}
	if (strcmp(name, "out") == 0)
		for (int i = 0; i < c->n_ablate; i++)
			if (c->ablate[i].layer == layer) {
				if (c->ablate[i].ref && (c->ablate[i].ref_T != dims[2] ||
							 c->ablate[i].ref_D != dims[3]))
					cli_die("--ablate %d.%d:mean=: the reference has "
						"T=%llu, this run T=%llu", layer,
						c->ablate[i].head,
						(unsigned long long)c->ablate[i].ref_T,
						(unsigned long long)dims[2]);
				knock_out(data, dims, c->ablate[i].head,
					  c->ablate[i].mean, c->ablate[i].ref);
			}
	for (int i = 0; i < c->n_spec; i++) {
		const capture_spec *s = &c->spec[i];
		if (strcmp(capture_names[s->name], name) == 0 && s->layer[layer]) {
			int rc = put(c, s, name, layer, data, rank, dims);
			if (rc)
				return rc;
		}
	}
	return 0;
}

const at_hook *capture_start(capture *c, int L, int H, int D, const at_fwd *e)
{
	int on_gpu = at_fwd_device(e) == AT_DEV_CUDA;
	for (int i = 0; i < c->n_ablate; i++)
		if (c->ablate[i].layer >= L || c->ablate[i].head >= H)
			cli_die("--ablate %d.%d: the model has %d layers of %d heads",
				c->ablate[i].layer, c->ablate[i].head, L, H);
	if (on_gpu && (c->n_ablate || c->n_patch))
		cli_die("--%s changes activations on the CPU only in this "
			"version: use --device cpu", c->n_ablate ? "ablate" : "patch");
	for (int i = 0; i < c->n_spec; i++) { /* a list names what exists */
		const capture_spec *s = &c->spec[i];
		for (int k = L; s->listed_layers && k < CAPTURE_INDICES; k++)
			if (s->layer[k])
				cli_die("--capture %s: layer %d: the model has %d "
					"layers (0..%d)", capture_names[s->name], k, L,
					L - 1);
		for (int k = H; s->listed_heads && k < CAPTURE_INDICES; k++)
			if (s->head[k])
				cli_die("--capture %s: head %d: the model has %d heads "
					"(0..%d)", capture_names[s->name], k, H, H - 1);
	}
	for (int i = 0; on_gpu && i < c->n_spec; i++)
		if (!AMONG(capture_names[c->spec[i].name], on_the_gpu))
			cli_die("--capture %s: the GPU engine does not report it in "
				"this version: use --device cpu",
				capture_names[c->spec[i].name]);
	c->L = L, c->H = H, c->D = D;
	c->hook = (at_hook){on_activation, c};
	return &c->hook;
}

void capture_to(capture *c, at_writer *w)
{
	c->w = w;
}

void capture_tag(capture *c, const char *key, const char *value)
{
	if (value)
		at_attr_set(&c->tag, key, value);
	else
		at_attr_del(&c->tag, key);
}
