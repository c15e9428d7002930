"""andrea-block --capture and --ablate against a float64 NumPy model
written here from andrea-model(5): every hook point by name, layer and
head, records streamed ahead of the x they lead to; zero and mean
ablation of heads; zero-ablating every head of a layer is the block
without its attention sublayer."""
import os

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error
from stagekit import pack
from test_model_filters import full_model
from test_train import records

CPU = ("--device", "cpu")


def block_acts(x, p, layer, H, ablate=()):
    """Every activation of one block, float64, in the hook's order; ablate:
    (head, mean) pairs applied to out."""
    pre = f"layers.{layer}."
    g = lambda n: p[pre + n].astype(np.float64)
    a = {"ln1": oracle.layernorm(x, g("ln1.weight"), g("ln1.bias"))}
    a["q"], a["k"], a["v"] = (oracle.split_heads(oracle.product(a["ln1"], p, pre + "attn.w" + m,
                                                                pre + "attn.b" + m), H)
                              for m in "qkv")
    a["scores"] = oracle.mask(oracle.scores(a["q"], a["k"]))
    a["attn"] = oracle.softmax(a["scores"])
    out = oracle.attend(a["attn"], a["v"])
    for h, mean in ablate:
        out[:, h] = out[:, h].mean(0, keepdims=True) if mean else 0
    a["out"] = out
    a["y"] = oracle.product(oracle.merge_heads(out), p, pre + "attn.wo", pre + "attn.bo")
    a["xmid"] = x + a["y"]
    a["ln2"] = oracle.layernorm(a["xmid"], g("ln2.weight"), g("ln2.bias"))
    a["fc"] = oracle.product(a["ln2"], p, pre + "mlp.fc", pre + "mlp.bfc")
    a["gelu"] = oracle.gelu(a["fc"])
    a["mlp"] = oracle.product(a["gelu"], p, pre + "mlp.proj", pre + "mlp.bproj")
    a["x"] = a["xmid"] + a["mlp"]
    return a


def recs_of(tmp, stream):
    path = tmp / "cap.ats"
    path.write_bytes(stream)
    return records(path)


NAMES = ["ln1", "q", "k", "v", "scores", "attn", "out", "y", "xmid", "ln2",
         "fc", "gelu", "mlp", "x"]


@pytest.mark.parametrize("B,T,biases", [(2, 7, False), (1, 1, True), (3, 13, True)])
def test_every_hook_point_matches_numpy(tmp_path, B, T, biases):
    L, H, C = 2, 3, 12
    rng = np.random.default_rng(B * 10 + T)
    model, p = full_model(tmp_path, rng, L, H, C, 50, 16, biases=biases)
    x = (0.5 * rng.standard_normal((B, T, C))).astype(np.float32)
    out = run("block", "-m", model, "-l", "all", *CPU,
              *[a for n in NAMES for a in ("--capture", n)],
              input=pack(tmp_path, [("x", x)]), check=0).stdout
    recs = recs_of(tmp_path, out)
    # in the order computed, each layer's, then the x of the last block
    assert [(r[0], r[1]["layer"]) for r in recs] == \
        [(n, str(l)) for l in range(L) for n in NAMES] + [("x", "1")]
    want, cur = {}, x.astype(np.float64)
    for l in range(L):
        acts = block_acts(cur, p, l, H)
        want.update({(n, str(l)): v for n, v in acts.items()})
        cur = acts["x"]
    for name, attrs, got in recs[:-1]:
        ref = want[(name, attrs["layer"])]
        assert got.shape == ref.shape, name
        assert oracle.rel_err(got, ref) <= 1e-5, (name, attrs["layer"])
    assert recs[5][1]["mask"] == "causal" and recs[1][1]["n_head"] == "3"


def test_layers_and_heads_are_picked(tmp_path):
    rng = np.random.default_rng(2)
    model, p = full_model(tmp_path, rng, 3, 4, 8, 50, 16)
    x = (0.5 * rng.standard_normal((2, 5, 8))).astype(np.float32)
    s = pack(tmp_path, [("x", x)])
    full = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                 "--capture", "attn", input=s, check=0).stdout)
    picked = recs_of(tmp_path, run("block", "-m", model, "-l", "all", *CPU,
                                   "--capture", "attn:0,2:1-2", input=s,
                                   check=0).stdout)
    assert [(r[1]["layer"], r[1]["head"]) for r in picked[:-1]] == \
        [("0", "1"), ("0", "2"), ("2", "1"), ("2", "2")]
    for name, attrs, a in picked[:-1]:
        whole = full[int(attrs["layer"])][2]
        assert np.array_equal(a, whole[:, int(attrs["head"])][:, None])
    assert np.array_equal(picked[-1][2], full[-1][2])  # capture changes nothing


