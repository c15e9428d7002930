"""andrea-train against a float64 NumPy model of the ANDREA architecture.

The NumPy forward pass below is written from andrea-model(5) alone.  Gradients
are checked against central differences of it; the trained model's loss,
the seeded initialisation, resuming, checkpoints, signals and the command
line are checked through the executable.  Everything runs on the CPU with
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


# ------------------------------------------------------------- the command

@pytest.mark.parametrize("args", [
    ["--steps", "x", "-o", "m.ats"],
    ["--config", "huge", "--steps", "0", "-o", "m.ats"],
    ["--data", "d"],                       # no -o
    ["-o", "m.ats"],                       # no --data
    ["--forward", "--lr", "1"],
    ["--text", "-o", "m.ats", "--steps", "0"],
    ["--bogus"],
    ["--val-fraction", "1", "--data", "d", "-o", "m.ats"],
    ["--resume", "-m", "x.ats", "--data", "d", "-o", "m.ats"],
    ["--d-model", "10", "--heads", "3", "--steps", "0", "-o", "m.ats"],
    ["--attention", "flash", "--data", "d", "-o", "m.ats"],
    ["--forward", "--attention", "fused"],
    # several GPUs (andrea-train(1), SEVERAL GPUS)
    ["--gpus", "0", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--rank", "0", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--dump-grads", "g.ats", "--data", "d", "-o", "m.ats"],
    ["--rank", "0", "--world", "2", "--data", "d", "-o", "m.ats"],
    ["--rank", "0", "--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--rank", "2", "--world", "2", "--init", "file:x", "--data", "d",
     "-o", "m.ats"],
    ["--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--shard-optimizer", "--data", "d", "-o", "m.ats"],
    ["--timeout", "30", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--timeout", "0", "--data", "d", "-o", "m.ats"],
    ["--forward", "--gpus", "2"],
    # an empty file name is refused before any work
    ["--checkpoint", "", "--data", "d", "-o", "m.ats"],
    ["--dump-grads", "", "--data", "d", "-o", "m.ats"],
    ["--log", "", "--data", "d", "-o", "m.ats"],
    ["--data", "", "-o", "m.ats"],
    ["--stop-at", "0", "--data", "d", "-o", "m.ats"],
    ["--data", "d", "-o", ""],
])
def test_bad_options_exit_2(tmp_path, args):
    p = run("train", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    one_line_error(p, "train")


def test_several_ranks_need_the_gpu(tmp_path):
    """--gpus, --init and an mpirun's ranks are refused on the CPU with one
    line, before any data is read or file written; so is an mpirun's
    environment that is not a rank and a size."""
    common = ["--data", tmp_path / "missing.txt", "-o", tmp_path / "m.ats",
              "--device", "cpu"]
    p = run("train", "--gpus", 2, *common, check=1)
    assert "--gpus: training on several ranks needs a GPU (--device cuda)" \
        in one_line_error(p, "train")
    p = run("train", "--gpus", 2, *common[:-2], env={"CUDA_VISIBLE_DEVICES":
                                                   ""}, check=1)
    assert "--gpus 2: this host has 0 GPUs" in one_line_error(p, "train")
    p = run("train", "--rank", 1, "--world", 2, "--init",
            f"file:{tmp_path}/id", *common, check=1)
    assert "--init: training on several ranks needs a GPU" \
        in one_line_error(p, "train")
    mpi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}
    p = run("train", "--init", f"file:{tmp_path}/id", *common, env=mpi,
            check=1)
    assert "needs a GPU" in one_line_error(p, "train")
    mpi["OMPI_COMM_WORLD_SIZE"] = "two"
    p = run("train", "--init", f"file:{tmp_path}/id", *common, env=mpi,
            check=1)
    assert "OMPI_COMM_WORLD_SIZE=two" in one_line_error(p, "train")
    assert os.listdir(tmp_path) == []


def test_outputs_that_cannot_hold_the_run_are_refused_first(tmp_path):
    """-o or the checkpoint that is a directory, the training data itself or
    a terminal, and -o a device with the checkpoint left to be put beside
    it, are refused before any work, with nothing written."""
    data = tmp_path / "d.txt"
    data.write_bytes(b"the cat sat on the mat. " * 200)
    (tmp_path / "dir").mkdir()
    common = ["--config", "tiny", "--data", data, "--steps", 2, "--seq", 16]
    before = sorted(os.listdir(tmp_path))
    for args, says in [
            (["-o", tmp_path / "dir"], "is a directory"),
            (["-o", data], "is the training data"),
            (["-o", tmp_path / "m.ats", "--checkpoint", data],
             "the checkpoint"),
            (["-o", tmp_path / "m.ats", "--log", data],
             "--log %s is the training data" % data),
            (["-o", tmp_path / "m.ats", "--dump-grads", data],
             "--dump-grads %s is the training data" % data),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "m.ats"],
             "is -o too"),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "m.ats.ckpt"],
             "is the checkpoint too"),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "x",
              "--dump-grads", tmp_path / "x"], "is --log too"),
            # one file by two spellings, none of them there yet
            (["-o", tmp_path / "m.ats", "--checkpoint",
              f"{tmp_path}/./m.ats"], "is -o too"),
            (["-o", tmp_path / "m.ats", "--dump-grads",
              f"{tmp_path}/dir/../m.ats"], "is -o too"),
            (["-o", "/dev/null"], "name the checkpoint with --checkpoint")]:
        p = run("train", *common, *args, check=2)
        assert says in one_line_error(p, "train")
        assert sorted(os.listdir(tmp_path)) == before
    # an output in a folder that is not there fails before the first step
    for args in (["-o", tmp_path / "no" / "m.ats"],
                 ["-o", tmp_path / "m.ats", "--checkpoint",
                  tmp_path / "no" / "c"]):
        p = run("train", *common, "--steps", 100000, *args, check=1)
        assert f"{tmp_path / 'no'}" in one_line_error(p, "train")
        assert "its folder: No such file or directory" in p.stderr.decode()
        assert sorted(os.listdir(tmp_path)) == before
    assert data.read_bytes() == b"the cat sat on the mat. " * 200
    # a device as the checkpoint holds no run -f would be needed to end
    run("train", *common, "-o", tmp_path / "dev.ats", "--checkpoint",
        "/dev/null", check=0)
    os.remove(tmp_path / "dev.ats")
    run("train", *common, "-o", "/dev/null", "--checkpoint",
        tmp_path / "c.ats", check=0)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["c.ats"])
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        p = run("train", *common, "-o", tty, "--checkpoint",
                tmp_path / "c2.ats", check=1)
        assert one_line_error(p, "train").endswith(
            f"{tty}: refusing to write binary data to a terminal (use -f)")
        # andrea-generate takes no -f, and says none
        model = tmp_path / "m.ats"
        run("train", "--config", "tiny", "--steps", 0, "-o", model, check=0)
        for opts in (["--logits", tty],
                     ["--capture", "x", "--capture-file", tty]):
            p = run("generate", "-m", model, "-n", 2, *opts, check=1)
            assert one_line_error(p, "generate").endswith(
                f"{tty}: refusing to write binary data to a terminal")
    finally:
        os.close(master)
        os.close(slave)


def test_bad_data_fails_with_one_line(tmp_path):
    data = tokens_file(tmp_path, [1, 2, 300])
    p = run("train", "--config", "tiny", "--data", data, "--seq", 1,
            "--val-fraction", 0, "-o", tmp_path / "m.ats", check=1)
    assert "300" in one_line_error(p, "train")
    short = tmp_path / "short.txt"
    short.write_bytes(b"abc")
    p = run("train", "--config", "tiny", "--data", short, "-o",
            tmp_path / "m.ats", check=1)
    assert "too few" in one_line_error(p, "train")
    assert not os.path.exists(tmp_path / "m.ats")


def test_the_fused_attention_needs_the_gpu(tmp_path):
    data = tokens_file(tmp_path, list(range(200)) * 5)
    p = run("train", "--config", "tiny", "--data", data, "--seq", 8,
            "--steps", 1, "--device", "cpu", "--attention", "fused",
            "-o", tmp_path / "m.ats", check=1)
    assert "fused attention" in one_line_error(p, "train")
    assert not os.path.exists(tmp_path / "m.ats")
    run("train", "--config", "tiny", "--data", data, "--seq", 8, "--steps",
        1, "--device", "cpu", "--attention", "explicit", "-o",
        tmp_path / "m.ats", check=0)


def test_a_run_says_what_it_did_and_keeps_its_checkpoint(tmp_path):
    """One summary line however stderr is connected; --progress into a
    file writes plain lines; an existing checkpoint is not replaced
    without --resume or -f; a resume says where it starts, and one with
    nothing left to do says so."""
    rng = np.random.default_rng(8)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--batch", 2, "--seq", 5, "--threads", 1,
              "--val-fraction", 0.2, "--eval-every", 2, "-o", out]
    p = run("train", "-m", model, *common, "--steps", 4, "--progress", check=0)
    lines = p.stderr.decode().splitlines()
    assert "\r" not in p.stderr.decode() and "\033" not in p.stderr.decode()
    assert lines[0].startswith("step ") and "loss" in lines[0]
    last = lines[-1]
    assert last.startswith("andrea-train: 4 steps on ") and "to step 4 of 4" in last
    assert f"wrote {out} and {out}.ckpt" in last and "held-out" in last
    p = run("train", "-m", model, *common, "--steps", 4, check=1)
    assert "m.ats.ckpt exists: --resume continues its run, -f replaces it" \
        in one_line_error(p, "train")
    run("train", "-m", model, *common, "--steps", 2, "-f", check=0)
    p = run("train", "--resume", *common, "--steps", 3, check=0)
    lines = p.stderr.decode().splitlines()
    assert lines[0] == f"andrea-train: resuming {out}.ckpt at step 2 of 3"
    assert "to step 3 of 3" in lines[-1]
    p = run("train", "--resume", *common, "--steps", 3, check=0)
    assert p.stderr.decode() == (f"andrea-train: {out}.ckpt is at step 3 of 3: "
                                 f"nothing to do (a larger --steps continues "
                                 f"it); wrote {out}\n")
    # a --stop-at behind the checkpoint, and a fresh --steps 0 (no step, so
    # no checkpoint), say so
    ckpt = open(f"{out}.ckpt", "rb").read()
    p = run("train", "--resume", *common, "--steps", 5, "--stop-at", 1,
            "--lr", 1, check=0)
    assert p.stderr.decode() == (f"andrea-train: {out}.ckpt is at step 3, "
                                 f"and --stop-at is 1: nothing to do; wrote "
                                 f"{out}\n")
    # ... and leaves the checkpoint as it was, its --steps and --lr too
    assert open(f"{out}.ckpt", "rb").read() == ckpt
    fresh = tmp_path / "z.ats"
    p = run("train", "-m", model, *common[:-1], fresh, "--steps", 0, check=0)
    assert p.stderr.decode() == (f"andrea-train: --steps 0: nothing to "
                                 f"train; wrote {fresh}\n")
    assert not os.path.exists(f"{fresh}.ckpt")


def test_the_schedule_is_the_formula_of_the_page_and_eval_every_is_kept(tmp_path):
    """andrea-train(1)'s formula, step by step from --log (its step counts
    the steps done: step s's record says s + 1); a resumed run keeps
    --eval-every from the checkpoint."""
    rng = np.random.default_rng(12)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    log, out = tmp_path / "log.jsonl", tmp_path / "m.ats"
    W, N, lr, mn = 3, 9, 1e-2, 2e-3
    run("train", "-m", model, "--data", data, "--batch", 2, "--seq", 5,
        "--steps", N, "--stop-at", 5, "--warmup", W, "--lr", lr, "--min-lr", mn,
        "--eval-every", 2, "--log", log, "-o", out, check=0)
    run("train", "--resume", "--data", data, "--log", log, "-o", out, check=0)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(1, N + 1))

    def rate(s):
        if s < W:
            return lr * (s + 1) / W
        p = min(1.0, (s - W) / (N - W))
        return mn + (lr - mn) * (1 + np.cos(np.pi * p)) / 2
    for r in recs:
        assert abs(r["lr"] - rate(r["step"] - 1)) <= 1e-6 * lr, r
    assert [r["step"] for r in recs if "val_loss" in r] == [2, 4, 5, 6, 8, 9]


def test_a_run_that_diverges_writes_nothing_and_fails(tmp_path):
    """A last step whose update leaves a model that computes no finite loss
    (its own loss, taken before the update, is finite) ends the run with
    exit 1 and one line, with no model or checkpoint written: by the
    held-out loss where one is measured, and by the parameters, where one
    is not finite, in any case."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    common = ["--config", "tiny", "--data", data, "--seq", 16, "--batch", 2,
              "--steps", 1, "--warmup", 1, "--lr", 1e30, "--clip", 0,
              "--weight-decay", 0, "-o", tmp_path / "m.ats"]
    p = run("train", *common, check=1)
    assert "step 1: the held-out loss is nan: training diverged" \
        in one_line_error(p, "train")
    common[common.index(1e30)] = 1e39  # past float32: the weights overflow
    p = run("train", *common, "--eval-every", 0, check=1)
    line = one_line_error(p, "train")
    assert line.startswith("andrea-train: step 1: ") and \
        "training diverged (lower --lr?); nothing written" in line
    assert sorted(os.listdir(tmp_path)) == ["d.txt"]


