/* bench/codec.c - speed and ratio of the stream codec on float32 data like
 * real activations, beside zlib's compress2 -1 and gzip -1 measured in the
 * same run on the same bytes.
 *
 *   build/bench/codec [-s MIB] [-r REPS] [-t MAXTHREADS] [-k KINDS] [-l LEVELS]
 *
 * Every figure goes through the real writer and reader (at_write_tensor into
 * an fmemopen buffer, at_read_header + at_read_payload back out of one), so
 * it includes headers, CRC32, shuffle, deflate and the stdio copies.  Speeds
 * are raw (uncompressed) bytes per second, best of REPS runs; ratio is raw
 * bytes over stream bytes.  The last block says whether the default setting
 * meets the goals set for it.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "stream/stream.h"

#define GOAL_ENC 200.0	 /* MB/s, dense, default setting */
#define GOAL_DEC 600.0	 /* MB/s, dense, default setting */
#define GOAL_DENSE 1.15	 /* ratio, dense */
#define GOAL_SCORES 2.2	 /* ratio, masked scores */

enum { DENSE, SCORES, PROBS, NKINDS };
static const char *kind_name[NKINDS] = { "dense", "scores", "probs" };
static const char *kind_what[NKINDS] = {
	"dense activations, normal(0,1) x 1.0",
	"causal-masked attention scores [H,T,T], -inf above the diagonal",
	"softmax of the masked scores, zeros above the diagonal",
};

typedef struct {
	double enc, dec, ratio; /* MB/s, MB/s, raw/stored */
} figure;

static struct {
	double mib;
	int reps;
	int max_threads;
	int kinds[NKINDS];
	int levels[10];
	char tmpdir[256];
} cfg;

/* Seconds on the monotonic clock. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64: a small seeded generator, good enough for test data. */
static uint64_t next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Fills x[0..n) with normal(0,1) draws (Box-Muller). */
static void fill_normal(float *x, size_t n, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t i = 0; i < n; i += 2) {
		double u1 = ((next_u64(&s) >> 11) + 1.0) * 0x1p-53;
		double u2 = (next_u64(&s) >> 11) * 0x1p-53;
		double r = sqrt(-2.0 * log(u1));
		x[i] = (float)(r * cos(2 * M_PI * u2));
		if (i + 1 < n)
			x[i + 1] = (float)(r * sin(2 * M_PI * u2));
	}
}

/* Masks x [H,T,T] causally: -inf where column j > row i. */
static void mask_causal(float *x, size_t H, size_t T)
{
	for (size_t h = 0; h < H; h++)
		for (size_t i = 0; i < T; i++)
			for (size_t j = i + 1; j < T; j++)
				x[(h * T + i) * T + j] = -INFINITY;
}

/* Row softmax of masked scores in place; -inf becomes exactly 0. */
static void softmax_rows(float *x, size_t rows, size_t T)
{
	for (size_t r = 0; r < rows; r++) {
		float *p = x + r * T, m = -INFINITY;
		double sum = 0;
		for (size_t j = 0; j < T; j++)
			m = p[j] > m ? p[j] : m;
		for (size_t j = 0; j < T; j++)
			sum += p[j] = expf(p[j] - m);
		for (size_t j = 0; j < T; j++)
			p[j] = (float)(p[j] / sum);
	}
}

/* Builds the test tensor of one kind, about cfg.mib MiB of float32. */
static int make_tensor(at_tensor *t, int kind)
{
	size_t n = (size_t)(cfg.mib * 1048576.0 / 4);
	size_t T = 1024, H = n / (T * T);
	uint64_t dims[3];
	int rank;
	if (kind == DENSE) {
		size_t C = 768;
		dims[0] = n / C > 0 ? n / C : 1;
		dims[1] = C;
		rank = 2;
	} else {
		while (H == 0 && T > 16) {
			T /= 2;
			H = n / (T * T);
		}
		dims[0] = H ? H : 1;
		dims[1] = dims[2] = T;
		rank = 3;
	}
	if (at_tensor_init(t, kind_name[kind], AT_F32, rank, dims) < 0)
		return -1;
	float *x = t->data;
	n = at_numel(t);
	fill_normal(x, n, 42 + kind);
	if (kind != DENSE)
		mask_causal(x, dims[0], T);
	if (kind == PROBS)
		softmax_rows(x, dims[0] * T, T);
	return 0;
}

