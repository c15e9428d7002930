"""andrea-patch against NumPy: the layer x head sweep (each head's output
from the clean run into the corrupted one) and the layer x position sweep
(the residual stream entering each layer, one position at a time), as the
normalised logit-difference effect."""
import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack
from test_capture import block_acts
from test_model_filters import full_model

CPU = ("--device", "cpu")


def clean_and_corrupted(tmp, rng, V, T, pos, shift):
    """Two rows of T random tokens below V and the same with position pos
    shifted by shift, written as tmp/c.ats and tmp/k.ats."""
    clean = rng.integers(0, V, (2, T)).astype(np.int32)
    corrupt = clean.copy()
    corrupt[:, pos] = (corrupt[:, pos] + shift) % V
    (tmp / "c.ats").write_bytes(pack(tmp, [("tokens", clean)]))
    (tmp / "k.ats").write_bytes(pack(tmp, [("tokens", corrupt)]))
    return clean, corrupt


def logits_with(tokens, p, L, H, patch=None):
    """Logits [B,T,V]; patch(l, name, array) may change the block's out
    (name 'out') or the x entering layer l (name 'pre')."""
    x = oracle.embed(tokens, p["wte"], p["wpe"])
    for l in range(L):
        if patch:
            x = patch(l, "pre", x)
        pre = f"layers.{l}."
        a = block_acts(x, p, l, H)
        out = patch(l, "out", a["out"].copy()) if patch else a["out"]
        y = oracle.product(oracle.merge_heads(out), p, pre + "attn.wo", pre + "attn.bo")
        xmid = x + y
        g = lambda n: p[pre + n].astype(np.float64)
        ln2 = oracle.layernorm(xmid, g("ln2.weight"), g("ln2.bias"))
        f = oracle.gelu(oracle.product(ln2, p, pre + "mlp.fc", pre + "mlp.bfc"))
        x = xmid + oracle.product(f, p, pre + "mlp.proj", pre + "mlp.bproj")
    return oracle.logits(x, p)


def clean_acts(tokens, p, L, H):
    outs, pres = {}, {}

    def keep(l, name, a):
        (outs if name == "out" else pres)[l] = a.copy()
        return a
    logits_with(tokens, p, L, H, keep)
    return outs, pres


# D = 4 at T = 7 (position 2 corrupted), D = 1 at T = 1
@pytest.mark.parametrize("H,C,T,pos", [(3, 12, 7, 2), (2, 2, 1, 0)])
@pytest.mark.parametrize("sweep", ["heads", "positions"])
def test_sweeps_match_numpy(tmp_path, sweep, H, C, T, pos):
    rng = np.random.default_rng((1 if sweep == "heads" else 2) + T)
    L, V = 2, 40
    model, p = full_model(tmp_path, rng, L, H, C, V, 16)
    clean, corrupt = clean_and_corrupted(tmp_path, rng, V, T, pos, 5)
    A, W = 3, 11
    stream = run("patch", "-m", model, "--clean", tmp_path / "c.ats",
                 "--corrupted", tmp_path / "k.ats", "--answer", A, "--wrong", W,
                 "--sweep", sweep, *CPU, check=0).stdout
    out = unpack(tmp_path, stream)["effect"]
    assert dict(atsfmt.read(stream)[0].attrs)["axes"] == (
        "layer,head" if sweep == "heads" else "layer,position")
    metric = lambda lg: (lg[:, -1, A] - lg[:, -1, W]).mean()
    m_clean = metric(logits_with(clean, p, L, H))
    m_corrupt = metric(logits_with(corrupt, p, L, H))
    outs, pres = clean_acts(clean, p, L, H)
    width = H if sweep == "heads" else T
    want = np.zeros((L, width))
    for l in range(L):
        for i in range(width):
            def put(layer, name, a):
                if layer == l and name == "out" and sweep == "heads":
                    a[:, i] = outs[l][:, i]
                if layer == l and name == "pre" and sweep == "positions":
                    a = a.copy()
                    a[:, i] = pres[l][:, i]
                return a
            want[l, i] = (metric(logits_with(corrupt, p, L, H, put)) - m_corrupt) \
                / (m_clean - m_corrupt)
    assert out.shape == (L, width)
    assert np.allclose(out, want, atol=1e-4), (out, want)
    if sweep == "positions":  # the corrupted position of layer 0 restores it all
        assert abs(out[0, pos] - 1) < 1e-4
        assert np.allclose(out[0, :pos], 0, atol=1e-4)


def test_table_and_bad_input(tmp_path):
    rng = np.random.default_rng(3)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 20, 8)
    t = np.array([[1, 2, 3]], np.int32)
    (tmp_path / "a.ats").write_bytes(pack(tmp_path, [("tokens", t)]))
    (tmp_path / "b.ats").write_bytes(pack(tmp_path, [("tokens", t[:, :2])]))
    (tmp_path / "c.ats").write_bytes(pack(tmp_path, [("tokens", t[:, ::-1].copy())]))
    table = run("patch", "-m", model, "--clean", tmp_path / "a.ats", "--corrupted",
                tmp_path / "c.ats", "--answer", 1, "--wrong", 2, "--table", *CPU,
                check=0).stdout.decode().splitlines()
    assert table[1].split() == ["layer", "head", "effect"] and len(table) == 4
    p = run("patch", "-m", model, "--clean", tmp_path / "a.ats", "--corrupted",
            tmp_path / "b.ats", "--answer", 1, "--wrong", 2, *CPU, check=1)
    assert "same shape" in one_line_error(p, "patch")
    p = run("patch", "-m", model, "--clean", tmp_path / "a.ats", "--corrupted",
            tmp_path / "c.ats", "--answer", 99, "--wrong", 2, *CPU, check=2)
    assert "--answer 99: the model has V=20" in one_line_error(p, "patch")
    p = run("patch", "-m", model, "--clean", tmp_path / "a.ats", check=2)
    one_line_error(p, "patch")
    p = run("patch", "-m", model, "--clean", "-", "--corrupted", "-",
            "--answer", 1, "--wrong", 2, *CPU, input=b"", check=2)
    assert "standard input (-) can be read only once" in \
        one_line_error(p, "patch")
    bad = tmp_path / "bad.ats"
    bad.write_bytes(pack(tmp_path, [("x", np.zeros(1, np.float32)),
                                    ("tokens", np.array([[1, -5, 3]],
                                                        np.int32))]))
    p = run("patch", "-m", model, "--clean", tmp_path / "a.ats", "--corrupted",
            bad, "--answer", 1, "--wrong", 2, *CPU, check=1)
    assert f"{bad}: record 2 'tokens': token -5 at [0,1]" in \
        one_line_error(p, "patch")
    p = run("patch", "-m", model, "--clean", tmp_path / "a.ats", "--corrupted",
            tmp_path / "c.ats", "--answer", 1, "--wrong", 2, "--device", "bogus",
            check=2)
    one_line_error(p, "patch")
