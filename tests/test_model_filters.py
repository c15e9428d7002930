"""andrea-block, andrea-logits and andrea-generate against the float64
NumPy oracle (tests/oracle.py).

Models are random files holding every parameter, LayerNorm weights and
biases included, so that a wrong or missing one shows.  Shapes are random
but seeded and include T = 1, D = 1, B > 1 and T not a multiple of 8.
"""
import os

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack, pipeline

TOL = 1e-5


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def full_model(tmp, rng, L, H, C, V, ctx, config=True, drop=(), name="model.ats",
               biases=False, tied=False):
    """A model file with every parameter of andrea-model(5), random; parameters
    named in drop are left out; biases: the products' optional biases too
    (GPT-2's); tied: no lm_head (the head is wte^T).  Returns (path, params)."""
    F = 4 * C
    p = {"wte": 0.3 * rng.standard_normal((V, C)),
         "wpe": 0.3 * rng.standard_normal((ctx, C))}
    for l in range(L):
        pre = f"layers.{l}."
        for ln in ("ln1", "ln2"):
            p[pre + ln + ".weight"] = 1 + 0.2 * rng.standard_normal(C)
            p[pre + ln + ".bias"] = 0.2 * rng.standard_normal(C)
        for m in "qkvo":
            p[pre + "attn.w" + m] = rng.standard_normal((C, C)) / np.sqrt(C)
        p[pre + "mlp.fc"] = rng.standard_normal((C, F)) / np.sqrt(C)
        p[pre + "mlp.proj"] = rng.standard_normal((F, C)) / np.sqrt(F)
        if biases:
            for m in "qkvo":
                p[pre + "attn.b" + m] = 0.5 * rng.standard_normal(C)
            p[pre + "mlp.bfc"] = 0.5 * rng.standard_normal(F)
            p[pre + "mlp.bproj"] = 0.5 * rng.standard_normal(C)
    p["lnf.weight"] = 1 + 0.2 * rng.standard_normal(C)
    p["lnf.bias"] = 0.2 * rng.standard_normal(C)
    if not tied:
        p["lm_head"] = 2 * rng.standard_normal((C, V)) / np.sqrt(C)
    p = {k: v.astype(np.float32) for k, v in p.items()}
    arrays = [(k, v) for k, v in p.items() if k not in drop]
    attrs = []
    if config:
        arrays.insert(0, ("config", np.zeros(0, np.int32)))
        attrs = [f"config:{k}={v}" for k, v in
                 dict(n_layer=L, n_head=H, d_model=C, ctx=ctx, vocab=V).items()]
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(pack(tmp, arrays, attrs))
    return path, p


# (B, T, H, D): T = 1, D = 1, B > 1, T not a multiple of 8
SHAPES = [(1, 1, 1, 1), (2, 5, 3, 1), (1, 1, 2, 7), (3, 13, 2, 4),
          (2, 17, 4, 3), (1, 9, 3, 5)]


@pytest.mark.parametrize("B,T,H,D", SHAPES)
def test_block_matches_numpy(tmp_path, B, T, H, D):
    rng = np.random.default_rng(B * 1000 + T * 10 + H + D)
    C = H * D
    model, p = full_model(tmp_path, rng, 2, H, C, 11, 32)
    x = rand(rng, B, T, C)
    out = unpack(tmp_path, run("block", "-m", model, "-l", 1,
                               input=pack(tmp_path, [("x", x)]), check=0).stdout)
    assert set(out) == {"x"} and out["x"].shape == (B, T, C)
    assert oracle.rel_err(out["x"], oracle.block(x, p, 1, H)) <= TOL