/* Writes t as one stream into buf (cap bytes); returns the stream length,
 * or 0 on failure. */
static size_t stream_encode(const at_tensor *t, const at_write_opts *o,
			    unsigned char *buf, size_t cap)
{
	FILE *f = fmemopen(buf, cap, "w");
	if (!f)
		return 0;
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	at_writer w;
	at_writer_wrap(&w, f, "bench", o);
	int rc = at_write_tensor(&w, t);
	if (rc == 0)
		rc = at_writer_finish(&w);
	if (rc < 0)
		fprintf(stderr, "codec: %s\n", w.err);
	long len = ftell(f);
	fclose(f);
	return rc < 0 || len <= 0 ? 0 : (size_t)len;
}

/* Reads the one tensor of stream buf[0..len) into t; returns 0 or -1. */
static int stream_decode(unsigned char *buf, size_t len, int threads,
			 at_tensor *t)
{
	FILE *f = fmemopen(buf, len, "r");
	if (!f)
		return -1;
	setvbuf(f, NULL, _IOFBF, 1 << 16);
	at_reader r;
	memset(&r, 0, sizeof r);
	at_read_opts_default(&r.opts);
	r.opts.threads = threads;
	r.f = f;
	snprintf(r.label, sizeof r.label, "<bench>");
	at_header h;
	int rc = at_read_header(&r, &h) == 1 ? at_read_payload(&r, &h, t) : -1;
	if (rc == 0 && at_read_header(&r, &h) != 0)
		rc = -1;
	if (rc < 0)
		fprintf(stderr, "codec: %s\n", r.err);
	fclose(f);
	return rc;
}

/* Runs fn up to cfg.reps times (fewer once 3 s are spent); best seconds. */
#define BEST_OF(secs, body)                                               \
	do {                                                              \
		double _spent = 0;                                        \
		secs = DBL_MAX;                                           \
		for (int _r = 0; _r < cfg.reps && _spent < 3.0; _r++) {  \
			double _t0 = now();                               \
			body;                                             \
			double _dt = now() - _t0;                         \
			_spent += _dt;                                    \
			secs = _dt < secs ? _dt : secs;                   \
		}                                                         \
	} while (0)

/* Measures one setting of the stream codec on t; checks the round trip. */
static int measure_stream(const at_tensor *t, const at_write_opts *o,
			  unsigned char *buf, size_t cap, figure *fig)
{
	size_t raw = at_nbytes(t), len = 0;
	double se, sd;
	int bad = 0;
	BEST_OF(se, len = stream_encode(t, o, buf, cap));
	if (!len)
		return -1;
	BEST_OF(sd, {
		at_tensor back;
		if (stream_decode(buf, len, o->threads, &back) < 0 ||
		    memcmp(back.data, t->data, raw) != 0)
			bad = 1;
		at_tensor_free(&back);
	});
	if (bad) {
		fprintf(stderr, "codec: round trip failed\n");
		return -1;
	}
	fig->enc = raw / se / 1e6;
	fig->dec = raw / sd / 1e6;
	fig->ratio = (double)raw / len;
	return 0;
}

