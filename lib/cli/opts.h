/* opts.h - the command line of an executable as one table over getopt_long.
 *
 * A main describes its options as an array of cli_opt entries, written
 * with the CLI_* macros below and closed by CLI_END, and hands it to
 * cli_parse, which runs the getopt_long loop: it stores each value as its
 * option is met, handles the common options of cli.h that the table takes
 * (--help printing the usage text, --version), reports an unknown option
 * or a missing argument, checks the number of operands and returns them.
 * Values are stored in the order of the command line, so a bad argument is
 * reported before anything after it, and a later option overrides an
 * earlier one.  What the options mean together (two that exclude each
 * other, an operand an option forbids) main checks afterwards:
 *
 *	cli_init(prog, &c);                  init
 *	operands = cli_parse(&c, opts, ...); parse
 *	if (a && b) cli_usage_error(...);    validate
 *	...                                  compute, write
 */
#ifndef ANDREA_OPTS_H
#define ANDREA_OPTS_H

#include "cli/cli.h"

/* The common options (cli_common_opt), one bit each, in the order of
 * CLI_COMMON_LONG, CLI_STAGE_LONG and CLI_MODEL_LONG; a short letter comes
 * with its long option. */
enum {
	CLI_USE_HELP = 1 << 0,       /* -h, --help */
	CLI_USE_VERSION = 1 << 1,    /* --version */
	CLI_USE_OUTPUT = 1 << 2,     /* -o, --output */
	CLI_USE_FORCE = 1 << 3,      /* -f, --force */
	CLI_USE_LEVEL = 1 << 4,      /* -z, --level */
	CLI_USE_THREADS = 1 << 5,    /* --threads */
	CLI_USE_NO_SHUFFLE = 1 << 6, /* --no-shuffle */
	CLI_USE_KEEP = 1 << 7,       /* --keep */
	CLI_USE_DEVICE = 1 << 8,     /* --device */
	CLI_USE_MODEL_FILE = 1 << 9, /* -m, --model */
	CLI_USE_SEED = 1 << 10,      /* --seed (of the default model) */
	CLI_USE_HEADS = 1 << 11,     /* --heads */
	/* what every executable takes */
	CLI_USE_BASIC = CLI_USE_HELP | CLI_USE_VERSION | CLI_USE_THREADS,
	/* CLI_COMMON_LONG: every stream-writing executable */
	CLI_USE_COMMON = CLI_USE_BASIC | CLI_USE_OUTPUT | CLI_USE_FORCE |
			 CLI_USE_LEVEL | CLI_USE_NO_SHUFFLE,
	/* CLI_STAGE_LONG: the stage filters */
	CLI_USE_STAGE = CLI_USE_KEEP | CLI_USE_DEVICE,
	/* CLI_MODEL_LONG: the tools that open a model */
	CLI_USE_MODEL = CLI_USE_MODEL_FILE | CLI_USE_SEED | CLI_USE_HEADS,
};

/* What an entry is, and so what its option does with its argument. */
typedef enum {
	CLI_KIND_END = 0, /* closes the table */
	CLI_KIND_USES,    /* takes the common options of the CLI_USE_* bits */
	CLI_KIND_SET,     /* no argument: *(int *)to = 1 */
	CLI_KIND_CLEAR,   /* no argument: *(int *)to = 0 */
	CLI_KIND_INT,     /* *(int *)to = an integer in [min, max] */
	CLI_KIND_LONG,    /* *(long *)to = an integer in [min, max] */
	CLI_KIND_DOUBLE,  /* *(double *)to = a number (cli_double) */
	CLI_KIND_STRING,  /* *(const char **)to = the argument itself */
	CLI_KIND_CALL,    /* no argument: fn(to, NULL, what) */
	CLI_KIND_CALL_ARG, /* fn(to, argument, what) */
	CLI_KIND_ALIAS,   /* another long name for the entry of this letter */
} cli_kind;

/* The action of a CLI_CALL or CLI_CALL_ARG option: ctx is the entry's
 * `to`, arg its argument (NULL for an option without one) and what names
 * it for messages as the other kinds do ("-l/--layer", "--fill", "-n").
 * A bad argument is a usage error (cli_usage_error). */
typedef void cli_opt_fn(void *ctx, const char *arg, const char *what);

