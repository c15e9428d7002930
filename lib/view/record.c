/* record.c - one line about a record (record.h). */
#include "view/record.h"

#include <math.h>

#include "view/npprint.h"

void rec_head(FILE *f, const at_tensor *t)
{
	char shape[AT_MAX_RANK * 21 + 3];
	at_shape_str(t->rank, t->dims, shape, sizeof shape);
	fprintf(f, "%s %s %s", t->name, at_dtype_name(t->dtype), shape);
}

void rec_attrs(FILE *f, const at_tensor *t)
{
	char a[AT_MAX_ATTR_BYTES + 1];
	if (!t->attrs.n)
		return;
	at_attrs_str(&t->attrs, a, sizeof a);
	fprintf(f, " %s", a);
}

void rec_value(at_dtype dt, double v, char *buf, size_t len)
{
	if (dt == AT_F32)
		np_f32_repr((float)v, buf, len);
	else
		snprintf(buf, len, "%.0f", v);
}

void rec_summary(FILE *f, const at_tensor *t)
{
	uint64_t n = at_numel(t), nfinite = 0, nnan = 0, ninf = 0;
	double lo = 0, hi = 0, sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		double v = at_elem(t, i);
		if (isnan(v)) {
			nnan++;
		} else if (isinf(v)) {
			ninf++;
		} else {
			if (!nfinite || v < lo)
				lo = v;
			if (!nfinite || v > hi)
				hi = v;
			sum += v;
			nfinite++;
		}
	}
	rec_head(f, t);
	if (nfinite) {
		double mean = sum / (double)nfinite, ss = 0;
		for (uint64_t i = 0; i < n; i++) {
			double v = at_elem(t, i);
			if (isfinite(v))
				ss += (v - mean) * (v - mean);
		}
		char a[64], b[64];
		rec_value(t->dtype, lo, a, sizeof a);
		rec_value(t->dtype, hi, b, sizeof b);
		fprintf(f, " min=%s max=%s mean=%.7g std=%.7g", a, b, mean,
			sqrt(ss / (double)nfinite));
	} else {
		fprintf(f, " min=- max=- mean=- std=-");
	}
	fprintf(f, " nan=%llu inf=%llu", (unsigned long long)nnan,
		(unsigned long long)ninf);
	rec_attrs(f, t);
	fputc('\n', f);
}
