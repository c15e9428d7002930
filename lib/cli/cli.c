/* cli.c - shared command-line handling and one-line diagnostics. */
#include "cli/cli.h"
#include "core/atomic_file.h"
#include "model/model.h"
#include "ops/blas_core.h"
#include "ops/device.h"
#include "stream/pump.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

const char *cli_prog = "andrea";
int cli_failure_status = 1;
/* the read options of the ANDREA_* variables, as cli_init read them */
static at_read_opts env_ropts;
static at_writer *open_writer; /* removed on failure */

static void env_long(const char *var, long min, long max, long *out)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return;
	char *end;
	errno = 0;
	long l = strtol(v, &end, 10);
	if (*end || errno || l < min || l > max)
		cli_usage_error("%s='%s': expected an integer in %ld..%ld", var,
				v, min, max);
	*out = l;
}

/* ANDREA_AUTO_MIN_WORK: the seconds auto counts for starting CUDA. */
static void auto_min_work(void)
{
	const char *v = getenv("ANDREA_AUTO_MIN_WORK");
	if (!v || !*v)
		return;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (*end || errno || !isfinite(d) || d < 0)
		cli_usage_error("ANDREA_AUTO_MIN_WORK='%s': expected seconds, "
				"a number 0 or more", v);
	at_device_auto_min_work(d);
}

/* A stage allocates and frees each record's tensors; glibc would map the
 * large ones afresh each time, paying a page fault a page (25 MB: some
 * 6,000 faults, more than the time its bytes take through a pipe).  Up to
 * 32 MiB (mmap's largest threshold) they come from the heap instead, and
 * what is freed stays there for the next record. */
