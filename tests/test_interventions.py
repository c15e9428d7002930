"""The hook points added to capture (result, the heads' shares of y; embed,
lnf and logits, the model's) and position selectors of --capture,
--ablate and --patch, against the float64 NumPy model of test_capture."""
import numpy as np
import pytest

import oracle
from conftest import run, one_line_error
from stagekit import pack
from test_capture import block_acts, recs_of
from test_model_filters import full_model
from test_train import records

CPU = ("--device", "cpu")


def result_of(acts, p, layer, H):
    """[B,H,T,C]: head h's out times its D rows of Wo."""
    wo = p[f"layers.{layer}.attn.wo"].astype(np.float64)
    out = acts["out"]
    D = out.shape[-1]
    return np.stack([out[:, h] @ wo[h * D:(h + 1) * D] for h in range(H)], 1)


@pytest.mark.parametrize("B,T,H,C,biases", [(2, 5, 3, 12, True), (1, 1, 1, 4, False),
                                            (3, 9, 4, 8, False)])
def test_result_is_each_heads_share_of_y(tmp_path, B, T, H, C, biases):
    rng = np.random.default_rng(T * 7 + H)
    L = 2
    model, p = full_model(tmp_path, rng, L, H, C, 30, 16, biases=biases)
    x = (0.5 * rng.standard_normal((B, T, C))).astype(np.float32)
    recs = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                 "--capture", "result", "--capture", "y",
                                 input=pack(tmp_path, [("x", x)]), check=0).stdout)
    assert [(r[0], r[1]["layer"]) for r in recs[:-1]] == \
        [(n, str(l)) for l in range(L) for n in ("result", "y")]
    cur = x.astype(np.float64)
    for l in range(L):
        acts = block_acts(cur, p, l, H)
        res = recs[2 * l][2]
        assert res.shape == (B, H, T, C)
        assert oracle.rel_err(res, result_of(acts, p, l, H)) <= 1e-5
        bo = p.get(f"layers.{l}.attn.bo", np.zeros(C)).astype(np.float64)
        # the shares and bo sum to y
        assert oracle.rel_err(res.astype(np.float64).sum(1) + bo, acts["y"]) <= 1e-5
        assert oracle.rel_err(recs[2 * l + 1][2], acts["y"]) <= 1e-5
        cur = acts["x"]
    assert oracle.rel_err(recs[-1][2], cur) <= 1e-5


def test_capturing_result_changes_nothing_downstream(tmp_path):
    rng = np.random.default_rng(11)
    model, _ = full_model(tmp_path, rng, 2, 2, 8, 30, 16)
    s = pack(tmp_path, [("x", (0.5 * rng.standard_normal((2, 6, 8))).astype(np.float32))])
    plain = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU, input=s,
                                  check=0).stdout)[-1][2]
    with_result = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                        "--capture", "result:1:0", input=s,
                                        check=0).stdout)
    assert with_result[0][1]["head"] == "0" and with_result[0][2].shape == (2, 1, 6, 8)
    assert np.array_equal(with_result[-1][2], plain)  # looking changes no bit


def test_positions_select_along_t(tmp_path):
    """@POSITIONS keeps those positions (query rows of attn), named by a
    positions attribute; those beyond the pass's T are not there."""
    rng = np.random.default_rng(12)
    model, p = full_model(tmp_path, rng, 2, 2, 8, 30, 16)
    x = (0.5 * rng.standard_normal((2, 7, 8))).astype(np.float32)
    s = pack(tmp_path, [("x", x)])
    full = {(r[0], r[1]["layer"], r[1].get("head")): r[2] for r in recs_of(
        tmp_path, run("block", "-m", model, "-l", "all", *CPU, "--capture", "attn",
                      "--capture", "xmid", input=s, check=0).stdout)[:-1]}
    recs = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                 "--capture", "attn:1:0@1-2,5", "--capture",
                                 "xmid:0@6,9-12", "--capture", "xmid:1@20",
                                 input=s, check=0).stdout)
    (n0, a0, d0), (n1, a1, d1) = recs[0], recs[1]
    assert (n0, a0["layer"], a0["positions"]) == ("xmid", "0", "6")
    assert np.array_equal(d0, full[("xmid", "0", None)][:, [6]])
    assert (n1, a1["layer"], a1["head"], a1["positions"]) == ("attn", "1", "0", "1-2,5")
    assert np.array_equal(d1, full[("attn", "1", None)][:, [0]][:, :, [1, 2, 5]])
    assert len(recs) == 3  # xmid:1@20 is beyond T = 7: no record


