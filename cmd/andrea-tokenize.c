/* andrea-tokenize - text to a tokens record, and tokens back to text.
 *
 * The tokenizer is the model's (-m): GPT-2's byte-level BPE where the
 * model file carries one (andrea-import puts it there), else the byte
 * tokenizer.  Encoding reads FILE (or stdin) as bytes and writes one
 * `tokens` record i32 [1,T]; --ids prints the ids instead, --pieces one
 * token a line.  --decode reads a stream and writes the text of every
 * `tokens` record, a newline between the rows of a batch (each row's
 * own length where the batch is padded).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"

#include "help/andrea-tokenize.h" /* usage: the --help text */

/* Text of at most this many bytes is encoded (1 GiB). */
#define MAX_ENCODE (1u << 30)

/* Writes token id's bytes to stdout as --pieces shows them: printable
 * ASCII as it is, a backslash as \\, every other byte as \xHH. */
static void put_piece(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\\')
			fputs("\\\\", stdout);
		else if (p[i] >= 0x20 && p[i] < 0x7f)
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
	}
}

/* The bytes of token ids[i], or dies naming the record and position. */
static const unsigned char *piece_of(const at_tokenizer *tok, const char *label,
				     int index, const at_tensor *t, uint64_t i,
				     size_t *len)
{
	int32_t id = ((const int32_t *)t->data)[i];
	const unsigned char *p = at_tok_piece(tok, id, len);
	uint64_t T = t->rank == 2 ? t->dims[1] : t->dims[0];
	if (!p)
		cli_die("%s: record %d 'tokens': token %d at [%llu,%llu] is not "
			"in the tokenizer's 0..%d", label, index, id,
			(unsigned long long)(T ? i / T : 0),
			(unsigned long long)(T ? i % T : 0), at_tok_size(tok) - 1);
	return p;
}

static void decode_main(cli_common *c, const at_tokenizer *tok,
			const char *path)
{
	at_reader r;
	cli_open_input(c, &r, path ? path : "-");
	at_header h;
	int rc, records = 0, rows = 0;
	while ((rc = at_read_header(&r, &h)) == 1) {
		if (strcmp(h.name, "tokens") != 0) {
			if (at_check_payload(&r, &h) < 0)
				break;
			continue;
		}
		records++;
		if (h.dtype != AT_I32 || h.rank < 1 || h.rank > 2)
			cli_die("%s: record %d 'tokens': expected i32 [B,T] or [T], "
				"got %s rank %d", r.label, h.index,
				at_dtype_name(h.dtype), h.rank);
		at_tensor t;
		if (at_read_payload(&r, &h, &t) < 0)
			break;
		uint64_t B = t.rank == 2 ? t.dims[0] : 1, T = t.dims[t.rank - 1],
			 row_len[AT_MAX_VALUE];
		char why[300];
		/* a padded batch (andrea-embed --lines): its padding is no text */
		int padded = at_attr_lengths(&t.attrs, B, T, row_len, why,
					     sizeof why);
		if (padded < 0)
			cli_die("%s: record %d 'tokens': %s", r.label, h.index, why);
		for (uint64_t b = 0; b < B; b++) {
			if (rows++)
				putchar('\n');
			uint64_t end = b * T + (padded ? row_len[b] : T);
			for (uint64_t i = b * T; i < end; i++) {
				size_t len;
				const unsigned char *p = piece_of(tok, r.label, h.index,
								  &t, i, &len);
				fwrite(p, 1, len, stdout);
			}
		}
		at_tensor_free(&t);
	}
	if (rc != 0)
		cli_fail(r.err);
	at_reader_close(&r);
	if (!records)
		cli_die("%s: no 'tokens' record", r.label);
	cli_finish_text();
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-tokenize", &c);
	int decode = 0, ids = 0, pieces = 0, bos = 0;
	cli_opt opts[] = {CLI_USES(CLI_USE_COMMON | CLI_USE_MODEL_FILE),
			  CLI_FLAG("decode", 'd', &decode),
			  CLI_FLAG("ids", 0, &ids),
			  CLI_FLAG("pieces", 0, &pieces),
			  CLI_FLAG("bos", 0, &bos), CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (decode + ids + pieces > 1)
		cli_usage_error("--decode, --ids and --pieces exclude each other");
	if ((decode || ids || pieces) && c.output)
		cli_usage_error("-o writes the tokens stream; %s prints text to "
				"stdout", decode ? "--decode" : ids ? "--ids" : "--pieces");
	if (decode && bos)
		cli_usage_error("--bos applies to encoding");
	const char *path = operand.n ? operand.v[0] : NULL;
	at_model model;
	stage_open_model(&c, &model);
	/* static: still reachable when a later error ends the program */
	static at_tokenizer *tok;
	tok = cli_tokenizer(&model);
	at_model_close(&model);
	if (bos && at_tok_bos(tok) < 0)
		cli_die("%s: --bos: the model's tokenizer has no token that starts "
			"a sequence", c.model);
	if (decode) {
		decode_main(&c, tok, path);
		at_tok_free(tok);
		return 0;
	}

	size_t n;
	unsigned char *text = cli_read_text(path, MAX_ENCODE, &n);
	uint64_t dims[2] = {1, n + (size_t)bos};
	at_tensor t;
	if (at_tensor_init(&t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	int32_t *id = t.data;
	if (bos)
		*id++ = at_tok_bos(tok);
	char err[300];
	long count = at_tok_encode(tok, text, n, id, err, sizeof err);
	if (count < 0)
		cli_die("%s: %s", path ? path : "<stdin>", err);
	free(text);
	t.dims[1] = (uint64_t)count + (uint64_t)bos;
	if (ids || pieces) {
		for (uint64_t i = 0; i < t.dims[1]; i++) {
			int32_t v = ((int32_t *)t.data)[i];
			if (pieces) {
				size_t len;
				const unsigned char *p = at_tok_piece(tok, v, &len);
				printf("%d\t", v);
				put_piece(p, len);
				putchar('\n');
			} else {
				printf(i ? ",%d" : "%d", v);
			}
		}
		if (ids && t.dims[1])
			putchar('\n');
		cli_finish_text();
	} else {
		at_writer w;
		cli_open_output(&c, &w);
		if (at_write_tensor(&w, &t) < 0)
			cli_fail(w.err);
		cli_finish_output(&w);
	}
	at_tensor_free(&t);
	at_tok_free(tok);
	return 0;
}
