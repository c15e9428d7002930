/* tokens.h - token ids from the command line: text through the model's
 * tokenizer (--text) or a comma-separated list (--tokens).  Each ends the
 * program with a one-line error on failure (cli.h). */
#ifndef ANDREA_TOKENS_H
#define ANDREA_TOKENS_H

#include "cli/cli.h"
#include "core/tensor.h"
#include "model/model.h"
#include "text/tokenizer.h"

/* Bytes of text read at most for --text. */
#define CLI_MAX_TEXT (1u << 26)

/* m's tokenizer (at_model_tokenizer). */
at_tokenizer *cli_tokenizer(const at_model *m);
/* Every byte of path (NULL or "-": stdin), at most cap of them; their
 * count in *n.  The buffer is malloc'd. */
unsigned char *cli_read_text(const char *path, size_t cap, size_t *n);
/* The text of path (at most CLI_MAX_TEXT bytes) encoded by tok as tokens
 * i32 [1,T]. */
void cli_tokens_from_text(const char *path, at_tokenizer *tok, at_tensor *t);
/* The first `tokens` record (i32 [B,T] or [T]) of the stream at path
 * (NULL or "-": stdin), as [B,T]; label (where not NULL) gets "PATH:
 * record N 'tokens'" for what is said of them later (stage_check_tokens). */
void cli_tokens_from_stream(cli_common *c, const char *path, at_tensor *t,
			    char *label, size_t len);
/* Ends the program where t [B,T]'s lengths attribute (andrea-embed
 * --lines' padded rows) says a row is shorter than T: for the tools whose
 * measures take every position of a row, or its last, as real. */
void cli_tokens_whole_rows(const at_tensor *t, const char *label);
/* "1,2,3" as tokens i32 [1,3]; anything else is a usage error. */
void cli_tokens_from_list(const char *list, at_tensor *t);
/* tokens [B,T] from the lines of a text file (as cli_tokens_from_text
 * reads it), one row a line without its newline, each encoded through
 * tok and right-padded with token 0 to the longest, and the attribute
 * lengths=N,N,... of the rows' own lengths (andrea-embed --lines).  An
 * empty line, or more lines than the attribute holds, ends the program. */
void cli_tokens_from_lines(const char *path, at_tokenizer *tok, at_tensor *t);

#endif