/* zlib's one-shot compress2 at level 1 and uncompress, one thread. */
static int measure_zlib(const at_tensor *t, figure *fig)
{
	size_t raw = at_nbytes(t);
	uLongf bound = compressBound(raw), len = 0, back_len = 0;
	unsigned char *z = malloc(bound), *back = malloc(raw);
	double se, sd;
	int rc = -1;
	if (!z || !back)
		goto out;
	BEST_OF(se, {
		len = bound;
		rc = compress2(z, &len, t->data, raw, 1);
	});
	if (rc != Z_OK)
		goto out;
	BEST_OF(sd, {
		back_len = raw;
		rc = uncompress(back, &back_len, z, len);
	});
	if (rc != Z_OK || back_len != raw || memcmp(back, t->data, raw)) {
		rc = -1;
		goto out;
	}
	fig->enc = raw / se / 1e6;
	fig->dec = raw / sd / 1e6;
	fig->ratio = (double)raw / len;
	rc = 0;
out:
	free(z);
	free(back);
	return rc;
}

/* Size of a file in bytes, or -1. */
static long file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n;
}

/* gzip -1 -c and gzip -dc as child processes on the raw bytes in a file. */
static int measure_gzip(const at_tensor *t, figure *fig)
{
	size_t raw = at_nbytes(t);
	char in[512], gz[512], cmd[1200];
	snprintf(in, sizeof in, "%s/raw", cfg.tmpdir);
	snprintf(gz, sizeof gz, "%s/raw.gz", cfg.tmpdir);
	FILE *f = fopen(in, "wb");
	if (!f || fwrite(t->data, 1, raw, f) != raw || fclose(f) != 0)
		return -1;
	double se, sd;
	int rc = 0;
	snprintf(cmd, sizeof cmd, "gzip -1 -c '%s' > '%s'", in, gz);
	BEST_OF(se, rc |= system(cmd));
	snprintf(cmd, sizeof cmd, "gzip -dc '%s' > /dev/null", gz);
	BEST_OF(sd, rc |= system(cmd));
	long len = file_size(gz);
	unlink(in);
	unlink(gz);
	if (rc != 0 || len <= 0)
		return -1;
	fig->enc = raw / se / 1e6;
	fig->dec = raw / sd / 1e6;
	fig->ratio = (double)raw / len;
	return 0;
}

/* zlib's crc32 and memcpy over the test bytes: the floor under the codec. */
static void measure_floor(const at_tensor *t)
{
	size_t raw = at_nbytes(t);
	unsigned char *dst = malloc(raw);
	volatile uLong sink = 0;
	double sc, sm;
	if (!dst)
		return;
	memset(dst, 1, raw);
	BEST_OF(sc, sink += crc32(0L, t->data, raw));
	BEST_OF(sm, memcpy(dst, t->data, raw));
	printf("floor, one thread: zlib %s crc32 %.0f MB/s, memcpy %.0f MB/s\n",
	       zlibVersion(), raw / sc / 1e6, raw / sm / 1e6);
	free(dst);
	(void)sink;
}

/* The chunk codec alone (at_chunk_encode / at_chunk_decode, one thread,
 * default setting, no stdio, no CRC of the writer): what the stream adds on
 * top of it is the difference to the one-thread default row. */
static void measure_chunks(const at_tensor *t, const at_write_opts *o)
{
	size_t raw = at_nbytes(t), elem = at_dtype_size(t->dtype);
	size_t chunk = o->chunk_raw - o->chunk_raw % elem;
	size_t nc = (raw + chunk - 1) / chunk, bound = at_chunk_bound(chunk);
	unsigned char *z = malloc(nc * bound), *back = malloc(raw),
		      *scratch = malloc(chunk);
	size_t *len = malloc(nc * sizeof *len);
	uint32_t *crc = malloc(nc * sizeof *crc);
	const unsigned char *src = t->data;
	double se, sd;
	size_t stored = 0;
	int bad = 0;
	char why[128];
	if (!z || !back || !scratch || !len || !crc)
		goto out;
	memset(back, 0, raw);
	for (size_t c = 0; c < nc; c++) {
		size_t n = raw - c * chunk < chunk ? raw - c * chunk : chunk;
		crc[c] = (uint32_t)crc32(0L, src + c * chunk, (uInt)n);
	}
	BEST_OF(se, {
		stored = 0;
		for (size_t c = 0; c < nc; c++) {
			size_t n = raw - c * chunk < chunk ? raw - c * chunk : chunk;
			len[c] = at_chunk_encode(src + c * chunk, n, z + c * bound,
						 elem, o, scratch);
			stored += len[c];
		}
	});
	BEST_OF(sd, {
		for (size_t c = 0; c < nc; c++) {
			size_t n = raw - c * chunk < chunk ? raw - c * chunk : chunk;
			bad |= at_chunk_decode(z + c * bound, len[c], back + c * chunk,
					       n, elem, o->shuffle, crc[c], scratch,
					       why, sizeof why);
		}
	});
	if (bad || memcmp(back, src, raw))
		fprintf(stderr, "codec: chunk round trip failed\n");
	else
		printf("  chunk codec only, default, 1 thread: enc %.0f MB/s, dec %.0f MB/s, ratio %.3f\n",
		       raw / se / 1e6, raw / sd / 1e6, (double)raw / stored);
out:
	free(z);
	free(back);
	free(scratch);
	free(len);
	free(crc);
}

