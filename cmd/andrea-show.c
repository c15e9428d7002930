/* andrea-show - print the records of andrea streams as text.
 *
 * By default one summary line per record (shape, attributes, finite
 * min/max/mean/std, NaN and inf counts); -p prints the values as NumPy
 * prints arrays; --ascii draws a 2-D slice as shaded text; --png draws it
 * as an image (--labels: its rows and columns named by the text of the
 * stream's last `tokens` record before it, through the model's
 * tokenizer).  Records are shown as they arrive, and stdout is flushed
 * after each one, so a later bad record leaves the earlier ones printed.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "core/atomic_file.h"
#include "view/heatmap.h"
#include "view/labels.h"
#include "view/npprint.h"
#include "view/record.h"

#include "help/andrea-show.h" /* usage: the --help text */

typedef enum { SHOW_SUMMARY, SHOW_PRINT, SHOW_ASCII, SHOW_PNG } show_mode;

typedef struct {
	show_mode mode;
	int full;
	const char *png;
	const char *name;
	const char *select_text; /* NULL: index 0 of every leading axis */
	uint64_t sel[AT_MAX_RANK];
	int nsel;
	int columns;             /* terminal width for --ascii */
	int labels;              /* --labels */
	long layer, head; /* --layer, --head: attribute values; -1: any */
	long index;              /* --index: the record number; 0: any */
	at_tokenizer *tok;       /* --labels: the model's */
	at_tensor tokens;        /* --labels: the last tokens record */
	int grid;                /* --grid: every map along the next axis */
	int shade_set;           /* --shade given, else by the record */
	hm_shade shade;
	int ranged;              /* --range given */
	double range[2];
	char where[4400];        /* "INPUT: record N 'name'" being drawn */
} show_opts;

#define ASCII_MAX_ROWS 64

/* Width of the terminal for --ascii: $COLUMNS when it is a positive
 * number, else 80. */
static int term_columns(void)
{
	const char *s = getenv("COLUMNS");
	if (s && *s) {
		char *end;
		long v = strtol(s, &end, 10);
		if (!*end && v > 0 && v < 100000)
			return (int)v;
	}
	return 80;
}

/* Writes the selection as "I,J,..." ("-" when there is none). */
static void sel_str(const uint64_t *sel, int n, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	if (!n)
		snprintf(buf, len, "-");
	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? "," : "",
				      (unsigned long long)sel[i]);
}

/* The selection for a record of this rank: --select, or zeros (with
 * --grid one index fewer: the grid runs along the next axis). */
static const uint64_t *record_sel(const show_opts *o, int rank, int *n)
{
	static const uint64_t zeros[AT_MAX_RANK];
	if (o->select_text) {
		*n = o->nsel;
		return o->sel;
	}
	*n = hm_leading(rank) - (o->grid && hm_leading(rank) > 0);
	return zeros;
}

/* Checks the selection against a header before its payload is read. */
static void check_select(const show_opts *o, const at_reader *r,
			 const at_header *h)
{
	int n;
	const uint64_t *given = record_sel(o, h->rank, &n);
	char err[128], s[AT_MAX_RANK * 21 + 2];
	uint64_t sel[AT_MAX_RANK + 1] = {0};
	memcpy(sel, given, (size_t)n * sizeof *sel);
	if (o->grid && hm_leading(h->rank) == 0)
		cli_die("%s: record %d '%s': --grid needs a record of 3 axes or "
			"more (maps along an axis)", r->label, h->index, h->name);
	int lead = hm_leading(h->rank);
	if (o->grid && n + 1 != lead) {
		char shape[AT_MAX_RANK * 21 + 3];
		at_shape_str(h->rank, h->dims, shape, sizeof shape);
		cli_die("%s: record %d '%s': --select with --grid takes %d "
			"ind%s for shape %s, one fewer than its %d leading "
			"ax%s (the grid runs along the next), not %d", r->label,
			h->index, h->name, lead - 1, lead - 1 == 1 ? "ex" : "ices",
			shape, lead, lead == 1 ? "is" : "es", n);
	}
	if (o->grid && h->dims[n] > HM_MAX_PANELS)
		cli_die("%s: record %d '%s': --grid draws at most %d maps, and "
			"axis %d has %llu (--select fixes more axes)", r->label,
			h->index, h->name, HM_MAX_PANELS, n,
			(unsigned long long)h->dims[n]);
	if (hm_check_select(h->rank, h->dims, sel, n + o->grid, err,
			    sizeof err) == 0)
		return;
	char shape[AT_MAX_RANK * 21 + 3];
	at_shape_str(h->rank, h->dims, shape, sizeof shape);
	sel_str(sel, n, s, sizeof s);
	cli_die("%s: record %d '%s': %s %s does not fit shape %s: %s", r->label,
		h->index, h->name, o->select_text ? "--select" : "selection",
		s, shape, err);
}

