"""andrea-show: summaries, NumPy-style values, text and PNG heatmaps.

NumPy is the oracle: statistics come from numpy, printed values from
numpy.array2string with default print options, heatmap shading from the
formula the man page documents.
"""
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from conftest import ROOT, one_line_error, run, tool

RAMP = ".:-=+*#%@"
MAN = os.path.join(ROOT, "man", "man1", "andrea-show.1")


def pack(tmp_path, **arrays):
    """An andrea stream holding the arrays, in keyword order."""
    args = []
    for name, a in arrays.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, a)
        args.append(f"{name}={path}")
    return run("pack", *args, check=0).stdout


def with_attrs(stream, attrs):
    """Rewrites the first record's header of stream to carry attrs (a
    'k=v\\n...' block), recomputing the header CRC; chunks are unchanged."""
    rank, name_len, attr_len = stream[7], stream[9], struct.unpack_from("<H", stream, 10)[0]
    end = 16 + 8 * rank + name_len
    assert attr_len == 0
    head = bytearray(stream[:end]) + attrs.encode()
    struct.pack_into("<H", head, 10, len(attrs))
    crc = struct.pack("<I", zlib.crc32(bytes(head)))
    return bytes(head) + crc + stream[end + 4:]


def show(*args, input=None, check=0, env=None):
    return run("show", *args, input=input, check=check, env=env)


def text(p):
    return p.stdout.decode()


# ---- summary ----

def parse_summary(line):
    """name, dtype, shape and a dict of the key=value fields of one line."""
    f = line.split(" ")
    kv = dict(x.split("=", 1) for x in f[3:])
    return f[0], f[1], f[2], kv


def check_stats(kv, a):
    a = np.asarray(a)
    fin = a[np.isfinite(a)] if a.dtype.kind == "f" else a.ravel()
    assert int(kv["nan"]) == int(np.isnan(a).sum()) if a.dtype.kind == "f" else kv["nan"] == "0"
    assert int(kv["inf"]) == (int(np.isinf(a).sum()) if a.dtype.kind == "f" else 0)
    if fin.size == 0:
        assert [kv[k] for k in ("min", "max", "mean", "std")] == ["-"] * 4
        return
    # min and max are exact: the shortest float32 text reads back the same
    assert np.float32(float(kv["min"])) == fin.min()
    assert np.float32(float(kv["max"])) == fin.max()
    d = fin.astype(np.float64)
    assert float(kv["mean"]) == pytest.approx(d.mean(), rel=1e-6, abs=1e-12)
    assert float(kv["std"]) == pytest.approx(d.std(), rel=1e-6, abs=1e-12)


def test_summary_statistics_match_numpy(tmp_path):
    rng = np.random.default_rng(1)
    f = (rng.standard_normal((3, 5, 7)) * 4 + 1).astype(np.float32)
    f[0, 0, :3] = [np.nan, np.inf, -np.inf]
    f[2, 4, 6] = -np.inf
    arrays = {
        "f": f,
        "i": rng.integers(-10**6, 10**6, (4, 9)).astype(np.int32),
        "u": rng.integers(0, 256, 50).astype(np.uint8),
        "s": np.array(0.1, np.float32),
        "empty": np.zeros((2, 0, 3), np.float32),
        "allnan": np.array([np.nan, np.inf, np.nan], np.float32),
    }
    p = show(input=pack(tmp_path, **arrays))
    lines = text(p).splitlines()
    assert len(lines) == len(arrays)
    for line, (name, a) in zip(lines, arrays.items()):
        n, dt, shape, kv = parse_summary(line)
        assert n == name
        assert dt == {"f": "f32", "i": "i32", "u": "u8"}[a.dtype.kind]
        assert shape == "[" + ",".join(map(str, a.shape)) + "]"
        check_stats(kv, a)
    assert parse_summary(lines[3])[3]["min"] == "0.1"


def test_summary_min_and_max_are_written_as_numpy_writes_a_float32(tmp_path):
    """min and max are str(numpy.float32(v)): the shortest digits, padded
    with zeros where the value is larger (99999990.0, not 99999992.0), and
    scientific below 1e-4 as a double (float32's 1e-4 is under it: 1e-04),
    on values spread over every exponent (they once gave the exact
    integer digits, and 0.0001)."""
    rng = np.random.default_rng(5)
    edges = [1e15, 99999992.0, 1e-4, 1e16, 123456789.0, 1.5e-5, 16777217.0,
             3.4e38, 1.2e-38, 1e-45, 9999999.0, 0.00010001]
    spread = rng.uniform(0.5, 10, 200) * 10.0 ** rng.integers(-40, 38, 200)
    values = np.concatenate([edges, spread]).astype(np.float32)
    values *= np.where(rng.random(values.size) < 0.3, -1, 1).astype(np.float32)
    stream = b"".join(pack(tmp_path, v=np.array([v])) for v in values)
    lines = text(show(input=stream)).splitlines()
    got = [parse_summary(line)[3]["min"] for line in lines]
    assert got == [str(np.float32(v)) for v in values]


