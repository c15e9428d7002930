/* andrea-attend - weighted values: out = attn . v, per head.
 *
 * --concat lays the heads side by side as [B,T,C]; --proj goes on to
 * y = concat . Wo of the layer named by the records' `layer` attribute
 * (or -l).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/filter.h"
#include "ops/ops.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include "help/andrea-attend.h" /* usage: the --help text */

typedef struct {
	int concat, proj, layer; /* layer -1: from the attributes, else 0 */
	at_model model;
	at_tensor wo;            /* Wo of wo_layer, once loaded */
	at_tensor bo;            /* and its bias, where the model has one */
	int wo_layer;
	at_exec exec;            /* the device; --tf32: TF32 products on the GPU */
} attend_ctx;

/* Loads Wo of layer unless it is the one already loaded. */
static void load_wo(attend_ctx *a, int layer)
{
	if (a->wo.data && a->wo_layer == layer)
		return;
	char name[64];
	int C = a->model.cfg.d_model;
	at_tensor_free(&a->wo);
	at_tensor_free(&a->bo);
	snprintf(name, sizeof name, "layers.%d.attn.wo", layer);
	stage_param(&a->model, name, &a->wo, 2, C, C);
	snprintf(name, sizeof name, "layers.%d.attn.bo", layer);
	if (at_model_has(&a->model, name))
		stage_param(&a->model, name, &a->bo, 1, C);
	a->wo_layer = layer;
}

/* y += bo, where --proj's model has it (on the host, whichever device
 * made y). */
static void add_bo(const attend_ctx *a, at_tensor *y)
{
	if (a->proj && a->bo.data)
		at_add_bias(y->data, a->bo.data, (size_t)(y->dims[0] * y->dims[1]),
			    (size_t)y->dims[2]);
}

/* attn's layer attribute: 1 with *layer, 0 where there is none, -1
 * where it is no layer number. */
static int attn_layer(const at_attrs *attrs, int *layer)
{
	long l;
	int rc = at_attr_long(attrs, "layer", &l);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (l < 0 || l > INT_MAX)
		return -1;
	*layer = (int)l;
	return 1;
}

/* Checks what --proj needs, loads Wo, and returns the layer. */
static int proj_layer(at_filter *f, attend_ctx *a, const at_tensor *attn,
		      int HD)
{
	int C = a->model.cfg.d_model;
	int layer = a->layer >= 0 ? a->layer : 0; /* -l, attn's, or 0 */
	if (a->layer < 0 && attn_layer(&attn->attrs, &layer) < 0)
		at_filter_die(f, 0, "layer=%s: not a layer number",
			      at_attr_get(&attn->attrs, "layer"));
	char err[300];
	if (at_attr_get(&attn->attrs, "head"))
		at_filter_die(f, 0, "holds head %s only; --proj needs all "
			      "heads", at_attr_get(&attn->attrs, "head"));
	if (HD != C)
		at_filter_die(f, 1, "H*D=%d but the model has C=%d", HD, C);
	if (at_model_check_layer(&a->model, layer, err, sizeof err) < 0)
		at_filter_die(f, 0, "%s", err);
	load_wo(a, layer);
	return layer;
}

/* Draws the default model's Wo for --proj as soon as attn's header names
 * the layer, while attn arrives rather than after v.  Only where that
 * cannot fail: errors stay with attend_run, in their order. */
static void attend_prepare(at_filter *f, int slot, const at_header *h)
{
	attend_ctx *a = f->ctx;
	int layer;
	char err[300];
	if (!a->proj || slot != 0 || a->layer >= 0 || !a->model.seeded ||
	    at_attr_get(&h->attrs, "head") ||
	    attn_layer(&h->attrs, &layer) != 1 ||
	    at_model_check_layer(&a->model, layer, err, sizeof err) < 0)
		return;
	load_wo(a, layer);
}

/* Checks attn and v (attn's payload may be still to come). */
static void attend_check(at_filter *f, const at_tensor *attn,
			 const at_tensor *v)
{
	at_filter_expect(f, 0, attn, 4, "B,H,T,T");
	at_filter_expect(f, 1, v, 4, "B,H,T,D");
	if (attn->dims[2] != attn->dims[3]) {
		char as[96];
		at_shape_str(4, attn->dims, as, sizeof as);
		at_filter_die(f, 0, "shape %s: expected [B,H,T,T], a square of "
			      "weights per head", as);
	}
	uint64_t T = v->dims[2];
	if (attn->dims[0] != v->dims[0] || attn->dims[1] != v->dims[1] ||
	    attn->dims[2] != T || attn->dims[3] != T) {
		char as[96], vs[96];
		at_shape_str(4, attn->dims, as, sizeof as);
		at_shape_str(4, v->dims, vs, sizeof vs);
		at_filter_die(f, 1, "shape %s does not fit attn's %s", vs, as);
	}
	at_filter_expect_count(f, 0, attn, 0, 2, INT_MAX, "B*H", "heads");
	at_filter_expect_count(f, 1, v, 0, 3, INT_MAX, "B*H*T", "rows");
	at_filter_expect_same_head(f, 1, v, attn);
}

/* Makes the output record for attn [B,H,T,T] and v [B,H,T,D]: out
 * [B,H,T,D], its concatenation [B,T,H*D], or y with --proj (Wo loaded),
 * with attn's attributes. */
