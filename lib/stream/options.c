/* options.c - default stream options. */
#include "stream/stream.h"

#include <unistd.h>

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

void at_read_opts_default(at_read_opts *o)
{
	o->threads = online_cpus();
	o->max_bytes = AT_DEFAULT_MAX_BYTES;
}

void at_write_opts_default(at_write_opts *o)
{
	o->level = 1;
	o->shuffle = 1;
	o->threads = online_cpus();
	o->chunk_raw = AT_DEFAULT_CHUNK;
}
