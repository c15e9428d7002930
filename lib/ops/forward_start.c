/* forward_start.c - at_fwd_new on a thread (forward.h). */
#include "ops/forward.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct at_fwd_start {
	const at_weights *w;
	at_device dev;
	int precision, rows, threaded;
	pthread_t thread;
	at_fwd *e;
	int rc;
	char err[600];
};

static void *make(void *arg)
{
	at_fwd_start *s = arg;
	s->rc = at_fwd_new(&s->e, s->w, s->dev, s->precision, s->rows, s->err,
			   sizeof s->err);
	return NULL;
}

at_fwd_start *at_fwd_begin(const at_weights *w, at_device dev, int precision,
			   int rows)
{
	at_fwd_start *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	*s = (at_fwd_start){.w = w, .dev = dev, .precision = precision,
			    .rows = rows};
	s->threaded = pthread_create(&s->thread, NULL, make, s) == 0;
	return s;
}

int at_fwd_take(at_fwd_start *s, at_fwd **e, char *err, size_t errlen)
{
	if (!s) {
		*e = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (s->threaded)
		pthread_join(s->thread, NULL);
	else
		make(s);
	*e = s->e;
	int rc = s->rc;
	if (rc < 0)
		snprintf(err, errlen, "%s", s->err);
	free(s);
	return rc;
}