def test_ablation_zero_and_mean_match_numpy(tmp_path):
    rng = np.random.default_rng(3)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 50, 16)
    x = (0.5 * rng.standard_normal((3, 6, C))).astype(np.float32)
    s = pack(tmp_path, [("x", x)])
    got = recs_of(tmp_path, run("block", "-m", model, "-l", "all", "--ablate",
                                "0.1", "--ablate", "1.0:mean", input=s,
                                check=0).stdout)[-1][2]
    cur = block_acts(x.astype(np.float64), p, 0, H, [(1, False)])["x"]
    cur = block_acts(cur, p, 1, H, [(0, True)])["x"]
    assert oracle.rel_err(got, cur) <= 1e-5


def test_zero_ablating_every_head_removes_the_attention_sublayer(tmp_path):
    rng = np.random.default_rng(4)
    H, C = 3, 12
    model, p = full_model(tmp_path, rng, 1, H, C, 50, 16)
    x = (0.5 * rng.standard_normal((2, 9, C))).astype(np.float32)
    got = recs_of(tmp_path, run("block", "-m", model, *sum(
        (("--ablate", f"0.{h}") for h in range(H)), ()),
        input=pack(tmp_path, [("x", x)]), check=0).stdout)[-1][2]
    g = lambda n: p["layers.0." + n].astype(np.float64)
    xd = x.astype(np.float64)
    f = oracle.gelu(oracle.layernorm(xd, g("ln2.weight"), g("ln2.bias")) @ g("mlp.fc"))
    assert oracle.rel_err(got, xd + f @ g("mlp.proj")) <= 1e-5


@pytest.mark.parametrize("args,code,says", [
    (["--capture", "nope"], 2, "no activation of that name"),
    (["--capture", "x:0:1"], 2, "x has no heads"),
    (["--capture", "attn:1-0"], 2, "expected NAME[:LAYERS[:HEADS]]"),
    (["--ablate", "0"], 2, "expected LAYER.HEAD"),
    (["--ablate", "0.9"], 1, "--ablate 0.9: the model has 1 layers of 2 heads"),
    (["--capture", "attn:5"], 1, "--capture attn: layer 5: the model has 1 layers"),
    (["--capture", "q:0:2"], 1, "--capture q: head 2: the model has 2 heads"),
    (["--capture", "embed"], 2, "--capture embed: andrea-block runs no embedding"),
])
def test_bad_capture_and_ablate_options(tmp_path, args, code, says):
    """Each is refused before any output: the tokens ahead of x are not
    passed on first."""
    rng = np.random.default_rng(5)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 50, 16)
    x = np.zeros((1, 2, 8), np.float32)
    tokens = np.zeros((1, 2), np.int32)
    p = run("block", "-m", model, *CPU, *args,
            input=pack(tmp_path, [("tokens", tokens), ("x", x)]), check=code)
    assert says in one_line_error(p, "block") and p.stdout == b""


def test_options_aimed_at_layers_block_does_not_run(tmp_path):
    """-l runs some layers: an --ablate, a --capture listing layers or a
    --patch record of another layer (or of none the model has, or of the
    head) would change nothing, and is an error naming the option, before
    any output; a --capture of every layer takes those run."""
    rng = np.random.default_rng(15)
    model, _ = full_model(tmp_path, rng, 2, 2, 8, 50, 16)
    x = pack(tmp_path, [("x", np.zeros((1, 3, 8), np.float32))])
    caught = run("block", "-m", model, *CPU, "-l", 1, "--capture", "out",
                 input=x, check=0).stdout
    patch, beyond, logits = (tmp_path / f"{n}.ats" for n in ("p", "b", "l"))
    patch.write_bytes(caught)
    beyond.write_bytes(atsfmt.stream(atsfmt.record(
        "out", "f32", (1, 2, 3, 4), bytes(96),
        attrs=b"captured=1\nlayer=2\n")))
    logits.write_bytes(atsfmt.stream(atsfmt.record(
        "logits", "f32", (1, 3, 50), bytes(600), attrs=b"captured=1\n")))
    for args, says in [
            (["--ablate", "1.0"], "--ablate 1.0: layer 1 is not among"),
            (["--capture", "attn:1"], "--capture attn: layer 1 is not among"),
            (["--patch", patch], "--patch: 'out' of layer 1: the layer is "
             "not among"),
            (["--patch", beyond], "--patch: 'out' of layer 2: the model has "
             "2 layers"),
            (["--patch", logits], "--patch: 'logits': andrea-block runs no "
             "embedding or head")]:
        p = run("block", "-m", model, *CPU, "-l", 0, *args, input=x, check=1)
        assert says in one_line_error(p, "block") and p.stdout == b""
    names = [r[0] for r in recs_of(tmp_path, run(
        "block", "-m", model, *CPU, "-l", 1, "--capture", "attn", input=x,
        check=0).stdout)]
    assert names == ["attn", "x"]