static void keep_freed_memory(void)
{
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

void cli_blas_core(char **argv)
{
	const char *core = at_blas_core_wanted();
	if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
		return;
	execv("/proc/self/exe", argv); /* OpenBLAS reads it as it loads */
	unsetenv("OPENBLAS_CORETYPE");
}

/* A signal that ends the tool first removes the temporary files of
 * what it was writing (core/atomic_file.h), then ends it as it would
 * have. */
static void on_fatal_signal(int sig)
{
	at_afile_drop_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* The handlers of the signals that end a tool.  SIGPIPE's is set even
 * where the caller ignored it, so that a tool whose reader went away
 * ends quietly rather than with a write error; an interrupt the caller
 * ignores (nohup, a background job) stays ignored.  A file size limit
 * fails the write instead of killing the tool, which then says so.  An
 * exit removes what was not renamed into place. */
static void catch_signals(void)
{
	static const int ends[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
		struct sigaction old;
		if (sigaction(ends[i], NULL, &old) == 0 &&
		    old.sa_handler != SIG_IGN)
			signal(ends[i], on_fatal_signal);
	}
	signal(SIGPIPE, on_fatal_signal);
	signal(SIGXFSZ, SIG_IGN);
	static int at_exit;
	if (!at_exit++)
		atexit(at_afile_drop_all);
}

void cli_init(const char *prog, cli_common *c)
{
	cli_prog = prog;
#ifdef __linux__
	/* after cli_blas_core's execv("/proc/self/exe") ps and top would
	 * call it "exe" */
	prctl(PR_SET_NAME, prog, 0, 0, 0);
#endif
	catch_signals();
	keep_freed_memory();
	memset(c, 0, sizeof *c);
	at_read_opts_default(&c->ropts);
	at_write_opts_default(&c->wopts);
	long threads = c->ropts.threads;
	env_long("ANDREA_THREADS", 1, 256, &threads);
	const char *given = getenv("ANDREA_THREADS");
	c->threads_given = given && *given;
	const char *mb = getenv("ANDREA_MAX_BYTES");
	if (mb && *mb) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(mb, &end, 10);
		if (*end || errno || v == 0 || !isdigit((unsigned char)mb[0]))
			cli_usage_error("ANDREA_MAX_BYTES='%s': expected a positive "
					"byte count", mb);
		c->ropts.max_bytes = v;
	}
	c->ropts.threads = c->wopts.threads = (int)threads;
	auto_min_work();
	c->device = getenv("ANDREA_DEVICE");
	if (c->device && !*c->device)
		c->device = NULL; /* empty: unset, as ANDREA_MODEL */
	c->model = getenv("ANDREA_MODEL");
	if (c->model && !*c->model)
		c->model = NULL;
	c->seed = AT_DEFAULT_SEED;
	env_ropts = c->ropts;
}

void cli_env_read_opts(at_read_opts *o)
{
	*o = env_ropts;
}

void cli_env_level(cli_common *c)
{
	long level = c->wopts.level;
	env_long("ANDREA_ZLEVEL", 0, 9, &level);
	const char *z = getenv("ANDREA_ZLEVEL");
	c->level_given = z && *z;
	c->wopts.level = (int)level;
}

static void vmsg(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", cli_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void (*before_exit)(void);

void cli_before_exit(void (*fn)(void))
{
	before_exit = fn;
}

/* Ends the program with status, removing the output being written. */
static _Noreturn void leave(int status)
{
	if (before_exit)
		before_exit();
	if (open_writer)
		at_writer_abort(open_writer);
	exit(status);
}

_Noreturn void cli_die(const char *fmt, ...)
{
	fflush(stdout); /* what was printed stays ahead of the error */
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	leave(cli_failure_status);
}

_Noreturn void cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	leave(2);
}

_Noreturn void cli_fail(const char *err)
{
	cli_die("%s", err);
}

_Noreturn void cli_bad_option(char **argv)
{
	if (optopt > 0 && optopt < 0x80 && isprint(optopt))
		cli_usage_error("-%c: unknown option or missing argument "
				"(see %s --help)", optopt, cli_prog);
	cli_usage_error("%s: unknown option or missing argument (see %s --help)",
			argv[optind - 1], cli_prog);
}

long cli_long(const char *arg, long min, long max, const char *what)
{
	char *end;
	errno = 0;
	long l = strtol(arg, &end, 10);
	if (end == arg || *end || errno || l < min || l > max)
		cli_usage_error("%s '%s': expected an integer in %ld..%ld", what,
				arg, min, max);
	return l;
}

double cli_double(const char *arg, const char *what)
{
	char *end;
	errno = 0;
	double d = strtod(arg, &end);
	if (end == arg || *end || (errno == ERANGE && isinf(d)) || isnan(d))
		cli_usage_error("%s '%s': expected a number", what, arg);
	return d;
}

int cli_choice(const char *arg, const char *const *names, int n,
	       const char *what)
{
	char list[256] = "";
	for (int i = 0; i < n; i++) {
		if (!strcmp(arg, names[i]))
			return i;
		size_t len = strlen(list);
		snprintf(list + len, sizeof list - len, "%s%s",
			 i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
	}
	cli_usage_error("%s '%s': expected %s", what, arg, list);
	return -1;
}

void cli_common_opt(cli_common *c, unsigned use, const char *arg,
		    const char *usage)
{
	switch (use) {
	case CLI_USE_HELP:
		fputs(usage, stdout);
		cli_finish_text();
		exit(0);
	case CLI_USE_VERSION:
		printf("%s (andrea) %s\n", cli_prog, ANDREA_VERSION);
		cli_finish_text();
		exit(0);
	case CLI_USE_OUTPUT:
		cli_file_named("-o/--output", arg);
		c->output = arg;
		break;
	case CLI_USE_FORCE:
		c->force = 1;
		break;
	case CLI_USE_LEVEL:
		c->wopts.level = (int)cli_long(arg, 0, 9, "-z/--level");
		c->level_given = 1;
		break;
	case CLI_USE_THREADS:
		c->ropts.threads = c->wopts.threads =
			(int)cli_long(arg, 1, 256, "--threads");
		c->threads_given = 1;
		break;
	case CLI_USE_NO_SHUFFLE:
		c->wopts.shuffle = 0;
		break;
	case CLI_USE_KEEP:
		c->keep = 1;
		break;
	case CLI_USE_DEVICE:
		c->device = arg;
		break;
	case CLI_USE_MODEL_FILE:
		c->model = arg;
		break;
	case CLI_USE_SEED:
		c->seed = (unsigned long long)cli_long(arg, 0, LONG_MAX, "--seed");
		c->seed_given = 1;
		break;
	case CLI_USE_HEADS:
		c->heads = (int)cli_long(arg, 1, 4096, "--heads");
		break;
	default:
		break;
	}
}

/* A pipe holds 64 KiB by default, so a stage handing on a 48 MiB tensor
 * would switch to its reader some 800 times; 1 MiB (the largest an
 * unprivileged process may ask for) cuts that sixteenfold.  Failure is
 * harmless: the pipe just stays as it was. */
static void widen_pipe(int fd)
{
#ifdef F_SETPIPE_SZ
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
		fcntl(fd, F_SETPIPE_SZ, 1 << 20);
#else
	(void)fd;
#endif
}

void cli_refuse_terminal(const cli_common *c, const char *path)
{
	/* only a character device can be one; opening anything else (a
	 * fifo) to ask would be seen by whoever is at its other end */
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode))
		return;
	int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return;
	int tty = isatty(fd);
	close(fd);
	if (tty && !c->force)
		cli_die("%s: refusing to write binary data to a terminal%s", path,
			cli_takes_force ? " (use -f)" : "");
}

