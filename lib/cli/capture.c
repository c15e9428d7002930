/* capture.c - the hook of capture.h: captures written, heads knocked out
 * and activations patched as the engine computes them. */
#include "cli/capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ops/forward.h"

/* What the GPU engine reports in a decoding step. */
static const char *const gpu_decoding[] = {
	"embed", "ln1", "result", "y",  "xmid", "ln2",   "fc",
	"gelu",  "mlp", "x",      "lnf", "logits"};

/* The hook's name for an activation: x of layer -1 is the embedding. */
static const char *hook_name(const char *name, int layer)
{
	return layer < 0 && strcmp(name, "x") == 0 ? "embed" : name;
}

/* The positions --patch FILE@POSITIONS gave record i, or NULL. */
static const at_positions *patch_selection(const capture *c, int i)
{
	for (int f = c->n_patch_files - 1; f >= 0; f--)
		if (i >= c->patch_first[f])
			return c->patch_pos[f].n ? &c->patch_pos[f] : NULL;
	return NULL;
}

/* An activation as rows of X floats: [B,H,T,X] (H = 1 for [B,T,X]). */
typedef struct {
	size_t B, H, T, X;
} act_shape;

static act_shape shape_of(int rank, const uint64_t *dims)
{
	if (rank == 4)
		return (act_shape){dims[0], dims[1], dims[2], dims[3]};
	return (act_shape){dims[0], 1, dims[1], dims[2]};
}

/* "'NAME' of layer L head H" of a --patch record (one_head: its head
 * counts), for messages. */
static void record_label(const at_tensor *p, int one_head, char *buf,
			 size_t n)
{
	const char *layer = at_attr_get(&p->attrs, "layer");
	const char *head = one_head ? at_attr_get(&p->attrs, "head") : NULL;
	snprintf(buf, n, "'%s'%s%s%s%s", p->name, layer ? " of layer " : "",
		 layer ? layer : "", head ? " head " : "", head ? head : "");
}

/* The positions of record p along T (its `positions` attribute, parsed),
 * into *pos[0..T_rec), or *pos NULL for every one; -1 with the reason in
 * err where the attribute is bad or names other than T_rec positions. */
static int record_positions(const at_tensor *p, size_t T_rec, size_t **pos,
			    char *err, size_t errlen)
{
	*pos = NULL;
	const char *attr = at_attr_get(&p->attrs, "positions");
	if (!attr)
		return 0;
	at_positions ps;
	char label[300];
	record_label(p, 0, label, sizeof label);
	if (at_positions_parse(attr, strlen(attr), CAPTURE_MAX_POSITION, &ps) < 0) {
		snprintf(err, errlen, "%s: bad positions attribute '%s'", label,
			 attr);
		return -1;
	}
	uint64_t n = at_positions_count(&ps);
	if (n != T_rec) {
		snprintf(err, errlen, "%s: its positions attribute '%s' names "
			 "%llu positions, its data has %zu", label, attr,
			 (unsigned long long)n, T_rec);
		return -1;
	}
	size_t *at = malloc((T_rec + 1) * sizeof *at);
	if (!at)
		cli_die("out of memory");
	size_t i = 0;
	for (int r = 0; r < ps.n; r++)
		for (long t = ps.lo[r]; t <= ps.hi[r]; t++)
			at[i++] = (size_t)t;
	*pos = at;
	return 0;
}