def test_resuming_with_another_lr_keeps_a_given_min_lr(tmp_path):
    """andrea-train(1): the schedule comes from the checkpoint unless given
    again.  A --min-lr given to the run stays when only --lr is given on
    resuming; the default one (a tenth of --lr) follows the new --lr; a
    kept --min-lr above the new --lr is a usage error."""
    rng = np.random.default_rng(3)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--batch", 2, "--seq", 5, "--steps", 6,
              "--warmup", 0, "-o", out]

    def state():
        return records(f"{out}.ckpt")[0][1]
    for given, new_lr, want in [(["--min-lr", 0], 1e-3, 0.0),
                                (["--min-lr", 3e-4], 1e-3, 3e-4),  # a tenth
                                ([], 1e-3, 1e-4)]:
        run("train", "-m", model, *common, "--lr", 3e-3, *given,
            "--stop-at", 2, "-f", check=0)
        run("train", "--resume", *common, "--lr", new_lr, "--stop-at", 3,
            check=0)
        st = state()
        assert float(st["lr"]) == new_lr and float(st["min_lr"]) == want, st
    run("train", "-m", model, *common, "--lr", 3e-3, "--min-lr", 2e-3,
        "--stop-at", 2, "-f", check=0)
    p = run("train", "--resume", *common, "--lr", 1e-3, check=2)
    assert "--lr 0.001 is below the --min-lr 0.002 of the checkpoint" \
        in one_line_error(p, "train")