def test_summary_attributes_come_last(tmp_path):
    s = with_attrs(pack(tmp_path, x=np.arange(6, dtype=np.float32)),
                   "layer=3\nmask=causal\n")
    line = text(show(input=s)).strip()
    assert line.endswith(" layer=3 mask=causal")
    _, _, _, kv = parse_summary(line)
    check_stats(kv, np.arange(6, dtype=np.float32))


def test_several_files_and_name_filter(tmp_path):
    a = tmp_path / "a.ats"
    b = tmp_path / "b.ats"
    a.write_bytes(pack(tmp_path, x=np.ones(3, np.float32), y=np.zeros(2, np.int32)))
    b.write_bytes(pack(tmp_path, x=np.full(4, 2, np.float32)))
    names = [l.split()[0] for l in text(show(a, b)).splitlines()]
    assert names == ["x", "y", "x"]
    lines = text(show("--name", "x", a, "-", input=b.read_bytes())).splitlines()
    assert [l.split()[2] for l in lines] == ["[3]", "[4]"]
    p = show("--name", "nope", a, check=1)
    assert "nope" in one_line_error(p, "show")


# ---- -p / --full against numpy.array2string ----

def np_cases():
    rng = np.random.default_rng(7)
    f32 = np.float32
    mixed = (rng.standard_normal(40) * 10.0 ** rng.integers(-6, 7, 40)).astype(f32)
    masked = rng.standard_normal((6, 6)).astype(f32)
    masked[np.triu_indices(6, 1)] = -np.inf
    return {
        "i32": (np.arange(-30, 30, dtype=np.int32) * 37).reshape(6, 10),
        "u8": rng.integers(0, 256, (3, 30)).astype(np.uint8),
        "smallints": np.arange(24, dtype=f32).reshape(2, 3, 4) - 7,
        "mixed": mixed,
        "normal": rng.standard_normal((5, 7)).astype(f32),
        "rank0": np.array(2.5, f32),
        "rank0int": np.array(-7, np.int32),
        "rank1": np.linspace(0, 1, 17, dtype=f32),
        "rank3": rng.uniform(-3, 3, (2, 3, 4)).astype(f32),
        "rank4": rng.standard_normal((2, 2, 2, 3)).astype(f32),
        "nonfinite": np.array([1.5, np.nan, np.inf, -np.inf, -0.0, 2.25], f32),
        "allnonfinite": np.array([np.nan, -np.inf], f32),
        "masked": masked,
        "tiny": np.array([1e-5, 1.2345678, 3e-7], f32),
        "huge": np.array([1e8, -3.5e12, 7.0], f32),
        "ties": np.array([2.0 ** -9, 3 * 2.0 ** -9, 1], f32),
        "big": rng.standard_normal((40, 60)).astype(f32),
        "bigint": np.arange(5000, dtype=np.int32).reshape(10, 500),
        "big3": rng.standard_normal((9, 10, 12)).astype(f32),
    }


def split_print(out, names):
    """Splits -p output into {name: (header, body)}."""
    res = {}
    chunks = out.split("\n\n")
    # 3-D bodies contain blank lines: regroup chunks by header lines
    blocks = []
    for c in chunks:
        first = c.split("\n", 1)[0]
        if first.split(" ")[0] in names and not first.startswith(("[", " ")):
            blocks.append(c)
        else:
            blocks[-1] += "\n\n" + c
    for b in blocks:
        head, body = b.split("\n", 1)
        res[head.split(" ")[0]] = (head, body.rstrip("\n"))
    return res


