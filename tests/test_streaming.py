"""The stages that write while they read (andrea-scores, -mask, -softmax)
against the float64 NumPy oracle, on records of many chunks.

Inputs are built with tests/atsfmt.py at small chunk sizes, so that rows
straddle chunks, rows are longer than a chunk, and T is 1; outputs are read
back with atsfmt as well.  Also: --keep (the whole-record path), pass-through
order and attributes, several groups in one stream, and an input that ends
inside a record after the output has begun.
"""
import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error

TOL = 1e-5


def arrays(data):
    """The records of a stream as [(name, array, attrs dict)]."""
    out = []
    for r in atsfmt.read(data):
        a = np.frombuffer(r.payload, {"f32": np.float32, "i32": np.int32,
                                      "u8": np.uint8}[r.dtype])
        out.append((r.name, a.reshape(r.dims), dict(r.attrs)))
    return out


def scores_record(s, chunk, level=1, name="scores", attrs=()):
    return atsfmt.record(name, "f32", s.shape, s.astype("<f4").tobytes(),
                         atsfmt.attr_block(list(attrs)), level=level,
                         chunk=chunk)


# (B, H, T, chunk bytes): rows straddling chunks, rows longer than a chunk
# (T = 1500 at 4 KiB), T = 1 over many rows, T dividing the chunk, and a
# record of several default-size chunks
CASES = [(1, 2, 37, 4096), (2, 1, 1500, 4096), (3, 5, 1, 64),
         (1, 3, 64, 1024), (1, 2, 700, 1 << 20)]


@pytest.mark.parametrize("B,H,T,chunk", CASES)
@pytest.mark.parametrize("level", [0, 1])
def test_mask_then_softmax_stream_many_chunks(B, H, T, chunk, level):
    rng = np.random.default_rng(T + chunk)
    s = (3 * rng.standard_normal((B, H, T, T))).astype(np.float32)
    data = atsfmt.stream(scores_record(s, chunk, level))
    env = {"ANDREA_ZLEVEL": str(level)}
    masked = run("mask", input=data, env=env, check=0).stdout
    [(name, m, attrs)] = arrays(masked)
    ref = oracle.mask(s)
    assert name == "scores" and attrs["mask"] == "causal"
    assert np.array_equal(np.isneginf(m), np.isneginf(ref))
    assert np.array_equal(m[np.isfinite(ref)], s[np.isfinite(ref)])
    # softmax reads mask's output: its own chunk size, at the same level
    attn = run("softmax", input=masked, env=env, check=0).stdout
    [(name, a, attrs)] = arrays(attn)
    assert name == "attn" and attrs["mask"] == "causal"
    assert oracle.rel_err(a, oracle.softmax(ref)) <= TOL
    assert np.all(a[..., np.triu(np.ones((T, T), bool), k=1)] == 0)


@pytest.mark.parametrize("T", [1, 9, 300])
def test_scores_written_a_block_at_a_time(T):
    # [1, 3, 300, 300] needs rows of several blocks at small chunk sizes
    rng = np.random.default_rng(T)
    q, k = (rng.standard_normal((2, 3, T, 5)).astype(np.float32)
            for _ in range(2))
    data = atsfmt.stream(scores_record(q, 4096, name="q"),
                         scores_record(k, 4096, name="k"))
    [(name, s, attrs)] = arrays(run("scores", input=data, check=0).stdout)
    assert name == "scores" and float(attrs["scale"]) == pytest.approx(5 ** -0.5)
    assert oracle.rel_err(s, oracle.scores(q, k)) <= TOL


def test_streaming_keeps_order_attributes_and_groups():
    rng = np.random.default_rng(5)
    s1 = rng.standard_normal((1, 2, 40, 40)).astype(np.float32)
    s2 = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    tag = np.arange(3, dtype=np.int32)
    data = atsfmt.stream(
        atsfmt.record("before", "i32", tag.shape, tag.tobytes()),
        scores_record(s1, 4096, attrs=[("layer", "3"), ("head", "1")]),
        atsfmt.record("between", "i32", tag.shape, tag.tobytes()),
        scores_record(s2, 4096),
        atsfmt.record("after", "i32", tag.shape, tag.tobytes()))
    out = arrays(run("softmax", input=data, check=0).stdout)
    assert [n for n, _, _ in out] == ["before", "attn", "between", "attn",
                                      "after"]
    assert out[1][2] == {"layer": "3", "head": "1"}
    assert oracle.rel_err(out[1][1], oracle.softmax(s1)) <= TOL
    assert oracle.rel_err(out[3][1], oracle.softmax(s2)) <= TOL
    assert np.array_equal(out[0][1], tag) and np.array_equal(out[4][1], tag)