def test_chain_embed_blocks_logits_matches_numpy(tmp_path):
    rng = np.random.default_rng(11)
    B, T, H, C, V, L = 2, 13, 4, 12, 23, 2
    model, p = full_model(tmp_path, rng, L, H, C, V, 16)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    s = pack(tmp_path, [("tokens", tokens)])
    chain = pipeline([("embed", "-m", model), ("block", "-m", model, "-l", 0),
                      ("block", "-m", model, "-l", 1), ("logits", "-m", model)],
                     input=s)
    out = unpack(tmp_path, chain)
    assert set(out) == {"tokens", "logits"}
    ref = oracle.forward(tokens, p, L, H)
    assert out["logits"].shape == (B, T, V)
    assert oracle.rel_err(out["logits"], ref) <= TOL
    # one process running both blocks gives the same numbers, bit for bit
    for spec in (["-l", "0-1"], ["-l", "all"], ["-l", "0", "-l", "1"], ["-l", "0,1"]):
        one = pipeline([("embed", "-m", model), ("block", "-m", model, *spec),
                        ("logits", "-m", model)], input=s)
        assert np.array_equal(unpack(tmp_path, one, "b")["logits"],
                              out["logits"]), spec


# (biases, tied, B, T, H, D): GPT-2's two additions, apart and together;
# T = 1, D = 1, T not a multiple of 8
GPT2_SHAPES = [(True, False, 2, 13, 4, 3), (False, True, 1, 1, 2, 1),
               (True, True, 3, 9, 3, 5), (True, True, 1, 17, 1, 4)]


@pytest.mark.parametrize("biases,tied,B,T,H,D", GPT2_SHAPES)
def test_biases_and_a_tied_head_match_numpy(tmp_path, biases, tied, B, T, H,
                                            D):
    """A model with the products' biases and/or without lm_head (its head
    tied to wte) runs with them through the whole model, andrea-qkv (all
    heads and one) and andrea-attend --proj (andrea-model(5))."""
    rng = np.random.default_rng(B * 100 + T * 10 + H + D)
    C, V, L = H * D, 29, 2
    model, p = full_model(tmp_path, rng, L, H, C, V, 32, biases=biases,
                          tied=tied)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    s = pack(tmp_path, [("tokens", tokens)])
    # the GPU's whole-model engine does not run these yet: on the CPU
    # under make test-gpu too
    cpu = ("--device", "cpu")
    out = unpack(tmp_path, pipeline([("embed", "-m", model),
                                     ("block", "-m", model, "-l", "all", *cpu),
                                     ("logits", "-m", model, *cpu)], input=s))
    assert oracle.rel_err(out["logits"], oracle.forward(tokens, p, L, H)) <= TOL
    x = rand(rng, B, T, C)
    sx = pack(tmp_path, [("x", x)])
    want = oracle.qkv(x, p, 1, H)
    got = unpack(tmp_path, run("qkv", "-m", model, "-l", 1, input=sx,
                               check=0).stdout)
    one = unpack(tmp_path, run("qkv", "-m", model, "-l", 1, "--head", H - 1,
                               input=sx, check=0).stdout, "h")
    for m, ref in zip("qkv", want):
        assert oracle.rel_err(got[m], ref) <= TOL, m
        assert oracle.rel_err(one[m], ref[:, H - 1:]) <= TOL, m
    y = unpack(tmp_path, pipeline([("qkv", "-m", model, "-l", 1), ("scores",),
                                   ("mask",), ("softmax",),
                                   ("attend", "-m", model, "--proj")],
                                  input=sx))["y"]
    assert oracle.rel_err(y, oracle.attention(x, p, 1, H)) <= TOL


def test_greedy_decoding_with_biases_and_a_tied_head(tmp_path):
    rng = np.random.default_rng(23)
    model, p = full_model(tmp_path, rng, 2, 2, 8, 257, 12, biases=True,
                          tied=True)
    prompt = b"abcde"
    out = run("generate", "-m", model, "--device", "cpu", "--prompt",
              prompt.decode(), "-n", 20, "--temperature", 0, check=0).stdout
    ref, margins = oracle.greedy(prompt, p, 2, 2, 12, 20)
    k = agreeing_prefix(margins)
    assert k >= 10
    assert out[:k] == ref[:k]


