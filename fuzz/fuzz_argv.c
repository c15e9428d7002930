/* fuzz_argv.c - the option parsing of every executable.
 *
 * Each cmd/andrea-*.c is compiled into this target with its main renamed to
 * tool_<name>_main (fuzz.mk: -Dmain=...), and with exit() and the calls
 * where a tool turns from parsing to work (opening the model, the input,
 * the output, a file) renamed to the fuzz_stop_* functions below, which
 * jump back here.  A run therefore covers parsing, the checks made on the
 * options and the messages for bad ones, in process and with coverage
 * feedback, but never reads or writes a file.
 *
 * Input: NUL-separated arguments.  The first names the tool
 * ("andrea-qkv"); a name that matches none picks one by its hash.  A tool
 * must end by returning or exiting 0, 1 or 2; anything else, and every
 * sanitizer report, is a finding.  Memory a tool leaves allocated when it
 * exits is not (a real process gives it back): what the tool's own code
 * allocated is freed after each run, and leak detection is off.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <getopt.h>

#include "cli/cli.h"
#include "cli/filter.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "stream/npy.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "cli/train_ranks.h"
#include "cli/train_run.h"
#include "train/train.h"

#define X(id) int tool_##id##_main(int argc, char **argv);
FUZZ_TOOLS
#undef X

static const struct {
	const char *name;
	int (*main)(int, char **);
} tools[] = {
#define X(id) {#id, tool_##id##_main},
	FUZZ_TOOLS
#undef X
};
#define NTOOLS ((int)(sizeof tools / sizeof tools[0]))

#define MAX_ARGS 64
#define STOPPED 1000 /* longjmp value: reached the work, parsing done */

static jmp_buf back;

const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

_Noreturn void fuzz_exit(int status)
{
	longjmp(back, 1 + (status & 0xff));
}

static _Noreturn void stop(void)
{
	longjmp(back, STOPPED);
}

/* The allocator of the tools' own code (fuzz.mk renames malloc, calloc,
 * realloc and free there): what a tool still holds when it exits or stops
 * is freed after the run, as the end of a real process would. */
#define MAX_HELD 256
static void *held[MAX_HELD];

static void hold(void *p)
{
	for (int i = 0; p && i < MAX_HELD; i++)
		if (!held[i]) {
			held[i] = p;
			return;
		}
}

static void unhold(void *p)
{
	for (int i = 0; p && i < MAX_HELD; i++)
		if (held[i] == p) {
			held[i] = NULL;
			return;
		}
}

static void release_held(void)
{
	for (int i = 0; i < MAX_HELD; i++) {
		free(held[i]);
		held[i] = NULL;
	}
}

void *fuzz_malloc(size_t n)
{
	void *p = malloc(n);
	hold(p);
	return p;
}

void *fuzz_calloc(size_t n, size_t size)
{
	void *p = calloc(n, size);
	hold(p);
	return p;
}

void *fuzz_realloc(void *old, size_t n)
{
	void *p = realloc(old, n);
	if (p) {
		unhold(old);
		hold(p);
	}
	return p;
}

void fuzz_free(void *p)
{
	unhold(p);
	free(p);
}

/* The points where a tool stops parsing and starts working. */
void fuzz_stop_model(const cli_common *c, at_model *m) { stop(); }
int fuzz_stop_model_open(at_model *m, const char *path, uint64_t seed,
			 int heads, const at_read_opts *ro, char *err,
			 size_t errlen) { stop(); }
void fuzz_stop_train_model_init(tr_model *m, const at_config *cfg,
				int biases, int tied,
				const char *what) { stop(); }
void fuzz_stop_filter(cli_common *c, at_filter *f, const char *path) { stop(); }
void fuzz_stop_input(cli_common *c, at_reader *r, const char *path) { stop(); }
void fuzz_stop_output(cli_common *c, at_writer *w) { stop(); }
int fuzz_stop_reader_open(at_reader *r, const char *path,
			  const at_read_opts *o) { stop(); }
int fuzz_stop_writer_open(at_writer *w, const char *path,
			  const at_write_opts *o) { stop(); }
int fuzz_stop_npy_read(const char *path, at_tensor *t, uint64_t max_bytes,
		       char *err, size_t errlen) { stop(); }
int fuzz_stop_st_open(at_st *st, const char *path, char *err,
		      size_t errlen) { stop(); }
FILE *fuzz_stop_fopen(const char *path, const char *mode) { stop(); }
int fuzz_stop_mkdir(const char *path, mode_t mode) { stop(); }
int fuzz_stop_train_run(train_options *o, at_device device,
			const tr_ranks *ranks) { stop(); }
int fuzz_stop_ranks_launch(const cli_ranks *r, int argc,
			   char **argv) { stop(); }
at_fwd *fuzz_stop_whole_model(const cli_common *c, const at_model *m,
			      at_loaded *w, double positions, int T,
			      double head_rows) { stop(); }
unsigned char *fuzz_stop_read_text(const char *path, size_t cap,
				   size_t *n) { stop(); }
void fuzz_stop_tokens_text(const char *path, at_tokenizer *tok,
			   at_tensor *t) { stop(); }
void fuzz_stop_tokens_stream(cli_common *c, const char *path, at_tensor *t,
			     char *label, size_t len) { stop(); }
void fuzz_stop_tokens_lines(const char *path, at_tokenizer *tok,
			    at_tensor *t) { stop(); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* usage and version texts go nowhere; the messages on stderr are
	 * silenced with -close_fd_mask=2 (fuzz/run.sh) */
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDIN_FILENO) < 0)
		abort();
	close(fd);
	static const char *vars[] = {"ANDREA_MODEL", "ANDREA_DEVICE",
				     "ANDREA_THREADS", "ANDREA_ZLEVEL",
				     "ANDREA_MAX_BYTES"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	return 0;
}

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[1 << 16];
	static char *argv[MAX_ARGS + 1];
	if (size == 0 || size >= sizeof buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	int argc = 0;
	for (char *p = buf; p <= buf + size && argc < MAX_ARGS;
	     p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;

	int t = 0;
	char name[64];
	for (t = 0; t < NTOOLS; t++) {
		snprintf(name, sizeof name, "%s", tools[t].name);
		name[6] = '-'; /* andrea_qkv -> andrea-qkv */
		if (strcmp(argv[0], name) == 0)
			break;
	}
	if (t == NTOOLS)
		t = (int)(hash(argv[0]) % NTOOLS);

	optind = 0; /* glibc: start getopt afresh */
	opterr = 0;
	cli_failure_status = 1; /* andrea-diff sets 2 */
	/* cli_init catches the signals that end a tool: libFuzzer's own
	 * handlers come back after each run */
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};
	struct sigaction was[sizeof sigs / sizeof sigs[0]];
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], NULL, &was[i]);
	int rc = setjmp(back);
	if (rc == 0)
		rc = 1 + tools[t].main(argc, argv);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &was[i], NULL);
	release_held();
	if (rc == STOPPED)
		return 0;
	rc -= 1;
	if (rc != 0 && rc != 1 && rc != 2) {
		fprintf(stderr, "fuzz_argv: %s ended with status %d\n", name, rc);
		abort();
	}
	return 0;
}
