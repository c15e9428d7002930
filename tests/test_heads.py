"""andrea-heads against a float64 NumPy model: every head's previous-token,
duplicate-token and induction scores, first-position mass and entropy,
and the second-half loss of the repeated random sequence; a hand-built
previous-token head is found as one."""
import numpy as np
import pytest

import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack
from test_model_filters import full_model
from test_train import records

NAMES = ["prev", "dup", "induction", "first", "entropy"]


def attentions(tokens, p, L, H):
    """Each layer's attention [B,H,T,T] in float64."""
    x = oracle.embed(tokens, p["wte"], p["wpe"])
    out = []
    for layer in range(L):
        out.append(oracle.softmax(oracle.mask(oracle.scores(*oracle.qkv(x, p, layer, H)[:2]))))
        x = oracle.block(x, p, layer, H)
    return out


def scores(att, tokens):
    """The five scores of andrea-heads(1) from one layer's attention."""
    B, H, T, _ = att.shape
    out = np.zeros((H, 5))
    for h in range(H):
        sums, counts = np.zeros(5), np.zeros(5)
        for b in range(B):
            t = tokens[b]
            for i in range(T):
                a = att[b, h, i, :i + 1]
                sums[4] += -(a[a > 0] * np.log(a[a > 0])).sum()
                counts[4] += 1
                if i >= 1:
                    sums[0] += a[i - 1]
                    sums[3] += a[0]
                    counts[0] += 1
                    counts[3] += 1
                dup = [j for j in range(i) if t[j] == t[i]]
                if dup:
                    sums[1] += a[dup].sum()
                    counts[1] += 1
                ind = [j for j in range(1, i) if t[j - 1] == t[i]]
                if ind:
                    sums[2] += a[ind].sum()
                    counts[2] += 1
        with np.errstate(invalid="ignore"):
            out[h] = sums / counts
    return out


def second_half_loss(logits, tokens, n):
    B, T, _ = logits.shape
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.mean([logp[b, i, tokens[b, i + 1]] for b in range(B)
                     for i in range(T - n, T - 1)])


@pytest.mark.parametrize("L,H,C,n,B", [(2, 3, 12, 9, 3), (1, 1, 4, 1, 1),
                                       (3, 2, 8, 13, 2)])
def test_scores_and_loss_match_numpy_on_a_repeated_random_sequence(tmp_path, L, H, C, n, B):
    rng = np.random.default_rng(L * 10 + n)
    model, p = full_model(tmp_path, rng, L, H, C, 300, 40)
    stream = run("heads", "-m", model, "--random", n, "--batch", B,
                 "--sequence-seed", 5, check=0).stdout
    out = unpack(tmp_path, stream)
    tokens = out["tokens"].astype(np.int64)
    assert tokens.shape == (B, 2 * n + 1) and np.all(tokens[:, 0] == 256)
    assert np.array_equal(tokens[:, 1:n + 1], tokens[:, n + 1:])
    want = np.stack([scores(a, tokens) for a in attentions(tokens, p, L, H)])
    for k, name in enumerate(NAMES):
        assert out[name].shape == (L, H)
        assert np.allclose(out[name], want[..., k], atol=2e-6, equal_nan=True), name
    (tmp_path / "h.ats").write_bytes(stream)
    recs = {name: attrs for name, attrs, _ in records(tmp_path / "h.ats")}
    assert all(recs[name]["axes"] == "layer,head" for name in NAMES)
    if n == 1:  # one token repeated: no position of the second half has a next
        assert "loss" not in recs["induction"]
        return
    loss = float(recs["induction"]["loss"])
    ref = second_half_loss(oracle.forward(tokens, p, L, H), tokens, n)
    assert abs(loss - ref) <= 1e-5 * abs(ref)