def test_the_trainer_takes_a_layers_biases_all_or_none(tmp_path):
    """A model with some of the six biases is refused with a one-line
    error, not trained without the others (tests/test_train.py checks the
    gradients of a model with all six and a tied head)."""
    rng = np.random.default_rng(24)
    data = tmp_path / "data.txt"
    data.write_bytes(b"the cat sat on the mat. " * 40)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 257, 16, biases=True,
                          drop=("layers.0.attn.bq",))
    r = run("train", "-m", model, "--data", data, "--steps", 1,
            "-o", tmp_path / "out.ats", check=1)
    assert "all six biases" in one_line_error(r, "train")


def test_block_runs_a_layer_list_with_repeats(tmp_path):
    """-l 1,0,1 and -l 2 -l 2: a layer named twice runs twice, in the order
    given; T = 1 and D = 1 (C = H) too."""
    rng = np.random.default_rng(15)
    for B, T, H, D in ((2, 6, 3, 2), (1, 1, 3, 1)):
        C = H * D
        model, p = full_model(tmp_path, rng, 3, H, C, 11, 8)
        x = rand(rng, B, T, C)
        s = pack(tmp_path, [("x", x)])
        for spec, order in ((["-l", "1,0,1"], (1, 0, 1)),
                            (["-l", "2", "-l", "2"], (2, 2)),
                            (["-l", "2-", "-l", "0-1,0"], (2, 0, 1, 0))):
            out = run("block", "-m", model, *spec, input=s, check=0).stdout
            rec, = atsfmt.read(out)
            assert dict(rec.attrs)["layer"] == str(order[-1])
            got = np.frombuffer(rec.payload, np.float32).reshape(B, T, C)
            ref = x
            for layer in order:
                ref = oracle.block(ref, p, layer, H)
            assert oracle.rel_err(got, ref) <= TOL, (B, T, H, D, spec)


def test_block_then_stages_give_head_2_of_layer_1(tmp_path):
    rng = np.random.default_rng(12)
    B, T, H, D, V = 2, 11, 4, 3, 19
    model, p = full_model(tmp_path, rng, 2, H, H * D, V, 16)
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    res = pipeline([("embed", "-m", model), ("block", "-m", model, "-l", 0),
                    ("qkv", "-m", model, "-l", 1, "--head", 2), ("scores",),
                    ("mask",), ("softmax",), ("attend",)],
                   input=pack(tmp_path, [("tokens", tokens)]))
    out = unpack(tmp_path, res)
    x1 = oracle.block(oracle.embed(tokens, p["wte"], p["wpe"]), p, 0, H)
    q, k, v = oracle.qkv(x1, p, 1, H)
    ref = oracle.attend(oracle.softmax(oracle.mask(oracle.scores(q, k))), v)
    assert out["out"].shape == (B, 1, T, D)
    assert oracle.rel_err(out["out"], ref[:, 2:3]) <= TOL


# the last: logits handed over in pieces (some 4 MiB of rows on the CPU,
# 16 MiB on the GPU), the last piece short, on either device
@pytest.mark.parametrize("B,T,C,V", [(1, 1, 1, 2), (2, 7, 12, 257), (3, 9, 5, 31),
                                     (2, 1100, 3, 4099)])
def test_logits_matches_numpy(tmp_path, B, T, C, V):
    rng = np.random.default_rng(B + T + C + V)
    model, p = full_model(tmp_path, rng, 1, 1, C, V, 16)
    x = rand(rng, B, T, C)
    s = pack(tmp_path, [("x", x)], attrs=["x:layer=0"])
    res = run("logits", "-m", model, input=s, check=0).stdout
    out = unpack(tmp_path, res)
    assert set(out) == {"logits"} and out["logits"].shape == (B, T, V)
    assert oracle.rel_err(out["logits"], oracle.logits(x, p)) <= TOL
    last = unpack(tmp_path, run("logits", "-m", model, "--last", input=s,
                                check=0).stdout, "l")["logits"]
    assert last.shape == (B, 1, V)
    # the same row (bit for bit on the CPU; a GPU's product of one row may
    # sum in another order than that of all rows)
    np.testing.assert_allclose(last, out["logits"][:, -1:], rtol=1e-5,
                               atol=1e-6)


