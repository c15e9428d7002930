"""andrea-import: GPT-2 checkpoints in Hugging Face's layout against an
independent NumPy GPT-2 forward written here in HF's own names (c_attn
fused, Conv1D weights [in, out], a head tied to wte), on safetensors files
written by the `safetensors` package (PyPI; tools/setup.sh puts it in
build/pydeps) and, for the files it would not write, by hand.
"""
import json
import os
import struct
import sys

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import ROOT, run, one_line_error
from stagekit import pack, unpack, pipeline

sys.path.insert(0, os.path.join(ROOT, "build", "pydeps"))
try:
    import safetensors.numpy as st_numpy
except ImportError:  # tools/setup.sh installs it; without it, by hand
    st_numpy = None

TOL = 1e-5


def save_safetensors(path, tensors, metadata=None):
    """tensors: name -> float32 array, as safetensors' writer lays them."""
    if st_numpy is not None:
        st_numpy.save_file(tensors, str(path), metadata=metadata)
        return
    raw_file(path, *layout(tensors), metadata=metadata)


def layout(tensors):
    """The header entries and data of a safetensors file, in name order."""
    header, data = {}, b""
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    return header, data


def raw_file(path, header, data, metadata=None, hlen=None):
    """A safetensors file from a header dict (written as given) and data."""
    if metadata:
        header = dict(header, __metadata__=metadata)
    text = json.dumps(header).encode() if isinstance(header, dict) else header
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if hlen is None else hlen))
        f.write(text + data)


def gpt2_params(rng, L, H, C, V, ctx):
    """A random GPT-2 in HF's names (GPT2LMHeadModel, no lm_head: tied)."""
    p = {"transformer.wte.weight": rng.standard_normal((V, C)) * 0.3,
         "transformer.wpe.weight": rng.standard_normal((ctx, C)) * 0.3,
         "transformer.ln_f.weight": 1 + 0.2 * rng.standard_normal(C),
         "transformer.ln_f.bias": 0.2 * rng.standard_normal(C)}
    for l in range(L):
        h = f"transformer.h.{l}."
        for ln in ("ln_1", "ln_2"):
            p[h + ln + ".weight"] = 1 + 0.2 * rng.standard_normal(C)
            p[h + ln + ".bias"] = 0.2 * rng.standard_normal(C)
        p[h + "attn.c_attn.weight"] = rng.standard_normal((C, 3 * C)) / np.sqrt(C)
        p[h + "attn.c_attn.bias"] = 0.5 * rng.standard_normal(3 * C)
        p[h + "attn.c_proj.weight"] = rng.standard_normal((C, C)) / np.sqrt(C)
        p[h + "attn.c_proj.bias"] = 0.5 * rng.standard_normal(C)
        p[h + "mlp.c_fc.weight"] = rng.standard_normal((C, 4 * C)) / np.sqrt(C)
        p[h + "mlp.c_fc.bias"] = 0.5 * rng.standard_normal(4 * C)
        p[h + "mlp.c_proj.weight"] = rng.standard_normal((4 * C, C)) / np.sqrt(4 * C)
        p[h + "mlp.c_proj.bias"] = 0.5 * rng.standard_normal(C)
    return {k: v.astype(np.float32) for k, v in p.items()}


def hf_config(L, H, C, V, ctx, **extra):
    return dict({"model_type": "gpt2", "n_layer": L, "n_head": H, "n_embd": C,
                 "vocab_size": V, "n_positions": ctx, "n_ctx": ctx,
                 "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
                 "n_inner": None, "tie_word_embeddings": True}, **extra)


# ---- GPT-2 in NumPy float64, in HF's terms ----

# LayerNorm and the tanh GELU (gelu_new) are oracle.py's; the rest is
# written here in HF's names, apart from the andrea-named oracle