at_write_opts cli_write_opts(const cli_common *c, const char *path)
{
	/* A pipe keeps nothing, so deflating for it costs the writer and the
	 * reader (inflating) time and saves nothing (bench/README.md,
	 * stages): stored, unless a level was asked for.  A pipe by name is
	 * one too: a fifo, /dev/stdout, >(cmd). */
	at_write_opts o = c->wopts;
	struct stat st;
	if (!c->level_given &&
	    (path ? stat(path, &st) == 0 &&
			    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
		  : at_is_pipe(STDOUT_FILENO)))
		o.level = 0;
	return o;
}

void cli_open_output(cli_common *c, at_writer *w)
{
	if (c->output && strcmp(c->output, "-") != 0) {
		cli_refuse_terminal(c, c->output);
		at_write_opts o = cli_write_opts(c, c->output);
		if (at_writer_open(w, c->output, &o) < 0)
			cli_fail(w->err);
	} else {
		if (isatty(STDOUT_FILENO) && !c->force)
			cli_die("refusing to write binary data to a terminal "
				"(redirect it, or use -f)");
		at_write_opts o = cli_write_opts(c, NULL);
		at_writer_wrap(w, stdout, "<stdout>", &o);
		widen_pipe(STDOUT_FILENO);
	}
	open_writer = w;
}

void cli_finish_output(at_writer *w)
{
	if (at_writer_finish(w) < 0)
		cli_fail(w->err);
	open_writer = NULL;
}

void cli_finish_text(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
		cli_die("<stdout>: write error: %s", strerror(errno));
}

int cli_takes_force;

void cli_file_named(const char *option, const char *path)
{
	if (path && !*path)
		cli_usage_error("%s: expected a file name", option);
}

int cli_resolve_path(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	snprintf(dir, sizeof dir, "%.*s",
		 !slash ? 1 : slash == path ? 1 : (int)(slash - path),
		 !slash ? "." : path);
	char *real = realpath(dir, NULL);
	if (!real)
		return -1;
	snprintf(buf, len, "%s/%s", real, slash ? slash + 1 : path);
	free(real);
	return 0;
}

void cli_output_not_input(const char *what, const char *out, int n,
			  const char *const *in_what, const char *const *in)
{
	for (int i = 0; i < n; i++)
		if (cli_same_file(out, in[i]))
			cli_usage_error("%s %s is %s, which the run reads",
					what, out, in_what[i]);
}

int cli_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char ra[8200], rb[8200];
	if (!a || !b)
		return 0;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	return cli_resolve_path(a, ra, sizeof ra) == 0 &&
	       cli_resolve_path(b, rb, sizeof rb) == 0 && strcmp(ra, rb) == 0;
}

void cli_stdin_once(const char *const *paths, int n)
{
	int dashes = 0;
	for (int i = 0; i < n; i++)
		dashes += paths[i] && strcmp(paths[i], "-") == 0;
	if (dashes > 1)
		cli_usage_error("standard input (-) can be read only once, and "
				"%d inputs name it", dashes);
}

void cli_open_input(cli_common *c, at_reader *r, const char *path)
{
	/* a stream is binary: one typed at a terminal is a mistake, as gzip
	 * -d says; -f reads it anyway */
	if ((!path || strcmp(path, "-") == 0) && isatty(STDIN_FILENO) &&
	    !c->force)
		cli_die("<stdin>: refusing to read a stream from a terminal (pipe "
			"one in or give a FILE%s)", cli_takes_force ? "; -f reads "
			"it anyway" : "");
	if (at_reader_open(r, path, &c->ropts) < 0)
		cli_fail(r->err);
	widen_pipe(fileno(r->f));
}