def test_ablating_at_positions_matches_numpy(tmp_path):
    rng = np.random.default_rng(13)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 30, 16)
    x = (0.5 * rng.standard_normal((3, 6, C))).astype(np.float32)
    got = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                "--ablate", "1.1@2-3", "--ablate", "0.0@0,5:mean",
                                input=pack(tmp_path, [("x", x)]), check=0).stdout)[-1][2]

    def layer(cur, l, h, pos, mean):
        a = block_acts(cur, p, l, H)
        out = a["out"].copy()
        for t in pos:
            out[:, h, t] = out[:, h, t].mean(0) if mean else 0
        pre = f"layers.{l}."
        g = lambda n: p[pre + n].astype(np.float64)
        xmid = cur + oracle.merge_heads(out) @ g("attn.wo")
        f = oracle.gelu(oracle.layernorm(xmid, g("ln2.weight"), g("ln2.bias")) @ g("mlp.fc"))
        return xmid + f @ g("mlp.proj")
    cur = layer(x.astype(np.float64), 0, 0, [0, 5], True)
    cur = layer(cur, 1, 1, [2, 3], False)
    assert oracle.rel_err(got, cur) <= 1e-5


def test_patching_at_positions(tmp_path):
    """--patch FILE@P puts back only P; a capture made @P patches the same;
    a positions capture of another T is refused, naming the record."""
    rng = np.random.default_rng(14)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 30, 16)
    clean = (0.5 * rng.standard_normal((2, 6, C))).astype(np.float32)
    corrupt = (0.5 * rng.standard_normal((2, 6, C))).astype(np.float32)
    s_clean, s_corrupt = (pack(tmp_path, [("x", v)]) for v in (clean, corrupt))
    cap = tmp_path / "clean.ats"
    cap.write_bytes(run("block", "-m", model, "-l", "all", *CPU, "--capture", "x:0",
                        input=s_clean, check=0).stdout)
    some = tmp_path / "some.ats"
    some.write_bytes(run("block", "-m", model, "-l", "all", *CPU, "--capture",
                         "x:0@1,4", input=s_clean, check=0).stdout)
    by_file = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU, "--patch",
                                    f"{cap}@1,4", input=s_corrupt, check=0).stdout)[-1][2]
    by_capture = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                       "--patch", some, input=s_corrupt,
                                       check=0).stdout)[-1][2]
    x0_clean = block_acts(clean.astype(np.float64), p, 0, H)["x"]
    x0 = block_acts(corrupt.astype(np.float64), p, 0, H)["x"]
    x0[:, [1, 4]] = x0_clean[:, [1, 4]]
    want = block_acts(x0, p, 1, H)["x"]
    assert oracle.rel_err(by_file, want) <= 1e-5
    assert np.array_equal(by_file, by_capture)
    short = pack(tmp_path, [("x", corrupt[:, :3])])
    e = run("block", "-m", model, "-l", "all", *CPU, "--patch", some, input=short,
            check=1)
    assert "--patch: 'x' of layer 0 at positions 1,4 is [2,2,8], but this run's is " \
        "[2,3,8]" in one_line_error(e, "block")