def gpt2_forward(p, tokens, L, H, want_attn=None):
    """Logits [B,T,V]; with want_attn=(layer, head) also that head's
    attention probabilities [B,T,T]."""
    g = {k: v.astype(np.float64) for k, v in p.items()}
    pre = "transformer."
    B, T = tokens.shape
    x = g[pre + "wte.weight"][tokens] + g[pre + "wpe.weight"][:T]
    C = x.shape[-1]
    D = C // H
    causal = np.triu(np.ones((T, T), bool), 1)
    probs = None
    for l in range(L):
        h = f"{pre}h.{l}."
        a = oracle.layernorm(x, g[h + "ln_1.weight"], g[h + "ln_1.bias"])
        qkv = a @ g[h + "attn.c_attn.weight"] + g[h + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, D)
                   .transpose(0, 2, 1, 3) for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
        s[..., causal] = -np.inf
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        if want_attn and want_attn[0] == l:
            probs = w[:, want_attn[1]]
        o = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + o @ g[h + "attn.c_proj.weight"] + g[h + "attn.c_proj.bias"]
        m = oracle.layernorm(x, g[h + "ln_2.weight"], g[h + "ln_2.bias"])
        f = oracle.gelu(m @ g[h + "mlp.c_fc.weight"] + g[h + "mlp.c_fc.bias"])
        x = x + f @ g[h + "mlp.c_proj.weight"] + g[h + "mlp.c_proj.bias"]
    x = oracle.layernorm(x, g[pre + "ln_f.weight"], g[pre + "ln_f.bias"])
    head = g["lm_head.weight"] if "lm_head.weight" in g else g[pre + "wte.weight"]
    return (x @ head.T, probs) if want_attn else x @ head.T