def test_block_attributes_pass_through_and_keep(tmp_path):
    rng = np.random.default_rng(13)
    model, _ = full_model(tmp_path, rng, 3, 2, 4, 11, 8)
    s = pack(tmp_path, [("note", rand(rng, 3)), ("x", rand(rng, 1, 3, 4))],
             attrs=["x:who=me", "x:layer=7"])
    out = run("block", "-m", model, "-l", "1-", input=s, check=0).stdout
    recs = list(atsfmt.read(out))
    assert [r.name for r in recs] == ["note", "x"]
    attrs = dict(recs[1].attrs)
    assert attrs["layer"] == "2" and attrs["who"] == "me"
    out = run("block", "-m", model, "--keep", input=s, check=0).stdout
    assert [r.name for r in atsfmt.read(out)] == ["note", "x", "x"]
    assert dict(list(atsfmt.read(out))[2].attrs)["layer"] == "0"


def complete_records(out):
    """The records of a stream cut short by an error (no end record)."""
    return list(atsfmt.read(out + atsfmt.end_record()))


def test_block_writes_each_record_in_order_while_the_next_computes(tmp_path):
    """andrea-block leaves a record in flight while the next one arrives
    (on the GPU the blocks run meanwhile): every output still comes out in
    order, around the records passed through, and an error in a later
    record, or an input cut short, loses none computed before it."""
    rng = np.random.default_rng(15)
    H, C = 2, 6
    model, p = full_model(tmp_path, rng, 2, H, C, 11, 8)
    xs = [rand(rng, 1, 4, C), rand(rng, 2, 3, C), rand(rng, 1, 1, C)]
    want = [oracle.block(oracle.block(x, p, 0, H), p, 1, H) for x in xs]
    note = rand(rng, 5)
    good = [pack(tmp_path, [("x", xs[0]), ("note", note)]),
            pack(tmp_path, [("x", xs[1])]), pack(tmp_path, [("x", xs[2])])]

    def check(recs, n):
        assert [r.name for r in recs] == ["x", "note", "x", "x"][:n + (n > 0)]
        xr = [r for r in recs if r.name == "x"]
        for r, w in zip(xr, want):
            got = np.frombuffer(r.payload, np.float32).reshape(w.shape)
            assert oracle.rel_err(got, w) <= TOL

    out = run("block", "-m", model, "-l", "all", input=b"".join(good),
              check=0).stdout
    check(list(atsfmt.read(out)), 3)
    bad = pack(tmp_path, [("x", rand(rng, 1, 2, C + 1))])
    p1 = run("block", "-m", model, "-l", "all", input=good[0] + good[1] + bad,
             check=1)
    assert "record 4 'x'" in one_line_error(p1, "block")
    check(complete_records(p1.stdout), 2)
    cut = good[2][:len(good[2]) // 2]
    p2 = run("block", "-m", model, "-l", "all", input=good[0] + good[1] + cut,
             check=1)
    assert "record 4 'x'" in one_line_error(p2, "block")
    check(complete_records(p2.stdout), 2)


@pytest.mark.parametrize("empty", [(1, 0), (0, 3)])
def test_block_passes_an_x_of_no_rows_through(tmp_path, empty):
    """An x with no rows (T = 0 or B = 0) between two others comes out
    as it went in, in its place, with the last layer run; the others are
    computed as ever (it once ended the run with an error of stray
    bytes)."""
    rng = np.random.default_rng(16)
    H, C = 2, 6
    model, p = full_model(tmp_path, rng, 2, H, C, 11, 8)
    xs = [rand(rng, 1, 4, C), np.zeros(empty + (C,), np.float32),
          rand(rng, 2, 3, C)]
    stream = b"".join(pack(tmp_path, [("x", x)]) for x in xs)
    recs = list(atsfmt.read(run("block", "-m", model, "-l", "0-1",
                                input=stream, check=0).stdout))
    assert [r.name for r in recs] == ["x", "x", "x"]
    assert tuple(recs[1].dims) == empty + (C,) and recs[1].payload == b""
    assert dict(recs[1].attrs)["layer"] == "1"
    for r, x in zip(recs[::2], xs[::2]):
        got = np.frombuffer(r.payload, np.float32).reshape(x.shape)
        want = oracle.block(oracle.block(x, p, 0, H), p, 1, H)
        assert oracle.rel_err(got, want) <= TOL


def test_records_passed_through_wait_behind_the_record_in_flight(tmp_path):
    """A record passed through while a block's output is pending is held
    (up to 64 MiB, lib/cli/filter.c) and written after that output, so the
    stage need not wait for it; a larger one drains first.  Either way the
    order holds, and an input cut inside a held record loses only that
    record."""
    rng = np.random.default_rng(17)
    model, p = full_model(tmp_path, rng, 1, 2, 4, 11, 8)
    xs = [rand(rng, 1, 3, 4), rand(rng, 2, 1, 4)]
    notes = [rand(rng, 7), rand(rng, 3)]
    big = rng.standard_normal((64 << 20) // 4 + 1).astype(np.float32)
    s = pack(tmp_path, [("x", xs[0]), ("n1", notes[0]), ("big", big),
                        ("x", xs[1]), ("n2", notes[1])])
    recs = list(atsfmt.read(run("block", "-m", model, "-z", 0, input=s,
                                check=0).stdout))
    assert [r.name for r in recs] == ["x", "n1", "big", "x", "n2"]
    for r, want in zip([recs[1], recs[2], recs[4]], [notes[0], big, notes[1]]):
        assert r.payload == want.tobytes()
    for r, x in zip([recs[0], recs[3]], xs):
        got = np.frombuffer(r.payload, np.float32).reshape(x.shape)
        assert oracle.rel_err(got, oracle.block(x, p, 0, 2)) <= TOL
    held = pack(tmp_path, [("x", xs[0]), ("n1", notes[0]),
                           ("n2", rand(rng, 5000))])
    cut = run("block", "-m", model, "-z", 0, input=held[:len(held) - 9000],
              check=1)
    assert "n2" in one_line_error(cut, "block")
    assert [r.name for r in complete_records(cut.stdout)] == ["x", "n1"]


def test_a_record_larger_than_the_pipe_buffers_passes_whole(tmp_path):
    """On a pipe a stage reads ahead and writes behind through at most
    32 MiB (lib/stream/pump.h): a 40 MB record passed through, and the
    blocks' record after it, arrive byte for byte."""
    rng = np.random.default_rng(16)
    model, p = full_model(tmp_path, rng, 1, 2, 4, 11, 8)
    big = rng.standard_normal(10_000_000).astype(np.float32)
    x = rand(rng, 1, 3, 4)
    s = pack(tmp_path, [("big", big), ("x", x)])
    out = run("block", "-m", model, "-z", 0, input=s, check=0).stdout
    recs = list(atsfmt.read(out))
    assert [r.name for r in recs] == ["big", "x"]
    assert np.frombuffer(recs[0].payload, np.float32).tobytes() == big.tobytes()
    got = np.frombuffer(recs[1].payload, np.float32).reshape(x.shape)
    assert oracle.rel_err(got, oracle.block(x, p, 0, 2)) <= TOL


# ---- andrea-generate ----

def gen_model(tmp, seed=21, L=2, H=2, C=8, ctx=12):
    rng = np.random.default_rng(seed)
    return full_model(tmp, rng, L, H, C, 257, ctx)


def agreeing_prefix(margins, eps=1e-3):
    """Steps before the first near-tie, where float32 may pick otherwise."""
    for i, m in enumerate(margins):
        if m < eps:
            return i
    return len(margins)


def test_greedy_matches_numpy_with_a_sliding_window(tmp_path):
    model, p = gen_model(tmp_path)
    prompt = b"abcde"
    out = run("generate", "-m", model, "--prompt", prompt.decode(), "-n", 20,
              "--temperature", 0, check=0).stdout
    ref, margins = oracle.greedy(prompt, p, 2, 2, 12, 20)
    k = agreeing_prefix(margins)
    assert k >= 10  # BOS + 5 + 10 > ctx 12: the window has slid
    assert out[:k] == ref[:k]
    top1 = run("generate", "-m", model, "--prompt", prompt.decode(), "-n", 20,
               "--top-k", 1, "--seed", 99, check=0).stdout
    assert top1 == out


def test_sampling_follows_the_documented_draws(tmp_path):
    model, p = gen_model(tmp_path, seed=22, ctx=16)
    for temp, k in ((1.0, 0), (0.7, 5)):
        out = run("generate", "-m", model, "--prompt", "hi", "-n", 8,
                  "--temperature", temp, "--top-k", k, "--seed", 5,
                  check=0).stdout
        seq, ref = [256] + list(b"hi"), []
        for step in range(8):
            lg = oracle.forward(np.array([seq[-16:]]), p, 2, 2)[0, -1]
            tok = oracle.sample(lg, temp, k, oracle.sample_uniform(5, step))
            if tok >= 256:
                break
            seq.append(tok)
            ref.append(tok)
        assert out == bytes(ref), (temp, k)


def test_same_seed_same_text_other_seed_other_text(tmp_path):
    model, _ = gen_model(tmp_path, seed=23)
    args = ["-m", model, "--prompt", "x", "-n", 24, "--temperature", 1.5]
    a = run("generate", *args, "--seed", 1, check=0).stdout
    b = run("generate", *args, "--seed", 1, check=0).stdout
    c = run("generate", *args, "--seed", 2, check=0).stdout
    assert a == b and len(a) > 0
    assert a != c


def test_generate_stops_at_bos(tmp_path):
    rng = np.random.default_rng(24)
    path, p = full_model(tmp_path, rng, 1, 1, 4, 257, 8)
    # LNf gives all ones, so the logits are lm_head's column sums
    p["lnf.weight"][:] = 0
    p["lnf.bias"][:] = 1
    for tok, want in ((ord("A"), b"A" * 5), (256, b"")):
        p["lm_head"][:] = 0
        p["lm_head"][:, tok] = 1
        s = pack(tmp_path, [("config", np.zeros(0, np.int32))] + list(p.items()),
                 [f"config:{k}={v}" for k, v in dict(
                     n_layer=1, n_head=1, d_model=4, ctx=8, vocab=257).items()])
        with open(path, "wb") as f:
            f.write(s)
        for temp in ("0", "0.01"):
            got = run("generate", "-m", path, "-n", 5, "--temperature", temp,
                      check=0).stdout
            assert got == want, (tok, temp)


# ---- errors: one line naming the tool (and input and record), status 1 or 2 ----

def test_errors_block(tmp_path):
    rng = np.random.default_rng(30)
    model, _ = full_model(tmp_path, rng, 2, 2, 8, 11, 16, drop=("layers.1.mlp.fc",))
    s = pack(tmp_path, [("x", rand(rng, 1, 3, 8))])
    p = run("block", "-m", model, "-l", 1, input=s, check=1)
    assert "'layers.1.mlp.fc'" in one_line_error(p, "block") and p.stdout == b""
    p = run("block", "-m", model, "-l", 0, input=pack(tmp_path, [("x", rand(rng, 1, 3, 5))]),
            check=1)
    msg = one_line_error(p, "block")
    assert "<stdin>: record 1 'x'" in msg and "C=5" in msg and "C=8" in msg
    p = run("block", "-m", model, "-l", 2, input=s, check=1)
    assert "layer 2 out of range" in one_line_error(p, "block") and p.stdout == b""
    for bad in (["-l", "1-0"], ["-l", "x"], ["-l", "1,"], ["--bogus"], ["a", "b"]):
        one_line_error(run("block", "-m", model, *bad, input=s, check=2), "block")
    p = run("block", "-m", model, "--seed", 3, input=s, check=2)
    one_line_error(p, "block")
    s = pack(tmp_path, [("x", np.zeros((1, 2, 8), np.int32))])
    assert "i32" in one_line_error(run("block", "-m", model, input=s, check=1), "block")


def test_errors_logits(tmp_path):
    rng = np.random.default_rng(31)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 11, 16, drop=("lnf.bias",))
    s = pack(tmp_path, [("x", rand(rng, 1, 3, 8))])
    p = run("logits", "-m", model, input=s, check=1)
    assert "'lnf.bias'" in one_line_error(p, "logits") and p.stdout == b""
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 11, 16, name="m2.ats")
    p = run("logits", "-m", model, input=pack(tmp_path, [("x", rand(rng, 2, 3, 6))]),
            check=1)
    assert "record 1 'x'" in one_line_error(p, "logits")
    p = run("logits", "-m", model, input=pack(tmp_path, [("y", rand(rng, 2))]), check=1)
    assert "no 'x' record" in one_line_error(p, "logits")
    one_line_error(run("logits", "--heads", 2, input=s, check=2), "logits")