/* Whether attribute key is the number want (want < 0: any record). */
static int attr_is(const at_attrs *a, const char *key, long want)
{
	long v;
	return want < 0 || (at_attr_long(a, key, &v) == 0 && v == want);
}

/* With --labels, the tokens naming the rows and, where they are keys,
 * the columns of batch row b's map s of t, in *rows and *cols (NULL where
 * none), those past the positions the map draws (s's valid: its own
 * `lengths`) unnamed, as those past the tokens' own; ascii for the PNG's
 * font. */
static hm_labels map_labels(const show_opts *o, const at_tensor *t,
			    uint64_t b, const hm_slice *s, int ascii)
{
	char **r = NULL, **c = NULL;
	if (o->labels &&
	    (hm_token_labels(o->tok, &o->tokens, b, s->rows, ascii, &r) < 0 ||
	     (hm_has_keys(t) &&
	      hm_token_labels(o->tok, &o->tokens, b, s->cols, ascii, &c) < 0)))
		cli_die("out of memory");
	for (uint64_t i = s->valid; r && s->valid && i < s->rows; i++)
		r[i] = "";
	for (uint64_t i = s->valid; c && s->valid && i < s->cols; i++)
		c[i] = "";
	return (hm_labels){(const char *const *)r, (const char *const *)c};
}

/* The batch row whose tokens name the maps of t (sel, n indices, then
 * with --grid the grid's axis): the index of its hm_row_axis, 0 for a
 * record of fewer than 3 axes; -1 where the grid runs along the rows (a
 * row a panel, and no one row's labels). */
static int64_t batch_row(const show_opts *o, const at_tensor *t,
			 const uint64_t *sel, int n)
{
	int a = hm_row_axis(t);
	if (t->rank < 3)
		return 0;
	return o->grid && a == n ? -1 : (int64_t)sel[a];
}

/* The scale a record is drawn on: --shade, else its own. */
static hm_shade record_shade(const show_opts *o, const at_tensor *t)
{
	return o->shade_set ? o->shade : hm_record_shade(t);
}

/* The maps of t to draw together (one, or --grid's) into maps; returns
 * their count. */
static int record_maps(const show_opts *o, const at_tensor *t, hm_slice *maps)
{
	int n;
	const uint64_t *sel = record_sel(o, t->rank, &n);
	char err[160];
	int count = hm_record_maps(t, sel, n, o->grid, record_shade(o, t),
				   o->ranged ? o->range : NULL, maps, err,
				   sizeof err);
	if (count < 0)
		cli_die("%s: %s (--shade, --range)", o->where, err);
	return count;
}

