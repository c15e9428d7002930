/* test_attrs.c - unit test of the attribute block (lib/core/attrs.h).
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <stdio.h>
#include <string.h>

#include "core/attrs.h"
#include "check.h"


/* A string of n copies of c (n < sizeof buf). */
static const char *rep(char *buf, char c, size_t n)
{
	memset(buf, c, n);
	buf[n] = 0;
	return buf;
}

/* Parses a NUL-terminated block; returns at_attrs_parse's result. */
static int parse(at_attrs *a, const char *block, char *why, size_t len)
{
	return at_attrs_parse(a, block, strlen(block), why, len);
}

static void test_set_get_replace_delete(void)
{
	at_attrs a = {0};
	CHECK(at_attr_get(&a, "layer") == NULL);
	CHECK(at_attr_set(&a, "layer", "3") == 0);
	CHECK(at_attr_set(&a, "scale", "0.125") == 0);
	CHECK(at_attr_set(&a, "mask", "causal") == 0);
	CHECK(a.n == 3);
	CHECK(strcmp(at_attr_get(&a, "layer"), "3") == 0);
	CHECK(strcmp(at_attr_get(&a, "mask"), "causal") == 0);
	CHECK(at_attr_get(&a, "Layer") == NULL);
	CHECK(at_attr_get(&a, "lay") == NULL);

	/* replacing keeps the position */
	CHECK(at_attr_set(&a, "layer", "11") == 0);
	CHECK(a.n == 3);
	CHECK(strcmp(a.key[0], "layer") == 0 && strcmp(a.value[0], "11") == 0);

	/* empty values and values with spaces and '=' are fine */
	CHECK(at_attr_set(&a, "note", "") == 0);
	CHECK(strcmp(at_attr_get(&a, "note"), "") == 0);
	CHECK(at_attr_set(&a, "expr", "a = b + c") == 0);

	at_attr_del(&a, "scale");
	CHECK(a.n == 4);
	CHECK(at_attr_get(&a, "scale") == NULL);
	CHECK(strcmp(a.key[1], "mask") == 0);
	CHECK(strcmp(a.key[3], "expr") == 0);
	at_attr_del(&a, "absent");
	CHECK(a.n == 4);
	at_attr_del(&a, "expr");
	at_attr_del(&a, "layer");
	CHECK(a.n == 2 && strcmp(a.key[0], "mask") == 0);

	CHECK(at_attr_setf(&a, "head", "%d", 7) == 0);
	long l = 0;
	CHECK(at_attr_long(&a, "head", &l) == 0 && l == 7);
	CHECK(at_attr_long(&a, "nothere", &l) == 1);
	CHECK(at_attr_long(&a, "mask", &l) == -1);
	double d = 0;
	CHECK(at_attr_setf(&a, "scale", "%.17g", 0.125) == 0);
	CHECK(at_attr_double(&a, "scale", &d) == 0 && d == 0.125);
	CHECK(at_attr_double(&a, "mask", &d) == -1);
	CHECK(at_attr_double(&a, "note", &d) == -1);
	CHECK(at_attr_double(&a, "nothere", &d) == 1);
	CHECK(at_attr_set(&a, "big", "1e999") == 0);
	CHECK(at_attr_double(&a, "big", &d) == -1);
	CHECK(at_attr_set(&a, "big", "99999999999999999999999") == 0);
	CHECK(at_attr_long(&a, "big", &l) == -1);
	/* whole numbers: digits after an optional '-', nothing around */
	const char *longs[] = {"128", "-3", "0128", " 128", "+128", "12 ", "-",
			       "1.0", "0x10", "- 1"};
	const long want[] = {128, -3, 128};
	for (int i = 0; i < 10; i++) {
		CHECK(at_attr_set(&a, "n", longs[i]) == 0);
		l = -99;
		int rc = at_attr_long(&a, "n", &l);
		CHECK(i < 3 ? rc == 0 && l == want[i] : rc == -1 && l == -99);
	}
}

/* A key the block cannot hold is kept as the block's lost key (the first
 * one only) for the stream writer to refuse; parsing clears it. */
static void test_lost_key(void)
{
	char k[128], v[256];
	at_attrs a = {0};
	CHECK(at_attr_set(&a, "ok", "1") == 0 && a.lost[0] == 0);
	CHECK(at_attr_set(&a, "v", rep(v, 'v', 128)) == -1);
	CHECK(strcmp(a.lost, "v") == 0);
	CHECK(at_attr_setf(&a, "w", "%s", rep(v, 'w', 128)) == -1);
	CHECK(strcmp(a.lost, "v") == 0); /* the first stays */
	at_attrs f = {0};
	CHECK(at_attr_setf(&f, "w", "%s", rep(v, 'w', 128)) == -1);
	CHECK(strcmp(f.lost, "w") == 0);
	at_attrs b = {0};
	for (int i = 0; i < AT_MAX_ATTRS; i++) {
		snprintf(k, sizeof k, "key%d", i);
		CHECK(at_attr_set(&b, k, "1") == 0);
	}
	CHECK(b.lost[0] == 0);
	CHECK(at_attr_set(&b, "scale", "0.125") == -1);
	CHECK(strcmp(b.lost, "scale") == 0);
	char why[200];
	CHECK(parse(&b, "layer=0\n", why, sizeof why) == 0 && b.lost[0] == 0);
}

