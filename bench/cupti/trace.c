/* trace.c - a CUPTI activity tracer for bench/train-timeline.py:
 * the CUDA driver loads it into a program named by CUDA_INJECTION64_PATH
 * and calls InitializeInjection, which asks CUPTI for a record of every
 * kernel, copy and memset the device runs; at exit each becomes a line
 * "KIND,START_NS,END_NS,STREAM,NAME" (KIND K, C or S) of the file named
 * by ANDREA_TRACE_OUT.  The record types' names carry CUPTI's version:
 * the script passes the newest ones its headers declare as KERNEL_REC,
 * MEMCPY_REC and MEMSET_REC. */
#include <cupti_activity.h>
#include <stdio.h>
#include <stdlib.h>

#define BUF_BYTES (16u << 20)

static FILE *out;

static void CUPTIAPI buffer_wanted(uint8_t **buf, size_t *size,
				   size_t *max_records)
{
	*buf = aligned_alloc(8, BUF_BYTES);
	*size = *buf ? BUF_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_done(CUcontext ctx, uint32_t stream, uint8_t *buf,
				 size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	(void)ctx, (void)stream, (void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			const KERNEL_REC *k = (const KERNEL_REC *)r;
			fprintf(out, "K,%llu,%llu,%u,%s\n",
				(unsigned long long)k->start,
				(unsigned long long)k->end, k->streamId, k->name);
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			const MEMCPY_REC *m = (const MEMCPY_REC *)r;
			fprintf(out, "C,%llu,%llu,%u,copy of %llu bytes\n",
				(unsigned long long)m->start,
				(unsigned long long)m->end, m->streamId,
				(unsigned long long)m->bytes);
		} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
			const MEMSET_REC *m = (const MEMSET_REC *)r;
			fprintf(out, "S,%llu,%llu,%u,memset of %llu bytes\n",
				(unsigned long long)m->start,
				(unsigned long long)m->end, m->streamId,
				(unsigned long long)m->bytes);
		}
	}
	free(buf);
}

static void flush_at_exit(void)
{
	cuptiActivityFlushAll(1);
	fclose(out);
}

int InitializeInjection(void)
{
	const char *path = getenv("ANDREA_TRACE_OUT");
	if (!path || !(out = fopen(path, "w")))
		return 0;
	if (cuptiActivityRegisterCallbacks(buffer_wanted, buffer_done) !=
		    CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) !=
		    CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)
		return 0;
	atexit(flush_at_exit);
	return 1;
}