/* The --ascii header line and map of one record. */
static void show_ascii(const show_opts *o, const at_tensor *t)
{
	int n;
	const uint64_t *sel = record_sel(o, t->rank, &n);
	hm_slice s;
	record_maps(o, t, &s);
	hm_labels lab = map_labels(o, t, (uint64_t)batch_row(o, t, sel, n), &s,
				   0);
	uint64_t bh, bw;
	hm_blocks(s.rows, s.cols, ASCII_MAX_ROWS, (uint64_t)o->columns, &bh,
		  &bw);
	char ss[AT_MAX_RANK * 21 + 2], lo[64] = "-", hi[64] = "-";
	sel_str(sel, n, ss, sizeof ss);
	if (s.any_finite) {
		rec_value(t->dtype, s.lo, lo, sizeof lo);
		rec_value(t->dtype, s.hi, hi, sizeof hi);
	}
	rec_head(stdout, t);
	printf(" select=%s map=%llux%llu min=%s max=%s", ss,
	       (unsigned long long)s.rows, (unsigned long long)s.cols, lo, hi);
	if (s.shade != HM_SHADE_LINEAR)
		printf(" shade=%s", hm_shade_name(s.shade));
	if (bh > 1 || bw > 1)
		printf(" downsampled=%llux%llu blocks=%llux%llu",
		       (unsigned long long)((s.rows + bh - 1) / bh),
		       (unsigned long long)((s.cols + bw - 1) / bw),
		       (unsigned long long)bh, (unsigned long long)bw);
	rec_attrs(stdout, t);
	putchar('\n');
	hm_ascii(stdout, &s, bh, bw, &lab);
	free((void *)lab.row);
	free((void *)lab.col);
}

/* The figure's words for t: its title (in title) and axis names (in
 * axes, two of 32 bytes). */
static hm_figure figure_words(const show_opts *o, const at_tensor *t,
			      char *title, size_t len, char axes[2][32])
{
	int n;
	const uint64_t *sel = record_sel(o, t->rank, &n);
	char shape[AT_MAX_RANK * 21 + 3], ss[AT_MAX_RANK * 21 + 2];
	at_shape_str(t->rank, t->dims, shape, sizeof shape);
	sel_str(sel, n, ss, sizeof ss);
	size_t at = (size_t)snprintf(title, len, "%s %s select=%s%s", t->name,
				     shape, ss, o->grid ? " (grid)" : "");
	static const char *const keys[] = {"layer", "head", "norm", "scale",
					   "mask", "fill", "token", "versus",
					   "answer", "wrong", "sweep"};
	for (size_t k = 0; k < sizeof keys / sizeof keys[0] && at < len; k++) {
		const char *v = at_attr_get(&t->attrs, keys[k]);
		if (v)
			at += (size_t)snprintf(title + at, len - at, " %s=%s",
					       keys[k], v);
	}
	if (at < len)
		snprintf(title + at, len - at, "  shade: %s",
			 hm_shade_name(record_shade(o, t)));
	int qk = hm_has_keys(t);
	int x = t->rank > 0 ? t->rank - 1 : 0, y = t->rank > 1 ? t->rank - 2 : 0;
	if (!hm_axis_name(t, x, axes[0], 32))
		snprintf(axes[0], 32, qk ? "key position j" : "axis %d", x);
	if (!hm_axis_name(t, y, axes[1], 32))
		snprintf(axes[1], 32, qk ? "query position i" : "axis %d", y);
	/* a 1-D record is one row, and a scalar one cell: no axis to name */
	if (t->rank < 2)
		axes[1][0] = '\0';
	if (t->rank < 1)
		axes[0][0] = '\0';
	return (hm_figure){title, axes[0], axes[1], NULL};
}

/* The figure into the file o->png, whole or not at all. */
static void write_png_file(const show_opts *o, const hm_slice *const *ptr,
			   const char *const *cap, int count,
			   const hm_figure *fig)
{
	char err[256];
	at_afile a;
	if (at_afile_open(&a, o->png) < 0)
		cli_die("%s: %s", o->png, strerror(errno));
	if (hm_png(a.f, ptr, cap, count, fig, err, sizeof err) < 0) {
		at_afile_abort(&a);
		cli_die("%s: %s", o->png, err);
	}
	if (at_afile_commit(&a, err, sizeof err) < 0)
		cli_die("%s: %s", o->png, err);
}

