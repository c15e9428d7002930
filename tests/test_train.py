"""andrea-train against a float64 NumPy model of the ANDREA architecture.

The NumPy forward pass below is written from andrea-model(5) alone.  Gradients
are checked against central differences of it; the trained model's loss,
the seeded initialisation, resuming, checkpoints and signals are checked
through the executable (its command line in tests/test_train_command.py).  Everything runs on the CPU with
--threads 1 or 2 and takes well under a minute and a half.
"""
import glob
import json
import os
import random
import signal
import subprocess
import time

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error, tool
from stagekit import pack, unpack

FORTUNES = "/usr/share/games/fortunes"


# ---------------------------------------------------------------- the model

def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(p, cfg, tokens, acts=None):
    """float64 logits [B,T,V] of tokens [B,T]; acts collects intermediates."""
    L, H = cfg["n_layer"], cfg["n_head"]
    B, T = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:T]
    if acts is not None:
        acts["x"] = x
    causal = np.triu(np.ones((T, T), bool), 1)
    for l in range(L):
        g = lambda n: p[f"layers.{l}.{n}"]
        bias = lambda n: p.get(f"layers.{l}.{n}", 0.0)  # GPT-2's, optional
        h = layernorm(x, g("ln1.weight"), g("ln1.bias"))
        q, k, v = (oracle.split_heads(h @ g("attn.w" + m) + bias("attn.b" + m), H)
                   for m in "qkv")
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        s[..., causal] = -np.inf
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        out = a @ v
        y = oracle.merge_heads(out) @ g("attn.wo") + bias("attn.bo")
        x = x + y
        x = x + gelu(layernorm(x, g("ln2.weight"), g("ln2.bias")) @ g("mlp.fc")
                     + bias("mlp.bfc")) @ g("mlp.proj") + bias("mlp.bproj")
        if acts is not None:
            acts[l] = dict(q=q, k=k, v=v, scores=s, attn=a, out=out, y=y, x=x)
    head = p["lm_head"] if "lm_head" in p else p["wte"].T  # tied
    return layernorm(x, p["lnf.weight"], p["lnf.bias"]) @ head


def loss(p, cfg, batch):
    """Mean cross-entropy in nats of batch [B,T+1] (inputs, then targets)."""
    z = forward(p, cfg, batch[:, :-1])
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    tgt = batch[:, 1:]
    return -np.take_along_axis(logp, tgt[..., None], -1).mean()


def param_shapes(cfg, gpt2=False):
    """andrea-model(5)'s parameters; gpt2: with the six biases of each
    layer and no lm_head (the head tied to wte)."""
    L, C, V, T = cfg["n_layer"], cfg["d_model"], cfg["vocab"], cfg["ctx"]
    s = {"wte": (V, C), "wpe": (T, C)}
    for l in range(L):
        pre = f"layers.{l}."
        for n in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"):
            s[pre + n] = (C,)
        for m in "qkvo":
            s[pre + "attn.w" + m] = (C, C)
        s[pre + "mlp.fc"] = (C, 4 * C)
        s[pre + "mlp.proj"] = (4 * C, C)
        if gpt2:
            s.update({pre + "attn.b" + m: (C,) for m in "qkvo"})
            s.update({pre + "mlp.bfc": (4 * C,), pre + "mlp.bproj": (C,)})
    s.update({"lnf.weight": (C,), "lnf.bias": (C,)})
    if not gpt2:
        s["lm_head"] = (C, V)
    return s


def write_model(tmp, rng, cfg, gpt2=False):
    """A model file with random parameters (LN ones included) of a size
    whose gradients are far from zero; returns (path, float32 params)."""
    p = {}
    for name, shape in param_shapes(cfg, gpt2).items():
        if name.endswith(".weight"):
            p[name] = 1 + 0.3 * rng.standard_normal(shape)
        elif name.endswith(".bias") or len(shape) == 1:
            p[name] = 0.3 * rng.standard_normal(shape)
        else:
            p[name] = rng.standard_normal(shape) * (0.5 if name[:2] == "wt" or
                                                    name[:2] == "wp" else
                                                    1 / np.sqrt(shape[0]))
    p = {k: v.astype(np.float32) for k, v in p.items()}
    attrs = [f"config:{k}={v}" for k, v in cfg.items()]
    path = os.path.join(tmp, "init.ats")
    with open(path, "wb") as f:
        f.write(pack(tmp, [("config", np.zeros(0, np.int32))] + list(p.items()),
                     attrs))
    return path, p


