"""The stream format end to end: andrea-pack and andrea-unpack against NumPy
and against tests/atsfmt.py, an independent Python reader and writer
written from andrea-stream(5).

Every rejected input must end with exit 1 and exactly one line on stderr,
and for streams that line must be the message the Python reader gives for
the same bytes, so both implementations follow the man page.
"""
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import time
import zlib

import numpy as np
import pytest

import atsfmt
import stagekit
from conftest import ROOT, one_line_error, run, tool

RNG = np.random.default_rng(20250101)


def save(path, arr, version=None):
    """np.save, or a given .npy format version."""
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version,
                                  allow_pickle=arr.dtype.hasobject)
    return str(path)


def pack(tmp, arrays, *opts, env=None, check=0):
    """Packs {name: array} through .npy files; returns andrea-pack's run."""
    args = []
    for i, (name, arr) in enumerate(arrays.items()):
        args.append(f"{name}={save(tmp / f'in{i}.npy', arr)}")
    return run("pack", *opts, *args, env=env, check=check)


def unpack(tmp, data, *args, check=0, env=None):
    """Unpacks stream bytes into a fresh directory; returns {name: array}."""
    out = tmp / "unpacked"
    shutil.rmtree(out, ignore_errors=True)
    p = run("unpack", "-d", out, *args, input=data, check=check, env=env)
    if check != 0:
        return p
    return {f[:-4]: np.load(out / f) for f in sorted(os.listdir(out))}


