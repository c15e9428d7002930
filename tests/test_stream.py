"""The stream format end to end: andrea-pack and andrea-unpack against NumPy
and against tests/atsfmt.py, an independent Python reader and writer
written from andrea-stream(5).

Every rejected input must end with exit 1 and exactly one line on stderr,
and for streams that line must be the message the Python reader gives for
the same bytes, so both implementations follow the man page.
"""
import os
import resource
import shutil
import signal
import subprocess
import zlib

import numpy as np
import pytest

import atsfmt
from conftest import one_line_error, run, tool

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