def test_scores_of_given_tokens_and_the_table(tmp_path):
    """Tokens from a stream, --tokens or --text (T = 1 too); --table prints
    what the records hold, to four decimals; a model with GPT-2's biases."""
    rng = np.random.default_rng(3)
    model, p = full_model(tmp_path, rng, 2, 2, 8, 300, 32, biases=True)
    ids = np.array([[5, 9, 5, 9, 7, 5, 9], [1, 2, 3, 1, 2, 3, 4]], np.int32)
    s = pack(tmp_path, [("tokens", ids)])
    out = unpack(tmp_path, run("heads", "-m", model, "--device", "cpu", input=s,
                               check=0).stdout)
    want = np.stack([scores(a, ids) for a in attentions(ids, p, 2, 2)])
    for k, name in enumerate(NAMES):
        assert np.allclose(out[name], want[..., k], atol=2e-6), name
    table = run("heads", "-m", model, "--device", "cpu", "--table", "-",
                input=s, check=0).stdout.decode().splitlines()
    assert table[0].split() == ["layer", "head"] + NAMES and len(table) == 5
    for line in table[1:]:
        l, h, *vals = line.split()
        assert np.allclose([float(v) for v in vals], want[int(l), int(h)], atol=6e-5)
    one = unpack(tmp_path, run("heads", "-m", model, "--device", "cpu",
                               "--tokens", "7", check=0).stdout)
    assert np.isnan(one["prev"]).all() and np.allclose(one["entropy"], 0)
    text = unpack(tmp_path, run("heads", "-m", model, "--device", "cpu", "--text",
                                input=b"abcab", check=0).stdout)
    assert text["tokens"].tolist() == [list(b"abcab")]


def test_a_hand_built_previous_token_head_is_found(tmp_path):
    """Head 0 of layer 0 built to look one position back (one-hot position
    embeddings; Wq shifts a position's code to its predecessor's, Wk keeps
    it): it scores at least 0.95, head 1 (no queries or keys: uniform
    attention) under 0.2."""
    T, C, H = 32, 64, 2
    D = C // H
    rng = np.random.default_rng(4)
    model, p = full_model(tmp_path, rng, 1, H, C, 257, T)
    p = {k: np.zeros_like(v) for k, v in p.items()}
    p["layers.0.ln1.weight"] = p["layers.0.ln2.weight"] = p["lnf.weight"] = \
        np.ones(C, np.float32)
    p["wpe"] = np.eye(T, C, dtype=np.float32)
    for i in range(1, T):
        p["layers.0.attn.wq"][i, i - 1] = 8  # head 0: columns 0..D-1
    for i in range(D):
        p["layers.0.attn.wk"][i, i] = 8
    p["lm_head"] = rng.standard_normal((C, 257)).astype(np.float32)
    path = tmp_path / "prev.ats"
    attrs = [f"config:{k}={v}" for k, v in
             dict(n_layer=1, n_head=H, d_model=C, ctx=T, vocab=257).items()]
    path.write_bytes(pack(tmp_path, [("config", np.zeros(0, np.int32))] +
                          list(p.items()), attrs))
    out = unpack(tmp_path, run("heads", "-m", path, "--random", 15, "--batch", 2,
                               check=0).stdout)
    assert out["prev"][0, 0] >= 0.95 and out["prev"][0, 1] < 0.2, out["prev"]


def test_bad_input_is_one_line(tmp_path):
    rng = np.random.default_rng(5)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 300, 16)
    p = run("heads", "-m", model, "--random", 20, check=1)  # 41 > ctx 16
    assert "41 positions (twice the sequence and BOS) exceed the model's context of 16" \
        in one_line_error(p, "heads")
    # V 20 has no room for BOS (256): 2 x 8 positions fill a context of 16
    small, _ = full_model(tmp_path, rng, 1, 2, 8, 20, 16)
    run("heads", "-m", small, "--random", 8, "--table", check=0)
    p = run("heads", "-m", small, "--random", 9, check=1)
    assert "18 positions (twice the sequence) exceed the model's context of 16" \
        in one_line_error(p, "heads")
    p = run("heads", "-m", model, "--tokens", "1,999", check=1)
    assert "token 999" in one_line_error(p, "heads")
    p = run("heads", "-m", model, "--table", "-o", tmp_path / "x", check=2)
    one_line_error(p, "heads")