@pytest.mark.parametrize("full", [False, True])
def test_print_matches_numpy(tmp_path, full):
    cases = np_cases()
    s = pack(tmp_path, **cases)
    args = ["-p", "--full"] if full else ["-p"]
    got = split_print(text(show(*args, input=s)), set(cases))
    assert set(got) == set(cases)
    for name, a in cases.items():
        head, body = got[name]
        want = (np.array2string(a, threshold=sys.maxsize) if full
                else np.array2string(a))
        assert body == want, name
        dt = {"f": "f32", "i": "i32", "u": "u8"}[a.dtype.kind]
        assert head == f"{name} {dt} [{','.join(map(str, a.shape))}]"
    if not full:
        assert "..." in got["big"][1] and "..." in got["bigint"][1]
        # rank >= 1 arrays: also what print() shows
        assert got["normal"][1] == str(cases["normal"])


def test_print_random_float32_bits(tmp_path):
    """Every float32 kind of value, each in its own array and all in one."""
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2 ** 32, 400, dtype=np.uint64).astype(np.uint32)
    vals = bits.view(np.float32)
    vals = vals[np.isfinite(vals)]
    arrays = {f"v{i}": np.array([v]) for i, v in enumerate(vals[:150])}
    arrays["all"] = vals
    arrays["pos"] = rng.uniform(1e-3, 900, 300).astype(np.float32)
    got = split_print(text(show("-p", "--full", input=pack(tmp_path, **arrays))),
                      set(arrays))
    for name, a in arrays.items():
        assert got[name][1] == np.array2string(a, threshold=sys.maxsize), name


def test_print_empty(tmp_path):
    p = show("-p", input=pack(tmp_path, e=np.zeros((3, 0), np.float32)))
    assert text(p) == "e f32 [3,0]\n[]\n"
    assert np.array2string(np.zeros((3, 0), np.float32)) == "[]"


# ---- --ascii ----

def ascii_map(out):
    lines = out.rstrip("\n").split("\n")
    return lines[0], lines[1:]


def test_ascii_masked_matrix(tmp_path):
    rng = np.random.default_rng(5)
    s = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    s[..., np.triu_indices(8, 1)[0], np.triu_indices(8, 1)[1]] = -np.inf
    p = show("--ascii", "--select", "1,2", input=pack(tmp_path, scores=s))
    head, rows = ascii_map(text(p))
    sl = s[1, 2]
    fin = sl[np.isfinite(sl)]
    f = head.split(" ")
    assert f[:3] == ["scores", "f32", "[2,3,8,8]"]
    kv = dict(x.split("=", 1) for x in f[3:])
    assert kv["select"] == "1,2" and kv["map"] == "8x8"
    assert np.float32(float(kv["min"])) == fin.min()
    assert np.float32(float(kv["max"])) == fin.max()
    assert "downsampled" not in kv
    assert len(rows) == 8 and all(len(r) == 8 for r in rows)
    lo, hi = float(fin.min()), float(fin.max())
    for i in range(8):
        for j in range(8):
            if j > i:
                assert rows[i][j] == "_"
            else:
                k = min(int((float(sl[i, j]) - lo) / (hi - lo) * 9), 8)
                assert rows[i][j] == RAMP[k], (i, j)
    # default selection is index 0 of every leading axis
    head0, rows0 = ascii_map(text(show("--ascii", input=pack(tmp_path, scores=s))))
    assert " select=0,0 " in head0
    assert rows0[0][1:] == "_" * 7 and "_" not in rows0[7]


def test_ascii_nonfinite_and_1d(tmp_path):
    a = np.array([0, 1, np.nan, np.inf, -np.inf, 2], np.float32)
    head, rows = ascii_map(text(show("--ascii", input=pack(tmp_path, a=a))))
    assert " select=- map=1x6 min=0.0 max=2.0" in head
    assert rows == [RAMP[0] + RAMP[4] + "?^_" + RAMP[8]]
    head, rows = ascii_map(text(show("--ascii", input=pack(tmp_path, c=np.array(3, np.int32)))))
    assert " map=1x1 min=3 max=3" in head and rows == ["+"]


def test_ascii_downsampled(tmp_path):
    rng = np.random.default_rng(9)
    m = rng.standard_normal((130, 10)).astype(np.float32)
    m[5, 7] = np.nan
    p = show("--ascii", input=pack(tmp_path, m=m), env={"COLUMNS": "4"})
    head, rows = ascii_map(text(p))
    bh, bw = math.ceil(130 / 64), math.ceil(10 / 4)
    assert f" downsampled={math.ceil(130 / bh)}x{math.ceil(10 / bw)} blocks={bh}x{bw}" in head
    assert len(rows) == math.ceil(130 / bh) and all(len(r) == 4 for r in rows)
    lo, hi = float(np.nanmin(m)), float(np.nanmax(m))
    for i, row in enumerate(rows):
        for j, ch in enumerate(row):
            blk = m[i * bh:(i + 1) * bh, j * bw:(j + 1) * bw].astype(np.float64)
            if np.isnan(blk).any():
                assert ch == "?"
                continue
            k = min(int((blk.mean() - lo) / (hi - lo) * 9), 8)
            assert ch == RAMP[k], (i, j)
    # fits the default 80 columns: no downsampling
    head, rows = ascii_map(text(show("--ascii", input=pack(tmp_path, m=m[:64]))))
    assert "downsampled" not in head and len(rows) == 64 and len(rows[0]) == 10