def read_params(tmp, path, sub):
    with open(path, "rb") as f:
        d = unpack(tmp, f.read(), sub)
    d.pop("config", None)
    return d


def records(path):
    """[(name, attrs dict, array)] of a (small) stream file, in order."""
    out = []
    for r in atsfmt.read(open(path, "rb").read()):
        dt = {"f32": "<f4", "i32": "<i4", "u8": "u1"}[r.dtype]
        out.append((r.name, dict(r.attrs),
                    np.frombuffer(r.payload, dt).reshape(r.dims)))
    return out


def record_names(path):
    """Names of the records of a stream, read from the headers alone."""
    import struct
    names, buf = [], open(path, "rb").read()
    pos = 0
    while pos < len(buf):
        version, kind, code, rank, flags, nlen, alen, chunk = \
            struct.unpack("<BBBBBBHI", buf[pos + 4:pos + 16])
        if kind == atsfmt.KIND_END:
            pos += 20
            continue
        dims = struct.unpack(f"<{rank}Q", buf[pos + 16:pos + 16 + 8 * rank])
        names.append(buf[pos + 16 + 8 * rank:pos + 16 + 8 * rank + nlen].decode())
        pos += 16 + 8 * rank + nlen + alen + 4
        nbytes = int(np.prod(dims, dtype=np.uint64)) * atsfmt.DTYPES[code][1]
        for _ in range((nbytes + chunk - 1) // chunk):
            pos += 16 + struct.unpack("<I", buf[pos + 4:pos + 8])[0]
    return names


def tokens_file(tmp, ids, name="data.ats"):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(pack(tmp, [("tokens", np.asarray(ids, np.int32))]))
    return path


def fortunes_text(limit=None):
    files = sorted(f for f in glob.glob(os.path.join(FORTUNES, "*"))
                   if os.path.isfile(f) and not os.path.islink(f)
                   and not f.endswith(".dat"))
    if not files:
        pytest.skip("the fortunes package is not installed (tools/setup.sh)")
    data = b"".join(open(f, "rb").read() for f in files)
    return data[:limit] if limit else data


SMALL = dict(n_layer=2, n_head=2, d_model=8, ctx=8, vocab=11)


# ----------------------------------------------------------------- gradients

# D = 4 at T = 5; D = 1 at T = 1 (a position of one key, whose q and k
# gradients are zero)
@pytest.mark.parametrize("cfg,seq", [(SMALL, 5),
                                     (dict(SMALL, n_head=3, d_model=3), 1)],
                         ids=["D4-T5", "D1-T1"])
@pytest.mark.parametrize("gpt2", [False, True], ids=["andrea", "gpt2-form"])
def test_gradients_match_finite_differences(tmp_path, gpt2, cfg, seq):
    """Every parameter's analytic gradient (float32) against central
    differences of the float64 model; relative error <= 1e-3 per tensor
    (float32 arithmetic leaves about 1e-6 to 1e-5; a wrong term is O(1)).
    The GPT-2 form: every product's bias, and the head tied to wte, whose
    gradient then sums the embedding's and the head's."""
    rng = np.random.default_rng(1)
    model, _ = write_model(tmp_path, rng, cfg, gpt2)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    grads = os.path.join(tmp_path, "g.ats")
    run("train", "-m", model, "--data", data, "--steps", "1", "--batch", 2,
        "--seq", seq, "--lr", 0, "--warmup", 0, "--val-fraction", 0,
        "--threads", 1, "--dump-grads", grads, "-o", tmp_path / "m.ats",
        check=0)
    g = read_params(tmp_path, grads, "g")
    batch = g.pop("tokens").astype(np.int64)
    assert batch.shape == (2, seq + 1)
    p = {k: v.astype(np.float64) for k, v in
         read_params(tmp_path, model, "p").items()}
    assert set(g) == set(p)
    # --lr 0 leaves the parameters exactly as they were
    after = read_params(tmp_path, tmp_path / "m.ats", "a")
    assert all(np.array_equal(after[k], p[k].astype(np.float32)) for k in p)
    worst = {}
    for name, w in p.items():
        flat = w.reshape(-1)
        idx = np.arange(flat.size) if flat.size <= 48 else \
            rng.choice(flat.size, 48, replace=False)
        num = np.empty(idx.size)
        for j, i in enumerate(idx):
            keep = flat[i]
            flat[i] = keep + 1e-5
            up = loss(p, cfg, batch)
            flat[i] = keep - 1e-5
            down = loss(p, cfg, batch)
            flat[i] = keep
            num[j] = (up - down) / 2e-5
        ana = g[name].reshape(-1)[idx].astype(np.float64)
        den = np.linalg.norm(num)
        err = np.linalg.norm(ana - num) / den if den > 1e-9 else \
            np.linalg.norm(ana)
        worst[name] = err
    bad = {k: v for k, v in worst.items() if v > 1e-3}
    assert not bad, bad


def test_loss_of_a_trained_model_matches_numpy(tmp_path):
    rng = np.random.default_rng(2)
    model, p0 = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 600))
    common = ["--data", data, "--batch", 3, "--seq", 7, "--threads", 1,
              "--val-fraction", 0.2]
    run("train", "-m", model, *common, "--steps", 30, "--lr", 1e-2,
        "-o", tmp_path / "t.ats", check=0)
    # one more step with lr 0 reports the loss of the trained parameters
    run("train", "-m", tmp_path / "t.ats", *common, "--steps", 1, "--lr", 0,
        "--seed", 99, "--dump-grads", tmp_path / "g.ats",
        "-o", tmp_path / "t2.ats", check=0)
    g = read_params(tmp_path, tmp_path / "g.ats", "g")
    p = {k: v.astype(np.float64) for k, v in
         read_params(tmp_path, tmp_path / "t.ats", "t").items()}
    ref = loss(p, SMALL, g["tokens"].astype(np.int64))
    name, attrs, _ = records(tmp_path / "g.ats")[0]
    reported = float(attrs["loss"])
    assert abs(reported - ref) <= 1e-5 * abs(ref), (reported, ref)
    p0 = {k: v.astype(np.float64) for k, v in p0.items()}
    assert ref < loss(p0, SMALL, g["tokens"].astype(np.int64))  # it learned


