"""andrea-diff: cmp-style comparison of two streams, checked against NumPy.

The oracle is numpy.isclose / numpy.allclose on the arrays converted to
float64 (the tool compares in double precision); the reported maxima are
recomputed here from the same arrays and parsed back out of the output.
"""
import math
import os
import re
import subprocess

import numpy as np
import pytest

from conftest import ROOT, one_line_error, run, tool

LINE = re.compile(
    r"^record (\d+) '([^']*)': "
    r"(?:equal|(\d+) of (\d+) values differ, first at \[([\d,]*)\]); "
    r"max abs err (\S+)(?: at \[([\d,]*)\])?; "
    r"max rel err (\S+)(?: at \[([\d,]*)\])?$")


class Packer:
    """Writes .npy files and packs them into streams inside tmp_path."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.n = 0

    def stream(self, records, name=None):
        args = []
        for rname, arr in records:
            self.n += 1
            npy = self.dir / f"a{self.n}.npy"
            np.save(npy, arr)
            args.append(f"{rname}={npy}")
        self.n += 1
        out = self.dir / (name or f"s{self.n}.ats")
        p = run("pack", "-o", out, *args, check=0)
        assert p.stdout == b""
        return out


@pytest.fixture
def pk(tmp_path):
    return Packer(tmp_path)


def idx(text):
    """'1,0,3' -> (1, 0, 3); '' -> ()."""
    return tuple(int(v) for v in text.split(",")) if text else ()


def oracle(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """What the value line of a record pair must say, from NumPy."""
    a = np.asarray(a).astype(np.float64)
    b = np.asarray(b).astype(np.float64)
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    res = {"ndiff": int(close.size - close.sum()), "n": int(close.size),
           "allclose": bool(np.allclose(a, b, rtol=rtol, atol=atol,
                                        equal_nan=equal_nan))}
    assert res["allclose"] == (res["ndiff"] == 0)
    if res["ndiff"]:
        res["first"] = np.unravel_index(int(np.argmin(close.ravel())),
                                        b.shape)
    fin = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(fin, np.abs(a - b), -1.0)
        rel = np.where(fin & (b != 0), np.abs(a - b) / np.abs(b), -1.0)
    for key, e in (("abs", err), ("rel", rel)):
        m = float(e.max()) if e.size else 0.0
        if m > 0:
            res[key] = (m, tuple(int(i) for i in
                                 np.unravel_index(int(np.argmax(e.ravel())),
                                                  b.shape)))
        else:
            res[key] = (0.0, None)
    return res


def check_line(line, index, name, want):
    """Asserts a value line agrees with oracle() output."""
    m = LINE.match(line)
    assert m, f"unparsable line {line!r}"
    assert int(m[1]) == index and m[2] == name, line
    if want["ndiff"]:
        assert m[3] is not None, f"{line!r}: expected a difference"
        assert int(m[3]) == want["ndiff"] and int(m[4]) == want["n"], line
        assert idx(m[5]) == tuple(int(i) for i in want["first"]), line
    else:
        assert m[3] is None, f"{line!r}: expected 'equal'"
    for key, val, at in (("abs", m[6], m[7]), ("rel", m[8], m[9])):
        wval, wat = want[key]
        got = float(val)
        if wval == 0:
            assert got == 0 and at is None, line
        else:
            assert math.isclose(got, wval, rel_tol=1e-5), (line, key, wval)
            assert at is not None and idx(at) == wat, (line, key, wat)


def tol_args(rtol, atol, equal_nan):
    args = ["--rtol", repr(rtol), "--atol", repr(atol)]
    return args + (["--equal-nan"] if equal_nan else [])


def random_pair(rng):
    """A float32 pair of random shape, perturbed around the tolerance
    boundary, with infinities, NaNs and zeros sprinkled into both sides."""
    rank = int(rng.integers(0, 5))
    shape = tuple(int(d) for d in rng.integers(0 if rng.random() < 0.05 else 1,
                                               6, size=rank))
    scale = 10.0 ** rng.integers(-6, 4)
    b = (rng.standard_normal(shape) * scale).astype(np.float32)
    a = b.copy()
    kind = rng.integers(0, 4)
    if kind == 1:     # tiny noise, mostly within the default tolerance
        a = (b * (1 + rng.standard_normal(shape) * 3e-6)).astype(np.float32)
    elif kind == 2:   # around the boundary of the default tolerance
        bound = 1e-8 + 1e-5 * np.abs(b.astype(np.float64))
        a = (b + bound * rng.uniform(-2, 2, shape)).astype(np.float32)
    elif kind == 3:   # one clear outlier
        a = (b + rng.standard_normal(shape) * scale * 1e-7).astype(np.float32)
        if a.size:
            a.flat[int(rng.integers(a.size))] += np.float32(scale)
    specials = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)
    if a.size and rng.random() < 0.6:
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(a.size))
            v = specials[rng.integers(4)]
            b.flat[i] = v
            # mostly the same special on both sides, sometimes not
            a.flat[i] = v if rng.random() < 0.7 else specials[rng.integers(4)]
    return a.reshape(shape), b.reshape(shape)


def random_tol(rng):
    if rng.random() < 0.4:
        return 1e-5, 1e-8, bool(rng.random() < 0.5)
    return (float(10.0 ** rng.uniform(-8, -1)) * (rng.random() < 0.9),
            float(10.0 ** rng.uniform(-10, -2)) * (rng.random() < 0.9),
            bool(rng.random() < 0.5))


def test_equal_streams_exit_0(pk):
    rng = np.random.default_rng(1)
    recs = [("x", rng.standard_normal((2, 3, 4)).astype(np.float32)),
            ("tokens", rng.integers(-5, 300, (2, 7)).astype(np.int32)),
            ("bytes", rng.integers(0, 256, (9,)).astype(np.uint8)),
            ("scalar", np.float32(2.5)),
            ("empty", np.zeros((0, 4), np.float32)),
            ("specials", np.array([np.inf, -np.inf, 0.0, -0.0, 1e-45],
                                  np.float32))]
    a = pk.stream(recs)
    b = pk.stream(recs)
    p = run("diff", a, b, check=0)
    lines = p.stdout.decode().splitlines()
    assert len(lines) == len(recs)
    for i, (name, arr) in enumerate(recs):
        check_line(lines[i], i + 1, name, oracle(arr, arr))
    assert p.stderr == b""
    assert run("diff", "-q", a, b, check=0).stdout == b""


def test_random_pairs_agree_with_numpy_allclose(pk):
    rng = np.random.default_rng(20240607)
    seen = set()
    for case in range(60):
        a, b = random_pair(rng)
        rtol, atol, equal_nan = random_tol(rng)
        sa = pk.stream([("t", a)])
        sb = pk.stream([("t", b)])
        want = oracle(a, b, rtol, atol, equal_nan)
        p = run("diff", *tol_args(rtol, atol, equal_nan), sa, sb)
        assert p.returncode == (0 if want["allclose"] else 1), (
            case, a, b, rtol, atol, equal_nan, p.stdout, p.stderr)
        assert p.stderr == b""
        lines = p.stdout.decode().splitlines()
        assert len(lines) == 1
        check_line(lines[0], 1, "t", want)
        seen.add(p.returncode)
    assert seen == {0, 1}, "the generator should give both outcomes"


def test_many_records_in_one_stream(pk):
    """Per-record verdicts in a long stream, at fixed custom tolerances."""
    rng = np.random.default_rng(7)
    pairs = [random_pair(rng) for _ in range(150)]
    rtol, atol = 3e-6, 1e-7
    for equal_nan in (False, True):
        sa = pk.stream([(f"r{i}", a) for i, (a, _) in enumerate(pairs)])
        sb = pk.stream([(f"r{i}", b) for i, (_, b) in enumerate(pairs)])
        p = run("diff", *tol_args(rtol, atol, equal_nan), sa, sb)
        lines = p.stdout.decode().splitlines()
        assert len(lines) == len(pairs)
        wants = [oracle(a, b, rtol, atol, equal_nan) for a, b in pairs]
        for i, want in enumerate(wants):
            check_line(lines[i], i + 1, f"r{i}", want)
        all_close = all(w["allclose"] for w in wants)
        assert not all_close
        assert p.returncode == 1


def test_swapped_operands_are_asymmetric(pk):
    """b is the reference: rtol scales |b|, as in numpy.isclose(a, b)."""
    a = np.array([1.0], np.float32)
    b = np.array([2.0], np.float32)
    sa, sb = pk.stream([("t", a)]), pk.stream([("t", b)])
    args = ["--rtol", "0.6", "--atol", "0"]
    assert np.isclose(a, b, rtol=0.6, atol=0) and not np.isclose(
        b, a, rtol=0.6, atol=0)
    run("diff", *args, sa, sb, check=0)
    run("diff", *args, sb, sa, check=1)


def test_exact_tolerance_boundary(pk):
    """|a - b| == atol + rtol*|b| exactly is close (<=, as in NumPy)."""
    cases = [(3.0, 2.0, 0.5, 0.0), (2.5, 2.0, 0.0, 0.5),
             (3.0, 2.0, 0.25, 0.5), (-1.0, -2.0, 0.5, 0.0)]
    for a, b, rtol, atol in cases:
        for nudge in (0.0, 1.0 / 64):
            x = np.array([a + nudge], np.float32)
            y = np.array([b], np.float32)
            sa, sb = pk.stream([("e", x)]), pk.stream([("e", y)])
            want = oracle(x, y, rtol, atol)
            assert want["allclose"] == (nudge == 0)
            p = run("diff", *tol_args(rtol, atol, False), sa, sb)
            assert p.returncode == (0 if want["allclose"] else 1)
            check_line(p.stdout.decode().strip(), 1, "e", want)


def test_infinities_and_nan(pk):
    a = np.array([np.inf, -np.inf, np.inf, np.nan, np.nan, 1.0, np.inf],
                 np.float32)
    b = np.array([np.inf, -np.inf, -np.inf, np.nan, 1.0, np.nan, 1e30],
                 np.float32)
    for keep in ([0, 1], [2], [3], [4], [5], [6], [0, 3]):
        sa = pk.stream([("v", a[keep])])
        sb = pk.stream([("v", b[keep])])
        for equal_nan in (False, True):
            want = oracle(a[keep], b[keep], 1e-5, 1e-8, equal_nan)
            p = run("diff", *(["--equal-nan"] if equal_nan else []), sa, sb)
            assert p.returncode == (0 if want["allclose"] else 1), keep
            check_line(p.stdout.decode().strip(), 1, "v", want)


def test_ties_and_threads(pk):
    """A large record takes the threaded path; ties go to the first."""
    rng = np.random.default_rng(3)
    # multiples of 1/256 below 64 in magnitude, so b + 4 is exact
    b = (np.round(rng.standard_normal((3, 100, 400)) * 256) / 256).astype(
        np.float32)
    a = b.copy()
    for pos in [(2, 99, 399), (0, 50, 7), (1, 0, 0), (2, 10, 10)]:
        a[pos] = b[pos] + np.float32(4.0)   # equal abs errors ...
    b[0, 50, 7] = a[0, 50, 7] = np.float32(-0.0)
    a[0, 50, 7] = np.float32(4.0)           # ... one with b = 0
    sa, sb = pk.stream([("big", a)]), pk.stream([("big", b)])
    want = oracle(a, b)
    assert want["abs"] == (4.0, (0, 50, 7))
    for threads in ("1", "3", "16"):
        p = run("diff", "--threads", threads, sa, sb, check=1)
        check_line(p.stdout.decode().strip(), 1, "big", want)
    p = run("diff", sa, sb, env={"ANDREA_THREADS": "5"}, check=1)
    check_line(p.stdout.decode().strip(), 1, "big", want)


def test_integer_dtypes(pk):
    rng = np.random.default_rng(11)
    i32 = np.array([0, 1, -1, 2**31 - 1, -2**31, 100000, 7], np.int32)
    j32 = np.array([0, 1, -1, -2**31, 2**31 - 1, 100001, 7], np.int32)
    u8a = rng.integers(0, 256, (4, 5)).astype(np.uint8)
    u8b = u8a.copy()
    u8a[1, 2], u8b[1, 2] = 0, 255      # would wrap in uint8 arithmetic
    u8a[3, 4], u8b[3, 4] = 200, 199
    for x, y in ((i32, j32), (u8a, u8b), (i32, i32), (u8a, u8a)):
        sa, sb = pk.stream([("n", x)]), pk.stream([("n", y)])
        for rtol, atol in ((1e-5, 1e-8), (0.0, 0.0), (0.01, 1.0),
                           (1e-5, 255.0)):
            want = oracle(x, y, rtol, atol)
            p = run("diff", *tol_args(rtol, atol, False), sa, sb)
            assert p.returncode == (0 if want["allclose"] else 1)
            check_line(p.stdout.decode().strip(), 1, "n", want)


def test_rank0_and_zero_size(pk):
    cases = [(np.float32(1.0), np.float32(1.5)),
             (np.float32(1.0), np.float32(1.0)),
             (np.int32(-3), np.int32(4)),
             (np.zeros((0,), np.float32), np.zeros((0,), np.float32)),
             (np.zeros((2, 0, 3), np.uint8), np.zeros((2, 0, 3), np.uint8))]
    for a, b in cases:
        sa, sb = pk.stream([("s", a)]), pk.stream([("s", b)])
        want = oracle(a, b)
        p = run("diff", sa, sb, check=0 if want["allclose"] else 1)
        line = p.stdout.decode().strip()
        check_line(line, 1, "s", want)
        if np.ndim(a) == 0 and not want["allclose"]:
            assert "1 of 1 values differ, first at []" in line, line
    # zero-size records of different shapes still differ in shape
    sa = pk.stream([("z", np.zeros((0, 3), np.float32))])
    sb = pk.stream([("z", np.zeros((3, 0), np.float32))])
    p = run("diff", sa, sb, check=1)
    assert p.stdout.decode().strip() == (
        f"record 1 'z': shape differs: f32 [0,3] in {sa}, f32 [3,0] in {sb}")


def test_header_mismatches(pk):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    base = [("a", x), ("b", x), ("c", x)]
    sa = pk.stream(base)
    variants = {
        "name": ([("a", x), ("B", x), ("c", x)],
                 "record 2: name differs: 'b' f32 [2,3] in {A}, "
                 "'B' f32 [2,3] in {B}"),
        "dtype": ([("a", x), ("b", x.astype(np.int32)), ("c", x)],
                  "record 2 'b': dtype differs: f32 [2,3] in {A}, "
                  "i32 [2,3] in {B}"),
        "shape": ([("a", x), ("b", x.reshape(3, 2)), ("c", x)],
                  "record 2 'b': shape differs: f32 [2,3] in {A}, "
                  "f32 [3,2] in {B}"),
        "rank": ([("a", x), ("b", x.reshape(6)), ("c", x)],
                 "record 2 'b': shape differs: f32 [2,3] in {A}, "
                 "f32 [6] in {B}"),
        "all": ([("a", x), ("q", x.reshape(6).astype(np.uint8)), ("c", x)],
                "record 2: name, dtype and shape differ: 'b' f32 [2,3] in "
                "{A}, 'q' u8 [6] in {B}"),
    }
    for what, (recs, want) in variants.items():
        sb = pk.stream(recs)
        p = run("diff", sa, sb, check=1)
        lines = p.stdout.decode().splitlines()
        assert len(lines) == 3, what
        assert lines[1] == want.format(A=sa, B=sb), what
        # the records around the mismatch are still compared
        check_line(lines[0], 1, "a", oracle(x, x))
        check_line(lines[2], 3, "c", oracle(x, x))
        assert run("diff", "-q", sa, sb, check=1).stdout == b""


def test_record_count_mismatch(pk):
    x = np.ones((2, 2), np.float32)
    s3 = pk.stream([("a", x), ("b", x), ("c", x)])
    s1 = pk.stream([("a", x)])
    p = run("diff", s3, s1, check=1)
    lines = p.stdout.decode().splitlines()
    assert len(lines) == 2
    check_line(lines[0], 1, "a", oracle(x, x))
    assert lines[1] == f"{s3} has 3 records, {s1} has 1"
    p = run("diff", s1, s3, check=1)
    assert p.stdout.decode().splitlines()[1] == f"{s1} has 1 record, {s3} has 3"
    # a concatenation of streams is one stream of all their records
    cat = s1.parent / "cat.ats"
    cat.write_bytes(s1.read_bytes() + s3.read_bytes())
    p = run("diff", s3, cat, check=1)
    assert p.stdout.decode().splitlines()[-1] == f"{s3} has 3 records, {cat} has 4"
    run("diff", "-q", s3, cat, check=1)


def test_stdin_operand(pk):
    x = np.linspace(-1, 1, 12, dtype=np.float32)
    y = x.copy()
    y[5] += 1
    sa, sb = pk.stream([("x", x)]), pk.stream([("x", y)])
    p = run("diff", "-", sb, input=sa.read_bytes(), check=1)
    check_line(p.stdout.decode().strip(), 1, "x", oracle(x, y))
    p = run("diff", sa, "-", input=sa.read_bytes(), check=0)
    p = run("diff", sb, "-", input=sa.read_bytes(), check=1)
    check_line(p.stdout.decode().strip(), 1, "x", oracle(y, x))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "tail",
                                    "flip", "missing"])
def test_bad_input_is_trouble(pk, tmp_path, damage):
    x = np.arange(1000, dtype=np.float32)
    good = pk.stream([("first", x), ("second", x * 2)])
    data = good.read_bytes()
    bad = tmp_path / "bad.ats"
    if damage == "truncate":
        first_len = len(pk.stream([("first", x)]).read_bytes()) - 16
        bad.write_bytes(data[:first_len + 40])  # inside record 2
    elif damage == "garbage":
        bad.write_bytes(b"this is not an andrea stream\n" * 4)
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "tail":
        bad.write_bytes(data + b"junk")
    elif damage == "flip":
        b = bytearray(data)
        b[len(b) - 30] ^= 0x40                  # inside record 2's payload
        bad.write_bytes(bytes(b))
    for args in ((good, bad), (bad, good), ("-", bad)):
        p = run("diff", *args, input=data, check=2)
        line = one_line_error(p, "diff")
        assert str(bad) in line, line
        if damage in ("truncate", "flip"):
            assert "record 2 'second'" in line, line
            # the line for the intact first record is not lost
            out = p.stdout.decode().splitlines()
            assert len(out) == 1
            check_line(out[0], 1, "first", oracle(x, x))
        p = run("diff", "-q", *args, input=data, check=2)
        one_line_error(p, "diff")
        assert p.stdout == b""


def test_damage_in_a_record_not_compared_is_trouble(pk, tmp_path):
    """A record diff does not compare (unpaired, or a shape apart) is still
    decoded and checked: a damaged one is trouble (status 2), not a
    difference (it was read past unchecked)."""
    x = np.arange(1000, dtype=np.float32)
    b = bytearray(pk.stream([("first", x), ("second", x * 2)]).read_bytes())
    b[len(b) - 30] ^= 0x40                      # inside record 2's payload
    bad = tmp_path / "bad.ats"
    bad.write_bytes(bytes(b))
    short = pk.stream([("first", x)])
    other = pk.stream([("first", x), ("second", x[:5])])
    for args in ((short, bad), (bad, short), ("--by-name", short, bad),
                 (other, bad), ("-q", other, bad)):
        p = run("diff", *args, check=2)
        line = one_line_error(p, "diff")
        assert str(bad) in line and "record 2 'second'" in line, (args, line)


def test_difference_then_trouble_is_trouble(pk, tmp_path):
    x = np.arange(10, dtype=np.float32)
    sa = pk.stream([("a", x), ("b", x)])
    sb = pk.stream([("a", x + 1), ("b", x)])
    cut = tmp_path / "cut.ats"
    cut.write_bytes(sb.read_bytes()[:-8])
    for q in ([], ["-q"]):
        p = run("diff", *q, sa, cut, check=2)
        one_line_error(p, "diff")


@pytest.mark.parametrize("args", [
    [], ["one.ats"], ["a", "b", "c"], ["-", "-"],
    ["--rtol", "x", "a", "b"], ["--rtol", "-1", "a", "b"],
    ["--atol", "nan", "a", "b"], ["--atol", "inf", "a", "b"],
    ["--rtol"], ["--threads", "0", "a", "b"], ["--bogus", "a", "b"],
    ["-z", "3", "a", "b"], ["-o", "out", "a", "b"]])
def test_usage_errors(args):
    p = run("diff", *args, check=2)
    one_line_error(p, "diff")
    assert p.stdout == b""


def test_a_terminal_is_no_stream(pk):
    """As every tool: standard input that is a terminal is refused."""
    import pty
    s = pk.stream([("x", np.zeros(3, np.float32))])
    master, slave = pty.openpty()
    try:
        p = subprocess.run([tool("diff"), "-", s], stdin=slave,
                           capture_output=True, timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 2
    assert "<stdin>: refusing to read a stream from a terminal" in \
        one_line_error(p, "diff")


def test_bad_environment_is_exit_2(pk):
    s = pk.stream([("x", np.zeros(3, np.float32))])
    p = run("diff", s, s, env={"ANDREA_THREADS": "lots"}, check=2)
    one_line_error(p, "diff")


def test_large_record_over_cap_is_trouble(pk):
    s = pk.stream([("x", np.zeros(1000, np.float32))])
    p = run("diff", s, s, env={"ANDREA_MAX_BYTES": "100"}, check=2)
    assert "record 1" in one_line_error(p, "diff")


def test_write_error_is_trouble(pk):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    s = pk.stream([("x", np.zeros(3, np.float32))])
    with open("/dev/full", "wb") as full:
        import subprocess
        from conftest import tool
        p = subprocess.run([tool("diff"), s, s], stdout=full,
                           stderr=subprocess.PIPE)
    assert p.returncode == 2
    assert "write error" in p.stderr.decode()


def test_by_name_pairs_records_whatever_their_order(tmp_path):
    """--by-name: each record of A with B's first unpaired one of the same
    name (and layer and head where both have them); the unpaired on either
    side are reported and make the streams differ; B must be a file."""
    import atsfmt
    q = atsfmt.record("q", "f32", (2,), np.array([1, 2], "<f4").tobytes())
    k = atsfmt.record("k", "f32", (2,), np.array([3, 4], "<f4").tobytes())
    a0 = atsfmt.record("attn", "f32", (1,), np.array([5], "<f4").tobytes(),
                       attrs=[("layer", "0")])
    a1 = atsfmt.record("attn", "f32", (1,), np.array([6], "<f4").tobytes(),
                       attrs=[("layer", "1")])
    b = tmp_path / "b.ats"
    b.write_bytes(atsfmt.stream(k, a1, q, a0))
    p = run("diff", "--by-name", "-", b, input=atsfmt.stream(q, a0, k, a1), check=0)
    assert p.stdout.decode().splitlines() == [
        "record 1 'q': equal; max abs err 0; max rel err 0",
        "record 2 'attn': equal; max abs err 0; max rel err 0",
        "record 3 'k': equal; max abs err 0; max rel err 0",
        "record 4 'attn': equal; max abs err 0; max rel err 0"]
    run("diff", "--by-name", "-", b, input=atsfmt.stream(q, a0, k, a1, q), check=1)
    p = run("diff", "--by-name", "-", b, input=atsfmt.stream(q, k), check=1)
    assert p.stdout.decode().splitlines()[-2:] == [
        f"{b}: record 2 'attn': not in <stdin>", f"{b}: record 4 'attn': not in <stdin>"]
    # the same attributes pair first, then those one side lacks
    x0 = atsfmt.record("x", "f32", (1,), np.array([1], "<f4").tobytes(),
                       attrs=[("layer", "0")])
    xn = atsfmt.record("x", "f32", (1,), np.array([2], "<f4").tobytes())
    (tmp_path / "c.ats").write_bytes(atsfmt.stream(xn, x0))
    run("diff", "-q", "--by-name", "-", tmp_path / "c.ats",
        input=atsfmt.stream(x0, xn), check=0)
    p = run("diff", "--by-name", b, "-", input=atsfmt.stream(q), check=2)
    assert "B must be a file" in p.stderr.decode()
