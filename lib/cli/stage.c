/* stage.c - model and device set-up shared by the stage filters. */
#include "cli/stage.h"

#include <math.h>
#include <stdarg.h>

#include "core/parallel.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "ops/stages.h"

void stage_open_model(const cli_common *c, at_model *m)
{
	char err[600];
	if (c->model && c->seed_given)
		cli_usage_error("--seed applies to the default model only, and a "
				"model file (-m or ANDREA_MODEL) is in use");
	if (at_model_open(m, c->model, c->seed, c->heads, &c->ropts, err,
			  sizeof err) < 0)
		cli_die("%s", err);
}

void stage_param(const at_model *m, const char *name, at_tensor *t, int rank,
		 ...)
{
	uint64_t dims[AT_MAX_RANK];
	va_list ap;
	va_start(ap, rank);
	for (int i = 0; i < rank; i++)
		dims[i] = (uint64_t)va_arg(ap, int);
	va_end(ap);
	char err[700];
	if (at_model_param(m, name, rank, dims, t, err, sizeof err) < 0)
		cli_die("%s", err);
}

at_device stage_device_lazy(const cli_common *c)
{
	at_device dev;
	char err[200];
	int rc = at_device_resolve(c->device, &dev, err, sizeof err);
	if (rc == -2)
		cli_usage_error("%s", err);
	if (rc < 0)
		cli_die("%s", err);
	return dev;
}

at_device stage_device(const cli_common *c, int has_cuda)
{
	at_device dev = stage_device_lazy(c);
	if (dev == AT_DEV_CUDA && !has_cuda)
		cli_die("--device cuda: this stage has no CUDA path in this "
			"version");
	if (dev == AT_DEV_AUTO)
		dev = has_cuda ? at_device_auto(INFINITY, 0, 1) : AT_DEV_CPU;
	return dev;
}

at_device stage_device_sized(const cli_common *c, int precision,
			      double madds, double bytes)
{
	at_device dev = stage_device_lazy(c);
	if (dev == AT_DEV_AUTO) /* tf32 and bf16 exist on the GPU only */
		dev = precision != AT_PREC_FP32
			      ? at_device_auto(INFINITY, 0, 1)
			      : at_device_auto(madds, bytes, at_threads());
	stage_check_precision(dev, precision);
	return dev;
}

void stage_check_device(const cli_common *c, int precision)
{
	if (stage_device_lazy(c) == AT_DEV_CPU)
		stage_check_precision(AT_DEV_CPU, precision);
}

void stage_precision_opt(void *to, const char *arg, const char *what)
{
	if ((*(int *)to = at_precision_parse(arg)) < 0)
		cli_usage_error("%s '%s': expected fp32, tf32 or bf16", what, arg);
}

void stage_check_precision(at_device dev, int precision)
{
	if (precision != AT_PREC_FP32 && dev != AT_DEV_CUDA)
		cli_die("--precision %s needs the GPU (--device cuda): the CPU "
			"computes in fp32", at_precision_name(precision));
}

void stage_check(int rc)
{
	if (rc < 0)
		cli_die("%s", at_stage_error());
}

static stage_engine *begun; /* the engine being made on its thread */

/* Ending the program while CUDA starts on another thread could crash in
 * CUDA's own exit handlers, so an error exit waits for it first. */
static void settle_begun(void)
{
	if (begun)
		stage_engine_free(begun);
}

static void engine_begin(stage_engine *s, at_device dev)
{
	s->start = at_fwd_begin(s->w, dev, s->precision, 0);
	begun = s;
	cli_before_exit(settle_begun);
}

void stage_engine_init(stage_engine *s, const cli_common *c,
		       const at_weights *w, int precision)
{
	*s = (stage_engine){.c = c, .w = w, .precision = precision};
	at_device dev = stage_device_lazy(c);
	if (dev != AT_DEV_AUTO || precision != AT_PREC_FP32)
		engine_begin(s, stage_device_sized(c, precision, 0, 0));
}

void stage_engine_prepare(stage_engine *s, double madds, double bytes)
{
	if (!s->start && !s->engine)
		engine_begin(s, stage_device_sized(s->c, s->precision, madds,
						   bytes));
}

at_fwd *stage_engine_get(stage_engine *s, double madds, double bytes)
{
	stage_engine_prepare(s, madds, bytes);
	if (s->start) {
		char err[600];
		at_fwd_start *start = s->start;
		s->start = NULL;
		begun = NULL;
		if (at_fwd_take(start, &s->engine, err, sizeof err) < 0)
			cli_die("%s", err);
	}
	return s->engine;
}

void stage_engine_free(stage_engine *s)
{
	begun = NULL;
	if (s->start) {
		char err[600];
		at_fwd_take(s->start, &s->engine, err, sizeof err);
		s->start = NULL;
	}
	at_fwd_free(s->engine);
	s->engine = NULL;
}

void stage_open_model_heads(const cli_common *c, at_model *m)
{
	char err[700];
	stage_open_model(c, m);
	if (at_model_need_heads(m, err, sizeof err) < 0)
		cli_die("%s", err);
}

void stage_check_tokens(const at_model *m, const at_tensor *t,
			const char *label)
{
	uint64_t B = t->dims[0], T = t->dims[1];
	char err[300];
	if (B * T > 1u << 24)
		cli_die("%s: B*T=%llu positions is more than this tool runs at "
			"once", label, (unsigned long long)(B * T));
	if (B == 0 || T == 0)
		cli_die("%s: no tokens to run (B=%llu, T=%llu)", label,
			(unsigned long long)B, (unsigned long long)T);
	if (at_tokens_check(&m->cfg, t->data, B, T, err, sizeof err) < 0)
		cli_die("%s: %s", label, err);
}

at_fwd *stage_whole_model(const cli_common *c, const at_model *m,
			  at_loaded *w, double positions, int T,
			  double head_rows)
{
	char err[700];
	if (at_weights_load(w, m, AT_LOAD_ALL, NULL, err, sizeof err) < 0)
		cli_die("%s", err);
	double bytes, madds = at_fwd_work(w->w.C, w->w.V, positions, w->w.L,
					  T / 2.0, head_rows, &bytes);
	at_fwd *e;
	if (at_fwd_new(&e, &w->w, stage_device_sized(c, AT_PREC_FP32, madds,
						      bytes),
		       AT_PREC_FP32, 0, err, sizeof err) < 0)
		cli_die("%s", err);
	return e;
}

void stage_scale_opt(void *to, const char *arg, const char *what)
{
	stage_scale *s = to;
	if (s->fixed)
		cli_usage_error("give --scale or --no-scale once");
	s->fixed = 1;
	s->scale = arg ? cli_double(arg, what) : 1.0;
	float f = (float)s->scale;
	if (isinf(f) || (f == 0.0f && s->scale != 0.0))
		cli_usage_error("--scale %s: beyond float32's range (it would "
				"become %s)", arg, isinf(f) ? "an infinity" : "0");
}

double stage_scale_of(at_filter *f, const stage_scale *s, int D)
{
	if (!s->fixed && D == 0)
		at_filter_die(f, 0, "D=0: a head of no values has no 1/sqrt(D) "
			      "scale (--scale or --no-scale gives one)");
	return s->fixed ? s->scale : 1.0 / sqrt((double)D);
}