def test_forward_activations_match_numpy(tmp_path):
    rng = np.random.default_rng(3)
    model, p = write_model(tmp_path, rng, SMALL)
    p = {k: v.astype(np.float64) for k, v in p.items()}
    ids = rng.integers(0, 11, (2, 6)).astype(np.int32)
    acts = os.path.join(tmp_path, "acts.ats")
    run("train", "--forward", "-m", model, "-o", acts,
        input=pack(tmp_path, [("tokens", ids)]), check=0)
    ref = {}
    logits = forward(p, SMALL, ids.astype(np.int64), ref)
    recs = records(acts)
    per_layer = ["q", "k", "v", "scores", "attn", "out", "y", "x"]
    assert [r[0] for r in recs] == ["tokens", "x"] + per_layer * 2 + ["logits"]
    assert np.array_equal(recs[0][2], ids)
    assert oracle.rel_err(recs[1][2], ref["x"]) <= 1e-5
    for name, attrs, arr in recs[2:-1]:
        layer = int(attrs["layer"])
        assert oracle.rel_err(arr, ref[layer][name]) <= 1e-5, (layer, name)
        if name == "scores":
            assert attrs["mask"] == "causal" and attrs["fill"] == "-inf"
            assert float(attrs["scale"]) == np.float32(1 / np.sqrt(4))
    assert oracle.rel_err(recs[-1][2], logits) <= 1e-5


