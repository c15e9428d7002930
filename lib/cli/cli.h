/* cli.h - what every andrea executable shares on the command line.
 *
 * Conventions (andrea(7), docs/ARCHITECTURE.md): -h/--help prints the
 * synopsis of the man page and the first sentence of each of its options
 * (cmd/help/andrea-NAME.h, which tools/gen-help.py writes from the page), --version
 * the version; errors are one line on stderr naming the program;
 * exit 0 success, 1 failure, 2 misuse of the command line; binary output
 * never goes to a terminal without -f; a closed downstream pipe ends the
 * program quietly (SIGPIPE is left at its default).
 */
#ifndef ANDREA_CLI_H
#define ANDREA_CLI_H

#include "stream/stream.h"

#define ANDREA_VERSION "0.1.0"

typedef struct {
	const char *output; /* -o FILE, or NULL for stdout */
	int force;          /* -f: write binary to a terminal anyway */
	at_read_opts ropts;
	at_write_opts wopts;
	int threads_given;  /* --threads or ANDREA_THREADS was given */
	int level_given;    /* -z or ANDREA_ZLEVEL was given */
	int keep;           /* --keep: write consumed records too */
	const char *device; /* --device, ANDREA_DEVICE */
	const char *model;  /* -m, ANDREA_MODEL; NULL: the seeded default */
	unsigned long long seed;
	int seed_given;     /* --seed was on the command line */
	int heads;          /* --heads for a model file without config */
} cli_common;

/* Names the program for messages, restores SIGPIPE's default action and
 * reads the ANDREA_* variables into c (a bad value is a usage error),
 * all but ANDREA_ZLEVEL, which cli_env_level reads for the tools that
 * write compressed records (cli_parse calls it for a table with -z). */
void cli_init(const char *prog, cli_common *c);
/* The read options (ANDREA_MAX_BYTES, ANDREA_THREADS) cli_init took from
 * the environment, for a file an option names (--patch FILE). */
void cli_env_read_opts(at_read_opts *o);
void cli_env_level(cli_common *c);
extern const char *cli_prog;
/* The exit status of cli_die and cli_fail: 1, except where 1 means
 * something else (andrea-diff sets 2, as cmp(1) does for trouble). */
extern int cli_failure_status;

/* Reports an unknown option or missing argument from getopt_long. */
_Noreturn void cli_bad_option(char **argv);

/* Where OpenBLAS fell back to a generic kernel on a CPU with AVX2
 * (ops/blas_core.h), sets OPENBLAS_CORETYPE to the matching one and starts
 * the program again with argv, before it has read anything; otherwise, or
 * if that fails, returns.  cli_parse calls it. */
void cli_blas_core(char **argv);
/* fn runs first when a cli_* call below ends the program (one at a time;
 * NULL: none): to stop work on other threads before the exit. */
void cli_before_exit(void (*fn)(void));
_Noreturn void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void cli_usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* A library failure: prints "prog: <err>" and exits 1. */
_Noreturn void cli_fail(const char *err);

/* Parses a whole decimal integer in [min, max]; a usage error otherwise. */
long cli_long(const char *arg, long min, long max, const char *what);
double cli_double(const char *arg, const char *what);
/* The index of arg among the n names (an option's choices); a usage error
 * naming them otherwise ("expected auto, fused or explicit"). */
int cli_choice(const char *arg, const char *const *names, int n,
	       const char *what);

/* The write options for the file at path (NULL: standard output):
 * c's, but stored (level 0) into a pipe or a socket unless a level was
 * given (-z, ANDREA_ZLEVEL). */
at_write_opts cli_write_opts(const cli_common *c, const char *path);
/* Opens the output stream: -o FILE (atomically) or stdout, refusing a
 * terminal without -f.  A later cli_die removes a partly written file. */
void cli_open_output(cli_common *c, at_writer *w);
/* Dies where path names a terminal and -f was not given: for streams
 * written by name (-o, --capture-file, a checkpoint). */
void cli_refuse_terminal(const cli_common *c, const char *path);
/* Writes the end record, flushes and reports a write error. */
void cli_finish_output(at_writer *w);
/* Flushes stdout for text output, reporting a write error (a full disk). */
void cli_finish_text(void);

/* Opens an input; failures exit 1, and so does standard input that is a
 * terminal (unless -f, where the tool takes it). */
void cli_open_input(cli_common *c, at_reader *r, const char *path);
/* A usage error where the file name an option was given is empty
 * (path NULL: the option was not given). */
void cli_file_named(const char *option, const char *path);
/* path's folder, resolved, and its last name into buf ("/a/b/NAME");
 * -1 where the folder does not resolve (errno says why). */
int cli_resolve_path(const char *path, char *buf, size_t len);
/* Whether a and b name one file: one that exists, or one that would be
 * made (./m.ats and m.ats); 0 where either is NULL. */
int cli_same_file(const char *a, const char *b);
/* A usage error where the output file out (given by option what; NULL:
 * none) is one of the n inputs in[i] (NULL: none; in_what[i] says what
 * it is, "the model file"), which the run reads and the output, renamed
 * into place at its end, would replace. */
void cli_output_not_input(const char *what, const char *out, int n,
			  const char *const *in_what, const char *const *in);
/* A usage error where more than one of paths[0..n) is "-": standard
 * input can be read once. */
void cli_stdin_once(const char *const *paths, int n);
/* The program's option table has -f (cli_parse sets it). */
extern int cli_takes_force;

/* The option table and its parser, cli_parse: every main's command line */
#include "cli/opts.h"

#endif