int capture_patch(const at_tensor *p, const at_positions *sel, float *data,
		  int rank, const uint64_t *dims, char *err, size_t errlen)
{
	long head = -1;
	at_attr_long(&p->attrs, "head", &head);
	int one_head = head >= 0 && rank == 4;
	act_shape run = shape_of(rank, dims), rec = shape_of(p->rank, p->dims);
	size_t *pos = NULL;
	if (p->rank == rank && record_positions(p, rec.T, &pos, err, errlen) < 0)
		return -1;
	int same = p->rank == rank && rec.B == run.B && rec.X == run.X &&
		rec.H == (one_head ? 1 : run.H) && (pos || rec.T == run.T) &&
		(!one_head || (uint64_t)head < run.H);
	for (size_t r = 0; same && pos && r < rec.T; r++)
		same = pos[r] < run.T;
	if (!same) {
		char want[128], got[128], label[300];
		at_shape_str(rank, dims, want, sizeof want);
		at_shape_str(p->rank, p->dims, got, sizeof got);
		record_label(p, one_head, label, sizeof label);
		const char *at = at_attr_get(&p->attrs, "positions");
		snprintf(err, errlen, "%s%s%s is %s, but this run's is %s", label,
			 at ? " at positions " : "", at ? at : "", got, want);
		free(pos);
		return -1;
	}
	for (size_t b = 0; b < rec.B; b++)
		for (size_t h = 0; h < rec.H; h++) {
			size_t to_h = one_head ? (size_t)head : h;
			const float *src = (const float *)p->data +
				(b * rec.H + h) * rec.T * rec.X;
			float *dst = data + (b * run.H + to_h) * run.T * run.X;
			for (size_t r = 0; r < rec.T; r++) {
				size_t t = pos ? pos[r] : r;
				if (!sel || at_positions_has(sel, t))
					memcpy(dst + t * run.X, src + r * rec.X,
					       rec.X * sizeof *dst);
			}
		}
	free(pos);
	return 0;
}

/* Head h of a [B,H,T,X] activation zeroed, set to its mean over b, or
 * to ref [T,X] (a reference run's mean), at the positions of sel. */
static void knock_out(float *data, const uint64_t *dims, int h, int mean,
		      const float *ref, const at_positions *sel)
{
	size_t B = dims[0], H = dims[1], T = dims[2], X = dims[3];
	for (size_t t = 0; t < T; t++) {
		if (!at_positions_has(sel, t))
			continue;
		for (size_t i = t * X; i < (t + 1) * X; i++) {
			double sum = 0.0;
			for (size_t b = 0; mean && !ref && b < B; b++)
				sum += data[(b * H + h) * T * X + i];
			float v = ref ? ref[i] : mean ? (float)(sum / (double)B) : 0.0f;
			for (size_t b = 0; b < B; b++)
				data[(b * H + h) * T * X + i] = v;
		}
	}
}

/* The positions of sel below T written as ranges into buf; how many. */
static size_t positions_attr(const at_positions *sel, size_t T,
			     char *buf, size_t len)
{
	size_t n = 0, at = 0;
	buf[0] = '\0';
	for (size_t t = 0; t < T; t++) {
		if (!at_positions_has(sel, t))
			continue;
		size_t end = t;
		while (end + 1 < T && at_positions_has(sel, end + 1))
			end++;
		int w = end > t ? snprintf(buf + at, len - at, "%s%zu-%zu",
					   at ? "," : "", t, end)
				: snprintf(buf + at, len - at, "%s%zu",
					   at ? "," : "", t);
		if (w < 0 || (size_t)w >= len - at)
			cli_die("--capture: the positions %s... are too long a list "
				"for the record's attribute", buf);
		at += (size_t)w;
		n += end - t + 1;
		t = end;
	}
	return n;
}

/* Writes activation `name` of layer as one record, or, for heads, one
 * record of each head [B,1,T,X]; only spec s's positions. */
