"""The six stage filters against the float64 NumPy oracle (tests/oracle.py).

Shapes are random but seeded, and include T = 1, D = 1, B > 1 and T not a
multiple of 8.  Every comparison is ||out - ref|| / ||ref|| <= 1e-5, with
non-finite entries required to sit exactly where the oracle has them.
"""
import numpy as np
import pytest

import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack, pipeline, random_model

TOL = 1e-5
# (B, H, T, D): T = 1, D = 1, B > 1, T not a multiple of 8
SHAPES = [(1, 1, 1, 1), (2, 3, 5, 1), (1, 2, 1, 7), (3, 2, 13, 4),
          (1, 4, 17, 16), (2, 1, 9, 8), (1, 3, 33, 5)]


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("B,T,C", [(1, 1, 1), (2, 7, 12), (3, 13, 5), (1, 20, 32)])
def test_embed_from_tokens_record(tmp_path, B, T, C):
    rng = np.random.default_rng(B * 100 + T)
    V, ctx = 37, 24
    model, p = random_model(tmp_path, rng, 1, 1, C, V, ctx)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    out = unpack(tmp_path, run("embed", "-m", model,
                               input=pack(tmp_path, [("tokens", tokens)]),
                               check=0).stdout)
    assert np.array_equal(out["tokens"], tokens)
    assert out["x"].shape == (B, T, C)
    assert oracle.rel_err(out["x"], oracle.embed(tokens, p["wte"], p["wpe"])) <= TOL


def test_embed_text_tokens_and_bos(tmp_path):
    rng = np.random.default_rng(5)
    model, p = random_model(tmp_path, rng, 1, 2, 8, 257, 64)
    text = b"the cat\n"
    out = unpack(tmp_path, run("embed", "-m", model, "--text", "--bos",
                               input=text, check=0).stdout)
    ids = np.array([[256] + list(text)], np.int32)
    assert np.array_equal(out["tokens"], ids)
    assert oracle.rel_err(out["x"], oracle.embed(ids, p["wte"], p["wpe"])) <= TOL
    out2 = unpack(tmp_path, run("embed", "-m", model, "--tokens", "3,1,4",
                                check=0).stdout, "o2")
    assert np.array_equal(out2["tokens"], [[3, 1, 4]])
    assert oracle.rel_err(out2["x"], oracle.embed(np.array([[3, 1, 4]]),
                                                  p["wte"], p["wpe"])) <= TOL


@pytest.mark.parametrize("B,T,H,D,norm", [(1, 1, 1, 1, True), (2, 5, 3, 1, True),
                                          (1, 9, 2, 4, False), (3, 13, 4, 3, True)])
def test_qkv_matches_numpy(tmp_path, B, T, H, D, norm):
    rng = np.random.default_rng(T * 10 + H)
    C, L = H * D, 2
    model, p = random_model(tmp_path, rng, L, H, C, 11, 32)
    x = rand(rng, B, T, C)
    args = ["-m", model, "-l", "1"] + ([] if norm else ["--no-norm"])
    out = unpack(tmp_path, run("qkv", *args, input=pack(tmp_path, [("x", x)]),
                               check=0).stdout)
    ref = oracle.qkv(x, p, 1, H, norm)
    for name, r in zip("qkv", ref):
        assert out[name].shape == (B, H, T, D)
        assert oracle.rel_err(out[name], r) <= TOL, name


def test_qkv_head_is_a_slice_of_all_heads(tmp_path):
    rng = np.random.default_rng(7)
    H, D, B, T = 4, 3, 2, 11
    model, _ = random_model(tmp_path, rng, 1, H, H * D, 11, 32)
    s = pack(tmp_path, [("x", rand(rng, B, T, H * D))])
    full = unpack(tmp_path, run("qkv", "-m", model, input=s, check=0).stdout, "a")
    for head in (0, 2, 3):
        one = unpack(tmp_path, run("qkv", "-m", model, "--head", head, input=s,
                                   check=0).stdout, "b")
        for name in "qkv":
            assert one[name].shape == (B, 1, T, D)
            assert oracle.rel_err(one[name], full[name][:, head:head + 1]) <= TOL