def same(a, b):
    """Bit-identical: dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def python_error(data, max_bytes=atsfmt.DEFAULT_MAX_BYTES, label="<stdin>"):
    with pytest.raises(atsfmt.FormatError) as e:
        atsfmt.read(data, max_bytes=max_bytes, label=label)
    return str(e.value)


def rejected(tmp, data, expect=None, env=None):
    """andrea-unpack must refuse data with exit 1 and the one line the
    independent reader gives; expect is a substring checked on top."""
    p = unpack(tmp, data, check=1, env=env)
    line = one_line_error(p, "unpack")
    max_bytes = int((env or {}).get("ANDREA_MAX_BYTES",
                                    atsfmt.DEFAULT_MAX_BYTES))
    assert line == "andrea-unpack: " + python_error(data, max_bytes)
    if expect:
        assert expect in line
    return line


def corpus():
    """Arrays covering dtypes, ranks and awkward shapes."""
    big = (RNG.standard_normal(1_300_000) * np.repeat(
        RNG.integers(0, 2, 1300), 1000)).astype(np.float32)  # 5.2 MB
    return {
        "f32": RNG.standard_normal((3, 5, 7)).astype(np.float32),
        "i32": RNG.integers(-2**31, 2**31, (17, 4), dtype=np.int32),
        "u8": RNG.integers(0, 256, 1000, dtype=np.uint8),
        "u8.zeros": np.zeros((64, 64), np.uint8),
        "scalar": np.array(3.25, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "empty3": np.zeros((3, 0, 2), np.int32),
        "rank8": RNG.standard_normal((2, 1, 2, 1, 2, 1, 2, 3)).astype(np.float32),
        "fortran": np.asfortranarray(
            RNG.standard_normal((4, 5, 6)).astype(np.float32)),
        "fortran.i32": np.asfortranarray(
            RNG.integers(-9, 9, (7, 3), dtype=np.int32)),
        "big": big,
        # noise rows ending in runs: level 1 switches deflate modes
        # about twice a row and plane (lib/stream/codec.c)
        "masked": np.where(np.triu(np.ones((700, 700), bool), 1), -np.inf,
                           RNG.standard_normal((3, 700, 700))).astype(np.float32),
    }


@pytest.fixture(scope="module")
def arrays():
    return corpus()


@pytest.mark.parametrize("level", [0, 1, 6])
@pytest.mark.parametrize("shuffle", [True, False])
def test_round_trip(tmp_path, arrays, level, shuffle):
    opts = ["-z", level] + ([] if shuffle else ["--no-shuffle"])
    data = pack(tmp_path, arrays, *opts).stdout
    back = unpack(tmp_path, data)
    assert sorted(back) == sorted(arrays)
    for name, arr in arrays.items():
        same(back[name], arr)
    # the independent reader sees the same records, in operand order
    recs = atsfmt.read(data)
    assert [r.name for r in recs] == list(arrays)
    for r, arr in zip(recs, arrays.values()):
        assert r.dims == arr.shape
        assert r.payload == np.ascontiguousarray(arr).tobytes()
        multi = arr.dtype.itemsize > 1
        assert r.flags == (1 if shuffle and level > 0 and multi else 0)
        if level == 0:
            assert all(raw == stored for _, raw, stored in r.chunks)
    big = recs[list(arrays).index("big")]
    assert len(big.chunks) == 5
    if level > 0:  # mostly zeros: deflate must have paid somewhere
        assert any(stored < raw for _, raw, stored in big.chunks)
        # and on every chunk of masked scores (a tenth at least)
        masked = recs[list(arrays).index("masked")]
        assert all(stored * 1.1 < raw for _, raw, stored in masked.chunks)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_versions(tmp_path, version):
    arr = RNG.standard_normal((5, 3)).astype(np.float32)
    save(tmp_path / "v.npy", arr, version=version)
    data = run("pack", f"x={tmp_path / 'v.npy'}", check=0).stdout
    same(unpack(tmp_path, data)["x"], arr)


def test_threads_do_not_change_bytes(tmp_path, arrays):
    sub = {"big": arrays["big"], "f32": arrays["f32"], "u8": arrays["u8"],
           "masked": arrays["masked"]}
    outs = [pack(tmp_path, sub, "--threads", n).stdout for n in (1, 2, 3, 4)]
    outs += [pack(tmp_path, sub, env={"ANDREA_THREADS": n}).stdout
             for n in ("1", "3")]
    outs += [pack(tmp_path, sub, "-z", 6, "--threads", 3).stdout]
    assert len(set(outs[:-1])) == 1
    six = pack(tmp_path, sub, "-z", 6, "--threads", 1).stdout
    assert outs[-1] == six and six != outs[0]
    for n in ("1", "4"):
        back = unpack(tmp_path, outs[0], "--threads", n)
        same(back["big"], arrays["big"])
        same(back["masked"], arrays["masked"])


def test_level_from_environment(tmp_path, arrays):
    sub = {"f32": arrays["f32"]}
    assert (pack(tmp_path, sub, env={"ANDREA_ZLEVEL": "0"}).stdout ==
            pack(tmp_path, sub, "-z", 0).stdout)
    # the option wins over the environment
    assert (pack(tmp_path, sub, "-z", 0, env={"ANDREA_ZLEVEL": "9"}).stdout
            == pack(tmp_path, sub, "-z", 0).stdout)


def test_default_level_stores_on_a_pipe_and_deflates_a_file(tmp_path):
    """A pipe keeps nothing, so by default a tool stores what it writes
    there; a file (-o, or standard output redirected to one) is deflated
    at level 1.  -z and ANDREA_ZLEVEL win everywhere."""
    sub = {"zeros": np.zeros((256, 1024), np.float32)}
    stored, deflated = (pack(tmp_path, sub, "-z", z).stdout for z in (0, 1))
    assert len(deflated) < len(stored) // 4 and len(stored) >= 1 << 20
    assert pack(tmp_path, sub).stdout == stored  # captured: a pipe
    assert pack(tmp_path, sub, env={"ANDREA_ZLEVEL": "1"}).stdout == deflated
    out = tmp_path / "o.ats"
    pack(tmp_path, sub, "-o", out)
    assert out.read_bytes() == deflated
    npy = save(tmp_path / "z.npy", sub["zeros"])
    with open(out, "wb") as f:
        subprocess.run([tool("pack"), f"zeros={npy}"], stdout=f, check=True)
    assert out.read_bytes() == deflated


@pytest.mark.parametrize("level", [0, 1, 6])
@pytest.mark.parametrize("shuffle", [True, False])
def test_python_writer_matches_c_writer(tmp_path, arrays, level, shuffle):
    """The header layout is fixed by the man page; the deflate bytes too as
    long as both sides use the same zlib."""
    if level > 0 and zlib.ZLIB_RUNTIME_VERSION != zlib.ZLIB_VERSION:
        pytest.skip("Python's zlib differs from the one it was built with")
    sub = {k: arrays[k] for k in ("f32", "u8", "scalar", "empty", "fortran")}
    opts = ["-z", level] + ([] if shuffle else ["--no-shuffle"])
    c = pack(tmp_path, sub, *opts).stdout
    py = atsfmt.stream(*[
        atsfmt.record(name, {"f": "f32", "i": "i32", "u": "u8"}[a.dtype.kind],
                      a.shape, np.ascontiguousarray(a).tobytes(),
                      level=level, shuffled=shuffle)
        for name, a in sub.items()])
    assert c == py


def test_python_writes_c_reads(tmp_path):
    """Streams only the independent writer makes: odd chunk sizes, stored
    chunks of a shuffled record, attributes, a u8 record with the flag."""
    f = RNG.standard_normal((10, 7)).astype(np.float32)
    i = RNG.integers(-5, 5, 33, dtype=np.int32)
    u = RNG.integers(0, 4, 1001, dtype=np.uint8)
    attrs = [("layer", "3"), ("scale", "0.125"), ("note", "a=b c"),
             ("k" * 63, "v" * 127)]
    shuffled_stored = atsfmt.header("fs", "f32", f.shape, flags=1, chunk=12)
    for off in range(0, f.nbytes, 12):
        shuffled_stored += atsfmt.encode_chunk(f.tobytes()[off:off + 12], 4,
                                               0, True)
    u_flag = atsfmt.header("uf", "u8", u.shape, flags=1, chunk=100)
    for off in range(0, u.nbytes, 100):
        u_flag += atsfmt.encode_chunk(u.tobytes()[off:off + 100], 1, 9, False)
    data = atsfmt.stream(
        atsfmt.record("f", "f32", f.shape, f.tobytes(), attrs, level=9,
                      chunk=28),
        atsfmt.record("i", "i32", i.shape, i.tobytes(), level=2, chunk=4),
        atsfmt.record("u", "u8", u.shape, u.tobytes(), level=1, chunk=3),
        shuffled_stored, u_flag,
        atsfmt.record("n", "f32", (0, 3), b""))
    back = unpack(tmp_path, data)
    same(back["f"], f)
    same(back["i"], i)
    same(back["u"], u)
    same(back["fs"], f)
    same(back["uf"], u)
    same(back["n"], np.zeros((0, 3), np.float32))


def test_zero_dim_with_huge_others(tmp_path):
    """[2^40, 2^40, 2^40, 0] holds no element: the product is 0."""
    shape = (1 << 40,) * 3 + (0,)
    data = atsfmt.stream(atsfmt.record("z", "u8", shape, b""))
    run("unpack", "-d", tmp_path, input=data, check=0)
    with open(tmp_path / "z.npy", "rb") as f:  # NumPy itself cannot load it
        np.lib.format.read_magic(f)
        assert np.lib.format.read_array_header_1_0(f)[0] == shape


def test_empty_stream_is_valid(tmp_path):
    assert unpack(tmp_path, atsfmt.end_record()) == {}
    assert atsfmt.read(atsfmt.end_record()) == []


def test_concatenation(tmp_path):
    a = {"a": RNG.standard_normal(10).astype(np.float32)}
    b = {"b": np.arange(6, dtype=np.int32).reshape(2, 3),
         "c": np.arange(5, dtype=np.uint8)}
    sa = pack(tmp_path, a).stdout
    sb = pack(tmp_path, b, "-z", 0).stdout
    empty = atsfmt.end_record()
    for joined in (sa + sb, sa + empty + sb, empty + sa + sb + empty):
        back = unpack(tmp_path, joined)
        assert sorted(back) == ["a", "b", "c"]
        same(back["b"], b["b"])
        assert [r.name for r in atsfmt.read(joined)] == ["a", "b", "c"]
    # several FILE operands read one after the other
    (tmp_path / "a.ats").write_bytes(sa)
    (tmp_path / "b.ats").write_bytes(sb + empty)
    out = tmp_path / "files"
    run("unpack", "-d", out, tmp_path / "a.ats", tmp_path / "b.ats", check=0)
    assert sorted(os.listdir(out)) == ["a.npy", "b.npy", "c.npy"]


# ---------------------------------------------------------------- bad input

def two_records():
    """A small two-record stream with attributes, and its records."""
    x = np.repeat(np.float32([0.5, -1 / 3]), 16).reshape(4, 8)
    idx = np.array([3, -1, 4, 1 << 20], dtype=np.int32)
    rx = atsfmt.record("x", "f32", x.shape, x.tobytes(), [("layer", "0")])
    ri = atsfmt.record("idx", "i32", idx.shape, idx.tobytes(), level=0)
    return atsfmt.stream(rx, ri), rx, ri


def test_two_records_read(tmp_path):
    data, _, _ = two_records()
    back = unpack(tmp_path, data)
    assert back["idx"].tolist() == [3, -1, 4, 1 << 20]


def test_truncation_at_every_offset(tmp_path):
    data, rx, ri = two_records()
    lines = set()
    for cut in range(len(data)):
        line = rejected(tmp_path, data[:cut])
        lines.add(line)
    # each kind of place a stream can stop is seen
    for want in ("empty input", "record 1: input ended inside the record",
                 "record 2: input ended inside the record",
                 "no end record after record 1",
                 "no end record after record 2", "inside the end record",
                 "inside the first header", "inside the header after record 1",
                 "'x': input ended", "'idx': input ended"):
        assert any(want in l for l in lines), (want, lines)


def test_truncation_through_a_file_operand(tmp_path):
    data, rx, _ = two_records()
    path = tmp_path / "cut.ats"
    path.write_bytes(data[:len(rx) - 3])
    p = run("unpack", "-d", tmp_path / "o", path, check=1)
    assert one_line_error(p, "unpack") == (
        f"andrea-unpack: {path}: record 1 'x': input ended inside the record")


def test_bit_flips(tmp_path):
    data, rx, ri = two_records()
    recs = atsfmt.read(data)
    hlen = recs[0].header_len
    chunk0 = recs[0].chunks[0][0]
    chunk1 = recs[1].chunks[0][0]
    positions = list(range(hlen))                      # every header byte
    positions += range(chunk0, chunk0 + 16)            # a chunk header
    positions += [chunk0 + 16, chunk0 + 20, len(rx) - 1]   # deflated data
    positions += [chunk1 + 16, chunk1 + 30, len(data) - 25]  # stored data
    positions += [len(data) - 15, len(data) - 2]       # the end record
    assert recs[0].chunks[0][2] < recs[0].chunks[0][1]  # x is deflated
    for pos in positions:
        for bit in (0, 5) if pos < hlen else (pos % 8,):
            bad = bytearray(data)
            bad[pos] ^= 1 << bit
            rejected(tmp_path, bytes(bad))


def crafted():
    """(label, stream bytes, substring of the expected message)."""
    f = np.arange(12, dtype=np.float32)
    rec = atsfmt.record("t", "f32", (3, 4), f.tobytes(), level=0)
    good_chunk = rec[len(atsfmt.header("t", "f32", (3, 4))):]
    H = atsfmt.header
    E = atsfmt.end_record()
    deflated = atsfmt.deflate(f.tobytes(), 6)
    cases = [
        ("rank 9", H("r", "f32", (1,) * 9), "rank 9 exceeds the maximum of 8"),
        ("terabyte", H("tb", "f32", (1 << 20, 1 << 20)),
         "exceeds the cap of 8589934592 bytes (ANDREA_MAX_BYTES)"),
        ("dim cap", H("d", "u8", (1 << 40 | 1,)), "dimension 0 of"),
        ("overflow", H("o", "u8", (1 << 40,) * 3),
         "element count overflows 64 bits"),
        ("dtype 0", H("d", 0, (1,)), "unknown dtype code 0"),
        ("dtype 7", H("d", 7, (1,)), "unknown dtype code 7"),
        ("bf16", H("b", "bf16", (2,)), "dtype bf16 is reserved"),
        ("f16", H("b", "f16", (2,)), "dtype f16 is reserved"),
        ("version", H("v", "f32", (1,), version=2),
         "unsupported format version 2"),
        ("kind", H("k", "f32", (1,), kind=3), "unknown record kind 3"),
        ("flags", H("f", "f32", (1,), flags=2), "unknown flags 0x02"),
        ("header crc", H("c", "f32", (1,), crc=0), "header CRC32 mismatch"),
        ("space in name", H("a b", "f32", (1,)),
         "record 1: record name contains whitespace"),
        ("tab in name", H("a\tb", "f32", (1,)), "contains whitespace"),
        ("newline in name", H("ab\n", "f32", (1,)), "contains whitespace"),
        ("DEL in name", H("a\x7f", "f32", (1,)), "control bytes"),
        ("empty name", H("", "f32", (1,)), "empty record name"),
        ("attr no newline", H("a", "u8", (0,), b"k=v"),
         "'a': attribute 1 has no newline"),
        ("attr no =", H("a", "u8", (0,), b"k=v\nkv\n"),
         "attribute 2 has no '='"),
        ("attr empty line", H("a", "u8", (0,), b"\n"), "has no '='"),
        ("attr bad key", H("a", "u8", (0,), b"k v=1\n"), "bad key or value"),
        ("attr empty key", H("a", "u8", (0,), b"=1\n"), "bad key or value"),
        ("attr long key", H("a", "u8", (0,), b"k" * 64 + b"=1\n"),
         "bad key or value"),
        ("attr long value", H("a", "u8", (0,), b"k=" + b"v" * 128 + b"\n"),
         "bad key or value"),
        ("attr control", H("a", "u8", (0,), b"k=\x01\n"), "bad key or value"),
        ("attr 8-bit", H("a", "u8", (0,), b"k=\xe9\n"), "bad key or value"),
        ("attr twice", H("a", "u8", (0,), b"k=1\nk=2\n"),
         "attribute 'k' appears twice"),
        ("33 attrs", H("a", "u8", (0,), [(f"k{i}", i) for i in range(33)]),
         "more than 32 attributes"),
        ("attr too long", H("a", "u8", (0,), b"k=v\n" * 1025),
         "attribute block of 4100 bytes exceeds 4096"),
        ("chunk 0", H("c", "f32", (1,), chunk=0), "chunk size 0 is not"),
        ("chunk 6", H("c", "f32", (1,), chunk=6),
         "chunk size 6 is not a multiple of 4 in 1..4194304"),
        ("chunk big", H("c", "u8", (1,), chunk=(4 << 20) + 1),
         "chunk size 4194305"),
        ("raw length lies", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            40, f.tobytes()[:40], atsfmt.crc32(f.tobytes()[:40])),
         "'t': chunk 0: raw length 40, expected 48"),
        ("raw length lies high", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            52, f.tobytes() + b"\0" * 4, 0), "raw length 52, expected 48"),
        ("stored length 0", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, b"", atsfmt.crc32(f.tobytes())), "stored length 0 not in"),
        ("stored longer than raw", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, f.tobytes() + b"\0", atsfmt.crc32(f.tobytes())),
         "stored length 49 not in 1..48"),
        ("chunk header crc", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, f.tobytes(), atsfmt.crc32(f.tobytes()), hdr_crc=1),
         "chunk 0: header CRC32 mismatch"),
        ("data crc", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, f.tobytes(), 0), "CRC32 mismatch: the data is damaged"),
        ("short deflate", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, atsfmt.deflate(f.tobytes()[:44], 6),
            atsfmt.crc32(f.tobytes())), "corrupt deflate data"),
        ("deflate with tail", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, deflated + b"\0" * (47 - len(deflated)),
            atsfmt.crc32(f.tobytes())), "corrupt deflate data"),
        ("not deflate", H("t", "f32", (3, 4)) + atsfmt.chunk_bytes(
            48, b"\xff" * 20, atsfmt.crc32(f.tobytes())),
         "corrupt deflate data"),
        ("shuffle flag on unshuffled data", H("t", "f32", (3, 4), flags=1)
         + good_chunk, "CRC32 mismatch"),
        ("second record bad magic", rec + b"XTSR" + bytes(40),
         "record 2: bad magic"),
        ("trailing newline", rec + E + b"\n",
         "trailing garbage after the end record"),
        ("trailing garbage", rec + E + b"garbage!" * 4, "trailing garbage"),
        ("trailing partial magic", rec + E + b"AT",
         "input ended inside the header after record 1"),
        ("trailing partial magic after an empty stream", E + b"ATS",
         "input ended inside a header after the end record"),
        ("end record crc", rec + atsfmt.end_record(crc=5),
         "end record after record 1: header CRC32 mismatch"),
        ("end record field", rec + atsfmt.end_record(fill=b"\0" * 9 + b"\1"),
         "end record after record 1: nonzero field"),
        ("end record version", rec + E[:4] + b"\2" + E[5:],
         "record 2: unsupported format version 2"),
    ]
    out = []
    for label, body, expect in cases:
        if not body.endswith(E) and not label.startswith(("second", "trail")):
            body += E
        out.append(pytest.param(body, expect, id=label))
    out += [
        pytest.param(b"", "empty input: not an andrea stream", id="empty"),
        pytest.param(b"P6\n1 1\n255\n\0\0\0", "not an andrea stream (bad "
                     "magic)", id="not a stream"),
        pytest.param(rec, "stream has no end record after record 1: did an "
                     "earlier stage fail?", id="missing end record"),
        pytest.param(rec + H("u", "f32", (3, 4), crc=0) + good_chunk + E,
                     "record 2: header CRC32 mismatch",
                     id="bad second header"),
        pytest.param(rec + atsfmt.record("u", "u8", (1,), b"\0"),
                     "no end record after record 2",
                     id="missing end record 2"),
    ]
    return out


@pytest.mark.parametrize("data,expect", crafted())
def test_bad_stream(tmp_path, data, expect):
    rejected(tmp_path, data, expect)


def test_cap_from_environment(tmp_path):
    data = atsfmt.stream(atsfmt.record("small", "u8", (101,), bytes(101)))
    line = rejected(tmp_path, data, env={"ANDREA_MAX_BYTES": "100"})
    assert "'small': tensor of 101 bytes exceeds the cap of 100 bytes" in line
    assert unpack(tmp_path, data, env={"ANDREA_MAX_BYTES": "101"})
    for bad in ("lots", "0", "-5", " -5", "1e9", "99999999999999999999999"):
        p = unpack(tmp_path, data, check=2, env={"ANDREA_MAX_BYTES": bad})
        assert "ANDREA_MAX_BYTES" in one_line_error(p, "unpack")


def run_limited(name, *args, input=None, env=None, aspace=None, fsize=None,
                stdout=subprocess.PIPE):
    """Runs a tool under resource limits (virtual memory, file size).  An
    AddressSanitizer build (make SAN=1) reserves terabytes of shadow
    memory, so it runs without the memory limit."""
    with open(tool(name), "rb") as f:
        if b"__asan_init" in f.read():
            aspace = None

    def limit():
        if aspace:
            resource.setrlimit(resource.RLIMIT_AS, (aspace, aspace))
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    full = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    full.update({"OPENBLAS_NUM_THREADS": "1", **(env or {})})
    return subprocess.run([tool(name), *map(str, args)], input=input,
                          stdout=stdout, stderr=subprocess.PIPE, env=full,
                          preexec_fn=limit, timeout=120)


GiB = 1 << 30


def test_terabyte_header_allocates_nothing(tmp_path):
    data = atsfmt.stream(atsfmt.header("tb", "f32", (1 << 20, 1 << 20)))
    p = run_limited("unpack", "-d", tmp_path / "o", input=data,
                    aspace=2 * GiB)
    assert p.returncode == 1
    assert one_line_error(p, "unpack") == (
        "andrea-unpack: <stdin>: record 1 'tb': tensor of 4398046511104 "
        "bytes exceeds the cap of 8589934592 bytes (ANDREA_MAX_BYTES)")


def test_lying_size_costs_only_what_arrives(tmp_path):
    """With the cap raised, a header claiming far more than the 2 GiB the
    process may map (but less than the memory available, which is refused
    up front: test_faults.py) followed by 3 MiB of real chunks ends in a
    truncation error, not an allocation failure."""
    with open("/proc/meminfo") as f:
        info = {l.split(":")[0]: int(l.split()[1]) << 10 for l in f}
    avail = info.get("MemAvailable", 1 << 42) + info.get("SwapFree", 0)
    rows = min(avail // 2, 1 << 42) // (4 << 20)
    if rows * (4 << 20) < 4 * GiB:
        pytest.skip("less than 8 GiB of memory available")
    zeros = bytes(1 << 20)
    body = atsfmt.header("tb", "f32", (rows, 1 << 20))
    body += atsfmt.encode_chunk(zeros, 4, 1, True) * 3
    for threads in ("1", "4"):
        p = run_limited("unpack", "-d", tmp_path / "o", input=body,
                        aspace=2 * GiB,
                        env={"ANDREA_MAX_BYTES": str(1 << 43),
                             "ANDREA_THREADS": threads})
        assert p.returncode == 1
        assert one_line_error(p, "unpack") == (
            "andrea-unpack: <stdin>: record 1 'tb': input ended inside "
            "the record")


# ------------------------------------------------------- .npy input corpus

def npy_raw(header, data=b"", version=1):
    """A .npy file from a header dict string."""
    pad = b" " * ((64 - (12 + len(header) + 1) % 64) % 64)
    h = header.encode() + pad + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return (b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h))
            + h + data)


def npy_cases(tmp):
    good = tmp / "good.npy"
    save(good, np.arange(10, dtype=np.float32))
    raw = good.read_bytes()
    cases = {
        "pickle": (np.array([{"a": 1}, None], dtype=object),
                   "object arrays (pickles) are refused"),
        "big-endian": (np.arange(4, dtype=">f4"), "big-endian data ('>f4')"),
        "float64": (np.arange(4, dtype=np.float64), "float64 data: andrea's "
                    "streams hold float32 (give --cast"),
        "int64": (np.arange(4, dtype=np.int64), "int64 data"),
        "bool": (np.zeros(4, bool), "'|b1' is not supported"),
        "structured": (np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]),
                       "structured dtypes are not supported"),
        "truncated": (raw[:-3], "data is 37 bytes, the header says 40"),
        "too long": (raw + b"\0", "data is 41 bytes, the header says 40"),
        "bad magic": (b"\x93NUMPX" + raw[6:], "not a .npy file"),
        "empty file": (b"", "not a .npy file"),
        "short header": (raw[:40], "truncated header"),
        "version 4": (raw[:6] + b"\x04" + raw[7:], "unsupported .npy version 4.0"),
        "version 1.1": (raw[:7] + b"\x01" + raw[8:],
                        "unsupported .npy version 1.1"),
        "newline in key": (npy_raw("{'descr': '<f4', 'fortran\norder': False, "
                                   "'shape': (1,), }", b"\0" * 4),
                           "malformed header dictionary"),
        "newline in descr": (npy_raw("{'descr': '<f\n4', 'fortran_order': "
                                     "False, 'shape': (1,), }", b"\0" * 4),
                             "malformed header dictionary"),
        "huge shape": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (1099511627776, 1099511627776), }"),
                       "array exceeds the cap of 8589934592 bytes"),
        "rank 9": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", b"\0" * 4),
                   "rank exceeds the maximum of 8"),
        "bad dict": (npy_raw("{'descr': '<f4', 'fortran_order': Maybe, "
                             "'shape': (1,), }", b"\0" * 4),
                     "malformed header dictionary"),
        "extra key": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (1,), 'x': 1, }", b"\0" * 4),
                      "unexpected header key 'x'"),
        "no shape": (npy_raw("{'descr': '<f4', 'fortran_order': False, }"),
                     "header lacks descr, fortran_order or shape"),
        "huge header": (b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 30),
                        "header of 1073741824 bytes exceeds 65536"),
    }
    out = []
    for name, (content, expect) in cases.items():
        path = tmp / (name.replace(" ", "_") + ".npy")
        if isinstance(content, np.ndarray):
            save(path, content)
        else:
            path.write_bytes(content)
        out.append((name, path, expect))
    out.append(("missing", tmp / "missing.npy", "No such file or directory"))
    return out


def test_pack_refuses_bad_npy(tmp_path):
    for name, path, expect in npy_cases(tmp_path):
        p = run_limited("pack", f"x={path}", aspace=2 * GiB)
        assert p.returncode == 1, name
        assert p.stdout == b"", name
        line = one_line_error(p, "pack")
        assert line.startswith(f"andrea-pack: {path}: "), line
        assert expect in line, (name, line)


def test_pack_casts_numpys_defaults_on_request(tmp_path):
    """float64 and int64 (np.array's defaults) are refused with a hint,
    taken with --cast as float32 (rounded to nearest, Fortran order too)
    and int32, and a value that does not fit is an error naming its index."""
    f = np.asfortranarray(np.random.default_rng(3).standard_normal((3, 5)))
    i = np.array([[0, -7, 2**31 - 1], [-2**31, 5, 9]])
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "i.npy", i)
    for name, kind in (("f", "float64"), ("i", "int64")):
        p = run("pack", f"x={tmp_path / name}.npy", check=1)
        assert f"{kind} data" in one_line_error(p, "pack") and "--cast" in p.stderr.decode()
    out = unpack(tmp_path, run("pack", "--cast", f"f={tmp_path / 'f.npy'}",
                               f"i={tmp_path / 'i.npy'}", check=0).stdout)
    assert out["f"].dtype == np.float32 and np.array_equal(out["f"], f.astype(np.float32))
    assert out["i"].dtype == np.int32 and np.array_equal(out["i"], i)
    np.save(tmp_path / "big.npy", np.array([1, 2**31]))
    np.save(tmp_path / "huge.npy", np.array([0.0, 1e300]))
    for name, says in (("big", "2147483648 at index 1 to int32"),
                       ("huge", "1e+300 at index 1 to float32")):
        p = run("pack", "--cast", f"x={tmp_path / name}.npy", check=1)
        assert says in one_line_error(p, "pack")


@pytest.mark.parametrize("args,env", [
    ([], None),
    (["x y=a.npy"], None),
    (["=a.npy"], None),
    (["noequals"], None),
    (["-z", "10", "x=a.npy"], None),
    (["-z", "", "x=a.npy"], None),
    (["--threads", "0", "x=a.npy"], None),
    (["--bogus", "x=a.npy"], None),
    (["-q", "x=a.npy"], None),
    (["x=a.npy"], {"ANDREA_ZLEVEL": "fast"}),
    (["x=a.npy"], {"ANDREA_THREADS": "0"}),
])
def test_pack_usage_errors(tmp_path, args, env):
    save(tmp_path / "a.npy", np.zeros(3, np.float32))
    p = run("pack", "-o", tmp_path / "o.ats", *args, env=env, cwd=tmp_path,
            check=2)
    one_line_error(p, "pack")
    assert os.listdir(tmp_path) == ["a.npy"]


# ------------------------------------------------------------- output side

def test_full_disk(tmp_path):
    src = save(tmp_path / "a.npy", RNG.standard_normal(1000).astype(np.float32))
    p = run("pack", "-o", "/dev/full", f"a={src}", check=1)
    assert "/dev/full: write error" in one_line_error(p, "pack")
    with open("/dev/full", "wb") as full:
        p = run_limited("pack", f"a={src}", stdout=full)
    assert p.returncode == 1
    assert "<stdout>: write error" in one_line_error(p, "pack")


def test_closed_pipe_ends_quietly(tmp_path):
    src = save(tmp_path / "a.npy", RNG.standard_normal(1 << 20)
               .astype(np.float32))
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([tool("pack"), f"a={src}"], stdout=w,
                           stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == -signal.SIGPIPE and p.stderr == b""


def test_atomic_output(tmp_path):
    arr = RNG.integers(0, 256, 300_000, dtype=np.uint8)  # incompressible
    src = save(tmp_path / "a.npy", arr)
    out = tmp_path / "out.ats"
    run("pack", "-o", out, f"a={src}", check=0)
    good = out.read_bytes()
    before = sorted(os.listdir(tmp_path))
    # a bad operand is found before anything is written
    p = run("pack", "-o", out, f"a={src}", f"b={tmp_path / 'no.npy'}",
            check=1)
    one_line_error(p, "pack")
    # a write that fails half way (file size limit, SIGXFSZ ignored)
    p = run_limited("pack", "-o", out, f"b={src}", fsize=64 << 10)
    assert p.returncode == 1
    assert "write error" in one_line_error(p, "pack")
    assert out.read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == before
    # and a successful rewrite replaces it
    small = save(tmp_path / "s.npy", np.ones(2, np.float32))
    run("pack", "-o", out, f"s={small}", check=0)
    assert [r.name for r in atsfmt.read(out.read_bytes())] == ["s"]
    assert sorted(os.listdir(tmp_path)) == before + ["s.npy"]


def test_pack_attributes_go_to_the_records_they_name(tmp_path):
    """-a NAME:KEY=VALUE: NAME ends at the last ':' before the first '='
    (a name may hold ':', a key not), the option reaches every record of
    that NAME, and a malformed option, one naming no operand or one
    setting a key of a name again is a usage error (the first of these
    was once dropped without a word, the last overrode)."""
    src = save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    out = run("pack", "-a", "a:b:k=v:w=1", "-a", "c:x=1", f"a:b={src}",
              f"c={src}", f"c={src}", check=0).stdout
    got = [(r.name, dict(r.attrs)) for r in atsfmt.read(out)]
    assert got == [("a:b", {"k": "v:w=1"}), ("c", {"x": "1"}), ("c", {"x": "1"})]
    for args, says in (
            (["-a", "ak=v"], "-a 'ak=v': expected NAME:KEY=VALUE"),
            (["-a", "a:=v"], "-a 'a:=v': expected NAME:KEY=VALUE"),
            (["-a", "a:k"], "-a 'a:k': expected NAME:KEY=VALUE"),
            (["-a", "b:k=v"], "-a 'b:k=v': names no NAME=FILE operand"),
            (["-a", "a:k=1", "-a", "a:k=2"],
             "-a 'a:k=2': sets k of that name again (after -a 'a:k=1')"),
            (["-a", "a:k!=1"], "-a 'a:k!=1': bad key or value")):
        p = run("pack", *args, f"a={src}", f"a={src}", check=2)
        assert says in one_line_error(p, "pack") and p.stdout == b"", args


def test_output_through_a_link_keeps_link_and_mode(tmp_path):
    """-o replaces a link's target and keeps the link, a replaced file
    keeps its permissions, a new one gets 0666 less the umask (as the
    shell's > would), and -o '' is a usage error before any work."""
    src = save(tmp_path / "a.npy", np.arange(5, dtype=np.float32))
    target, link = tmp_path / "t.ats", tmp_path / "l.ats"
    run("pack", "-o", target, f"a={src}", check=0)
    os.chmod(target, 0o640)
    os.symlink("t.ats", link)
    run("pack", "-o", link, f"b={src}", check=0)
    assert os.path.islink(link)
    assert [r.name for r in atsfmt.read(target.read_bytes())] == ["b"]
    assert os.stat(target).st_mode & 0o777 == 0o640
    old = os.umask(0o027)
    try:
        run("pack", "-o", tmp_path / "new.ats", f"a={src}", check=0)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new.ats").st_mode & 0o777 == 0o640
    before = sorted(os.listdir(tmp_path))
    p = run("pack", "-o", "", f"a={src}", check=2, cwd=tmp_path)
    assert "expected a file name" in one_line_error(p, "pack")
    assert sorted(os.listdir(tmp_path)) == before


def test_a_replaced_file_keeps_its_owner_and_its_other_names_the_old(tmp_path):
    """-o keeps a replaced file's owner and group where the tool may give
    them (root here: any; else a group of the user's), and replaces that
    name alone: a hard link to it keeps the earlier contents (andrea(7))."""
    src = save(tmp_path / "a.npy", np.arange(5, dtype=np.float32))
    target, other = tmp_path / "t.ats", tmp_path / "other.ats"
    run("pack", "-o", target, f"a={src}", check=0)
    os.link(target, other)
    before = other.read_bytes()
    root = os.geteuid() == 0
    if root:
        os.chown(target, 4321, 4322)
    run("pack", "-o", target, f"b={src}", check=0)
    assert [r.name for r in atsfmt.read(target.read_bytes())] == ["b"]
    assert other.read_bytes() == before
    st = os.stat(target)
    if root:
        assert (st.st_uid, st.st_gid) == (4321, 4322)
    else:  # a group of the user's other than the file's, where there is one
        other = [g for g in os.getgroups() if g != st.st_gid]
        if not other:
            pytest.skip("no second group to give the file")
        os.chown(target, -1, other[0])
        run("pack", "-o", target, f"a={src}", check=0)
        assert os.stat(target).st_gid == other[0]


def test_output_to_a_pipe_by_name(tmp_path):
    """-o /dev/stdout into a pipe, -o >(cmd) (a /dev/fd link to a pipe)
    and -o FIFO with its reader waiting are written in place, whole; the
    terminal check never opens the fifo ahead of the writer."""
    src = save(tmp_path / "a.npy", np.arange(7, dtype=np.float32))
    run("pack", "-z", 1, "-o", tmp_path / "w.ats", f"a={src}", check=0)
    want = (tmp_path / "w.ats").read_bytes()
    os.remove(tmp_path / "w.ats")
    p = subprocess.run([tool("pack"), "-z", "1", "-o", "/dev/stdout",
                        f"a={src}"], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == want, p.stderr
    got = tmp_path / "got.ats"
    p = subprocess.run(["bash", "-c", f"'{tool('pack')}' -z 1 -o >(cat > "
                        f"'{got}') a='{src}'; wait"], capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    for _ in range(100):
        if got.exists() and got.stat().st_size == len(want):
            break
        time.sleep(0.05)
    assert got.read_bytes() == want
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    time.sleep(0.2)  # the reader waits in open()
    run("pack", "-z", 1, "-o", fifo, f"a={src}", check=0)
    assert reader.communicate(timeout=60)[0] == want
    assert sorted(os.listdir(tmp_path)) == ["a.npy", "fifo", "got.ats"]
    # without a level, a pipe by name is stored as standard output's pipe
    # is (it was deflated)
    stored = run("pack", "-z", 0, f"a={src}", check=0).stdout
    assert stored != want
    p = subprocess.run([tool("pack"), "-o", "/dev/stdout", f"a={src}"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == stored, p.stderr
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    time.sleep(0.2)
    run("pack", "-o", fifo, f"a={src}", check=0)
    assert reader.communicate(timeout=60)[0] == stored


def test_unpack_replaces_npy_whole_or_not_at_all(tmp_path):
    """An .npy that cannot be written whole leaves the earlier one."""
    small = save(tmp_path / "s.npy", np.ones(3, np.float32))
    big = save(tmp_path / "b.npy", RNG.standard_normal(100_000)
               .astype(np.float32))
    out = tmp_path / "out"
    s = run("pack", f"x={small}", check=0).stdout
    run("unpack", "-d", out, input=s, check=0)
    good = (out / "x.npy").read_bytes()
    b = run("pack", f"x={big}", check=0).stdout
    p = run_limited("unpack", "-d", out, input=b, fsize=64 << 10)
    assert p.returncode == 1
    assert "write error" in one_line_error(p, "unpack")
    assert (out / "x.npy").read_bytes() == good
    assert os.listdir(out) == ["x.npy"]


def test_output_into_missing_directory(tmp_path):
    src = save(tmp_path / "a.npy", np.ones(2, np.float32))
    p = run("pack", "-o", tmp_path / "nodir" / "o.ats", f"a={src}", check=1)
    one_line_error(p, "pack")


def test_refuses_terminal(tmp_path):
    src = save(tmp_path / "a.npy", np.ones(2, np.float32))
    master, slave = os.openpty()
    try:
        for args in ([], ["-o", "-"]):
            p = subprocess.run([tool("pack"), *args, f"a={src}"],
                               stdout=slave, stderr=subprocess.PIPE,
                               timeout=60)
            assert p.returncode == 1
            assert "refusing to write binary data to a terminal" in \
                one_line_error(p, "pack")
        p = subprocess.run([tool("pack"), "-f", f"a={src}"], stdout=slave,
                           stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 0 and p.stderr == b""
    finally:
        os.close(master)
        os.close(slave)


# ----------------------------------------------------------- andrea-unpack

@pytest.mark.parametrize("name", ["a/b", "../evil", "..", ".", "/abs",
                                  "dir/"])
def test_unpack_refuses_names_leaving_dir(tmp_path, name):
    data = atsfmt.stream(atsfmt.record(name, "u8", (2,), b"\1\2"))
    out = tmp_path / "d"
    p = run("unpack", "-d", out, input=data, check=1)
    line = one_line_error(p, "unpack")
    assert line == (f"andrea-unpack: <stdin>: record 1 '{name}': the name "
                    f"would leave {out}")
    assert os.listdir(out) == []
    assert sorted(os.listdir(tmp_path)) == ["d"]


def test_unpack_long_names(tmp_path):
    """A name of 251 bytes makes a file name of 255, the most a name may
    have (its temporary is cut to fit); one of 252 is refused in one line
    naming the record, before anything is written."""
    longest = "a" * 251
    data = atsfmt.stream(atsfmt.record(longest, "u8", (2,), b"\1\2"))
    run("unpack", "-d", tmp_path / "d", input=data, check=0)
    assert os.listdir(tmp_path / "d") == [longest + ".npy"]
    assert np.load(tmp_path / "d" / (longest + ".npy")).tolist() == [1, 2]
    over = "b" * 252
    data = atsfmt.stream(atsfmt.record(over, "u8", (2,), b"\1\2"))
    p = run("unpack", "-d", tmp_path / "e", input=data, check=1)
    assert one_line_error(p, "unpack") == (
        f"andrea-unpack: <stdin>: record 1 '{over}': the file name {over}.npy "
        "would be 256 bytes, over the 255 a name may have")
    assert os.listdir(tmp_path / "e") == []
    # a stream written by name with -o: the temporary fits as well
    out = tmp_path / ("s" * 255)
    run("pack", "-o", out, f"x={tmp_path / 'd' / (longest + '.npy')}", check=0)
    assert run("show", out).returncode == 0


def test_unpack_names_repeated_records_apart(tmp_path):
    """A later record of a name already written goes to NAME.layerL.headH
    (its attributes), else NAME.N (its record number), across FILEs too:
    nothing is overwritten or refused."""
    r = atsfmt.record("x", "u8", (2,), b"\1\2")
    r2 = atsfmt.record("x", "u8", (1,), b"\3", attrs=[("layer", "1"), ("head", "2")])
    r3 = atsfmt.record("x", "u8", (1,), b"\4", attrs=[("layer", "1"), ("head", "2")])
    data = atsfmt.stream(r, atsfmt.record("y", "u8", (1,), b"\5"), r2, r3, r)
    run("unpack", "-d", tmp_path / "d", input=data, check=0)
    got = {f: np.load(tmp_path / "d" / f).tolist()
           for f in sorted(os.listdir(tmp_path / "d"))}
    assert got == {"x.npy": [1, 2], "y.npy": [5], "x.layer1.head2.npy": [3],
                   "x.4.npy": [4], "x.5.npy": [1, 2]}
    (tmp_path / "s.ats").write_bytes(atsfmt.stream(r))
    run("unpack", "-d", tmp_path / "e", tmp_path / "s.ats", tmp_path / "s.ats",
        check=0)
    assert sorted(os.listdir(tmp_path / "e")) == ["x.2.npy", "x.npy"]
    # a record named like a numbered one: one more suffix
    named = atsfmt.record("x.3", "u8", (1,), b"\7")
    run("unpack", "-d", tmp_path / "f", input=atsfmt.stream(r, named, r), check=0)
    assert sorted(os.listdir(tmp_path / "f")) == ["x.3.1.npy", "x.3.npy", "x.npy"]


def test_unpack_creates_dir(tmp_path):
    data = atsfmt.stream(atsfmt.record("x", "u8", (2,), b"\1\2"))
    out = tmp_path / "new"
    run("unpack", "-d", out, input=data, check=0)
    assert np.load(out / "x.npy").tolist() == [1, 2]
    run("unpack", "-d", out, input=data, check=0)  # an existing DIR is fine
    p = run("unpack", "-d", tmp_path / "no" / "such", input=data, check=1)
    one_line_error(p, "unpack")
    # without -d the current directory
    run("unpack", input=data, cwd=out, check=0)
    p = run("unpack", tmp_path / "missing.ats", cwd=out, check=1)
    one_line_error(p, "unpack")


def test_unpack_usage_errors(tmp_path):
    for args in (["-z", "1"], ["-o", "x"], ["--bogus"], ["-d"],
                 ["--threads", "x"]):
        p = run("unpack", *args, input=b"", cwd=tmp_path, check=2)
        one_line_error(p, "unpack")


@pytest.mark.parametrize("prog,args,force", [
    ("show", [], False), ("unpack", ["-d", "out"], False),
    ("qkv", [], True), ("softmax", [], True), ("tokenize", ["--decode"], True)])
def test_a_stream_is_not_read_from_a_terminal(tmp_path, prog, args, force):
    """As gzip -d refuses, a binary reader refuses a terminal on standard
    input at once, in one line; -f, where the tool has it, reads anyway."""
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([tool(prog), *args], stdin=slave, capture_output=True,
                           cwd=tmp_path, timeout=20)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 1
    line = one_line_error(p, prog)
    assert "refusing to read a stream from a terminal" in line
    assert ("-f reads it anyway" in line) == force


@pytest.mark.parametrize("full", ["count", "bytes"])  # 32 of them; 4096 bytes
def test_a_stage_never_drops_the_attribute_it_adds(tmp_path, full):
    """A record whose attribute block is full gets no attribute from a
    stage: the stage refuses it in one line naming the attribute, rather
    than write its result without it (later stages would read it as
    unscaled)."""
    q = np.random.default_rng(1).standard_normal((1, 1, 3, 4)).astype(np.float32)
    if full == "count":
        attrs = [f"{n}:k{i:02d}=v" for n in "qk" for i in range(32)]
    else:  # 21 lines of 192 bytes and one of 64: 4096 bytes in all
        attrs = [f"{n}:k{i:02d}{'x' * 60}={'v' * 127}"
                 for n in "qk" for i in range(21)]
        attrs += [f"{n}:z={'w' * 61}" for n in "qk"]
    stream = stagekit.pack(tmp_path, [("q", q), ("k", q)], attrs)
    head = run("show", "--full", input=stream)
    assert head.returncode == 0, head.stderr
    p = run("scores", input=stream)
    assert p.returncode == 1
    assert "its attributes could not hold 'scale'" in one_line_error(p, "scores")
    # what was written is not a whole stream: the next stage says so
    assert run("show", input=p.stdout).returncode == 1
    # one attribute fewer, and the stage has its room again
    fewer = [a for a in attrs if ":k00" not in a]
    fewer = stagekit.pack(tmp_path, [("q", q), ("k", q)], fewer)
    p = run("scores", input=fewer)
    assert p.returncode == 0, p.stderr
    assert "scale=" in run("show", "--full", input=p.stdout).stdout.decode()