static void attend_output(at_filter *f, attend_ctx *a, const at_tensor *attn,
			  const at_tensor *v, at_tensor *dst)
{
	int B = (int)v->dims[0], H = (int)v->dims[1], T = (int)v->dims[2],
	    D = (int)v->dims[3];
	int layer = a->proj ? proj_layer(f, a, attn, H * D) : 0;
	uint64_t cd[3] = {(uint64_t)B, (uint64_t)T, (uint64_t)H * D};
	int merged = a->concat || a->proj;
	if (at_tensor_init(dst, a->proj ? "y" : "out", AT_F32, merged ? 3 : 4,
			   merged ? cd : v->dims) < 0)
		cli_die("out of memory");
	dst->attrs = attn->attrs;
	if (a->proj)
		at_attr_setf(&dst->attrs, "layer", "%d", layer);
}

static void attend_run(at_filter *f, at_tensor *in, at_writer *w)
{
	attend_ctx *a = f->ctx;
	at_tensor *attn = &in[0], *v = &in[1], dst;
	attend_check(f, attn, v);
	attend_output(f, a, attn, v, &dst);
	stage_check(at_stage_attend(&a->exec, dst.data, attn->data, v->data,
				    (int)v->dims[0], (int)v->dims[1],
				    (int)v->dims[2], (int)v->dims[3], a->concat,
				    a->proj ? a->wo.data : NULL));
	add_bo(a, &dst);
	at_filter_write(w, &dst);
	at_tensor_free(&dst);
}

/* Where the stage streams, attn arriving after v: each head's
 * probabilities are used as soon as they have arrived, so attend works
 * while the stages upstream still do, and holds one head of attn instead
 * of all of them.  The numbers are those of attend_run: the same
 * arithmetic, head by head. */
static int attend_stream_last(at_filter *f, at_tensor *in, int slot,
			      at_reader *r, const at_header *h, at_writer *w)
{
	attend_ctx *a = f->ctx;
	at_tensor attn, *v = &in[1];
	/* no heads, nothing to gain: the usual path (it allocates nothing
	 * for an empty attn, however large its T) */
	if (slot != 0 || v->dims[0] * v->dims[1] == 0)
		return 1;
	at_tensor_from_header(&attn, h);
	attend_check(f, &attn, v);
	/* read a head at a time, but held to the cap: a head can be most
	 * of the record */
	if (at_payload_within_cap(r, h) < 0)
		cli_fail(r->err);
	int B = (int)v->dims[0], H = (int)v->dims[1], T = (int)v->dims[2],
	    D = (int)v->dims[3];
	if (!at_stage_streams(&a->exec, at_work_attend(B, H, T, D, a->proj)))
		return 1;
	at_tensor dst, out;
	attend_output(f, a, &attn, v, &dst); /* its errors before any work */
	size_t head_bytes = (size_t)T * T * sizeof(float);
	int joined = a->concat || a->proj;
	float *head = malloc(head_bytes ? head_bytes : 1);
	if (!head || (joined && at_tensor_init(&out, "out", AT_F32, 4,
					       v->dims) < 0))
		cli_die("out of memory");
	float *heads = joined ? out.data : dst.data;
	at_payload_in pin;
	at_filter_payload_begin(f, r, h, &pin);
	at_filter_serial(1);
	for (size_t i = 0; i < (size_t)B * H; i++) {
		if (at_payload_read(&pin, head, head_bytes) < 0)
			cli_fail(r->err);
		stage_check(at_stage_attend_heads(heads + i * T * D, head,
						  (const float *)v->data + i * T * D,
						  1, T, D));
	}
	at_filter_serial(0);
	at_payload_end(&pin);
	free(head);
	if (joined) {
		stage_check(at_stage_attend_join(dst.data, out.data, B, H, T, D,
						 a->concat,
						 a->proj ? a->wo.data : NULL));
		at_tensor_free(&out);
	}
	add_bo(a, &dst);
	at_filter_write(w, &dst);
	at_tensor_free(&dst);
	return 0;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-attend", &c);
	attend_ctx a = {.layer = -1};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE | CLI_USE_MODEL),
		CLI_FLAG("concat", 0, &a.concat),
		CLI_FLAG("proj", 0, &a.proj),
		CLI_FLAG("tf32", 0, &a.exec.tf32),
		CLI_INT("layer", 'l', &a.layer, 0, INT_MAX),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (a.concat && a.proj)
		cli_usage_error("--concat and --proj exclude each other "
				"(--proj includes the concatenation)");
	a.exec.dev = stage_device_lazy(&c);
	if (a.proj) {
		char err[600];
		stage_open_model(&c, &a.model);
		if (!a.model.cfg.d_model)
			cli_die("%s: the model's C is unknown (no config, wte or "
				"attention matrix)", c.model);
		if (a.layer >= 0) { /* check what can be checked before output */
			if (at_model_check_layer(&a.model, a.layer, err, sizeof err) < 0)
				cli_die("%s", err);
			load_wo(&a, a.layer);
		}
	}
	at_filter f = {.inputs = {"attn", "v"}, .n_inputs = 2, .run = attend_run,
		       .stream_last = attend_stream_last,
		       .prepare = attend_prepare, .ctx = &a};
	at_filter_main(&c, &f, operand.v[0]);
	at_tensor_free(&a.wo);
	at_tensor_free(&a.bo);
	at_model_close(&a.model);
	return 0;
}