static int put(capture *c, const capture_spec *s, const char *name, int layer,
	       const float *data, int rank, const uint64_t *dims)
{
	at_tensor t;
	at_fwd_activation_header(&t, name, layer, c->H, c->D, rank, dims);
	at_attr_set(&t.attrs, "captured", "1"); /* what --patch takes */
	for (int i = 0; i < c->tag.n; i++)
		at_attr_set(&t.attrs, c->tag.key[i], c->tag.value[i]);
	act_shape a = shape_of(rank, dims);
	size_t P = a.T;
	if (s->pos.n) {
		char list[AT_MAX_VALUE];
		if (!(P = positions_attr(&s->pos, a.T, list, sizeof list)))
			return 0; /* none of them in this pass */
		at_attr_set(&t.attrs, "positions", list);
		t.dims[rank - 2] = P;
	}
	if (!s->heads_given && !s->pos.n) {
		t.data = (void *)data;
		return at_write_tensor(c->w, &t) < 0 ? 1 : 0;
	}
	size_t heads = s->heads_given ? 1 : a.H;
	if (s->heads_given)
		t.dims[1] = 1;
	float *part = malloc(a.B * heads * P * a.X * sizeof *part + 1);
	if (!part)
		cli_die("out of memory");
	t.data = part;
	int rc = 0;
	for (size_t h0 = 0; h0 < a.H && !rc; h0 += heads) {
		if (s->heads_given && (h0 >= CAPTURE_INDICES || !s->head[h0]))
			continue;
		float *to = part;
		for (size_t b = 0; b < a.B; b++)
			for (size_t h = h0; h < h0 + heads; h++)
				for (size_t tt = 0; tt < a.T; tt++)
					if (at_positions_has(&s->pos, tt)) {
						memcpy(to, data + ((b * a.H + h) * a.T + tt) * a.X,
						       a.X * sizeof *to);
						to += a.X;
					}
		if (s->heads_given)
			at_attr_setf(&t.attrs, "head", "%zu", h0);
		rc = at_write_tensor(c->w, &t) < 0 ? 1 : 0;
	}
	free(part);
	return rc;
}

/* Whether patch record p is for activation name of layer. */
static int patch_for(const at_tensor *p, const char *name, int layer)
{
	long l;
	if (strcmp(p->name, name) != 0)
		return 0;
	if (capture_of_the_model(name))
		return 1;
	return at_attr_long(&p->attrs, "layer", &l) == 0 && l == layer;
}

/* What the options need of an activation. */
static int own_wants(capture *c, const char *name, int layer)
{
	name = hook_name(name, layer);
	if (layer >= CAPTURE_INDICES)
		return AT_HOOK_SKIP;
	for (int i = 0; i < c->n_patch; i++)
		if (patch_for(&c->patch[i], name, layer))
			return AT_HOOK_WRITE;
	for (int i = 0; strcmp(name, "out") == 0 && i < c->n_ablate; i++)
		if (c->ablate[i].layer == layer)
			return AT_HOOK_WRITE;
	for (int i = 0; i < c->n_spec; i++)
		if (strcmp(capture_names[c->spec[i].name], name) == 0 &&
		    (layer < 0 || c->spec[i].layer[layer]))
			return AT_HOOK_READ;
	return AT_HOOK_SKIP;
}

static int capture_wants(void *ctx, const char *name, int layer)
{
	capture *c = ctx;
	int next = at_hook_wants(c->next, name, layer), own = own_wants(c, name,
									layer);
	return next > own ? next : own;
}