def test_forward_records_names_attributes_and_order(tmp_path):
    """The headers of andrea-train --forward, record by record, as the
    stages write them (and as they were before the forward engine)."""
    rng = np.random.default_rng(4)
    model, _ = write_model(tmp_path, rng, SMALL)
    acts = os.path.join(tmp_path, "acts.ats")
    run("train", "--forward", "-m", model, "--tokens", "1,2,3", "-o", acts,
        check=0)
    head = [("norm", "ln1"), ("n_head", "2")]
    rest = head + [("scale", "0.5"), ("mask", "causal"), ("fill", "-inf")]
    want = [("tokens", (1, 3), []), ("x", (1, 3, 8), [])]
    for l in range(2):
        layer = [("layer", str(l))]
        want += [(n, (1, 2, 3, 4), layer + head) for n in "qkv"]
        want += [(n, (1, 2, 3, 3), layer + rest) for n in ("scores", "attn")]
        want += [("out", (1, 2, 3, 4), layer + rest),
                 ("y", (1, 3, 8), layer + rest), ("x", (1, 3, 8), layer)]
    want.append(("logits", (1, 3, 11), []))
    got = [(r.name, r.dims, r.attrs) for r in atsfmt.read(open(acts, "rb").read())]
    assert got == want
    # a sequence longer than the context names where it came from
    long = ",".join(["1"] * 9)
    p = run("train", "--forward", "-m", model, "--tokens", long, "-o", acts,
            check=1)
    assert "--tokens: T=9 exceeds the model's context of 8" in \
        one_line_error(p, "train")


def test_stage_filters_reproduce_a_head_from_the_engine(tmp_path):
    """andrea-embed gives the engine's x bit for bit, and the stage filters
    fed with the engine's layer-0 output recompute head 1 of layer 1."""
    rng = np.random.default_rng(4)
    model, p = write_model(tmp_path, rng, SMALL)
    ids = ",".join(map(str, rng.integers(0, 11, 7)))
    acts = os.path.join(tmp_path, "a.ats")
    run("train", "--forward", "-m", model, "--tokens", ids, "-o", acts, check=0)
    recs = records(acts)
    emb = run("embed", "-m", model, "--tokens", ids, check=0).stdout
    e = unpack(tmp_path, emb, "emb")
    assert np.array_equal(e["x"], recs[1][2])
    x0 = next(a for n, at, a in recs if n == "x" and at.get("layer") == "0")
    s = pack(tmp_path, [("x", x0)])
    for stage in (["qkv", "-m", model, "-l", 1, "--head", 1], ["scores"],
                  ["mask"], ["softmax", "--keep"], ["attend", "--keep"]):
        s = run(*stage, input=s, check=0).stdout
    o = unpack(tmp_path, s, "pipe")
    eng = {n: a for n, at, a in recs if at.get("layer") == "1"}
    for name in ("scores", "attn", "out"):
        assert oracle.rel_err(o[name][:, 0], eng[name][:, 1]) <= 1e-5, name


# ------------------------------------------------------------ initialisation

def test_steps_0_writes_the_seeded_default_model(tmp_path):
    m = tmp_path / "m.ats"
    run("train", "--steps", 0, "-z", 0, "-o", m, check=0, timeout=300)
    assert not os.path.exists(str(m) + ".ckpt")
    with_m = run("embed", "-m", m, "--text", "-z", 0, input=b"the cat",
                 check=0).stdout
    without = run("embed", "--text", "-z", 0, input=b"the cat", check=0).stdout
    assert with_m == without
    names = record_names(m)
    assert names[0] == "config" and names[-1] == "lm_head"
    assert set(names[1:]) == set(param_shapes(oracle.PRESETS["andrea-120m"]))