def test_a_patch_file_named_with_an_at_sign(tmp_path):
    """FILE@P is FILE at positions P, unless a file of the whole name is
    there."""
    rng = np.random.default_rng(17)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 30, 16)
    x = pack(tmp_path, [("x", (0.5 * rng.standard_normal((1, 4, 8))).astype(np.float32))])
    y = pack(tmp_path, [("x", (0.5 * rng.standard_normal((1, 4, 8))).astype(np.float32))])
    odd = tmp_path / "run@3"
    odd.write_bytes(run("block", "-m", model, *CPU, "--capture", "out", input=x,
                        check=0).stdout)
    whole = recs_of(tmp_path, run("block", "-m", model, *CPU, "--patch", odd, input=y,
                                  check=0).stdout)[-1][2]
    plain = tmp_path / "plain.ats"
    plain.write_bytes(odd.read_bytes())
    want = recs_of(tmp_path, run("block", "-m", model, *CPU, "--patch", plain, input=y,
                                 check=0).stdout)[-1][2]
    at3 = recs_of(tmp_path, run("block", "-m", model, *CPU, "--patch", f"{plain}@3",
                                input=y, check=0).stdout)[-1][2]
    assert np.array_equal(whole, want)  # every position: the file run@3
    assert not np.array_equal(at3, want)
    p = run("block", "-m", model, *CPU, "--patch", tmp_path / "gone@3", input=y, check=1)
    assert "gone" in one_line_error(p, "block")


def test_generate_refuses_positions_in_decoding_steps(tmp_path):
    rng = np.random.default_rng(18)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 257, 16)
    p = run("generate", "-m", model, "--prompt", "a", "-n", 1, "--capture", "x@2",
            "--capture-file", tmp_path / "c.ats", *CPU, check=2)
    assert "positions count within a pass" in one_line_error(p, "generate")
    run("generate", "-m", model, "--prompt", "ab", "-n", 1, "--no-cache", "--capture",
        "x@2", "--capture-file", tmp_path / "c.ats", *CPU, check=0)


def test_the_models_own_hook_points_in_generate(tmp_path):
    """embed of the prompt's pass (all but its last token, which the first
    decoding step takes), and embed, lnf and logits of that step, against
    NumPy."""
    rng = np.random.default_rng(15)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 257, 32, biases=True)
    cap = tmp_path / "g.ats"
    run("generate", "-m", model, "--prompt", "hi!", "-n", 1, "--temperature", 0,
        "--capture", "embed", "--capture", "lnf", "--capture", "logits",
        "--capture-file", cap, *CPU, check=0)
    recs = [r for r in records(cap) if r[1].get("step") in ("prompt", "0")]
    assert [(r[0], r[1]["step"]) for r in recs] == \
        [("embed", "prompt"), ("embed", "0"), ("lnf", "0"), ("logits", "0")]
    assert all("layer" not in r[1] for r in recs)
    tok = np.array([[256] + list(b"hi!")])
    x = oracle.embed(tok, p["wte"], p["wpe"])
    assert oracle.rel_err(recs[0][2], x[:, :3]) <= 1e-6
    assert oracle.rel_err(recs[1][2], x[:, 3:]) <= 1e-6
    recs = recs[1:]
    for l in range(L):
        x = block_acts(x, p, l, H)["x"]
    ln = oracle.layernorm(x[:, -1:], p["lnf.weight"].astype(np.float64),
                          p["lnf.bias"].astype(np.float64))
    assert oracle.rel_err(recs[1][2], ln) <= 1e-5
    assert oracle.rel_err(recs[2][2], oracle.logits(x, p)[:, -1:]) <= 1e-5


@pytest.mark.parametrize("args,code,says", [
    (["--capture", "embed:0"], 2, "embed is the model's, not a layer's"),
    (["--capture", "attn@"], 2, "expected @POSITIONS"),
    (["--capture", "attn@3-1"], 2, "expected @POSITIONS"),
    (["--capture", "x:0@1:2"], 2, "expected NAME[:LAYERS[:HEADS]][@POSITIONS]"),
    (["--ablate", "0.1@"], 2, "expected @POSITIONS"),
    (["--ablate", "0.1@2:median"], 2, "expected LAYER.HEAD[@POSITIONS]"),
    (["--capture", "lnf"], 2, "andrea-block runs no embedding or head"),
    (["--capture", "result:0:3"], 1, "--capture result: head 3: the model has 2 heads"),
    (["--capture", "x@" + ",".join(str(i) for i in range(40))], 2, "at most 32 ranges"),
])
def test_bad_selectors(tmp_path, args, code, says):
    rng = np.random.default_rng(16)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 30, 16)
    x = np.zeros((1, 2, 8), np.float32)
    p = run("block", "-m", model, *CPU, *args, input=pack(tmp_path, [("x", x)]),
            check=code)
    assert says in one_line_error(p, "block")