static void print_row(int level, const char *shuf, int threads,
		      const figure *f, const figure *zf, const figure *gf)
{
	printf("  %5d %4s %7d %9.0f %9.0f %7.3f %8.2fx %7.2fx %8.2fx %7.2fx\n",
	       level, shuf, threads, f->enc, f->dec, f->ratio,
	       f->enc / zf->enc, f->dec / zf->dec, f->enc / gf->enc,
	       f->dec / gf->dec);
}

/* All settings on one kind of data; fills *def with the default setting. */
static int bench_kind(int kind, figure *def)
{
	at_tensor t;
	memset(&t, 0, sizeof t);
	if (make_tensor(&t, kind) < 0)
		return -1;
	char shape[64];
	at_shape_str(t.rank, t.dims, shape, sizeof shape);
	size_t raw = at_nbytes(&t);
	printf("\n%s: %s\n  f32 %s, %.1f MiB\n", kind_name[kind], kind_what[kind],
	       shape, raw / 1048576.0);
	if (kind == DENSE)
		measure_floor(&t);

	figure zf = { 0 }, gf = { 0 };
	if (measure_zlib(&t, &zf) < 0 || measure_gzip(&t, &gf) < 0) {
		fprintf(stderr, "codec: reference measurement failed\n");
		return -1;
	}
	printf("  reference            enc MB/s  dec MB/s   ratio\n");
	printf("  compress2 -1, 1 thr %9.0f %9.0f %7.3f\n", zf.enc, zf.dec, zf.ratio);
	printf("  gzip -1 (process)   %9.0f %9.0f %7.3f\n", gf.enc, gf.dec, gf.ratio);
	printf("  level shuf threads  enc MB/s  dec MB/s   ratio  enc/zlib dec/zlib  enc/gzip dec/gzip\n");

	size_t cap = at_chunk_bound(raw) + raw / 8 + (1 << 20);
	unsigned char *buf = malloc(cap);
	if (!buf)
		return -1;
	memset(buf, 0, cap);
	at_write_opts dflt;
	at_write_opts_default(&dflt);
	int rc = 0;
	for (int li = 0; li < 10 && cfg.levels[li] >= 0 && rc == 0; li++) {
		int level = cfg.levels[li];
		for (int shuf = level ? 0 : 1; shuf < 2 && rc == 0; shuf++) {
			for (int th = 1; th <= cfg.max_threads && rc == 0; th++) {
				at_write_opts o = dflt;
				o.level = level;
				o.shuffle = shuf;
				o.threads = th;
				figure f;
				rc = measure_stream(&t, &o, buf, cap, &f);
				if (rc == 0)
					print_row(level, level ? shuf ? "yes" : "no" : "-",
						  th, &f, &zf, &gf);
			}
		}
	}
	if (rc == 0) {
		at_write_opts o = dflt;
		rc = measure_stream(&t, &o, buf, cap, def);
		if (rc == 0) {
			printf("  default setting (-z %d, shuffle %s, %d threads, %u KiB chunks):\n",
			       o.level, o.shuffle ? "on" : "off", o.threads,
			       (unsigned)(o.chunk_raw >> 10));
			print_row(o.level, o.shuffle ? "yes" : "no", o.threads, def,
				  &zf, &gf);
			measure_chunks(&t, &o);
		}
	}
	free(buf);
	at_tensor_free(&t);
	return rc;
}