@pytest.mark.parametrize("tool", ["mask", "softmax"])
def test_keep_writes_the_input_then_the_output(tool):
    rng = np.random.default_rng(6)
    s = rng.standard_normal((1, 2, 50, 50)).astype(np.float32)
    if tool == "softmax":
        s = oracle.mask(s).astype(np.float32)
    # mask's input is unmasked: an already masked one hid a --keep that
    # did not mask; rel_err also holds the -inf entries in place
    data = atsfmt.stream(scores_record(s, 4096))
    out = arrays(run(tool, "--keep", input=data, check=0).stdout)
    assert [n for n, _, _ in out] == ["scores",
                                      "scores" if tool == "mask" else "attn"]
    assert np.array_equal(out[0][1], s)
    ref = oracle.mask(s) if tool == "mask" else oracle.softmax(s)
    assert oracle.rel_err(out[1][1], ref) <= TOL


@pytest.mark.parametrize("tool", ["mask", "softmax"])
def test_input_ending_inside_the_record_after_output_began(tool, tmp_path):
    """The stage has written part of its record when the input stops: it
    fails naming the record, the next stage rejects what it got, and an
    -o file is not left behind."""
    rng = np.random.default_rng(7)
    s = rng.standard_normal((1, 4, 512, 512)).astype(np.float32)  # 4 MiB
    whole = atsfmt.stream(scores_record(s, 4096, level=0))
    cut = whole[:len(whole) * 3 // 4]  # an upstream stage that died
    # one thread: the writer encodes (and writes) a chunk at a time
    env = {"ANDREA_THREADS": "1"}
    p = run(tool, input=cut, env=env, check=1)
    assert one_line_error(p, tool) == (
        f"andrea-{tool}: <stdin>: record 1 'scores': input ended inside the "
        "record")
    assert len(p.stdout) > 1 << 20  # it had written chunks of the record
    q = run("softmax" if tool == "mask" else "attend", input=p.stdout, check=1)
    assert "input ended inside the record" in one_line_error(
        q, "softmax" if tool == "mask" else "attend")
    target = tmp_path / "out.ats"
    run(tool, "-o", target, input=cut, env=env, check=1)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_damaged_chunk_after_output_began():
    rng = np.random.default_rng(8)
    s = rng.standard_normal((1, 2, 128, 128)).astype(np.float32)
    data = bytearray(atsfmt.stream(scores_record(s, 4096, level=0)))
    data[-300] ^= 0xFF  # in the last chunk's bytes
    p = run("mask", input=bytes(data), check=1)
    line = one_line_error(p, "mask")
    assert line.startswith("andrea-mask: <stdin>: record 1 'scores': chunk ")
    assert "CRC32 mismatch" in line


def test_qkv_writes_v_first():
    """v leads, so that andrea-attend has it before the probabilities."""
    out = run("qkv", input=run("embed", "--text", input=b"abc",
                               check=0).stdout, check=0).stdout
    assert [n for n, _, _ in arrays(out)] == ["tokens", "v", "q", "k"]


def causal_attn(rng, B, H, T):
    a = oracle.softmax(oracle.mask(rng.standard_normal((B, H, T, T))))
    return a.astype(np.float32)


# (B, H, T, D, chunk bytes): heads straddling chunks, a head larger than
# a chunk, T = 1, D = 1, and T not a multiple of the causal block (128)
ATTEND_CASES = [(1, 3, 37, 5, 4096), (2, 2, 300, 4, 4096), (3, 2, 1, 3, 64),
                (1, 2, 130, 1, 1 << 20)]


@pytest.mark.parametrize("B,H,T,D,chunk", ATTEND_CASES)
@pytest.mark.parametrize("extra", [[], ["--concat"]])
def test_attend_uses_attn_as_it_arrives_after_v(B, H, T, D, chunk, extra):
    """v before attn: attend works head by head as attn arrives; the
    output is the same, byte for byte, as with attn first, and matches
    the oracle.  Foreign records keep their places."""
    rng = np.random.default_rng(T * 10 + D)
    a = causal_attn(rng, B, H, T)
    v = rng.standard_normal((B, H, T, D)).astype(np.float32)
    tag = np.arange(2, dtype=np.int32)
    rec_a = scores_record(a, chunk, name="attn", attrs=[("layer", "0")])
    rec_v = scores_record(v, chunk, name="v")
    rec_t = atsfmt.record("tag", "i32", tag.shape, tag.tobytes())
    v_first = run("attend", *extra, input=atsfmt.stream(rec_v, rec_t, rec_a),
                  check=0).stdout
    a_first = run("attend", *extra, input=atsfmt.stream(rec_a, rec_t, rec_v),
                  check=0).stdout
    got = arrays(v_first)
    assert [n for n, _, _ in got] == ["tag", "out"]
    assert got[1][2] == {"layer": "0"}
    assert [x[1].tobytes() for x in got] == \
        [x[1].tobytes() for x in arrays(a_first)]
    ref = oracle.attend(a, v)
    if extra:
        ref = oracle.merge_heads(ref)
    assert oracle.rel_err(got[1][1], ref) <= TOL


def test_attend_streaming_groups_and_errors(tmp_path):
    rng = np.random.default_rng(9)
    groups = []
    for T in (3, 40):
        a = causal_attn(rng, 1, 2, T)
        v = rng.standard_normal((1, 2, T, 4)).astype(np.float32)
        groups.append((a, v, scores_record(v, 256, name="v"),
                       scores_record(a, 256, name="attn")))
    data = atsfmt.stream(*[r for g in groups for r in g[2:]])
    out = arrays(run("attend", input=data, check=0).stdout)
    assert [n for n, _, _ in out] == ["out", "out"]
    for (a, v, _, _), (_, o, _) in zip(groups, out):
        assert oracle.rel_err(o, oracle.attend(a, v)) <= TOL
    # a shape that does not fit is refused before any work, naming v
    a, v, rec_v, _ = groups[1]
    bad = scores_record(causal_attn(rng, 1, 2, 39), 256, name="attn")
    p = run("attend", input=atsfmt.stream(rec_v, bad), check=1)
    assert one_line_error(p, "attend") == (
        "andrea-attend: <stdin>: record 1 'v': shape [1,2,40,4] does not "
        "fit attn's [1,2,39,39]")
    # attn ending inside its payload: an error naming it, and no 'out'
    whole = atsfmt.stream(rec_v, scores_record(a, 256, name="attn"))
    p = run("attend", input=whole[:len(whole) - 500], check=1)
    assert one_line_error(p, "attend") == (
        "andrea-attend: <stdin>: record 2 'attn': input ended inside the "
        "record")
    assert b"out" not in p.stdout


@pytest.mark.parametrize("tool", ["mask", "softmax", "attend"])
def test_codec_threads_do_not_change_the_output(tool, tmp_path):
    """A pipe without a thread count given (half the codec's threads), a
    file (all of them), and counts given: the same bytes."""
    rng = np.random.default_rng(10)
    T = 200
    s = causal_attn(rng, 1, 3, T) if tool == "attend" else \
        rng.standard_normal((1, 3, T, T)).astype(np.float32)
    recs = [scores_record(s, 16384, name="attn" if tool == "attend" else "scores")]
    if tool == "attend":
        recs.insert(0, scores_record(
            rng.standard_normal((1, 3, T, 7)).astype(np.float32), 16384, name="v"))
    data = atsfmt.stream(*recs)
    path = tmp_path / "in.ats"
    path.write_bytes(data)
    outs = [run(tool, input=data, check=0).stdout,
            run(tool, path, check=0).stdout,
            run(tool, "--threads", "3", input=data, check=0).stdout,
            run(tool, input=data, env={"ANDREA_THREADS": "1"}, check=0).stdout]
    assert all(o == outs[0] for o in outs[1:])


def test_attend_empty_attn_after_v_allocates_nothing():
    """No heads: either order gives the same empty out, however large T
    (a head buffer of T*T floats would be 4 TiB here)."""
    T = 1 << 20
    v = atsfmt.record("v", "f32", (0, 1, T, 3), b"", atsfmt.attr_block([]),
                      level=0, chunk=4096)
    a = atsfmt.record("attn", "f32", (0, 1, T, T), b"", atsfmt.attr_block([]),
                      level=0, chunk=4096)
    outs = [run("attend", input=atsfmt.stream(*recs), check=0).stdout
            for recs in ((v, a), (a, v))]
    assert outs[0] == outs[1]
    [(name, o, _)] = arrays(outs[0])
    assert name == "out" and o.shape == (0, 1, T, 3)