/* Draws the one record kept for --png into o->png ("-": stdout). */
static void write_png(const show_opts *o, const at_tensor *t)
{
	static hm_slice maps[HM_MAX_PANELS];
	int count = record_maps(o, t, maps);
	if (maps[0].rows == 0 || maps[0].cols == 0)
		cli_die("%s: an empty slice, nothing to draw", o->where);
	const hm_slice *ptr[HM_MAX_PANELS];
	char caption[HM_MAX_PANELS][48], along[32];
	const char *cap[HM_MAX_PANELS];
	int n;
	const uint64_t *sel = record_sel(o, t->rank, &n);
	/* the grid's axis by its name; [B,H,T,T] of a stage (which records
	 * n_head): its heads */
	if (!o->grid || !hm_axis_name(t, n, along, sizeof along))
		snprintf(along, sizeof along, "%s", t->rank == 4 && n == 1 &&
			 at_attr_get(&t->attrs, "n_head") ? "head" : "index");
	for (int i = 0; i < count; i++) {
		ptr[i] = &maps[i];
		snprintf(caption[i], sizeof caption[i], "%s %d", along, i);
		cap[i] = caption[i];
	}
	char title[AT_MAX_ATTR_BYTES + 200], axes[2][32];
	hm_figure fig = figure_words(o, t, title, sizeof title, axes);
	int64_t b = batch_row(o, t, sel, n);
	hm_labels lab = b < 0 ? (hm_labels){NULL, NULL} :
		       map_labels(o, t, (uint64_t)b, &maps[0], 1);
	fig.lab = &lab;
	int to_stdout = strcmp(o->png, "-") == 0;
	if (to_stdout && isatty(STDOUT_FILENO))
		cli_die("refusing to write a PNG to a terminal (redirect it)");
	char err[256];
	if (to_stdout) {
		if (hm_png(stdout, ptr, cap, count, &fig, err, sizeof err) < 0)
			cli_die("<stdout>: %s", err);
		cli_finish_text();
	} else {
		write_png_file(o, ptr, cap, count, &fig);
	}
	free((void *)lab.row);
	free((void *)lab.col);
}

/* --shade linear|sqrt|log|signed into the show_opts at ctx. */
static void shade_opt(void *ctx, const char *arg, const char *what)
{
	show_opts *o = ctx;
	const char *names[HM_SHADES];
	for (int i = 0; i < HM_SHADES; i++)
		names[i] = hm_shade_name((hm_shade)i);
	o->shade = (hm_shade)cli_choice(arg, names, HM_SHADES, what);
	o->shade_set = 1;
}

/* --range LO,HI into the show_opts at ctx. */
static void range_opt(void *ctx, const char *arg, const char *what)
{
	show_opts *o = ctx;
	char *end;
	o->range[0] = strtod(arg, &end);
	if (*end == ',')
		o->range[1] = strtod(end + 1, &end);
	if (*end || end == arg || !isfinite(o->range[0]) ||
	    !isfinite(o->range[1]) || !(o->range[1] > o->range[0]))
		cli_usage_error("--range '%s': expected LO,HI, two numbers with "
				"LO < HI", arg);
	o->ranged = 1;
}

/* --png FILE into the show_opts at ctx. */
static void png_opt(void *ctx, const char *arg, const char *what)
{
	show_opts *o = ctx;
	cli_file_named("--png", arg);
	o->png = arg;
}

/* --select I,J,... into the show_opts at ctx. */
static void select_opt(void *ctx, const char *arg, const char *what)
{
	show_opts *o = ctx;
	o->select_text = arg;
	o->nsel = hm_parse_select(arg, o->sel, AT_MAX_RANK);
	if (o->nsel < 0)
		cli_usage_error("--select '%s': expected indices I,J,... (at "
				"most %d)", arg, AT_MAX_RANK);
}

