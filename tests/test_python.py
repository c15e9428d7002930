"""python/andrea_stream (pip install ./python) against the C tools: what
andrea writes reads in Python, what Python writes reads in andrea, record
by record, with attributes, at every level and shuffle setting, across
many chunks and odd shapes; bad streams raise FormatError."""
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import atsfmt
from conftest import ROOT, run
from stagekit import pack, unpack

sys.path.insert(0, os.path.join(ROOT, "python"))
import andrea_stream as ats  # noqa: E402

SHAPES = [(), (1,), (0, 3), (3, 1, 5), (2, 3, 4, 7), (1031,)]


def arrays(rng):
    out = []
    for i, shape in enumerate(SHAPES):
        out.append((f"f{i}", rng.standard_normal(shape).astype(np.float32)))
        out.append((f"i{i}", rng.integers(-9, 9, shape).astype(np.int32)))
    out.append(("u", rng.integers(0, 255, (17, 3)).astype(np.uint8)))
    return out


@pytest.mark.parametrize("level", ["0", "1", "6"])
def test_python_reads_what_andrea_writes(tmp_path, level):
    rng = np.random.default_rng(int(level) + 1)
    items = arrays(rng)
    stream = run("pack", "-z", level, "-a", "f3:layer=2", "-a", "f3:head=1",
                 *[f"{n}={tmp_path / n}.npy" for n, a in items
                   if np.save(tmp_path / f"{n}.npy", a) is None],
                 check=0).stdout
    recs = list(ats.records(io.BytesIO(stream)))
    assert [r.name for r in recs] == [n for n, _ in items]
    for r, (n, a) in zip(recs, items):
        assert r.array.dtype == a.dtype and np.array_equal(r.array, a), n
    assert recs[6].attrs == {"layer": "2", "head": "1"}
    # cat a b is one stream; names= skips the rest undecoded
    two = list(ats.records(io.BytesIO(stream + stream), names={"u"}))
    assert len(two) == 2 * len(items) and two[0].array is None
    assert np.array_equal(two[-1].array, items[-1][1])
    assert ats.find(io.BytesIO(stream), "f3", layer=2).index == 7


@pytest.mark.parametrize("level,shuffle", [(0, False), (1, True), (1, False),
                                           (9, True)])
def test_andrea_reads_what_python_writes(tmp_path, level, shuffle):
    rng = np.random.default_rng(level * 2 + shuffle)
    items = arrays(rng)
    path = tmp_path / "py.ats"
    with ats.Writer(str(path), level=level, shuffle=shuffle, chunk=1000) as w:
        for n, a in items:
            w.write(n, a, layer=3) if n == "f3" else w.write(n, a)
    got = unpack(tmp_path, path.read_bytes())
    for n, a in items:
        assert got[n].dtype == a.dtype and np.array_equal(got[n], a), n
    # the setting took: an ignored shuffle reads back just as well
    for r, (n, a) in zip(atsfmt.read(path.read_bytes()), items):
        want = shuffle and level > 0 and a.dtype.itemsize > 1
        assert r.flags == (atsfmt.FLAG_SHUFFLE if want else 0), n
    shown = run("show", "--name", "f3", path, check=0).stdout.decode()
    assert "layer=3" in shown
    # and andrea-diff finds it equal to the C writer's stream
    c = pack(tmp_path, items)
    (tmp_path / "c.ats").write_bytes(c)
    run("diff", "-q", "--rtol", 0, "--atol", 0, tmp_path / "c.ats", path, check=0)


def test_bad_streams_raise_format_error(tmp_path):
    good = pack(tmp_path, [("x", np.arange(300, dtype=np.float32))])
    cases = {"no end record": good[:-20], "cut in a chunk": good[:-30],
             "not a stream": b"hello world, not a stream",
             "header crc": good[:20] + bytes([good[20] ^ 1]) + good[21:]}
    for what, data in cases.items():
        with pytest.raises(ats.FormatError):
            list(ats.records(io.BytesIO(data)))
    flipped = bytearray(good)
    flipped[-25] ^= 0xFF  # inside the chunk's stored bytes
    with pytest.raises(ats.FormatError):
        list(ats.records(io.BytesIO(bytes(flipped))))