static void test_caps(void)
{
	char k[128], v[256];
	at_attrs a = {0};
	/* keys: 1..63 bytes of [A-Za-z0-9_.-] */
	CHECK(at_attr_set(&a, rep(k, 'k', 63), "x") == 0);
	CHECK(at_attr_set(&a, rep(k, 'k', 64), "x") == -1);
	CHECK(at_attr_set(&a, "", "x") == -1);
	CHECK(at_attr_set(&a, "a b", "x") == -1);
	CHECK(at_attr_set(&a, "a=b", "x") == -1);
	CHECK(at_attr_set(&a, "a\nb", "x") == -1);
	CHECK(at_attr_set(&a, "Az09_.-", "x") == 0);
	/* values: 0..127 printable ASCII bytes */
	CHECK(at_attr_set(&a, "v", rep(v, 'v', 127)) == 0);
	CHECK(at_attr_set(&a, "v", rep(v, 'v', 128)) == -1);
	CHECK(at_attr_get(&a, "v") && strlen(at_attr_get(&a, "v")) == 127);
	CHECK(at_attr_set(&a, "v", "tab\there") == -1);
	CHECK(at_attr_set(&a, "v", "new\nline") == -1);
	CHECK(at_attr_set(&a, "v", "\x7f") == -1);
	CHECK(at_attr_set(&a, "v", "caf\xc3\xa9") == -1);
	CHECK(at_attr_setf(&a, "v", "%s", rep(v, 'w', 128)) == -1);
	CHECK(at_attr_setf(&a, "v", "%s", rep(v, 'w', 127)) == 0);
	CHECK(a.n == 3);

	/* at most AT_MAX_ATTRS pairs */
	at_attrs b = {0};
	int ok = 1;
	for (int i = 0; i < AT_MAX_ATTRS; i++) {
		snprintf(k, sizeof k, "key%d", i);
		ok &= at_attr_set(&b, k, "1") == 0;
	}
	CHECK(ok && b.n == AT_MAX_ATTRS);
	CHECK(at_attr_set(&b, "one.more", "1") == -1);
	CHECK(b.n == AT_MAX_ATTRS);
	CHECK(at_attr_set(&b, "key5", "replacing is still fine") == 0);

	/* at most AT_MAX_ATTR_BYTES serialised bytes: 31 pairs of
	 * 63 + 1 + 63 + 1 = 128 bytes make 3968; a 32nd, "last=" and 122
	 * bytes and a newline, brings it to 4096, exactly the cap */
	at_attrs c = {0};
	for (int i = 0; i < 31; i++) {
		snprintf(k, sizeof k, "%02d%s", i, rep(v, 'k', 61));
		CHECK(at_attr_set(&c, k, rep(v, 'v', 63)) == 0);
	}
	CHECK(at_attrs_size(&c) == 31 * 128);
	CHECK(at_attr_set(&c, "last", rep(v, 'v', 123)) == -1);
	CHECK(at_attr_set(&c, "last", rep(v, 'v', 122)) == 0);
	CHECK(at_attrs_size(&c) == AT_MAX_ATTR_BYTES);
	/* growing a value past the cap is refused, shrinking is fine */
	CHECK(at_attr_set(&c, "last", rep(v, 'v', 123)) == -1);
	const char *last = at_attr_get(&c, "last");
	CHECK(last && strlen(last) == 122);
	CHECK(at_attr_set(&c, "last", "") == 0);
	CHECK(at_attrs_size(&c) == AT_MAX_ATTR_BYTES - 122);
	CHECK(at_attr_set(&c, "last", rep(v, 'v', 122)) == 0);
}

static void test_parse_good(void)
{
	at_attrs a;
	char why[200];
	CHECK(parse(&a, "", why, sizeof why) == 0 && a.n == 0);
	CHECK(parse(&a, "layer=0\nscale=0.125\nnote=x=y z\nempty=\n", why,
		    sizeof why) == 0);
	CHECK(a.n == 4);
	CHECK(strcmp(at_attr_get(&a, "note"), "x=y z") == 0);
	CHECK(strcmp(at_attr_get(&a, "empty"), "") == 0);
	CHECK(strcmp(a.key[1], "scale") == 0);

	/* parse stops at len, whatever follows */
	const char *blk = "a=1\nb=2\n";
	CHECK(at_attrs_parse(&a, blk, 4, why, sizeof why) == 0 && a.n == 1);

	/* exactly the caps */
	char buf[AT_MAX_ATTR_BYTES + 256], k[128], v[256];
	size_t off = 0;
	for (int i = 0; i < 31; i++)
		off += (size_t)sprintf(buf + off, "%02d%s=%s\n", i,
				       rep(k, 'k', 61), rep(v, 'v', 63));
	off += (size_t)sprintf(buf + off, "last=%s\n", rep(v, 'v', 122));
	CHECK(off == AT_MAX_ATTR_BYTES);
	CHECK(at_attrs_parse(&a, buf, off, why, sizeof why) == 0 &&
	      a.n == AT_MAX_ATTRS);
}