/* --name NAME into the show_opts at ctx. */
static void name_opt(void *ctx, const char *arg, const char *what)
{
	show_opts *o = ctx;
	if (!at_name_valid(arg, strlen(arg)))
		cli_usage_error("--name '%s': not a record name (1-255 bytes, no "
				"whitespace)", arg);
	o->name = arg;
}

/* Ends the program where the selectors picked no record of the nfiles
 * inputs (the first at path). */
static _Noreturn void none_selected(const show_opts *o, int nfiles,
				    const char *path)
{
	char layer[32] = "", head[32] = "", in[48] = "";
	if (o->layer >= 0)
		snprintf(layer, sizeof layer, " of layer %ld", o->layer);
	if (o->head >= 0)
		snprintf(head, sizeof head, " head %ld", o->head);
	if (nfiles > 1)
		snprintf(in, sizeof in, " in any of the %d inputs", nfiles);
	cli_die("%s%sno record%s%s%s%s%s%s%s", nfiles > 1 ? "" :
		strcmp(path, "-") ? path : "<stdin>", nfiles > 1 ? "" : ": ",
		o->name ? " named '" : "", o->name ? o->name : "",
		o->name ? "'" : "", layer, head, o->index ? " at that --index" : "",
		in);
}

/* Reads the options into c and o and returns the operands, the input
 * files; misuse exits 2. */
static cli_operands parse_args(int argc, char **argv, cli_common *c,
			       show_opts *o)
{
	int print = 0, ascii = 0;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_BASIC | CLI_USE_MODEL_FILE),
		CLI_FLAG("labels", 0, &o->labels),
		CLI_LONG("layer", 0, &o->layer, 0, INT_MAX),
		CLI_LONG("head", 0, &o->head, 0, INT_MAX),
		CLI_LONG("index", 0, &o->index, 1, 1L << 40),
		CLI_FLAG("print", 'p', &print),
		CLI_FLAG("full", 0, &o->full),
		CLI_FLAG("ascii", 0, &ascii),
		CLI_CALL_ARG("png", 0, png_opt, o),
		CLI_CALL_ARG("select", 0, select_opt, o),
		CLI_FLAG("grid", 0, &o->grid),
		CLI_CALL_ARG("shade", 0, shade_opt, o),
		CLI_CALL_ARG("range", 0, range_opt, o),
		CLI_CALL_ARG("name", 0, name_opt, o),
		CLI_END};
	cli_operands operand = cli_parse(c, opts, usage, CLI_ANY, argc, argv);
	print |= o->full; /* --full prints in full */
	if (print + ascii + (o->png != NULL) > 1)
		cli_usage_error("-p/--full, --ascii and --png exclude each other");
	o->mode = print ? SHOW_PRINT : ascii ? SHOW_ASCII :
		  o->png ? SHOW_PNG : SHOW_SUMMARY;
	if (o->select_text && o->mode != SHOW_ASCII && o->mode != SHOW_PNG)
		cli_usage_error("--select needs --ascii or --png");
	if (o->labels && o->mode != SHOW_ASCII && o->mode != SHOW_PNG)
		cli_usage_error("--labels needs --ascii or --png");
	if (o->grid && o->mode != SHOW_PNG)
		cli_usage_error("--grid needs --png");
	if ((o->shade_set || o->ranged) && o->mode != SHOW_ASCII &&
	    o->mode != SHOW_PNG)
		cli_usage_error("--shade and --range need --ascii or --png");
	if (o->shade_set && o->shade == HM_SHADE_LOG && o->ranged &&
	    !(o->range[0] > 0))
		cli_usage_error("--shade log --range %g,%g: a log scale needs a "
				"range above 0", o->range[0], o->range[1]);
	if (c->model && !o->labels)
		cli_usage_error("-m gives --labels its tokenizer");
