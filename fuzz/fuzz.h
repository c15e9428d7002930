/* fuzz.h - helpers shared by the libFuzzer targets in fuzz/.
 *
 * Each target is one LLVMFuzzerTestOneInput over a library entry point,
 * built with clang's libFuzzer, ASan and UBSan against library objects
 * compiled the same way (fuzz/fuzz.mk).  The reader caps are set small so
 * an input can never make the library allocate more than FUZZ_MAX_BYTES.
 */
#ifndef ANDREA_FUZZ_H
#define ANDREA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_MAX_BYTES (64ull << 20)

/* Writes the input to one temporary file per process (made once under
 * TMPDIR) and returns its path; aborts if that fails, since a target that
 * silently tests nothing is worse than one that stops. */
const char *fuzz_tmpfile(const uint8_t *data, size_t size);

struct at_tokenizer;
/* Checks a tokenizer a reader accepted, as the tokenizer targets do: a few
 * fixed texts and the n bytes s encode (at_tok_encode) to ids in
 * 0..size-1 whose pieces spell the text back byte for byte; a BPE one
 * written as its records (at_tok_write) reads back (at_tok_from_records)
 * as a tokenizer with the same size, BOS and ids.  Aborts otherwise. */
void fuzz_tok_check(struct at_tokenizer *t, const uint8_t *s, size_t n);
/* What a tokenizer reader gave: without t, err must be one non-empty
 * line; t must pass fuzz_tok_check on s, and is then freed. */
void fuzz_tok_result(struct at_tokenizer *t, const char *err,
		     const uint8_t *s, size_t n);

#endif
