"""andrea-attention, the fused stage (issue 18), against the four stages
it replaces (andrea-scores | -mask | -softmax | -attend) and against the
float64 NumPy oracle, on the device ANDREA_DEVICE names (make test-gpu runs
it on the GPU).  Shapes include T = 1, D = 1 and T either side of the
tiles (64 rows and keys on the GPU, 64 rows and 256 keys on the CPU)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import oracle
from conftest import ROOT, run, one_line_error, tool_env
from stagekit import pack, unpack, pipeline

TOL = 1e-5
SHAPES = [(1, 1, 1, 1), (2, 3, 5, 1), (1, 2, 1, 7), (2, 2, 65, 15),
          (1, 1, 257, 64), (1, 3, 130, 33), (1, 1, 300, 128), (1, 1, 70, 256)]


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def qkv(rng, B, H, T, D):
    return [(n, rand(rng, B, H, T, D)) for n in "qkv"]


def reference(q, k, v, scale, causal=True):
    """out and lse in float64."""
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) * scale
    if causal:
        T = q.shape[2]
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (np.log(e.sum(-1, keepdims=True)) + m)[..., 0]
    return (e / e.sum(-1, keepdims=True)) @ v, lse


@pytest.mark.parametrize("B,H,T,D", SHAPES)
def test_fused_equals_the_four_stages(tmp_path, B, H, T, D):
    rng = np.random.default_rng(B * 1000 + T * 7 + D)
    recs = qkv(rng, B, H, T, D)
    s = pack(tmp_path, recs)
    fused = unpack(tmp_path, run("attention", "--lse", input=s, check=0).stdout)
    staged = unpack(tmp_path, pipeline([("scores",), ("mask",), ("softmax",),
                                        ("attend",)], input=s), "st")
    assert list(fused) == ["out", "lse"]
    assert oracle.rel_err(fused["out"], staged["out"]) <= TOL
    out, lse = reference(*(a for _, a in recs), 1 / np.sqrt(D))
    assert oracle.rel_err(fused["out"], out) <= TOL
    assert oracle.rel_err(fused["lse"], lse) <= TOL
    assert fused["lse"].shape == (B, H, T)


@pytest.mark.parametrize("opts,scale,causal", [
    (["--no-scale"], 1.0, True), (["--scale", "0.3"], 0.3, True),
    (["--no-mask"], None, False), (["--no-mask", "--no-scale"], 1.0, False)])
def test_scale_and_mask_options(tmp_path, opts, scale, causal):
    rng = np.random.default_rng(len(opts) + int((scale or 0) * 10))
    B, H, T, D = 2, 2, 70, 16
    recs = qkv(rng, B, H, T, D)
    s = pack(tmp_path, recs)
    fused = unpack(tmp_path, run("attention", "--lse", *opts, input=s,
                                 check=0).stdout)
    out, lse = reference(*(a for _, a in recs),
                         1 / np.sqrt(D) if scale is None else scale, causal)
    assert oracle.rel_err(fused["out"], out) <= TOL
    assert oracle.rel_err(fused["lse"], lse) <= TOL
    if "--no-mask" not in opts:  # the same as scores --scale ... | mask | ...
        staged = unpack(tmp_path, pipeline(
            [("scores", *opts), ("mask",), ("softmax",), ("attend",)],
            input=s), "st")
        assert oracle.rel_err(fused["out"], staged["out"]) <= TOL


def test_nan_and_inf_spread_as_in_numpy(tmp_path):
    """A NaN or an infinite query poisons its own row's output, as NumPy's
    softmax would (and as the four stages do), and leaves the other rows
    alone; under make SAN=1 no step of the exp is undefined behaviour."""
    rng = np.random.default_rng(11)
    q, k, v = (rand(rng, 1, 2, 9, 4) for _ in range(3))
    q[0, 0, 3, 1] = np.nan
    q[0, 1, 5, 0] = np.inf
    s = pack(tmp_path, [("q", q), ("k", k), ("v", v)])
    fused = unpack(tmp_path, run("attention", input=s, check=0).stdout)["out"]
    staged = unpack(tmp_path, pipeline([("scores",), ("mask",), ("softmax",),
                                        ("attend",)], input=s), "st")["out"]
    with np.errstate(invalid="ignore"):
        out, _ = reference(q, k, v, 1 / np.sqrt(4))
    bad = np.isnan(out)
    assert bad[0, 0, 3].all() and bad[0, 1, 5].all()
    assert bad.sum() == 8
    for got in (fused, staged):
        assert (np.isnan(got) == bad).all()
        assert oracle.rel_err(got[~bad], out[~bad]) <= TOL


@pytest.mark.parametrize("opts", [[], ["--no-mask"]])
def test_a_block_of_keys_scored_minus_inf_weighs_nothing(tmp_path, opts):
    """Keys a row scores -inf (q . k of -inf) get weight 0, as in NumPy,
    also where they fill a whole block of keys (256 on the CPU, 64 on the
    GPU): -inf - -inf made NaN of every row that saw that block.  A row
    that sees no other key is NaN in out (0/0) and -inf in lse (log 0)."""
    rng = np.random.default_rng(12)
    T, D = 600, 8
    q, k, v = (rand(rng, 1, 1, T, D) for _ in range(3))
    q[..., 0] = np.abs(q[..., 0]) + 0.1
    k[0, 0, :256, 0] = -np.inf
    s = pack(tmp_path, [("q", q), ("k", k), ("v", v)])
    fused = unpack(tmp_path, run("attention", "--lse", *opts, input=s,
                                 check=0).stdout)
    stages = [("scores",), ("softmax",), ("attend",)]
    if not opts:
        stages.insert(1, ("mask",))
    staged = unpack(tmp_path, pipeline(stages, input=s), "st")["out"]
    with np.errstate(invalid="ignore"):
        out, lse = reference(q, k, v, 1 / np.sqrt(D), not opts)
    bad = np.isnan(out)
    assert bad.sum() == (0 if opts else 256 * D)
    for got in (fused["out"], staged):
        assert (np.isnan(got) == bad).all()
        assert oracle.rel_err(got[~bad], out[~bad]) <= TOL
    seen = ~bad[..., 0]
    assert oracle.rel_err(fused["lse"][seen], lse[seen]) <= TOL
    assert (fused["lse"][~seen] == -np.inf).all()


def test_in_a_pipeline_with_attributes_and_passthrough(tmp_path):
    """embed | qkv | attention: out carries q's attributes and the scale;
    the tokens pass through; --keep writes q, k, v where they were."""
    x = run("embed", "--text", input=b"the cat sat on the mat", check=0).stdout
    qkv_s = run("qkv", "-l", 1, input=x, check=0).stdout
    fused = run("attention", input=qkv_s, check=0).stdout
    staged = pipeline([("scores",), ("mask",), ("softmax",), ("attend",)],
                      input=qkv_s)
    from test_train import records
    (tmp_path / "f.ats").write_bytes(fused)
    recs = records(tmp_path / "f.ats")
    assert [n for n, _, _ in recs] == ["tokens", "out"]
    attrs = recs[1][1]
    assert attrs["layer"] == "1" and attrs["scale"] == "0.125"
    (tmp_path / "s.ats").write_bytes(staged)  # the mask said as theirs
    assert attrs == records(tmp_path / "s.ats")[1][1]
    assert attrs["mask"] == "causal" and attrs["fill"] == "-inf"
    want = unpack(tmp_path, staged, "st")["out"]
    assert oracle.rel_err(recs[1][2], want) <= TOL
    (tmp_path / "k.ats").write_bytes(run("attention", "--keep", input=qkv_s,
                                         check=0).stdout)
    (tmp_path / "in.ats").write_bytes(qkv_s)
    assert [n for n, _, _ in records(tmp_path / "k.ats")] == \
        [n for n, _, _ in records(tmp_path / "in.ats")] + ["out"]


def test_bad_input_is_one_line_naming_the_record(tmp_path):
    rng = np.random.default_rng(3)
    q = rand(rng, 1, 2, 9, 4)
    cases = [
        ([("q", q), ("k", q), ("v", q[:, :, :8])],
         "record 3 'v': shape [1,2,8,4] does not match q's [1,2,9,4]"),
        ([("q", q), ("k", q)], "no 'v' record goes with it"),
        ([("q", q), ("k", q[0]), ("v", q)], "record 2 'k': shape [2,9,4]"),
        ([("q", q), ("k", q.astype(np.int32)), ("v", q)],
         "record 2 'k': dtype i32, expected f32"),
    ]
    for recs, msg in cases:
        r = run("attention", input=pack(tmp_path, recs), check=1)
        assert msg in one_line_error(r, "attention"), msg
    r = run("attention", "--scale", "1", "--no-scale", input=b"", check=2)
    assert "give --scale or --no-scale once" in one_line_error(r, "attention")
    # heads of no values have no 1/sqrt(D), unless a scale is given
    q0 = np.zeros((1, 2, 3, 0), np.float32)
    s0 = pack(tmp_path, [("q", q0), ("k", q0), ("v", q0)])
    for prog in ("attention", "scores"):
        r = run(prog, input=s0, check=1)
        assert "record 1 'q': D=0: a head of no values has no 1/sqrt(D)" \
            in one_line_error(r, prog)
    got = unpack(tmp_path, run("scores", "--no-scale", input=s0,
                               check=0).stdout)["scores"]
    assert got.shape == (1, 2, 3, 3) and not got.any()


def test_a_context_of_8192_runs_as_the_page_shows(tmp_path):
    """andrea-attention(1)'s long example: T = 8192, 12 heads (scores of
    3 GiB the stages would hold), checked on a few rows against NumPy."""
    page = open(os.path.join(ROOT, "man", "man1", "andrea-attention.1")).read()
    block = page.split("whose scores alone would take")[1]
    block = block.split("\n.nf\n", 1)[1].split("\n.fi\n", 1)[0]
    for roff, plain in (("\\-", "-"), ("\\(aq", "'")):
        block = block.replace(roff, plain)
    shim = tmp_path / "shim"  # python3: the one running this, with NumPy
    shim.mkdir()
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    env = tool_env()
    env["PATH"] = os.pathsep.join([str(shim), os.path.join(ROOT, "bin"),
                                   env["PATH"]])
    subprocess.run(["sh", "-ec", block], cwd=tmp_path, env=env, check=True,
                   timeout=300)
    got = unpack(tmp_path, (tmp_path / "long.ats").read_bytes(), "l")
    q, k, v = (np.load(tmp_path / f"{n}.npy") for n in "qkv")
    assert got["out"].shape == (1, 12, 8192, 64)
    for h, i in ((0, 0), (3, 4095), (11, 8191)):
        s = k[0, h, :i + 1].astype(np.float64) @ q[0, h, i] / 8
        e = np.exp(s - s.max())
        want = e @ v[0, h, :i + 1] / e.sum()
        assert oracle.rel_err(got["out"][0, h, i], want) <= TOL
        assert abs(got["lse"][0, h, i] - (np.log(e.sum()) + s.max())) <= 1e-5


def test_the_gpu_refuses_heads_wider_than_256_in_one_line(tmp_path):
    if os.environ.get("ANDREA_TEST_DEVICE") != "cuda":
        pytest.skip("needs the GPU (make test-gpu)")
    rng = np.random.default_rng(4)
    s = pack(tmp_path, qkv(rng, 1, 1, 5, 257))
    r = run("attention", "--device", "cuda", input=s, check=1)
    assert "at most 256 values" in one_line_error(r, "attention")