#ifndef ANDREA_PNG
	if (o->png)
		cli_die("--png: this andrea-show was built without libgd");
#endif
	return operand;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-show", &c);
	show_opts o = {.columns = term_columns(), .layer = -1, .head = -1};
	cli_operands operand = parse_args(argc, argv, &c, &o);
	if (o.labels) {
		at_model m;
		stage_open_model(&c, &m);
		o.tok = cli_tokenizer(&m);
		at_model_close(&m);
	}

	cli_stdin_once((const char *const *)operand.v, operand.n);
	int nfiles = operand.n, shown = 0;
	at_tensor keep = {0}; /* the record --png draws */
	for (int f = 0; f < (nfiles ? nfiles : 1); f++) {
		at_reader r;
		cli_open_input(&c, &r, nfiles ? operand.v[f] : "-");
		at_header h;
		int rc;
		while ((rc = at_read_header(&r, &h)) == 1) {
			int is_tokens = strcmp(h.name, "tokens") == 0 &&
					h.dtype == AT_I32 && (h.rank == 1 || h.rank == 2);
			if (o.labels && is_tokens && o.name && strcmp(o.name, "tokens")) {
				at_tensor_free(&o.tokens);
				if (at_read_payload(&r, &h, &o.tokens) < 0)
					goto fail;
				at_tokens_as_batch(&o.tokens);
				continue;
			}
			if ((o.name && strcmp(h.name, o.name) != 0) ||
			    !attr_is(&h.attrs, "layer", o.layer) ||
			    !attr_is(&h.attrs, "head", o.head) ||
			    (o.index && h.index != o.index)) {
				if (at_check_payload(&r, &h) < 0)
					goto fail;
				continue;
			}
			if (o.mode == SHOW_ASCII || o.mode == SHOW_PNG)
				check_select(&o, &r, &h);
			if (o.mode == SHOW_PNG && shown)
				cli_die("%s: record %d '%s': --png draws one record, "
					"and '%s' came first; pick one with --name",
					r.label, h.index, h.name, keep.name);
			at_tensor t;
			if (at_read_payload(&r, &h, &t) < 0)
				goto fail;
			snprintf(o.where, sizeof o.where, "%s: record %d '%s'",
				 r.label, h.index, h.name);
			switch (o.mode) {
			case SHOW_SUMMARY:
				rec_summary(stdout, &t);
				break;
			case SHOW_PRINT:
				if (shown)
					putchar('\n');
				rec_head(stdout, &t);
				rec_attrs(stdout, &t);
				putchar('\n');
				if (np_print(stdout, &t, o.full) < 0)
					cli_die("out of memory printing '%s'", t.name);
				break;
			case SHOW_ASCII:
				show_ascii(&o, &t);
				break;
			case SHOW_PNG:
				keep = t;
				break;
			}
			shown++;
			if (o.labels && is_tokens) { /* kept for the maps after it */
				at_tensor_free(&o.tokens);
				o.tokens = t;
				at_tokens_as_batch(&o.tokens);
				memset(&t, 0, sizeof t);
			}
			if (o.mode != SHOW_PNG) {
				at_tensor_free(&t);
				cli_finish_text();
			}
		}
		if (rc < 0)
			goto fail;
		at_reader_close(&r);
		continue;
fail:
		fflush(stdout);
		cli_fail(r.err);
	}
	if ((o.name || o.layer >= 0 || o.head >= 0 || o.index) && !shown)
		none_selected(&o, nfiles, nfiles ? operand.v[0] : "-");
	if (o.mode == SHOW_PNG) {
		if (!shown)
			cli_die("no record to draw");
		write_png(&o, &keep);
		at_tensor_free(&keep);
	}
	cli_finish_text();
	at_tensor_free(&o.tokens);
	at_tok_free(o.tok);
	return 0;
}