/* The options' work on one activation (its hook name). */
static int intervene(capture *c, const char *name, int layer, float *data,
		     int rank, const uint64_t *dims)
{
	if (layer >= CAPTURE_INDICES || (layer < 0 && !capture_of_the_model(name)))
		return 0;
	if (strcmp(name, "out") == 0)
		for (int i = 0; i < c->n_ablate; i++)
			if (c->ablate[i].layer == layer) {
				if (c->ablate[i].ref && (c->ablate[i].ref_T != dims[2] ||
							 c->ablate[i].ref_D != dims[3]))
					cli_die("--ablate %d.%d:mean=%s: the reference's "
						"mean is [T,D] [%llu,%llu], this run's "
						"out [%llu,%llu]", layer,
						c->ablate[i].head, c->ablate[i].ref_path,
						(unsigned long long)c->ablate[i].ref_T,
						(unsigned long long)c->ablate[i].ref_D,
						(unsigned long long)dims[2],
						(unsigned long long)dims[3]);
				knock_out(data, dims, c->ablate[i].head,
					  c->ablate[i].mean, c->ablate[i].ref,
					  &c->ablate[i].pos);
			}
	for (int i = 0; i < c->n_patch; i++) /* after: a patch restores */
		if (patch_for(&c->patch[i], name, layer)) {
			char err[512];
			if (capture_patch(&c->patch[i], patch_selection(c, i),
					  data, rank, dims, err, sizeof err) < 0)
				cli_die("--patch: %s", err);
		}
	for (int i = 0; i < c->n_spec; i++) {
		const capture_spec *s = &c->spec[i];
		if (strcmp(capture_names[s->name], name) == 0 &&
		    (layer < 0 || s->layer[layer])) {
			int rc = put(c, s, name, layer, data, rank, dims);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The options' work, then the tool's own hook, under the engine's name. */
static int on_activation(void *ctx, const char *name, int layer, float *data,
			 int rank, const uint64_t *dims)
{
	capture *c = ctx;
	int rc = intervene(c, hook_name(name, layer), layer, data, rank, dims);
	if (rc || !c->next || at_hook_wants(c->next, name, layer) == AT_HOOK_SKIP)
		return rc;
	return c->next->fn(c->next->ctx, name, layer, data, rank, dims);
}

/* The options and the --patch records against a model of L layers and H
 * heads, ending the program on a mismatch (capture_start's checks that
 * need no engine). */
static void check_model(const capture *c, int L, int H)
{
	for (int i = 0; i < c->n_ablate; i++)
		if (c->ablate[i].layer >= L || c->ablate[i].head >= H)
			cli_die("--ablate %d.%d: the model has %d layers of %d heads",
				c->ablate[i].layer, c->ablate[i].head, L, H);
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
		/* these two are the command line's own misuse */
		if (c->blocks_only && capture_of_the_model(capture_names[s->name]))
			cli_usage_error("--capture %s: andrea-block runs no embedding or "
				"head (capture it in andrea-generate)",
				capture_names[s->name]);
		if (c->decoding && s->pos.n)
			cli_usage_error("--capture %s@...: positions count within a pass, "
				"and a decoding step is a pass of one; capture "
				"every position and cut the records apart",
				capture_names[s->name]);
	}
	for (int i = 0; i < c->n_patch; i++) { /* what a patch would miss */
		const at_tensor *p = &c->patch[i];
		long l;
		if (capture_of_the_model(p->name)) {
			if (c->blocks_only)
				cli_die("--patch: '%s': andrea-block runs no "
					"embedding or head", p->name);
		} else if (at_attr_long(&p->attrs, "layer", &l) == 0 &&
			   (l < 0 || l >= L)) {
			cli_die("--patch: '%s' of layer %ld: the model has %d "
				"layers (0..%d)", p->name, l, L, L - 1);
		}
	}
}

const at_hook *capture_start(capture *c, int L, int H, int D, const at_fwd *e,
			     const at_hook *next)
{
	check_model(c, L, H);
	int on_gpu = at_fwd_device(e) == AT_DEV_CUDA;
	for (int i = 0; i < c->n_spec; i++) {
		const capture_spec *s = &c->spec[i];
		if (on_gpu && c->decoding &&
		    !CAPTURE_AMONG(capture_names[s->name], gpu_decoding))
			cli_die("--capture %s: the GPU engine reports q, k, v, "
				"scores, attn and out of whole passes, not of "
				"generation's, in this version: use --device cpu",
				capture_names[s->name]);
	}
	c->L = L, c->H = H, c->D = D;
	c->next = next;
	c->hook = (at_hook){.fn = on_activation, .wants = capture_wants, .ctx = c};
	return &c->hook;
}

void capture_check_run(const capture *c, const unsigned char *run, int L,
		       int H)
{
	check_model(c, L, H);
	for (int i = 0; i < c->n_ablate; i++)
		if (c->ablate[i].layer < L && !run[c->ablate[i].layer])
			cli_die("--ablate %d.%d: layer %d is not among the blocks "
				"-l runs", c->ablate[i].layer, c->ablate[i].head,
				c->ablate[i].layer);
	for (int i = 0; i < c->n_spec; i++)
		for (int k = 0; c->spec[i].listed_layers && k < L &&
				k < CAPTURE_INDICES; k++)
			if (c->spec[i].layer[k] && !run[k])
				cli_die("--capture %s: layer %d is not among the "
					"blocks -l runs",
					capture_names[c->spec[i].name], k);
	for (int i = 0; i < c->n_patch; i++) {
		long l;
		const at_tensor *p = &c->patch[i];
		if (at_attr_long(&p->attrs, "layer", &l) == 0 && l >= 0 &&
		    l < L && !run[l])
			cli_die("--patch: '%s' of layer %ld: the layer is not "
				"among the blocks -l runs", p->name, l);
	}
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