def test_tiny_init_matches_the_generator(tmp_path):
    m = tmp_path / "tiny.ats"
    run("train", "--config", "tiny", "--seed", 7, "--steps", 0, "-o", m,
        check=0)
    p = read_params(tmp_path, m, "t")
    for name, shape in param_shapes(oracle.PRESETS["tiny"]).items():
        assert np.array_equal(p[name], oracle.seeded_param(7, name, shape)), name


# --------------------------------------------------------------- real text

def test_tiny_model_learns_english(tmp_path):
    """A tiny model trained for about half a minute on the fortunes beats
    the unigram (byte-frequency) entropy of the same text clearly."""
    text = fortunes_text()
    data = tmp_path / "fortunes.txt"
    data.write_bytes(text)
    counts = np.bincount(np.frombuffer(text, np.uint8), minlength=256)
    f = counts[counts > 0] / counts.sum()
    unigram = float(-(f * np.log(f)).sum())
    log = tmp_path / "log.jsonl"
    t0 = time.time()
    run("train", "--config", "tiny", "--data", data, "--steps", 500,
        "--batch", 8, "--seq", 64, "--lr", 3e-3, "--warmup", 20,
        "--eval-every", 250, "--eval-batches", 16, "--threads", 1,
        "--log", log, "-o", tmp_path / "tiny.ats", check=0, timeout=200)
    took = time.time() - t0
    recs = [json.loads(line) for line in open(log)]
    assert [r["step"] for r in recs] == list(range(1, 501))
    val = [r["val_loss"] for r in recs if "val_loss" in r]
    assert len(val) == 2
    print(f"unigram {unigram:.3f} nats, held-out {val[-1]:.3f} nats, "
          f"{recs[-1]['tokens_per_s']:.0f} tok/s, {took:.1f} s")
    assert val[-1] < unigram - 0.4, (val, unigram)


# ------------------------------------------------------- resume and safety

def small_run(tmp, out, *extra, data=None, check=0):
    return run("train", "--config", "tiny", "--d-model", 16, "--heads", 2,
               "--ctx", 16, "--data", data, "--batch", 4, "--seq", 16,
               "--steps", 20, "--warmup", 3, "--lr", 3e-3, "--eval-every", 5,
               "--eval-batches", 2, "--threads", 2, "-o", out, *extra,
               check=check)


def payload(tmp, path, sub):
    return read_params(tmp, path, sub)


def test_resume_is_bit_exact(tmp_path):
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(200000))
    full = tmp_path / "full.ats"
    small_run(tmp_path, full, data=data)
    half = tmp_path / "half.ats"
    small_run(tmp_path, half, "--stop-at", 10, data=data)
    assert os.path.exists(str(half) + ".ckpt")
    small_run(tmp_path, half, "--resume", data=data)
    a, b = payload(tmp_path, full, "a"), payload(tmp_path, half, "b")
    assert set(a) == set(b)
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    # the same seed twice: the same run
    again = tmp_path / "again.ats"
    small_run(tmp_path, again, data=data)
    c = payload(tmp_path, again, "c")
    assert all(np.array_equal(a[k], c[k]) for k in a)


def test_resume_refuses_other_data_and_settings(tmp_path):
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(50000))
    m = tmp_path / "m.ats"
    small_run(tmp_path, m, "--stop-at", 2, data=data)
    other = tmp_path / "o.txt"
    other.write_bytes(fortunes_text(50001)[1:])
    p = small_run(tmp_path, m, "--resume", data=other, check=1)
    assert "differs" in one_line_error(p, "train")
    p = small_run(tmp_path, m, "--resume", "--batch", 5, data=data, check=1)
    assert "--batch 5" in one_line_error(p, "train")
    p = small_run(tmp_path, m, "--resume", "--layers", 3, data=data, check=1)
    assert "n_layer=3" in one_line_error(p, "train")