def test_select_errors(tmp_path):
    s = pack(tmp_path, scores=np.zeros((2, 3, 4, 4), np.float32))
    for sel in ["0,3", "2,0", "0", "0,0,0"]:
        p = show("--ascii", "--select", sel, input=s, check=1)
        msg = one_line_error(p, "show")
        assert "record 1 'scores'" in msg and sel in msg
        assert p.stdout == b""
    for sel in ["a", "0,", ",1", "0;1", "-1,0", "1,2,3,4,5,6,7,8,9"]:
        p = show("--ascii", "--select", sel, input=s, check=2)
        one_line_error(p, "show")
    p = show("--select", "0,0", input=s, check=2)  # needs --ascii or --png
    one_line_error(p, "show")


# ---- scales, masks, grids (issue 19) ----

def ascii_rows(p):
    return text(p).splitlines()[1:]


def level_chars(levels):
    return "".join(RAMP[min(int(9 * l), 8)] for l in levels)


def test_attention_is_drawn_on_a_log_scale_with_the_mask_apart(tmp_path):
    """attn (mask=causal): visible weights on log(v/a)/log(b/a), a = the
    larger of the smallest weight and max/1e4; the hidden triangle '_'."""
    import stagekit
    rng = np.random.default_rng(8)
    T = 12
    s = rng.standard_normal((1, 1, T, T)) * 4
    s[0, 0][np.triu_indices(T, 1)] = -np.inf
    a = np.exp(s - s.max(-1, keepdims=True))
    a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
    stream = stagekit.pack(tmp_path, [("attn", a)], ["attn:mask=causal"])
    p = show("--ascii", input=stream)
    head = text(p).splitlines()[0]
    vis = a[0, 0][np.tril_indices(T)]
    fields = dict(f.split("=", 1) for f in head.split() if "=" in f)
    assert np.float32(fields["min"]) == vis.min()  # the visible entries'
    assert fields["shade"] == "log"
    hi = float(vis.max())
    lo = max(float(vis[vis > 0].min()), hi / 1e4)
    for i, row in enumerate(ascii_rows(p)):
        lv = [min(max(math.log(float(v) / lo) / math.log(hi / lo), 0), 1)
              for v in a[0, 0, i, :i + 1]]
        assert row == level_chars(lv) + "_" * (T - 1 - i), i
    # --shade linear gives the old ramp over the visible values
    p = show("--ascii", "--shade", "linear", input=stream)
    lo = float(vis.min())
    for i, row in enumerate(ascii_rows(p)):
        lv = [(float(v) - lo) / (hi - lo) for v in a[0, 0, i, :i + 1]]
        assert row[:i + 1] == level_chars(lv), i


def test_captured_rows_keep_their_mask_where_their_queries_are(tmp_path):
    """Rows a capture kept (positions=2-3,6 of T = 9) hide the keys after
    their own queries, and the header's min is over what they see."""
    import stagekit
    rng = np.random.default_rng(9)
    T, qs = 9, [2, 3, 6]
    a = rng.uniform(0.1, 1, (1, 1, len(qs), T)).astype(np.float32)
    for r, q in enumerate(qs):
        a[0, 0, r, q + 1:] = 0
    stream = stagekit.pack(tmp_path, [("attn", a)],
                           ["attn:mask=causal", "attn:positions=2-3,6"])
    p = show("--ascii", "--shade", "linear", input=stream)
    rows = ascii_rows(p)
    for r, q in enumerate(qs):
        assert rows[r][q + 1:] == "_" * (T - 1 - q), (r, rows[r])
        assert "_" not in rows[r][:q + 1], (r, rows[r])
    seen = np.concatenate([a[0, 0, r, :q + 1] for r, q in enumerate(qs)])
    head = dict(f.split("=", 1) for f in text(p).splitlines()[0].split()
                if "=" in f)
    assert np.float32(head["min"]) == seen.min()