def test_errors_generate(tmp_path):
    rng = np.random.default_rng(32)
    small, _ = full_model(tmp_path, rng, 1, 1, 4, 11, 8)
    p = run("generate", "-m", small, check=1)
    assert "V=11" in one_line_error(p, "generate") and p.stdout == b""
    model, _ = full_model(tmp_path, rng, 2, 1, 4, 257, 8, drop=("layers.1.ln2.bias",),
                          name="m2.ats")
    p = run("generate", "-m", model, check=1)
    assert "'layers.1.ln2.bias'" in one_line_error(p, "generate") and p.stdout == b""
    for bad in (["--temperature", "-1"], ["--temperature", "x"], ["--top-k", "-2"],
                ["-n", "-1"], ["--model-seed", "3"], ["prompt"], ["-o", "f"]):
        one_line_error(run("generate", "-m", model, *bad, check=2), "generate")
    p = run("generate", "--model-seed", 3, "--heads", 5, check=1)
    assert "--heads 5" in one_line_error(p, "generate")


def test_default_model_pipeline_agrees_with_generate(tmp_path):
    """-l all on the seeded default model, then the head, picks the byte
    that greedy andrea-generate writes first."""
    res = pipeline([("embed", "--text", "--bos"), ("block", "-l", "all"),
                    ("logits", "--last")], input=b"the cat sat")
    lg = unpack(tmp_path, res)["logits"]
    assert lg.shape == (1, 1, 257)
    out = run("generate", "--prompt", "the cat sat", "-n", 1, "--temperature", 0,
              check=0).stdout
    assert out == bytes([int(np.argmax(lg[0, 0]))])


def test_block_groups_and_a_model_without_config(tmp_path):
    rng = np.random.default_rng(14)
    H, C = 2, 6
    model, p = full_model(tmp_path, rng, 2, H, C, 11, 8, config=False)
    x1, x2 = rand(rng, 1, 4, C), rand(rng, 2, 3, C)
    s = pack(tmp_path, [("x", x1)]) + pack(tmp_path, [("x", x2)])
    p1 = run("block", "-m", model, "-l", "all", input=s, check=1)
    assert "--heads" in one_line_error(p1, "block") and p1.stdout == b""
    out = run("block", "-m", model, "--heads", H, "-l", "all", input=s,
              check=0).stdout
    recs = [r for r in atsfmt.read(out)]
    assert [r.name for r in recs] == ["x", "x"]
    for r, x in zip(recs, (x1, x2)):
        got = np.frombuffer(r.payload, np.float32).reshape(x.shape)
        assert oracle.rel_err(got, oracle.block(oracle.block(x, p, 0, H), p, 1, H)) <= TOL
