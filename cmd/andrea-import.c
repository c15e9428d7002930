/* andrea-import - a GPT-2 checkpoint as an andrea model file.
 *
 * PATH is a Hugging Face model directory (model.safetensors and
 * config.json), its model.safetensors (config.json beside it, or
 * --config FILE), or an llm.c checkpoint (gpt2_124M.bin).  The
 * tokenizer goes into the model file too: tokenizer.json, or vocab.json
 * with merges.txt, beside the checkpoint or named by options.  The
 * header, the config and the tokenizer are checked before anything is
 * written, each tensor's shape as it is read; a pickle is refused unread.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "model/gpt2.h"
#include "model/gpt2_tokenizer.h"
#include "model/safetensors.h"

#include "help/andrea-import.h" /* usage: the --help text */

/* PATH's directory: path itself where it is one, else what holds it. */
static void directory_of(const char *path, int is_dir, char *out, size_t n)
{
	if (is_dir) {
		snprintf(out, n, "%s", path);
		return;
	}
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(out, n, ".");
	else
		snprintf(out, n, "%.*s", (int)(slash - path) + (slash == path),
			 path);
}

/* 1 where path opens with llm.c's magic. */
static int starts_as_llmc(const char *path)
{
	unsigned char head[4];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(head, 1, sizeof head, f) : 0;
	if (f)
		fclose(f);
	return at_llmc_is(head, n);
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

typedef struct {
	const char *json, *vocab, *merges; /* the options */
	int none;                          /* --no-tokenizer */
} tokenizer_opts;

/* The tokenizer the options name, else tokenizer.json in dir, else
 * vocab.json and merges.txt there; NULL where there is none (or
 * --no-tokenizer).  Dies on a bad file or one that does not fit V. */
static at_tokenizer *read_tokenizer(const tokenizer_opts *o, const char *dir,
				    const at_config *cfg)
{
	char json[4200], vocab[4200], merges[4200], err[1200];
	snprintf(json, sizeof json, "%s/tokenizer.json", dir);
	snprintf(vocab, sizeof vocab, "%s", o->vocab ? o->vocab : "");
	snprintf(merges, sizeof merges, "%s", o->merges ? o->merges : "");
	if (!o->vocab) {
		snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
		snprintf(merges, sizeof merges, "%s/merges.txt", dir);
	}
	at_tokenizer *t = NULL;
	if (o->none)
		return NULL;
	if (o->json || (!o->vocab && exists(json)))
		t = at_gpt2_tokenizer_json(o->json ? o->json : json, err, sizeof err);
	else if (o->vocab || (exists(vocab) && exists(merges)))
		t = at_gpt2_tokenizer_files(vocab, merges, err, sizeof err);
	else
		return NULL;
	if (!t)
		cli_die("%s", err);
	if (at_tok_size(t) > cfg->vocab)
		cli_die("%s: the tokenizer has %d tokens, but the model's V is %d",
			o->json ? o->json : o->vocab ? o->vocab : dir,
			at_tok_size(t), cfg->vocab);
	return t;
}

/* No PATH: a stream of the tokenizer's records alone, which andrea-tokenize
 * -m and andrea-train --tokenizer take. */
static void tokenizer_only(cli_common *c, const tokenizer_opts *o)
{
	at_config any = {.vocab = AT_MAX_CONFIG}; /* any a model may have */
	at_tokenizer *t = read_tokenizer(o, ".", &any);
	at_writer w;
	cli_open_output(c, &w);
	if (at_tok_write(t, &w) < 0)
		cli_fail(w.err);
	cli_finish_output(&w);
	at_tok_free(t);
}

/* Writes each parameter as it comes. */
static int write_param(void *w, const at_tensor *t)
{
	if (at_write_tensor(w, t) < 0)
		cli_fail(((at_writer *)w)->err);
	return 0;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-import", &c);
	const char *config = NULL;
	tokenizer_opts to = {0};
	cli_opt opts[] = {CLI_USES(CLI_USE_COMMON),
			  CLI_STRING("config", 0, &config),
			  CLI_STRING("tokenizer", 0, &to.json),
			  CLI_STRING("vocab", 0, &to.vocab),
			  CLI_STRING("merges", 0, &to.merges),
			  CLI_FLAG("no-tokenizer", 0, &to.none), CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (!to.vocab != !to.merges)
		cli_usage_error("--vocab and --merges go together");
	if ((to.json != NULL) + (to.vocab != NULL) + to.none > 1)
		cli_usage_error("--tokenizer, --vocab/--merges and --no-tokenizer "
				"exclude each other");
	if (operand.n == 0 && (to.json || to.vocab)) {
		if (config)
			cli_usage_error("--config: no PATH, so no checkpoint "
					"it would describe");
		tokenizer_only(&c, &to);
		return 0;
	}
	if (operand.n != 1)
		cli_usage_error("no PATH operand (see %s --help)", cli_prog);
	const char *path = operand.v[0];
	struct stat st;
	if (stat(path, &st) != 0)
		cli_die("%s: no such file or directory", path);
	int is_dir = S_ISDIR(st.st_mode);
	char dir[4096], tensors[4200], cfg_path[4200];
	directory_of(path, is_dir, dir, sizeof dir);
	snprintf(tensors, sizeof tensors, is_dir ? "%s/model.safetensors" : "%s",
		 is_dir ? dir : path);
	snprintf(cfg_path, sizeof cfg_path, "%s", config ? config : "");
	if (!config)
		snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);

	char err[1200];
	at_config cfg;
	at_st sf = {0};
	int llmc = !is_dir && starts_as_llmc(path);
	if (llmc && config)
		cli_usage_error("--config: an llm.c checkpoint carries its config");
	if (llmc ? at_llmc_config(path, &cfg, err, sizeof err) < 0
		 : at_st_open(&sf, tensors, err, sizeof err) < 0 ||
			   at_gpt2_config(cfg_path, &cfg, err, sizeof err) < 0)
		cli_die("%s", err);
	at_tokenizer *tok = read_tokenizer(&to, dir, &cfg);
	/* with -o a failure leaves no file (it is renamed into place at the
	 * end); on a pipe the stream then has no end, an error downstream */
	at_writer w;
	cli_open_output(&c, &w);
	if (at_config_write(&w, &cfg) < 0)
		cli_fail(w.err);
	if ((llmc ? at_llmc_import(path, write_param, &w, err, sizeof err)
		  : at_gpt2_import(&sf, &cfg, write_param, &w, err, sizeof err)) < 0)
		cli_die("%s", err);
	if (tok && at_tok_write(tok, &w) < 0)
		cli_fail(w.err);
	cli_finish_output(&w);
	at_tok_free(tok);
	at_st_close(&sf);
	return 0;
}