def test_a_patch_whose_positions_do_not_fit_its_data(tmp_path):
    rng = np.random.default_rng(17)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 50, 16)
    x = pack(tmp_path, [("x", np.zeros((1, 4, 8), np.float32))])
    caught = run("block", "-m", model, *CPU, "--capture", "x@1-2", input=x,
                 check=0).stdout
    rec = next(r for r in atsfmt.read(caught) if r.name == "x")
    assert ("positions", "1-2") in rec.attrs
    patch = tmp_path / "p.ats"
    patch.write_bytes(atsfmt.stream(atsfmt.record(
        "x", rec.dtype, rec.dims, rec.payload, attrs=b"".join(
            f"{k}={'1-3' if k == 'positions' else v}\n".encode()
            for k, v in rec.attrs))))
    p = run("block", "-m", model, *CPU, "--patch", patch, input=x, check=1)
    assert "--patch: 'x' of layer 0: its positions attribute '1-3' names 3 " \
        "positions, its data has 2" in one_line_error(p, "block")


def test_patching_a_clean_run_into_a_corrupted_one(tmp_path):
    """Every block's x patched from the clean run gives the clean output
    exactly; one head's out patched matches NumPy's run with that head's
    output replaced, so the final x of that capture file, the clean run's
    output, is not taken as a patch."""
    rng = np.random.default_rng(6)
    L, H, C = 3, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 50, 16)
    clean = (0.5 * rng.standard_normal((2, 6, C))).astype(np.float32)
    corrupt = clean.copy()
    corrupt[:, 2] += 1.0
    cap = tmp_path / "clean.ats"
    cap.write_bytes(run("block", "-m", model, "-l", "all", "--capture", "x",
                        "--capture", "out:1:0", input=pack(tmp_path, [("x", clean)]),
                        check=0).stdout)
    clean_x = records(cap)[-1][2]
    caps = {(r[0], r[1]["layer"], r[1].get("head")): r[2] for r in records(cap)[:-1]}
    everything = run("block", "-m", model, "-l", "all", "--patch", cap,
                     input=pack(tmp_path, [("x", corrupt)]), check=0).stdout
    assert np.array_equal(recs_of(tmp_path, everything)[-1][2], clean_x)
    # only head 0 of layer 1, from a capture of just that
    only = tmp_path / "head.ats"
    only.write_bytes(run("block", "-m", model, "-l", "all", "--capture", "out:1:0",
                         input=pack(tmp_path, [("x", clean)]), check=0).stdout)
    got = recs_of(tmp_path, run("block", "-m", model, "-l", "all", "--patch", only,
                                input=pack(tmp_path, [("x", corrupt)]),
                                check=0).stdout)[-1][2]
    cur = corrupt.astype(np.float64)
    for l in range(L):
        if l == 1:
            a = block_acts(cur, p, l, H)
            out = a["out"].copy()
            out[:, 0] = caps[("out", "1", "0")][:, 0]
            pre = "layers.1."
            y = oracle.merge_heads(out) @ p[pre + "attn.wo"].astype(np.float64)
            xmid = cur + y
            g = lambda n: p[pre + n].astype(np.float64)
            f = oracle.gelu(oracle.layernorm(xmid, g("ln2.weight"), g("ln2.bias"))
                            @ g("mlp.fc"))
            cur = xmid + f @ g("mlp.proj")
        else:
            cur = block_acts(cur, p, l, H)["x"]
    assert oracle.rel_err(got, cur) <= 1e-5
    bad = tmp_path / "bad.ats"
    bad.write_bytes(run("block", "-m", model, "-l", "all", "--capture", "out:1:0",
                        input=pack(tmp_path, [("x", clean[:1])]), check=0).stdout)
    e = run("block", "-m", model, "-l", "all", "--patch", bad,
            input=pack(tmp_path, [("x", corrupt)]), check=1)
    assert "--patch: 'out' of layer 1 head 0 is [1,1,6,4], but this run's is [2,2,6,4]" \
        in one_line_error(e, "block")