def test_data_is_read_whole_once_and_capped(tmp_path):
    """Text through a pipe trains as the same text in a file (the bytes
    that told text from a stream are not read twice), and text of more
    than ANDREA_MAX_BYTES is refused in one line rather than held."""
    text = fortunes_text(5000)
    data = tmp_path / "d.txt"
    data.write_bytes(text)
    common = ["--config", "tiny", "--seq", 16, "--batch", 2, "--steps", 2,
              "--threads", 1]
    run("train", *common, "--data", data, "-o", tmp_path / "a.ats", check=0)
    run("train", *common, "--data", "/dev/stdin", "-o", tmp_path / "b.ats",
        "--checkpoint", tmp_path / "b.ckpt", input=text, check=0)
    assert open(tmp_path / "a.ats", "rb").read() == \
        open(tmp_path / "b.ats", "rb").read()
    p = run("train", *common, "--data", data, "-o", tmp_path / "c.ats",
            env={"ANDREA_MAX_BYTES": "4999"}, check=1)
    assert one_line_error(p, "train") == (
        f"andrea-train: {data}: more than 4999 bytes of text (ANDREA_MAX_BYTES)")
    assert not os.path.exists(tmp_path / "c.ats")
    # a tokens stream is read twice: through a pipe it is refused as such
    # (it was once called a stream of bad magic)
    toks = run("tokenize", input=text, check=0).stdout
    p = run("train", *common, "--data", "/dev/stdin", "-o", tmp_path / "d.ats",
            input=toks, check=1)
    assert "/dev/stdin: a tokens stream must be a file, not a pipe" in \
        one_line_error(p, "train")