def test_range_and_sqrt_place_values_where_the_formula_says(tmp_path):
    x = np.linspace(-1, 3, 24, dtype=np.float32).reshape(2, 12)
    for args, level in (
            (["--range", "0,2"], lambda v: min(max(v / 2, 0), 1)),
            (["--shade", "sqrt"], lambda v: math.sqrt((v + 1) / 4)),
            (["--shade", "log", "--range", "0.5,2"],
             lambda v: min(max(math.log(v / 0.5) / math.log(4), 0), 1)
             if v > 0 else 0)):
        p = show("--ascii", *args, input=pack(tmp_path, x=x))
        want = [level_chars([level(float(v)) for v in r]) for r in x]
        assert ascii_rows(p) == want, args


# ---- errors, pipes, help ----

def test_bad_stream_keeps_earlier_records(tmp_path):
    s = pack(tmp_path, a=np.ones(4, np.float32),
             b=np.arange(100000, dtype=np.float32))
    p = show(input=s[:len(s) - 1000], check=1)
    msg = one_line_error(p, "show")
    assert msg.startswith("andrea-show: <stdin>: record 2 'b'")
    assert text(p).startswith("a f32 [4] ")
    p = show(input=b"not a stream at all", check=1)
    one_line_error(p, "show")
    p = show(tmp_path / "missing.ats", check=1)
    one_line_error(p, "show")


def test_standard_input_is_read_once(tmp_path):
    p = show("-", "-", input=pack(tmp_path, a=np.ones(2, np.float32)),
             check=2)
    assert "standard input (-) can be read only once, and 2 inputs name it" \
        in one_line_error(p, "show")


def test_write_error_dev_full(tmp_path):
    f = tmp_path / "x.ats"
    f.write_bytes(pack(tmp_path, x=np.ones((30, 30), np.float32)))
    for args in ([], ["-p"], ["--ascii"]):
        with open("/dev/full", "wb") as full:
            p = subprocess.run([tool("show"), *args, str(f)], stdout=full,
                               stderr=subprocess.PIPE)
        assert p.returncode == 1
        assert len(p.stderr.decode().splitlines()) == 1
        assert p.stderr.startswith(b"andrea-show: ")


def test_closed_pipe_is_quiet(tmp_path):
    f = tmp_path / "big.ats"
    f.write_bytes(pack(tmp_path, big=np.arange(400000, dtype=np.float32)))
    p = subprocess.run(["bash", "-c", f"'{tool('show')}' -p --full '{f}' | head -1"],
                       capture_output=True)
    assert p.stdout == b"big f32 [400000]\n"
    assert p.stderr == b""


def usage_words(s):
    return s.replace("usage:", "").split()


def test_help_version_and_bad_options():
    p = show("--help")
    out = text(p)
    assert out.startswith("usage: andrea-show ")
    p = show("--version")
    assert re.fullmatch(r"andrea-show \(andrea\) \S+\n", text(p))
    for args in (["--bogus"], ["-x"], ["--png"], ["--name"], ["--threads", "0"],
                 ["-p", "--ascii"]):
        p = show(*args, check=2)
        one_line_error(p, "show")
    if shutil.which("man"):
        page = subprocess.run(["man", "-l", MAN], capture_output=True,
                              env={**os.environ, "MANWIDTH": "200"}).stdout.decode()
        syn = page.split("SYNOPSIS", 1)[1].split("DESCRIPTION", 1)[0]
        assert usage_words(syn) == usage_words(out.split("\n\noptions")[0])


def test_man_page_renders_cleanly():
    if not shutil.which("man"):
        pytest.skip("man is not installed")
    p = subprocess.run(["man", "--warnings", "-l", MAN], capture_output=True,
                       env={**os.environ, "MANWIDTH": "80"})
    assert p.returncode == 0 and p.stderr == b""


def test_a_damaged_record_not_shown_is_still_an_error(tmp_path):
    """--name, --layer, --head and --index pass over records, but each is
    decoded and checked as it goes by: damage there is an error, after the
    records shown before it (it was read past unchecked)."""
    x = np.arange(1000, dtype=np.float32)
    b = bytearray(pack(tmp_path, first=x, second=x * 2))
    b[len(b) - 30] ^= 0x40                      # inside record 2's payload
    p = show("--name", "first", input=bytes(b), check=1)
    assert "record 2 'second'" in one_line_error(p, "show")
    assert text(p).startswith("first f32 [1000]")