def test_qkv_heads_option_for_a_model_without_config(tmp_path):
    rng = np.random.default_rng(8)
    model, p = random_model(tmp_path, rng, 1, 2, 6, 11, 16, config=False)
    s = pack(tmp_path, [("x", rand(rng, 1, 4, 6))])
    p1 = run("qkv", "-m", model, input=s, check=1)
    assert "--heads" in one_line_error(p1, "qkv")
    out = unpack(tmp_path, run("qkv", "-m", model, "--heads", 3, input=s,
                               check=0).stdout)
    assert out["q"].shape == (1, 3, 4, 2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [None, "--no-scale", "0.37"])
def test_scores_matches_numpy(tmp_path, shape, scale):
    rng = np.random.default_rng(sum(shape))
    q, k, v = rand(rng, *shape), rand(rng, *shape), rand(rng, *shape)
    args = [] if scale is None else (["--no-scale"] if scale == "--no-scale"
                                     else ["--scale", scale])
    out = unpack(tmp_path, run("scores", *args, input=pack(
        tmp_path, [("q", q), ("k", k), ("v", v)]), check=0).stdout)
    s = None if scale is None else (1.0 if scale == "--no-scale" else float(scale))
    assert oracle.rel_err(out["scores"], oracle.scores(q, k, s)) <= TOL
    assert np.array_equal(out["v"], v)
    assert set(out) == {"scores", "v"}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fill", [None, "-1e9", "0"])
