/* capture_opts.c - the options of capture.h parsed: --capture with its
 * selectors, --ablate, and --patch with the captures it reads. */
#include "cli/capture.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

const char *const capture_names[] = {
	"embed", "ln1",  "q",   "k",    "v",   "scores", "attn", "out",
	"result", "y",   "xmid", "ln2", "fc",  "gelu",   "mlp",  "x",
	"lnf",   "logits", NULL};

/* The names of [B,H,T,*] tensors, which --capture may cut by head; those
 * of the model rather than of a layer. */
static const char *const per_head[] = {"q",    "k",   "v",     "scores",
				       "attn", "out", "result"};
static const char *const of_the_model[] = {"embed", "lnf", "logits"};
int capture_among(const char *name, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(name, set[i]) == 0)
			return 1;
	return 0;
}

int capture_of_the_model(const char *name)
{
	return CAPTURE_AMONG(name, of_the_model);
}

/* Where a list of n items ends: at its first ':' or '@' (or the end). */
static size_t list_len(const char *s)
{
	return strcspn(s, ":@");
}

/* "3", "0-2,5", "all" of s[0..len) into the set (all: every index); 1
 * for a list of indices, 0 for all, -1 for bad syntax. */
static int parse_list(const char *s, size_t len, unsigned char *set)
{
	if (len == 3 && strncmp(s, "all", 3) == 0) {
		memset(set, 1, CAPTURE_INDICES);
		return 0;
	}
	at_positions ps;
	if (at_positions_parse(s, len, CAPTURE_INDICES - 1, &ps) < 0)
		return -1;
	for (int r = 0; r < ps.n; r++)
		memset(set + ps.lo[r], 1, (size_t)(ps.hi[r] - ps.lo[r] + 1));
	return 1;
}

/* "@POSITIONS" at s (or nothing) into ps: the rest of s after it. */
static const char *positions_opt(const char *s, at_positions *ps,
				 const char *what, const char *arg)
{
	ps->n = 0;
	if (*s != '@')
		return s;
	size_t len = list_len(s + 1);
	if (at_positions_parse(s + 1, len, CAPTURE_MAX_POSITION, ps) < 0)
		cli_usage_error("%s '%s': expected @POSITIONS like @5, @0-3,7 (at "
				"most %d ranges, 100 characters)", what, arg,
				AT_POSITION_RANGES);
	return s + 1 + len;
}