def test_cast_and_refusals():
    buf = io.BytesIO()
    with ats.Writer(buf, cast=True) as w:
        w.write("ids", np.array([[1, 2, 3]]))
        w.write("x", np.array([0.5, 1.5]))
    recs = list(ats.records(io.BytesIO(buf.getvalue())))
    assert recs[0].array.dtype == np.int32 and recs[1].array.dtype == np.float32
    with pytest.raises(ValueError):
        ats.Writer(io.BytesIO()).write("ids", np.array([1, 2]))
    with pytest.raises(ValueError):
        ats.Writer(io.BytesIO()).write("bad name", np.zeros(2, np.float32))
    # what andrea-show would refuse is refused as it is written
    many = {f"k{i:061d}": "v" * 127 for i in range(30)}  # 5730 bytes
    for make, what in (
            (lambda: ats.Writer(io.BytesIO()).write("x", np.zeros(1, np.float32),
                                                    many), "exceed 4096"),
            (lambda: ats.Writer(io.BytesIO(), chunk=8 << 20), "chunk"),
            (lambda: ats.Writer(io.BytesIO(), chunk=2), "chunk"),
            (lambda: ats.Writer(io.BytesIO()).write(
                "x", np.lib.stride_tricks.as_strided(
                    np.zeros(1, np.float32), (0, 2**41), (4, 4))), r"2\^40"),
            (lambda: ats.Writer(io.BytesIO(), cast=True).write(
                "x", np.array([1e300])), "beyond float32")):
        with pytest.raises(ValueError, match=what):
            make()


class Trickle(io.RawIOBase):
    """A raw pipe: read() hands out at most 4093 bytes at a time."""

    def __init__(self, data):
        self.data = data

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), 4093, len(self.data))
        b[:n], self.data = self.data[:n], self.data[n:]
        return n


def test_short_reads_long_concatenations_and_find(tmp_path):
    """A file object whose reads come short (an unbuffered pipe) reads as
    a whole one; a thousand streams one after another read as one (each
    was a wrapper deeper: RecursionError); find() decodes no record that
    does not match, of its name or not (one whose data is damaged, before
    the match, is passed over)."""
    rng = np.random.default_rng(3)
    items = [(f"r{i}", rng.standard_normal((5, 700)).astype(np.float32))
             for i in range(4)]
    data = pack(tmp_path, items)
    got = list(ats.records(Trickle(data)))
    assert [r.name for r in got] == [n for n, _ in items]
    assert all(np.array_equal(r.array, a) for r, (_, a) in zip(got, items))
    one = pack(tmp_path, [("x", np.zeros(3, np.float32))])
    assert sum(1 for _ in ats.records(io.BytesIO(one * 1500))) == 1500
    x = np.arange(1000, dtype=np.float32)
    buf = io.BytesIO()
    ats.save(buf, [("attn", x, {"layer": 0}), ("y", x),
                   ("attn", x + 1, {"layer": 1})], level=0)
    two = bytearray(buf.getvalue())
    two[200] ^= 0xFF  # inside the first attn's stored bytes
    r = ats.find(io.BytesIO(bytes(two)), "attn", layer=1)
    assert r.index == 3 and np.array_equal(r.array, x + 1)
    with pytest.raises(ats.FormatError, match="record 1 'attn'"):
        ats.find(io.BytesIO(bytes(two)), "attn", layer=0)


def test_pip_installs_it(tmp_path):
    # from a copy: setuptools writes build/ and *.egg-info beside the source
    import shutil
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "python"), src)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--no-deps", "--no-build-isolation", "--target",
                        str(tmp_path / "site"), str(src)],
                       capture_output=True, cwd=tmp_path)
    if p.returncode != 0 and b"setuptools" in p.stderr:
        pytest.skip("no setuptools to build with")
    assert p.returncode == 0, p.stderr.decode()
    code = ("import andrea_stream, sys; print(andrea_stream.__file__); "
            "print(sorted(andrea_stream.load('-')))")
    stream = pack(tmp_path, [("a", np.zeros(2, np.float32))])
    out = subprocess.run([sys.executable, "-c", code], input=stream,
                         capture_output=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert out.returncode == 0, out.stderr.decode()
    assert str(tmp_path / "site") in out.stdout.decode()
    assert "['a']" in out.stdout.decode()