/* Expects parse to fail with a reason containing want. */
static void bad(const char *block, size_t len, const char *want)
{
	at_attrs a;
	char why[200] = "";
	int rc = at_attrs_parse(&a, block, len, why, sizeof why);
	CHECK(rc == -1);
	if (!strstr(why, want)) {
		failed++;
		printf("parse: reason '%s' lacks '%s'\n", why, want);
	} else {
		passed++;
	}
}

static void test_parse_bad(void)
{
	char buf[AT_MAX_ATTR_BYTES + 256], k[128], v[256];
#define BAD(s, want) bad(s, strlen(s), want)
	BAD("k=v", "attribute 1 has no newline");
	BAD("a=1\nk=v", "attribute 2 has no newline");
	BAD("\n", "attribute 1 has no '='");
	BAD("a=1\nkv\n", "attribute 2 has no '='");
	BAD("=v\n", "bad key or value");
	BAD("a b=v\n", "bad key or value");
	BAD("k=\x01\n", "bad key or value");
	BAD("k=\x7f\n", "bad key or value");
	BAD("k=\xe9\n", "bad key or value");
	BAD("k=a\rb\n", "bad key or value");
	BAD("a=1\na=2\n", "attribute 'a' appears twice");
	bad("k=a\0b\n", 6, "bad key or value");
	sprintf(buf, "%s=1\n", rep(k, 'k', 64));
	BAD(buf, "bad key or value");
	sprintf(buf, "k=%s\n", rep(v, 'v', 128));
	BAD(buf, "bad key or value");
	size_t off = 0;
	for (int i = 0; i < AT_MAX_ATTRS + 1; i++)
		off += (size_t)sprintf(buf + off, "k%d=\n", i);
	bad(buf, off, "more than 32 attributes");
	memset(buf, 'x', AT_MAX_ATTR_BYTES + 1); /* the size is checked first */
	bad(buf, AT_MAX_ATTR_BYTES + 1, "attribute block of 4097 bytes exceeds 4096");
#undef BAD
}

static void test_round_trip(void)
{
	at_attrs a = {0}, b;
	char why[200], k[128], v[256];
	CHECK(at_attr_set(&a, "layer", "5") == 0);
	CHECK(at_attr_set(&a, "scale", "0.17677669529663687") == 0);
	CHECK(at_attr_set(&a, "mask", "causal") == 0);
	CHECK(at_attr_set(&a, "e", "") == 0);
	CHECK(at_attr_set(&a, rep(k, 'K', 63), rep(v, '~', 127)) == 0);
	CHECK(at_attr_set(&a, "eq", "==a=b==") == 0);
	at_attr_del(&a, "mask");
	size_t n = at_attrs_size(&a);
	char buf[AT_MAX_ATTR_BYTES + 1];
	memset(buf, '#', sizeof buf);
	at_attrs_write(&a, buf);
	CHECK(buf[n] == '#'); /* no terminator written */
	CHECK(n > 0 && buf[n - 1] == '\n');
	CHECK(memcmp(buf, "layer=5\nscale=0.17677669529663687\ne=\nK", 38) == 0);
	CHECK(at_attrs_parse(&b, buf, n, why, sizeof why) == 0);
	CHECK(b.n == a.n);
	int same = b.n == a.n;
	for (int i = 0; same && i < a.n; i++)
		same = strcmp(a.key[i], b.key[i]) == 0 &&
		       strcmp(a.value[i], b.value[i]) == 0;
	CHECK(same);
	CHECK(at_attrs_size(&b) == n);

	char line[512];
	at_attrs_str(&b, line, sizeof line);
	CHECK(strncmp(line, "layer=5 scale=0.17677669529663687 e= K", 38) == 0);
	char tiny[8];
	at_attrs_str(&b, tiny, sizeof tiny);
	CHECK(strlen(tiny) == 7 && memcmp(tiny, "layer=5", 7) == 0);
	at_attrs empty = {0};
	CHECK(at_attrs_size(&empty) == 0);
	at_attrs_str(&empty, line, sizeof line);
	CHECK(line[0] == 0);
}

int main(void)
{
	test_set_get_replace_delete();
	test_caps();
	test_lost_key();
	test_parse_good();
	test_parse_bad();
	test_round_trip();
	return check_finish("test_attrs");
}