def test_corrupt_checkpoint_is_refused(tmp_path):
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(50000))
    m = tmp_path / "m.ats"
    small_run(tmp_path, m, "--stop-at", 2, data=data)
    ck = str(m) + ".ckpt"
    raw = bytearray(open(ck, "rb").read())
    bad = bytearray(raw)
    bad[len(bad) // 2] ^= 0x55  # inside some tensor's payload
    open(ck, "wb").write(bad)
    p = small_run(tmp_path, m, "--resume", data=data, check=1)
    one_line_error(p, "train")
    # a checkpoint of another shape under the right name
    other = tmp_path / "other.ats"
    run("train", "--config", "tiny", "--data", data, "--steps", 1, "--batch", 2,
        "--seq", 8, "--threads", 1, "-o", other, check=0)
    open(ck, "wb").write(open(str(other) + ".ckpt", "rb").read())
    p = small_run(tmp_path, m, "--resume", data=data, check=1)
    assert "asks for n_head=2" in one_line_error(p, "train")
    # a model file is not a checkpoint
    open(ck, "wb").write(open(other, "rb").read())
    p = small_run(tmp_path, m, "--resume", data=data, check=1)
    assert "not a checkpoint" in one_line_error(p, "train")


def test_sigkill_never_leaves_a_broken_model(tmp_path):
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(100000))
    m = tmp_path / "m.ats"
    args = [tool("train"), "--config", "tiny", "--data", str(data),
            "--batch", 2, "--seq", 32, "--steps", 100000, "--save-every", 1,
            "--eval-every", 0, "--threads", 1, "-o", str(m)]
    rnd = random.Random(5)
    seen = 0
    for i in range(6):
        p = subprocess.Popen(list(map(str, args)), stderr=subprocess.DEVNULL)
        time.sleep(0.3 + rnd.random() * 0.4)
        p.send_signal(signal.SIGKILL)
        p.wait()
        if os.path.exists(m):
            seen += 1
            # every record decodes and every CRC holds
            assert records(m)[-1][0] == "lm_head"
            if os.path.exists(str(m) + ".ckpt"):
                assert records(str(m) + ".ckpt")[-1][0] == "adam.v.lm_head"
    assert seen >= 4


def test_sigterm_saves_and_exits_143(tmp_path):
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(100000))
    m = tmp_path / "m.ats"
    p = subprocess.Popen([tool("train"), "--config", "tiny", "--data", str(data),
                          "--batch", 2, "--seq", 32, "--steps", 100000,
                          "--eval-every", 0, "--threads", 1, "-o", str(m)]
                         if False else
                         list(map(str, [tool("train"), "--config", "tiny",
                                        "--data", data, "--batch", 2, "--seq",
                                        32, "--steps", 100000, "--eval-every",
                                        0, "--threads", 1, "-o", m])),
                         stderr=subprocess.PIPE)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert b"stopped by signal 15" in err
    assert records(str(m) + ".ckpt")[0][0] == "train_state"


def test_sighup_saves_and_a_resume_logs_each_step_once(tmp_path):
    """SIGHUP (a closed terminal) stops and saves as SIGTERM does (it
    killed the run unsaved); a run resumed from a checkpoint behind its
    log (killed between saves) cuts the log's later lines, and a line cut
    short, so that each step is logged once."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(100000))
    m, log = tmp_path / "m.ats", tmp_path / "m.log"
    args = list(map(str, [tool("train"), "--config", "tiny", "--data", data,
                          "--batch", 2, "--seq", 16, "--eval-every", 0,
                          "--threads", 1, "-o", m, "--log", log]))
    p = subprocess.Popen(args + ["--steps", "100000"], stderr=subprocess.PIPE)
    time.sleep(1.0)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 129, err
    saved = int(dict(records(str(m) + ".ckpt")[0][1])["step"])
    with open(log, "a") as f:  # what a kill between saves leaves
        f.write("".join(f'{{"step": {s}, "loss": 9}}\n'
                        for s in range(saved + 1, saved + 6)))
        f.write('{"step": %d, "lo' % (saved + 6))
    end = saved + 10
    run("train", "--resume", "--data", data, "--steps", end, "--threads", 1,
        "-o", m, "--log", log, check=0)
    steps = [json.loads(line)["step"] for line in open(log)]
    assert steps == list(range(1, end + 1))
