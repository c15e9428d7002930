"""andrea-lens against NumPy: the logit lens (every layer's stream through
LNf and the head, top-k per position) and direct logit attribution (each
head's share of the last position's logit difference), whose shares plus
the rest (embedding, biases, MLPs, LNf's bias), computed apart here, make
the logit difference."""
import numpy as np
import pytest

import oracle
from conftest import run, one_line_error
from stagekit import pack
from test_capture import block_acts
from test_model_filters import full_model
from test_train import records


# D = 4, and D = 1 at T = 1 and at T = 9
@pytest.mark.parametrize("biases,tied,H,C,T", [
    (False, False, 3, 12, 6), (True, True, 3, 12, 6), (False, True, 3, 3, 1),
    (True, False, 2, 2, 9)])
def test_lens_and_attribution_match_numpy(tmp_path, biases, tied, H, C, T):
    rng = np.random.default_rng(2 + biases + C + T)
    L, V = 2, 40
    D = C // H
    model, p = full_model(tmp_path, rng, L, H, C, V, 16, biases=biases, tied=tied)
    tokens = rng.integers(0, V, (2, T)).astype(np.int32)
    A, W = 7, 19
    out = tmp_path / "lens.ats"
    out.write_bytes(run("lens", "-m", model, "--top", 4, "--token", A, "--versus", W,
                        "--device", "cpu", input=pack(tmp_path, [("tokens", tokens)]),
                        check=0).stdout)
    recs = {r[0]: (r[1], r[2]) for r in records(out)}
    # the stream after the embedding and each block, and each head's share
    x = oracle.embed(tokens, p["wte"], p["wpe"])
    streams, parts, shares = [x], [x], np.zeros((L, H, 2, C))
    for l in range(L):
        a = block_acts(x, p, l, H)
        wo = p[f"layers.{l}.attn.wo"].astype(np.float64)
        for h in range(H):
            shares[l, h] = a["out"][:, h, -1] @ wo[h * D:(h + 1) * D]
        if biases:
            parts.append(np.broadcast_to(p[f"layers.{l}.attn.bo"], x.shape))
        parts.append(a["mlp"])
        x = a["x"]
        streams.append(x)
    lens_ids, lens_vals = recs["lens_tokens"][1], recs["lens_logits"][1]
    for l, s in enumerate(streams):
        z = oracle.logits(s, p)
        order = np.argsort(-z, -1)[..., :4]
        assert np.array_equal(lens_ids[l], order), l
        assert np.allclose(lens_vals[l], np.take_along_axis(z, order, -1), atol=1e-4)
    head = p["lm_head"] if "lm_head" in p else p["wte"].T
    u = head[:, A].astype(np.float64) - head[:, W]
    last = x[:, -1]
    rstd = 1 / np.sqrt(last.var(-1) + 1e-5)
    share = lambda r: (((r - r.mean(-1, keepdims=True)) * rstd[:, None]
                        * p["lnf.weight"]) @ u).mean()
    attrs, got = recs["attribution"]
    assert attrs["axes"] == "layer,head"
    want = np.array([[share(shares[l, h]) for h in range(H)] for l in range(L)])
    assert np.allclose(got, want, atol=1e-5)
    logit = oracle.logits(x, p)[:, -1]
    assert abs(float(attrs["logit"]) - (logit[:, A] - logit[:, W]).mean()) <= 1e-5
    rest = sum(share(part[:, -1]) for part in parts) + p["lnf.bias"] @ u
    assert abs(float(attrs["rest"]) - rest) <= 1e-5
    assert abs(got.sum() + float(attrs["rest"]) - float(attrs["logit"])) <= 1e-5


def test_bad_lens_options(tmp_path):
    rng = np.random.default_rng(9)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 20, 8)
    s = pack(tmp_path, [("tokens", np.array([[1, 2]], np.int32))])
    p = run("lens", "-m", model, "--token", 25, input=s, check=2)
    assert "--token 25: the model has V=20" in one_line_error(p, "lens")
    p = run("lens", "-m", model, "--versus", 3, input=s, check=2)
    one_line_error(p, "lens")


@pytest.mark.parametrize("tool", ["lens", "heads", "patch"])
def test_token_streams_cut_short_or_ragged_are_refused(tmp_path, tool):
    """lens, heads and patch take a stream's first tokens record but read
    the stream to its end: one cut short (inside a later record) is an
    error, as everywhere; and a padded batch (the lengths attribute of
    andrea-embed --lines) is refused rather than read as whole rows."""
    rng = np.random.default_rng(11)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 20, 8)
    t = np.array([[1, 2, 3], [4, 5, 0]], np.int32)
    good = pack(tmp_path, [("tokens", t), ("x", np.ones((2, 3, 8), np.float32))])
    ragged = pack(tmp_path, [("tokens", t)], attrs=["tokens:lengths=3,2"])
    whole = pack(tmp_path, [("tokens", t)], attrs=["tokens:lengths=3,3"])

    def run_on(stream, check):
        f = tmp_path / "in.ats"
        f.write_bytes(stream)
        args = {"lens": [f], "heads": ["--table", f],
                "patch": ["--clean", f, "--corrupted", f, "--answer", 1,
                          "--wrong", 2]}[tool]
        return run(tool, "-m", model, "--device", "cpu", *args, check=check)

    run_on(good, 0)
    run_on(whole, 0)
    err = one_line_error(run_on(good[:-30], 1), tool)
    assert "record 2 'x'" in err, err
    err = one_line_error(run_on(ragged, 1), tool)
    assert "record 1 'tokens': row 1 holds 2 of its 3 positions" in err, err