def test_show_and_unpack_pick_captures_apart(tmp_path):
    """andrea-show --name/--layer/--head/--index select among the repeated
    names of a capture; andrea-unpack writes each to its own file."""
    rng = np.random.default_rng(7)
    model, _ = full_model(tmp_path, rng, 2, 2, 8, 50, 16)
    x = (0.5 * rng.standard_normal((1, 4, 8))).astype(np.float32)
    cap = tmp_path / "cap.ats"
    cap.write_bytes(run("block", "-m", model, "-l", "all", "--capture", "attn:all:0-1",
                        input=pack(tmp_path, [("x", x)]), check=0).stdout)
    recs = records(cap)
    shown = run("show", "--name", "attn", "--layer", 1, "--head", 0, cap,
                check=0).stdout.decode().splitlines()
    assert len(shown) == 1 and "layer=1" in shown[0] and "head=0" in shown[0]
    assert run("show", "--index", 5, cap, check=0).stdout.decode().startswith("x ")
    p = run("show", "--layer", 9, cap, check=1)
    assert f"{cap}: no record of layer 9" in one_line_error(p, "show")
    p = run("show", "--name", "attn", "--head", 7, cap, cap, check=1)
    assert "no record named 'attn' head 7 in any of the 2 inputs" in \
        one_line_error(p, "show")
    # numbers, not strings: 01 is layer 1; x or -1 is a usage error
    assert len(run("show", "--layer", "01", "--head", 0, "--name", "attn", cap,
                   check=0).stdout.splitlines()) == 1
    for bad in ("x", "-1"):
        p = run("show", "--layer", bad, cap, check=2)
        assert "--layer" in one_line_error(p, "show")
    run("unpack", "-d", tmp_path / "u", cap, check=0)
    import os
    assert sorted(os.listdir(tmp_path / "u")) == [
        "attn.layer0.head1.npy", "attn.layer1.head0.npy", "attn.layer1.head1.npy",
        "attn.npy", "x.npy"]
    assert np.array_equal(np.load(tmp_path / "u" / "attn.layer1.head1.npy"), recs[3][2])


@pytest.mark.parametrize("dims", [(1, 0, 5, 4), (0, 1, 1 << 31, 1 << 31)])
def test_a_mean_reference_that_holds_no_data_is_refused(tmp_path, dims):
    """A capture of out with no heads or no batch rows (found by
    fuzz_capture: the first was read past its end, the second's [T,D]
    wrapped the mean's size and wrote past it) is no reference."""
    rng = np.random.default_rng(12)
    model, _ = full_model(tmp_path, rng, 2, 2, 8, 50, 16)
    ref = tmp_path / "ref.ats"
    ref.write_bytes(atsfmt.stream(atsfmt.record(
        "out", "f32", dims, b"",
        attrs=b"captured=1\nlayer=0\nhead=0\n")))
    x = (0.5 * rng.standard_normal((1, 5, 8))).astype(np.float32)
    e = run("block", "-m", model, "-l", "all", "--ablate", f"0.0:mean={ref}",
            input=pack(tmp_path, [("x", x)]), check=1)
    assert "no capture of out for layer 0 head 0" in one_line_error(e, "block")


def test_generate_captures_every_step_against_numpy(tmp_path):
    """andrea-generate --capture: the prompt's pass (step=prompt, row) and
    each decoding step (step=N, over the KV cache) write the activations
    the whole sequence so far gives NumPy at its last position."""
    rng = np.random.default_rng(8)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 257, 32)
    cap = tmp_path / "g.ats"
    text = run("generate", "-m", model, "--prompt", "hey", "-n", 4,
               "--temperature", 0, "--capture", "attn:1:1", "--capture",
               "x:0", "--capture-file", cap, *CPU, check=0).stdout
    seq = [256] + list(b"hey") + list(text)
    recs = records(cap)
    steps = [(r[0], r[1]["step"]) for r in recs]
    # every one of the 4 steps, not only the first few: the loop below
    # checks the values of the records there are
    assert len(text) == 4
    assert steps == [("x", "prompt"), ("attn", "prompt")] + \
        [(n, str(i)) for i in range(4) for n in ("x", "attn")]
    assert recs[0][1]["row"] == "0" and "row" not in recs[2][1]
    for name, attrs, got in recs:
        n = 3 if attrs["step"] == "prompt" else 4 + int(attrs["step"])
        x = oracle.embed(np.array([seq[:n]]), p["wte"], p["wpe"])
        a0 = block_acts(x, p, 0, H)
        if name == "x":
            want = a0["x"] if attrs["step"] == "prompt" else a0["x"][:, -1:]
        else:
            att = block_acts(a0["x"], p, 1, H)["attn"][:, 1:2]
            want = att if attrs["step"] == "prompt" else att[:, :, -1:]
        assert got.shape == want.shape and oracle.rel_err(got, want) <= 1e-5, attrs
    p2 = run("generate", "-m", model, "--capture", "attn", *CPU, check=2)
    assert "--capture and --capture-file go together" in one_line_error(p2, "generate")