/* Parses "0,1,6" into cfg.levels (terminated by -1). */
static int parse_levels(const char *s)
{
	int n = 0;
	char *end;
	while (*s && n < 9) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > 9)
			return -1;
		cfg.levels[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
	}
	cfg.levels[n] = -1;
	return n ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: codec [-s MIB] [-r REPS] [-t MAXTHREADS] "
			"[-k dense,scores,probs] [-l 0,1,6]\n");
	exit(2);
}

static void verdict(const figure *def, const int *have)
{
	at_write_opts d; /* what the default rows were measured with (-t
			  * bounds the sweep only) */
	at_write_opts_default(&d);
	printf("\nverdict (default setting, this machine, %d threads):\n",
	       d.threads);
	if (have[DENSE]) {
		const figure *d = &def[DENSE];
		printf("  dense encode  >= %4.0f MB/s: %-7s (%.0f MB/s)\n", GOAL_ENC,
		       d->enc >= GOAL_ENC ? "met" : "NOT MET", d->enc);
		printf("  dense decode  >= %4.0f MB/s: %-7s (%.0f MB/s)\n", GOAL_DEC,
		       d->dec >= GOAL_DEC ? "met" : "NOT MET", d->dec);
		printf("  dense ratio   >= %4.2f     : %-7s (%.3f)\n", GOAL_DENSE,
		       d->ratio >= GOAL_DENSE ? "met" : "NOT MET", d->ratio);
	}
	if (have[SCORES])
		printf("  scores ratio  >= %4.2f     : %-7s (%.3f)\n", GOAL_SCORES,
		       def[SCORES].ratio >= GOAL_SCORES ? "met" : "NOT MET",
		       def[SCORES].ratio);
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	cfg.mib = 32;
	cfg.reps = 3;
	cfg.max_threads = ncpu < 1 ? 1 : (int)ncpu;
	parse_levels("0,1,6");
	for (int k = 0; k < NKINDS; k++)
		cfg.kinds[k] = 1;
	int c;
	while ((c = getopt(argc, argv, "s:r:t:k:l:h")) != -1) {
		switch (c) {
		case 's': cfg.mib = atof(optarg); break;
		case 'r': cfg.reps = atoi(optarg); break;
		case 't': cfg.max_threads = atoi(optarg); break;
		case 'l':
			if (parse_levels(optarg) < 0)
				usage();
			break;
		case 'k':
			for (int k = 0; k < NKINDS; k++)
				cfg.kinds[k] = strstr(optarg, kind_name[k]) != NULL;
			break;
		default: usage();
		}
	}
	if (cfg.mib <= 0 || cfg.reps < 1 || cfg.max_threads < 1 || optind != argc)
		usage();
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(cfg.tmpdir, sizeof cfg.tmpdir, "%s/andrea-bench.XXXXXX", base);
	if (!mkdtemp(cfg.tmpdir)) {
		fprintf(stderr, "codec: %s: %s\n", cfg.tmpdir, strerror(errno));
		return 1;
	}

	printf("andrea stream codec benchmark: %.0f MiB per kind, best of %d, "
	       "threads 1..%d of %ld cpus\n", cfg.mib, cfg.reps, cfg.max_threads, ncpu);
	printf("MB/s = 1e6 raw bytes per second; ratio = raw / stored bytes; "
	       "x = speed over the reference\n");
	figure def[NKINDS];
	int rc = 0;
	for (int k = 0; k < NKINDS && rc == 0; k++)
		if (cfg.kinds[k])
			rc = bench_kind(k, &def[k]);
	rmdir(cfg.tmpdir);
	if (rc < 0)
		return 1;
	verdict(def, cfg.kinds);
	return 0;
}