void capture_opt(void *ctx, const char *arg, const char *what)
{
	capture *c = ctx;
	if (c->n_spec == CAPTURE_MAX)
		cli_usage_error("%s: more than %d of them", what, CAPTURE_MAX);
	capture_spec *s = &c->spec[c->n_spec];
	memset(s, 0, sizeof *s);
	size_t nlen = list_len(arg);
	s->name = -1;
	for (int i = 0; capture_names[i]; i++)
		if (strlen(capture_names[i]) == nlen &&
		    strncmp(arg, capture_names[i], nlen) == 0)
			s->name = i;
	if (s->name < 0)
		cli_usage_error("%s '%s': no activation of that name (embed, ln1, "
				"q, k, v, scores, attn, out, result, y, xmid, ln2, "
				"fc, gelu, mlp, x, lnf, logits)", what, arg);
	const char *name = capture_names[s->name], *p = arg + nlen;
	parse_list("all", 3, s->layer);
	if (*p == ':') { /* LAYERS */
		size_t len = list_len(p + 1);
		if (capture_of_the_model(name))
			cli_usage_error("%s '%s': %s is the model's, not a layer's: "
					"give no layers", what, arg, name);
		memset(s->layer, 0, sizeof s->layer);
		if ((s->listed_layers = parse_list(p + 1, len, s->layer)) < 0)
			cli_usage_error("%s '%s': expected NAME[:LAYERS[:HEADS]]"
					"[@POSITIONS], each list like 3, 0-2,5 "
					"or all", what, arg);
		p += 1 + len;
	}
	if (*p == ':') { /* HEADS */
		size_t len = list_len(p + 1);
		if (!CAPTURE_AMONG(name, per_head))
			cli_usage_error("%s '%s': %s has no heads to pick (only q, "
					"k, v, scores, attn, out and result have)",
					what, arg, name);
		if ((s->listed_heads = parse_list(p + 1, len, s->head)) < 0)
			cli_usage_error("%s '%s': expected NAME[:LAYERS[:HEADS]]"
					"[@POSITIONS], each list like 3, 0-2,5 "
					"or all", what, arg);
		s->heads_given = 1;
		p += 1 + len;
	}
	p = positions_opt(p, &s->pos, what, arg);
	if (*p)
		cli_usage_error("%s '%s': expected NAME[:LAYERS[:HEADS]][@POSITIONS]",
				what, arg);
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

int capture_is_record(const at_header *h)
{
	long layer;
	const char *captured = at_attr_get(&h->attrs, "captured");
	return name_index(h->name) >= 0 && h->dtype == AT_F32 && captured &&
	       strcmp(captured, "1") == 0 &&
	       (capture_of_the_model(h->name) ||
		at_attr_long(&h->attrs, "layer", &layer) == 0);
}

int capture_read_records(at_reader *r, at_tensor **list, int *n)
{
	at_header h;
	int rc, kept = 0;
	while ((rc = at_read_header(r, &h)) == 1) {
		if (!capture_is_record(&h)) {
			if (at_skip_payload(r, &h) < 0)
				return -1;
			continue; /* the tokens, the output x: not captures */
		}
		at_tensor *grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
		if (!grown)
			cli_die("out of memory");
		*list = grown;
		if (at_read_payload(r, &h, &grown[*n]) < 0)
			return -1;
		(*n)++;
		kept++;
	}
	return rc < 0 ? -1 : kept;
}

/* Appends the captures of the file at path to *list (capture_read_records),
 * ending the program where it has none; how many. */
static int read_captures(const char *path, const char *what, at_tensor **list,
			 int *n)
{
	if (strcmp(path, "-") == 0)
		cli_usage_error("%s -: standard input carries the stream to run; "
				"give the captures as a file", what);
	cli_common none = {0};
	cli_env_read_opts(&none.ropts);
	at_reader r;
	cli_open_input(&none, &r, path);
	int kept = capture_read_records(&r, list, n);
	if (kept < 0)
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
	if (c->n_patch_files == CAPTURE_MAX)
		cli_usage_error("%s: more than %d of them", what, CAPTURE_MAX);
	/* FILE[@POSITIONS]: the last '@' that starts a list of positions */
	const char *at = strrchr(arg, '@');
	at_positions sel = {0};
	char *path = strdup(arg);
	if (!path)
		cli_die("out of memory");
	/* a file of that whole name is that file */
	if (at && at[1] && access(arg, F_OK) != 0 &&
	    at_positions_parse(at + 1, strlen(at + 1), CAPTURE_MAX_POSITION, &sel) == 0)
		path[at - arg] = '\0';
	else
		sel.n = 0;
	int first = c->n_patch;
	read_captures(path, what, &c->patch, &c->n_patch);
	free(path);
	c->patch_pos[c->n_patch_files] = sel;
	c->patch_first[c->n_patch_files++] = first;
}

int capture_reference_mean(const at_tensor *list, int n, int l, int h,
			   float **ref, uint64_t *T, uint64_t *D)
{
	const at_tensor *t = NULL;
	uint64_t hh = 0;
	for (int i = 0; i < n && !t; i++) {
		long layer, head = -1;
		if (strcmp(list[i].name, "out") != 0 || list[i].rank != 4 ||
		    at_numel(&list[i]) == 0 ||
		    at_attr_long(&list[i].attrs, "layer", &layer) != 0 ||
		    layer != l || at_attr_get(&list[i].attrs, "positions"))
			continue;
		/* one head's record is [B,1,T,D]; else head h of [B,H,T,D] */
		at_attr_long(&list[i].attrs, "head", &head);
		if (head >= 0 ? head != h || list[i].dims[1] != 1
			      : list[i].dims[1] <= (uint64_t)h)
			continue;
		t = &list[i];
		hh = head >= 0 ? 0 : (uint64_t)h;
	}
	if (!t)
		return -1;
	uint64_t B = t->dims[0], H = t->dims[1], TD = t->dims[2] * t->dims[3];
	float *mean = malloc(TD * sizeof *mean + 1);
	if (!mean)
		cli_die("out of memory");
	for (uint64_t i = 0; i < TD; i++) {
		double sum = 0.0;
		for (uint64_t b = 0; b < B; b++)
			sum += ((const float *)t->data)[(b * H + hh) * TD + i];
		mean[i] = (float)(sum / (double)B);
	}
	*ref = mean;
	*T = t->dims[2];
	*D = t->dims[3];
	return 0;
}

/* --ablate L.H:mean=FILE: capture_reference_mean of the captures of path
 * into ablation a. */
static void reference_mean(capture *c, int a, const char *path,
			   const char *what)
{
	at_tensor *list = NULL;
	int n = 0, l = c->ablate[a].layer, h = c->ablate[a].head;
	read_captures(path, what, &list, &n);
	if (capture_reference_mean(list, n, l, h, &c->ablate[a].ref,
				   &c->ablate[a].ref_T, &c->ablate[a].ref_D) < 0)
		cli_die("%s %d.%d:mean=%s: no capture of out for layer %d head %d "
			"at every position in it", what, l, h, path, l, h);
	for (int i = 0; i < n; i++)
		at_tensor_free(&list[i]);
	free(list);
}

void ablate_opt(void *ctx, const char *arg, const char *what)
{
	capture *c = ctx;
	if (c->n_ablate == CAPTURE_MAX)
		cli_usage_error("%s: more than %d of them", what, CAPTURE_MAX);
	int a = c->n_ablate;
	char *p, *q;
	long l = strtol(arg, &p, 10), h = -1;
	if (p != arg && *p == '.')
		h = strtol(p + 1, &q, 10);
	else
		q = p;
	int bad = p == arg || l < 0 || h < 0 || q == p + 1 ||
		l >= CAPTURE_INDICES || h >= CAPTURE_INDICES;
	const char *rest = bad ? q : positions_opt(q, &c->ablate[a].pos, what, arg);
	int mean = strcmp(rest, ":mean") == 0, from = strncmp(rest, ":mean=", 6) == 0;
	if (bad || (*rest && !mean && !(from && rest[6])))
		cli_usage_error("%s '%s': expected LAYER.HEAD[@POSITIONS], "
				"optionally followed by :mean or :mean=FILE",
				what, arg);
	c->n_ablate++;
	c->ablate[a].layer = (int)l;
	c->ablate[a].head = (int)h;
	c->ablate[a].mean = mean || from;
	c->ablate[a].ref = NULL;
	c->ablate[a].ref_path = from ? rest + 6 : NULL;
	if (from)
		reference_mean(c, a, rest + 6, what);
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