def test_mask_matches_numpy(tmp_path, shape, fill):
    rng = np.random.default_rng(sum(shape) + 1)
    B, H, T, _ = shape
    s = rand(rng, B, H, T, T)
    args = [] if fill is None else ["--fill", fill]
    out = unpack(tmp_path, run("mask", *args, input=pack(tmp_path, [("scores", s)]),
                               check=0).stdout)["scores"]
    ref = oracle.mask(s, -np.inf if fill is None else float(fill))
    # exact: masked entries take the fill, the rest keep their bits
    assert np.array_equal(np.isneginf(out), np.isneginf(ref))
    assert np.array_equal(out[np.isfinite(ref)], ref[np.isfinite(ref)].astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_matches_numpy_and_rows_sum_over_the_past(tmp_path, shape):
    rng = np.random.default_rng(sum(shape) + 2)
    B, H, T, _ = shape
    s = oracle.mask(3 * rand(rng, B, H, T, T)).astype(np.float32)
    out = unpack(tmp_path, run("softmax", input=pack(tmp_path, [("scores", s)]),
                               check=0).stdout)
    assert set(out) == {"attn"}
    a = out["attn"]
    assert oracle.rel_err(a, oracle.softmax(s)) <= TOL
    upper = np.triu(np.ones((T, T), bool), k=1)
    assert np.all(a[..., upper] == 0)
    assert np.allclose(a.astype(np.float64).sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_gives_the_same_bits_for_a_minus_inf_or_minus_1e9_fill(tmp_path, shape):
    """andrea-softmax(1): on causal rows a -1e9 fill gives exactly the
    weights a -inf fill does (both tails weigh exactly 0, and the sum
    stops at the last non-zero weight)."""
    rng = np.random.default_rng(sum(shape) + 9)
    B, H, T, _ = shape
    s = 3 * rand(rng, B, H, T, T)
    got = [unpack(tmp_path, run("softmax", input=pack(
        tmp_path, [("scores", oracle.mask(s, fill).astype(np.float32))]),
        check=0).stdout)["attn"] for fill in (-np.inf, -1e9)]
    assert np.array_equal(got[0].view(np.uint32), got[1].view(np.uint32))


def test_softmax_of_a_row_with_nothing_unmasked_is_nan(tmp_path):
    s = np.array([[0.0, 1.0], [-np.inf, -np.inf]], np.float32)
    a = unpack(tmp_path, run("softmax", input=pack(tmp_path, [("scores", s)]),
                             check=0).stdout)["attn"]
    assert np.all(np.isnan(a[1])) and np.allclose(a[0], oracle.softmax(s[:1])[0])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", [None, "--concat"])
def test_attend_matches_numpy(tmp_path, shape, mode):
    rng = np.random.default_rng(sum(shape) + 3)
    B, H, T, D = shape
    a = oracle.softmax(oracle.mask(rand(rng, B, H, T, T))).astype(np.float32)
    v = rand(rng, B, H, T, D)
    out = unpack(tmp_path, run("attend", *([mode] if mode else []),
                               input=pack(tmp_path, [("attn", a), ("v", v)]),
                               check=0).stdout)
    assert set(out) == {"out"}
    ref = oracle.attend(a, v)
    if mode:
        ref = oracle.merge_heads(ref)
    assert out["out"].shape == ref.shape
    assert oracle.rel_err(out["out"], ref) <= TOL


@pytest.mark.parametrize("B,T,H,D", [(1, 1, 1, 1), (2, 7, 3, 2), (1, 13, 4, 4),
                                     (3, 17, 2, 5)])
def test_pipeline_through_proj_matches_numpy(tmp_path, B, T, H, D):
    rng = np.random.default_rng(B + T + H + D)
    C, V, L = H * D, 29, 2
    model, p = random_model(tmp_path, rng, L, H, C, V, 32)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    y = pipeline([("embed", "-m", model), ("qkv", "-m", model, "-l", 1),
                  ("scores",), ("mask",), ("softmax",),
                  ("attend", "--proj", "-m", model)],
                 input=pack(tmp_path, [("tokens", tokens)]))
    out = unpack(tmp_path, y)
    assert set(out) == {"tokens", "y"}
    x = oracle.embed(tokens, p["wte"], p["wpe"])
    q, k, v = oracle.qkv(x, p, 1, H)
    att = oracle.softmax(oracle.mask(oracle.scores(q, k)))
    ref = oracle.merge_heads(oracle.attend(att, v)) @ p["layers.1.attn.wo"]
    assert oracle.rel_err(out["y"], ref) <= TOL


def test_pipeline_on_the_seeded_default_model(tmp_path):
    """The default model is regenerated here from its documented recipe."""
    seed, cfg = 1337, oracle.PRESETS["andrea-120m"]
    C, H, V, ctx = cfg["d_model"], cfg["n_head"], cfg["vocab"], cfg["ctx"]
    ids = np.array([[256] + list(b"attention!")], np.int32)
    names = {"wte": (V, C), "wpe": (ctx, C), "layers.0.ln1.weight": (C,),
             "layers.0.ln1.bias": (C,), "layers.0.attn.wq": (C, C),
             "layers.0.attn.wk": (C, C), "layers.0.attn.wv": (C, C),
             "layers.0.attn.wo": (C, C)}
    p = {n: oracle.seeded_param(seed, n, s) for n, s in names.items()}
    y = pipeline([("embed", "--text", "--bos"), ("qkv",), ("scores",), ("mask",),
                  ("softmax",), ("attend", "--proj")], input=b"attention!")
    out = unpack(tmp_path, y)
    x = oracle.embed(ids, p["wte"], p["wpe"])
    q, k, v = oracle.qkv(x, p, 0, H)
    att = oracle.softmax(oracle.mask(oracle.scores(q, k)))
    ref = oracle.merge_heads(oracle.attend(att, v)) @ p["layers.0.attn.wo"]
    assert oracle.rel_err(out["y"], ref) <= TOL


def test_seed_changes_the_default_model(tmp_path):
    a = run("embed", "--tokens", "1,2", check=0).stdout
    b = run("embed", "--tokens", "1,2", "--seed", "7", check=0).stdout
    xa, xb = unpack(tmp_path, a, "a")["x"], unpack(tmp_path, b, "b")["x"]
    ref = oracle.embed(np.array([[1, 2]]),
                       oracle.seeded_param(7, "wte", (257, 768)),
                       oracle.seeded_param(7, "wpe", (1024, 768)))
    assert not np.array_equal(xa, xb)
    assert oracle.rel_err(xb, ref) <= TOL


# ---- errors: one line naming the tool, the input and the record, exit 1 ----

def test_error_shape_mismatch(tmp_path):
    rng = np.random.default_rng(1)
    model, _ = random_model(tmp_path, rng, 1, 2, 8, 11, 16)
    p = run("qkv", "-m", model, input=pack(tmp_path, [("x", rand(rng, 1, 3, 5))]),
            check=1)
    msg = one_line_error(p, "qkv")
    assert "<stdin>: record 1 'x'" in msg and "C=5" in msg and "C=8" in msg
    s = pack(tmp_path, [("q", rand(rng, 1, 2, 3, 4)), ("k", rand(rng, 1, 2, 4, 4))])
    msg = one_line_error(run("scores", input=s, check=1), "scores")
    assert "record 2 'k'" in msg


def test_error_missing_record(tmp_path):
    rng = np.random.default_rng(2)
    s = pack(tmp_path, [("q", rand(rng, 1, 1, 2, 2)), ("v", rand(rng, 1, 1, 2, 2))])
    msg = one_line_error(run("scores", input=s, check=1), "scores")
    assert "record 1 'q'" in msg and "'k'" in msg
    s = pack(tmp_path, [("other", rand(rng, 2))])
    msg = one_line_error(run("softmax", input=s, check=1), "softmax")
    assert "no 'scores' record" in msg


def test_error_wrong_dtype(tmp_path):
    s = pack(tmp_path, [("scores", np.zeros((1, 1, 2, 2), np.int32))])
    msg = one_line_error(run("mask", input=s, check=1), "mask")
    assert "record 1 'scores'" in msg
    s = pack(tmp_path, [("x", np.zeros((1, 2, 768), np.int32))])
    msg = one_line_error(run("qkv", input=s, check=1), "qkv")
    assert "record 1 'x'" in msg and "i32" in msg


def test_error_token_out_of_range_and_context(tmp_path):
    rng = np.random.default_rng(3)
    model, _ = random_model(tmp_path, rng, 1, 1, 4, 10, 6)
    s = pack(tmp_path, [("tokens", np.array([[1, 2, 10]], np.int32))])
    msg = one_line_error(run("embed", "-m", model, input=s, check=1), "embed")
    assert "record 1 'tokens'" in msg and "token 10" in msg
    msg = one_line_error(run("embed", "-m", model, "--text", input=b"seven!!",
                             check=1), "embed")
    assert "T=7" in msg and "context of 6" in msg
    p = run("embed", "--tokens", "300", check=1)
    assert "token 300" in one_line_error(p, "embed")
    assert p.stdout == b""


@pytest.mark.parametrize("poke", [False, True])
def test_attend_on_long_causal_rows(tmp_path, poke):
    """T large enough for the causal block path; one entry above the
    diagonal made nonzero must send it back to the full product."""
    rng = np.random.default_rng(11)
    B, H, T, D = 1, 2, 301, 5
    a = oracle.softmax(oracle.mask(rand(rng, B, H, T, T))).astype(np.float32)
    if poke:
        a[0, 1, 3, 290] = 0.5
    v = rand(rng, B, H, T, D)
    out = unpack(tmp_path, run("attend", input=pack(tmp_path, [("attn", a), ("v", v)]),
                               check=0).stdout)
    assert oracle.rel_err(out["out"], oracle.attend(a, v)) <= TOL
