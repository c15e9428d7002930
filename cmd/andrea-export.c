/* andrea-export - an andrea model as a Hugging Face GPT-2 checkpoint.
 *
 * Writes DIR/model.safetensors and DIR/config.json, which transformers
 * loads as GPT2LMHeadModel (lib/model/gpt2.h: at_gpt2_export), and where
 * the model carries GPT-2's tokenizer, DIR/tokenizer.json (with its added
 * tokens), DIR/vocab.json and DIR/merges.txt (gpt2_tokenizer.h).  DIR is
 * made if it does not exist; each file is written through a temporary
 * name and renamed into place.
 */

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "model/gpt2.h"
#include "model/gpt2_tokenizer.h"

#include "help/andrea-export.h" /* usage: the --help text */

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-export", &c);
	cli_opt opts[] = {CLI_USES(CLI_USE_BASIC | CLI_USE_MODEL), CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (operand.n != 1)
		cli_usage_error("no DIR operand (see %s --help)", cli_prog);
	const char *dir = operand.v[0];
	at_model m;
	stage_open_model(&c, &m);
	const at_config *cfg = &m.cfg;
	if (!cfg->n_layer || !cfg->n_head || !cfg->d_model || !cfg->ctx ||
	    !cfg->vocab)
		cli_die("%s: the model's shape is unknown (no config record)",
			m.path);
	char err[1200];
	at_tokenizer *tok = cli_tokenizer(&m);
	/* the tokenizer's files are made and checked before anything is
	 * written */
	at_gpt2_tok_files *files = NULL;
	if (at_tok_is_bpe(tok) &&
	    !(files = at_gpt2_tok_files_make(tok, m.path, err, sizeof err)))
		cli_die("%s", err);
	if (at_gpt2_export(&m, dir, err, sizeof err) < 0 ||
	    (files && at_gpt2_tok_files_write(files, dir, err, sizeof err) < 0))
		cli_die("%s", err);
	at_gpt2_tok_files_free(files);
	at_tok_free(tok);
	at_model_close(&m);
	return 0;
}