def test_generate_names_a_capture_file_it_cannot_write(tmp_path):
    """A --capture-file write that fails ends generate with that file's
    error (it once printed stray bytes)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    # the default model: records big enough to be written mid-run
    p = run("generate", "--prompt", "ab", "-n", 5, "--capture", "x",
            "--capture-file", "/dev/full", *CPU, check=1)
    assert "/dev/full: write error" in one_line_error(p, "generate")


def test_a_patch_file_is_read_under_andrea_max_bytes(tmp_path):
    """The files --patch and --ablate ...:mean= name are read under the
    cap ANDREA_MAX_BYTES sets, as the input stream is (they once were
    read under the default alone)."""
    rng = np.random.default_rng(19)
    model, _ = full_model(tmp_path, rng, 1, 2, 8, 50, 16)
    x = pack(tmp_path, [("x", np.zeros((1, 40, 8), np.float32))])
    cap = tmp_path / "cap.ats"
    # attn [1,2,40,40] is 12800 bytes, x 1280
    cap.write_bytes(run("block", "-m", model, *CPU, "--capture", "attn",
                        "--capture", "out", input=x, check=0).stdout)
    for opt in ("--patch", "--ablate"):
        arg = cap if opt == "--patch" else f"0.1:mean={cap}"
        p = run("block", "-m", model, *CPU, opt, arg, input=x,
                env={"ANDREA_MAX_BYTES": "2000"}, check=1)
        err = one_line_error(p, "block")
        assert str(cap) in err and "ANDREA_MAX_BYTES" in err, opt
        run("block", "-m", model, *CPU, opt, arg, input=x,
            env={"ANDREA_MAX_BYTES": "20000"}, check=0)


def test_mean_ablation_from_a_reference_run(tmp_path):
    """--ablate L.H:mean=FILE: the head's output becomes its mean over the
    batch of a reference run's capture, at each position."""
    rng = np.random.default_rng(10)
    L, H, C = 2, 2, 8
    model, p = full_model(tmp_path, rng, L, H, C, 50, 16)
    ref_x = (0.5 * rng.standard_normal((4, 5, C))).astype(np.float32)
    x = (0.5 * rng.standard_normal((2, 5, C))).astype(np.float32)
    ref = tmp_path / "ref.ats"
    ref.write_bytes(run("block", "-m", model, "-l", "all", "--capture", "out:1:1",
                        input=pack(tmp_path, [("x", ref_x)]), check=0).stdout)
    got = recs_of(tmp_path, run("block", "-m", model, "-l", "all", "--ablate",
                                f"1.1:mean={ref}", input=pack(tmp_path, [("x", x)]),
                                check=0).stdout)[-1][2]
    r = block_acts(block_acts(ref_x.astype(np.float64), p, 0, H)["x"], p, 1, H)
    mean = r["out"][:, 1].mean(0)
    cur = block_acts(x.astype(np.float64), p, 0, H)["x"]
    a = block_acts(cur, p, 1, H)
    out = a["out"].copy()
    out[:, 1] = mean
    pre = "layers.1."
    g = lambda n: p[pre + n].astype(np.float64)
    xmid = cur + oracle.merge_heads(out) @ g("attn.wo")
    f = oracle.gelu(oracle.layernorm(xmid, g("ln2.weight"), g("ln2.bias")) @ g("mlp.fc"))
    assert oracle.rel_err(got, xmid + f @ g("mlp.proj")) <= 1e-5
    e = run("block", "-m", model, "-l", "all", "--ablate", f"0.1:mean={ref}",
            input=pack(tmp_path, [("x", x)]), check=1)
    assert "no capture of out for layer 0 head 1" in one_line_error(e, "block")
    e = run("block", "-m", model, "-l", "all", "--ablate", f"1.1:mean={ref}",
            input=pack(tmp_path, [("x", x[:, :3])]), check=1)
    assert (f"--ablate 1.1:mean={ref}: the reference's mean is [T,D] [5,4], "
            "this run's out [3,4]") in one_line_error(e, "block")