/* One entry of an option table: write it with the macros below. */
typedef struct {
	cli_kind kind;
	const char *name; /* long name without "--"; NULL: a short option only */
	int letter;       /* short option letter; 0: a long option only */
	void *to;         /* where the value goes, or fn's context */
	long min, max;    /* CLI_KIND_INT, CLI_KIND_LONG: the range */
	cli_opt_fn *fn;   /* CLI_KIND_CALL, CLI_KIND_CALL_ARG */
	unsigned uses;    /* CLI_KIND_USES: CLI_USE_* bits */
	int given;        /* set by cli_parse: how many times it was met */
} cli_opt;

/* p as the `to` of an entry, checked to point to a T (a compiler warning
 * otherwise). */
#define CLI_TO(T, p) ((void *)(1 ? (p) : (T *)0))

/* The entries.  nm is the long name without "--" (NULL: a short option
 * only), ch the short letter (0: a long option only).  The table's
 * common options come with CLI_USES (several add up). */
#define CLI_USES(bits) {.kind = CLI_KIND_USES, .uses = (bits)}
/* A flag: sets, or clears, the int at p. */
#define CLI_FLAG(nm, ch, p)                                             \
	{.kind = CLI_KIND_SET, .name = (nm), .letter = (ch),            \
	 .to = CLI_TO(int, p)}
#define CLI_UNFLAG(nm, ch, p)                                           \
	{.kind = CLI_KIND_CLEAR, .name = (nm), .letter = (ch),          \
	 .to = CLI_TO(int, p)}
/* An integer from lo to hi (cli_long) into the int, or long, at p. */
#define CLI_INT(nm, ch, p, lo, hi)                                      \
	{.kind = CLI_KIND_INT, .name = (nm), .letter = (ch),            \
	 .to = CLI_TO(int, p), .min = (lo), .max = (hi)}
#define CLI_LONG(nm, ch, p, lo, hi)                                     \
	{.kind = CLI_KIND_LONG, .name = (nm), .letter = (ch),           \
	 .to = CLI_TO(long, p), .min = (lo), .max = (hi)}
/* A number (cli_double) into the double at p. */
#define CLI_DOUBLE(nm, ch, p)                                           \
	{.kind = CLI_KIND_DOUBLE, .name = (nm), .letter = (ch),         \
	 .to = CLI_TO(double, p)}
/* The argument itself into the const char * at p. */
#define CLI_STRING(nm, ch, p)                                           \
	{.kind = CLI_KIND_STRING, .name = (nm), .letter = (ch),         \
	 .to = CLI_TO(const char *, p)}
/* An option that calls fn(ctx, ...) when met: without, or with, an
 * argument.  For checks that must come in the order of the command line
 * (a value's own range, "give this once"). */
#define CLI_CALL(nm, ch, f, ctx)                                        \
	{.kind = CLI_KIND_CALL, .name = (nm), .letter = (ch),           \
	 .to = (ctx), .fn = (f)}
#define CLI_CALL_ARG(nm, ch, f, ctx)                                    \
	{.kind = CLI_KIND_CALL_ARG, .name = (nm), .letter = (ch),       \
	 .to = (ctx), .fn = (f)}
/* nm as a second long name of the entry of short letter ch (--silent
 * for -q/--quiet); it counts in that entry's given. */
#define CLI_ALIAS(nm, ch)                                               \
	{.kind = CLI_KIND_ALIAS, .name = (nm), .letter = (ch)}
#define CLI_END {.kind = CLI_KIND_END}

/* max_operands of cli_parse: any number. */
#define CLI_ANY (-1)

/* The operands that follow the options: v[0] .. v[n-1], and v[n] is
 * NULL, so v[0] is the one operand of a filter or NULL for stdin. */
typedef struct {
	int n;
	char **v;
} cli_operands;

/* Parses argv by the table opts: stores each option's value as it is
 * met and counts it in its entry's given; the common options of the
 * table's CLI_USES go to cli_common_opt (-h and --help print usage and
 * exit 0, as --version does).  An unknown option, a missing or bad
 * argument, or more than max_operands operands (CLI_ANY: no limit) is a
 * usage error, exit 2.  getopt_long's state (optind) is left as it ends. */
cli_operands cli_parse(cli_common *c, cli_opt *opts, const char *usage,
		       int max_operands, int argc, char **argv);

/* How many times cli_parse met the option of long name `name` in opts,
 * aliases included; 0 for a name the table lacks. */
int cli_given(const cli_opt *opts, const char *name);

#endif