def test_a_log_whose_reader_left_stops_the_run_saved(tmp_path):
    """--log into a pipe whose reader has gone: the run stops after that
    step as a signal stops it, saves the model and the checkpoint, says
    so in one line and exits 1 (not killed by SIGPIPE)."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    out = tmp_path / "m.ats"
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([tool("train"), "--config", "tiny", "--data", data,
                        "--seq", "16", "--batch", "2", "--steps", "50",
                        "--log", "/dev/stdout", "-o", out], stdout=w,
                       stderr=subprocess.PIPE)
    os.close(w)
    assert p.returncode == 1, p.stderr
    last = p.stderr.decode().splitlines()[-1]
    assert last == (f"andrea-train: /dev/stdout: write error: Broken pipe; "
                    f"stopped after step 1, saved {out} and {out}.ckpt")
    assert records(f"{out}.ckpt")[0][1]["step"] == "1"
    run("train", "--resume", "--data", data, "-o", out, check=0)


def test_a_resumed_log_whose_reader_left_stops_the_run_too(tmp_path):
    """A resumed run appends to its log opened for writing alone: a pipe
    whose reader has gone fails the write (opened to read too, the run
    was a reader of its own pipe, never saw EPIPE, and ran on)."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--seq", 16, "--batch", 2, "--threads", 1,
              "-o", out]
    run("train", "--config", "tiny", "--steps", 2, *common, check=0)
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run(list(map(str, [tool("train"), "--resume", "--steps",
                                      100000, *common, "--log",
                                      "/dev/stdout"])),
                       stdout=w, stderr=subprocess.PIPE, timeout=60)
    os.close(w)
    assert p.returncode == 1, p.stderr
    assert b"Broken pipe; stopped after step 3" in p.stderr