def rel_err(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def checkpoint(tmp, rng, L=2, H=3, C=12, V=300, ctx=32, **cfg):
    d = tmp / "gpt2"
    d.mkdir(exist_ok=True)
    p = gpt2_params(rng, L, H, C, V, ctx)
    save_safetensors(d / "model.safetensors", p)
    (d / "config.json").write_text(json.dumps(hf_config(L, H, C, V, ctx, **cfg)))
    return d, p


def model_logits(tmp, model, tokens):
    """logits of tokens [B,T] through embed | block -l all | logits."""
    return unpack(tmp, pipeline([("embed", "-m", model),
                                 ("block", "-m", model, "-l", "all"),
                                 ("logits", "-m", model)],
                                input=pack(tmp, [("tokens", tokens)])))["logits"]


def import_model(tmp, src, *args):
    out = tmp / "model.ats"
    run("import", src, "-o", out, *args, check=0)
    return out


# (B, T): T = 1, T not a multiple of 8
@pytest.mark.parametrize("B,T", [(1, 1), (2, 13), (3, 32)])
def test_imported_gpt2_matches_numpy(tmp_path, B, T):
    rng = np.random.default_rng(B * 100 + T)
    L, H, C, V = 2, 3, 12, 300
    d, p = checkpoint(tmp_path, rng, L, H, C, V)
    model = import_model(tmp_path, d)
    recs = {r.name: r for r in atsfmt.read(model.read_bytes())}
    assert "lm_head" not in recs  # tied
    assert dict(recs["config"].attrs) == {"n_layer": "2", "n_head": "3",
                                          "d_model": "12", "ctx": "32",
                                          "vocab": "300"}
    tokens = rng.integers(0, V, (B, T)).astype(np.int32)
    logits = model_logits(tmp_path, model, tokens)
    want, probs = gpt2_forward(p, tokens, L, H, want_attn=(1, 2))
    assert rel_err(logits, want) <= TOL
    # one head of layer 1 through the stages, against the pattern
    heads = unpack(tmp_path, pipeline(
        [("embed", "-m", model), ("block", "-m", model, "-l", 0),
         ("qkv", "-m", model, "-l", 1, "--head", 2), ("scores",), ("mask",),
         ("softmax",)], input=pack(tmp_path, [("tokens", tokens)])), "a")
    assert rel_err(heads["attn"][:, 0], probs) <= TOL


def test_greedy_generation_of_an_imported_model(tmp_path):
    rng = np.random.default_rng(5)
    L, H, C, V, ctx = 2, 2, 8, 300, 64
    d, p = checkpoint(tmp_path, rng, L, H, C, V, ctx)
    model = import_model(tmp_path, d)
    prompt = b"hello"
    out = run("generate", "-m", model, "--prompt", prompt.decode(), "-n", 30,
              "--temperature", 0, check=0).stdout
    seq = [256] + list(prompt)
    for i, tok in enumerate(out):
        lg = gpt2_forward(p, np.array([seq]), L, H)[0, -1]
        order = np.argsort(lg)
        if lg[order[-1]] - lg[order[-2]] < 1e-3:  # a near-tie: float32's call
            break
        assert tok == order[-1], i
        seq.append(tok)
    assert len(seq) > 10


def test_an_untied_head_and_the_layout_without_prefix(tmp_path):
    """GPT2Model's names (no "transformer.") and an lm_head.weight [V,C]
    that differs from wte (tie_word_embeddings false) become lm_head
    [C,V]; an lm_head.weight equal to wte stays tied."""
    rng = np.random.default_rng(6)
    L, H, C, V = 1, 2, 8, 40
    p = gpt2_params(rng, L, H, C, V, 16)
    bare = {k[len("transformer."):]: v for k, v in p.items()}
    bare["lm_head.weight"] = rng.standard_normal((V, C)).astype(np.float32)
    d = tmp_path / "untied"
    d.mkdir()
    save_safetensors(d / "model.safetensors", bare)
    (d / "config.json").write_text(json.dumps(
        hf_config(L, H, C, V, 16, tie_word_embeddings=False)))
    model = import_model(tmp_path, d / "model.safetensors")
    recs = {r.name: r for r in atsfmt.read(model.read_bytes())}
    head = np.frombuffer(recs["lm_head"].payload, np.float32).reshape(C, V)
    assert np.array_equal(head, bare["lm_head.weight"].T)
    p["lm_head.weight"] = bare["lm_head.weight"]
    tokens = rng.integers(0, V, (2, 5)).astype(np.int32)
    logits = model_logits(tmp_path, model, tokens)
    assert rel_err(logits, gpt2_forward(p, tokens, L, H)) <= TOL
    tied = dict(p, **{"lm_head.weight": p["transformer.wte.weight"]})
    save_safetensors(d / "model.safetensors", tied)
    recs = [r.name for r in atsfmt.read(
        import_model(tmp_path, d / "model.safetensors").read_bytes())]
    assert "lm_head" not in recs


def bf16(a):
    """float32 -> bfloat16 bits (round to nearest even) and back."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return u, (u.astype(np.uint32) << 16).view(np.float32)


def test_bf16_and_f16_tensors_are_converted(tmp_path):
    rng = np.random.default_rng(7)
    L, H, C, V = 1, 2, 8, 20
    p = gpt2_params(rng, L, H, C, V, 8)
    header, data, want = {}, b"", {}
    for i, name in enumerate(sorted(p)):
        a = p[name]
        if i % 3 == 0:
            bits, back = bf16(a)
            raw, dt = bits.tobytes(), "BF16"
        elif i % 3 == 1:
            half = a.astype(np.float16)
            raw, dt, back = half.tobytes(), "F16", half.astype(np.float32)
        else:
            raw, dt, back = a.tobytes(), "F32", a
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
        want[name] = back
    d = tmp_path / "m"
    d.mkdir()
    raw_file(d / "model.safetensors", header, data)
    (d / "config.json").write_text(json.dumps(hf_config(L, H, C, V, 8)))
    recs = {r.name: r for r in atsfmt.read(import_model(tmp_path, d).read_bytes())}
    got = np.frombuffer(recs["layers.0.mlp.fc"].payload, np.float32)
    assert np.array_equal(got, want["transformer.h.0.mlp.c_fc.weight"].ravel())
    got = np.frombuffer(recs["wte"].payload, np.float32)
    assert np.array_equal(got, want["transformer.wte.weight"].ravel())


# ---- bad input: one line naming the file (and the tensor), exit 1 ----

def bad(tmp, header, data, cfg=None, hlen=None, name="model.safetensors"):
    d = tmp / "bad"
    d.mkdir(exist_ok=True)
    raw_file(d / name, header, data, hlen=hlen)
    (d / "config.json").write_text(json.dumps(cfg or hf_config(1, 2, 8, 20, 8)))
    r = run("import", d / name, "-o", tmp / "out.ats", check=1)
    assert not (tmp / "out.ats").exists()
    return one_line_error(r, "import")


def test_bad_safetensors_files_are_refused(tmp_path):
    rng = np.random.default_rng(8)
    p = gpt2_params(rng, 1, 2, 8, 20, 8)
    header, data = layout(p)
    first = min(header, key=lambda k: header[k]["data_offsets"][0])
    cases = []
    cut = dict(header)
    cases.append(("truncated", cut, data[:-4], "hold"))
    over = json.loads(json.dumps(header))
    over[first]["data_offsets"][1] += 4
    cases.append(("range vs shape", over, data, first))
    lap = json.loads(json.dumps(header))
    second = sorted(header, key=lambda k: header[k]["data_offsets"][0])[1]
    n = lap[second]["data_offsets"][1] - lap[second]["data_offsets"][0]
    lap[second]["data_offsets"] = [0, n]
    lap[first]["data_offsets"] = [0, header[first]["data_offsets"][1]]
    cases.append(("overlap", lap, data, "overlap"))
    hole = json.loads(json.dumps(header))
    for k in hole:
        hole[k]["data_offsets"] = [o + 4 for o in hole[k]["data_offsets"]]
    cases.append(("hole", hole, b"\0" * 4 + data, "hole"))
    huge = json.loads(json.dumps(header))
    huge[first]["shape"] = [1 << 40, 1 << 40]
    cases.append(("huge shape", huge, data, first))
    dtype = json.loads(json.dumps(header))
    dtype[first]["dtype"] = "F99"
    cases.append(("dtype", dtype, data, "F99"))
    for what, h, dat, needle in cases:
        msg = bad(tmp_path, h, dat)
        assert "model.safetensors" in msg and needle in msg, (what, msg)
    text = json.dumps(header)
    dup = (text[:-1] + ', "' + first + '": ' + json.dumps(header[first]) +
           "}").encode()
    assert "duplicate" in bad(tmp_path, dup, data)
    assert "header of" in bad(tmp_path, header, data, hlen=10 ** 12)
    assert "'{'" in bad(tmp_path, b"[]" + b" " * 10, data)
    assert "header" in bad(tmp_path, b"{not json", data)


def test_an_empty_tensor_where_another_begins_is_in_order(tmp_path):
    """The format orders the ranges by (begin, end): an empty tensor lies
    before the one that begins at its offset, wherever the header lists
    it (safetensors' own reader takes both orders)."""
    p = gpt2_params(np.random.default_rng(8), 1, 2, 8, 20, 8)
    header, data = layout(p)
    first = min(header, key=lambda k: header[k]["data_offsets"][0])
    empty = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(hf_config(1, 2, 8, 20, 8)))
    for order in (1, -1):
        h = dict(list(header.items()) +
                 [("transformer.h.0.attn.bias", empty)])
        h = dict(sorted(h.items(), key=lambda kv: (kv[0] != first) * order))
        raw_file(d / "model.safetensors", h, data)
        run("import", d, "-o", tmp_path / "o.ats", check=0)


def test_a_pickle_is_refused_unread(tmp_path):
    for head in (b"\x80\x04\x95" + b"\0" * 40, b"PK\x03\x04" + b"\0" * 40):
        f = tmp_path / "ckpt.pt"
        f.write_bytes(head)
        (tmp_path / "config.json").write_text("{}")
        msg = one_line_error(run("import", f, "-o", tmp_path / "o.ats",
                                 check=1), "import")
        assert "pickle" in msg and "safetensors" in msg and "ckpt.pt" in msg


def test_a_config_that_disagrees_is_refused(tmp_path):
    rng = np.random.default_rng(9)
    p = gpt2_params(rng, 1, 2, 8, 20, 8)
    header, data = layout(p)
    msg = bad(tmp_path, header, data, cfg=hf_config(1, 2, 8, 21, 8))
    assert "transformer.wte.weight" in msg and "[20,8]" in msg
    msg = bad(tmp_path, header, data, cfg=hf_config(2, 2, 8, 20, 8))
    assert "transformer.h.1." in msg
    for key, val, needle in (("activation_function", "gelu", "gelu"),
                             ("layer_norm_epsilon", 1e-6, "epsilon"),
                             ("n_inner", 7, "n_inner"),
                             ("scale_attn_by_inverse_layer_idx", True,
                              "scale_attn")):
        msg = bad(tmp_path, header, data,
                  cfg=hf_config(1, 2, 8, 20, 8, **{key: val}))
        assert "config.json" in msg and needle in msg, key
    # a model file's config holds at most 4096 layers: more is refused
    # before a file every tool would refuse is written
    msg = bad(tmp_path, header, data, cfg=hf_config(4097, 2, 8, 20, 8))
    assert "config.json" in msg and "'n_layer'" in msg and "1..4096" in msg
    d = tmp_path / "bad"
    (d / "config.json").write_text('{"n_layer": 1,')
    r = run("import", d, "-o", tmp_path / "o.ats", check=1)
    assert "config.json" in one_line_error(r, "import")
    (d / "config.json").write_text('{"n_layer": 1}')
    r = run("import", d, "-o", tmp_path / "o.ats", check=1)
    assert "n_head" in one_line_error(r, "import")


def test_tensors_the_model_has_no_place_for_are_refused(tmp_path):
    """A tensor the config's model would not hold (a layer beyond n_layer,
    a stray name) is an error naming it, not left out without a word; the
    causal-mask buffers (attn.bias, attn.masked_bias) are left out."""
    rng = np.random.default_rng(10)
    p = gpt2_params(rng, 2, 2, 8, 20, 8)
    for extra in ("transformer.h.1.attn.c_attn.weightx", "foo"):
        q = dict(p, **{extra: np.zeros(3, np.float32)})
        msg = bad(tmp_path, *layout(q), cfg=hf_config(1, 2, 8, 20, 8)
                  if extra == "foo" else hf_config(2, 2, 8, 20, 8))
        assert f"tensor '{extra}' has no place" in msg, extra
    msg = bad(tmp_path, *layout(p), cfg=hf_config(1, 2, 8, 20, 8))
    assert "tensor 'transformer.h.1." in msg and "(1 layers)" in msg
    q = dict(p, **{"transformer.h.0.attn.bias": np.ones((1, 1, 8, 8), np.float32),
                   "transformer.h.1.attn.masked_bias": np.ones(1, np.float32)})
    d = tmp_path / "buffers"
    d.mkdir()
    save_safetensors(d / "model.safetensors", q)
    (d / "config.json").write_text(json.dumps(hf_config(2, 2, 8, 20, 8)))
    run("import", d, "-o", tmp_path / "ok.ats", check=0)


# ---- llm.c's checkpoints ----

def llmc_file(path, p, L, H, C, V, ctx, version=3, pad=8):
    """p (HF names) as llm.c's train_gpt2 writes it: the 256-int header,
    then its sixteen groups, Linear weights [out, in], wte padded."""
    Vp = -(-V // pad) * pad if version != 1 else V
    t = "transformer."
    wte = np.zeros((Vp, C), np.float32)
    wte[:V] = p[t + "wte.weight"]
    per = lambda key, f=lambda a: a: np.stack(
        [f(p[f"{t}h.{l}.{key}"]) for l in range(L)])
    groups = [wte, p[t + "wpe.weight"], per("ln_1.weight"), per("ln_1.bias"),
              per("attn.c_attn.weight", np.transpose), per("attn.c_attn.bias"),
              per("attn.c_proj.weight", np.transpose), per("attn.c_proj.bias"),
              per("ln_2.weight"), per("ln_2.bias"),
              per("mlp.c_fc.weight", np.transpose), per("mlp.c_fc.bias"),
              per("mlp.c_proj.weight", np.transpose), per("mlp.c_proj.bias"),
              p[t + "ln_f.weight"], p[t + "ln_f.bias"]]
    header = np.zeros(256, np.int32)
    header[:8] = [20240326, version, ctx, V, L, H, C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for g in groups:
            g = np.ascontiguousarray(g, np.float32)
            f.write(bf16(g)[0].tobytes() if version == 5 else g.tobytes())


@pytest.mark.parametrize("version", [3, 5, 1])
def test_llmc_checkpoints_match_numpy(tmp_path, version):
    rng = np.random.default_rng(10 + version)
    L, H, C, V, ctx = 2, 2, 8, 37, 16
    p = gpt2_params(rng, L, H, C, V, ctx)
    if version == 5:  # what the file can hold
        p = {k: bf16(v)[1] for k, v in p.items()}
    llmc_file(tmp_path / "gpt2.bin", p, L, H, C, V, ctx, version)
    model = import_model(tmp_path, tmp_path / "gpt2.bin")
    recs = {r.name: r for r in atsfmt.read(model.read_bytes())}
    assert "lm_head" not in recs and recs["wte"].dims == (V, C)
    tokens = rng.integers(0, V, (2, 9)).astype(np.int32)
    logits = model_logits(tmp_path, model, tokens)
    assert rel_err(logits, gpt2_forward(p, tokens, L, H)) <= TOL


def test_bad_llmc_checkpoints_are_refused(tmp_path):
    rng = np.random.default_rng(14)
    p = gpt2_params(rng, 1, 2, 8, 20, 8)
    f = tmp_path / "gpt2.bin"
    llmc_file(f, p, 1, 2, 8, 20, 8)
    whole = f.read_bytes()
    for data, needle in ((whole[:-4], "need"), (whole[:1000], "header"),
                         (whole[:4] + struct.pack("<i", 7) + whole[8:],
                          "version 7"),
                         (whole[:20] + struct.pack("<i", 3) + whole[24:],
                          "multiple"),
                         (whole[:16] + struct.pack("<i", 4097) + whole[20:],
                          "is 4097, not in 1..4096")):
        f.write_bytes(data)
        msg = one_line_error(run("import", f, "-o", tmp_path / "o.ats",
                                 check=1), "import")
        assert "gpt2.bin" in msg and needle in msg, (needle, msg)
        assert not (tmp_path / "o.ats").exists()


# ---- andrea-export ----

def load_safetensors(path):
    """name -> array, through the safetensors package where it is, else a
    reader written here."""
    if st_numpy is not None:
        return st_numpy.load_file(str(path))
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for name, e in json.loads(raw[8:8 + n]).items():
        if name != "__metadata__":
            a, b = e["data_offsets"]
            out[name] = np.frombuffer(raw[8 + n + a:8 + n + b],
                                      np.float32).reshape(e["shape"])
    return out


@pytest.mark.parametrize("biases,tied", [(False, False), (True, True)])
def test_export_writes_what_hf_gpt2_reads(tmp_path, biases, tied):
    """An andrea model exported: the files hold GPT2LMHeadModel's names and
    shapes, and a GPT-2 forward in those names gives andrea's logits; the
    config says whether the head is tied.  Imported back, the logits are
    the same again."""
    from test_model_filters import full_model
    rng = np.random.default_rng(12 + biases)
    L, H, C, V = 2, 2, 8, 41
    model, _ = full_model(tmp_path, rng, L, H, C, V, 16, biases=biases,
                          tied=tied)
    out = tmp_path / "hf"
    run("export", "-m", model, out, check=0)
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"],
            cfg["vocab_size"]) == (L, H, C, 16, V)
    assert cfg["tie_word_embeddings"] == tied
    assert cfg["activation_function"] == "gelu_new"
    hf = load_safetensors(out / "model.safetensors")
    assert ("lm_head.weight" in hf) == (not tied)
    assert hf["transformer.h.1.attn.c_attn.weight"].shape == (C, 3 * C)
    if not biases:
        assert not hf["transformer.h.0.mlp.c_fc.bias"].any()
    tokens = rng.integers(0, V, (2, 7)).astype(np.int32)
    ours = model_logits(tmp_path, model, tokens)
    assert rel_err(ours, gpt2_forward(hf, tokens, L, H)) <= TOL
    back = import_model(tmp_path, out)
    assert rel_err(model_logits(tmp_path, back, tokens), ours) <= TOL
