/* tokens.h - token ids from the command line: raw bytes (--text) or a
 * comma-separated list (--tokens).  Both end the program with a one-line
 * error on failure (cli.h). */
#ifndef ANDREA_TOKENS_H
#define ANDREA_TOKENS_H

#include "core/tensor.h"

/* Every byte of path (NULL or "-": stdin) as a token: tokens i32 [1,T]. */
void cli_tokens_from_text(const char *path, at_tensor *t);
/* "1,2,3" as tokens i32 [1,3]; anything else is a usage error. */
void cli_tokens_from_list(const char *list, at_tensor *t);

#endif
