"""andrea-train on the GPU against andrea-train on the CPU.  Run by
`make test-gpu` (ANDREA_TEST_DEVICE=cuda); skipped elsewhere.

Tolerances (relative, as norms over a whole tensor):
  fp32  gradients and the loss 1e-4; ten-step loss curves 1e-4 per step;
  tf32  gradients 5e-3, loss 2e-4 (products round their operands to
        10-bit mantissas, about 3e-4 each, compounded through the layers);
  bf16  gradients 3e-2, loss 2e-3 (7-bit mantissas, about 4e-3 each);
  ten-step curves in tf32 and bf16: ten times the loss tolerance.
Measured on an H200 (CUDA 13.0), GELU apart / fused into the product:
fp32 worst gradient 7.7e-7 / 3.9e-6, loss 2.6e-9 / 1.3e-8; tf32 1.1e-3 /
1.1e-3 and 1.4e-5 / 1.6e-5; bf16 1.0e-2 / 1.0e-2 and 1.5e-4 / 1.5e-4;
curves (the default path) fp32 1.8e-7, tf32 1.1e-5, bf16 4.4e-5 per step.
pytest -s prints the values of a run.
"""
import json
import os
import shutil

import numpy as np
import pytest

from conftest import run, one_line_error
from test_train import write_model, tokens_file, read_params, records

ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"
pytestmark = pytest.mark.skipif(not ON_GPU, reason="ANDREA_TEST_DEVICE=cuda "
                                "is not set (make test-gpu)")

# four heads of 16, two layers, T = 32; V = 67 is neither a multiple of 4
# nor of 32 (the kernels' odd cases)
CFG = dict(n_layer=2, n_head=4, d_model=64, ctx=32, vocab=67)
GRAD_TOL = {"fp32": 1e-4, "tf32": 5e-3, "bf16": 3e-2}
LOSS_TOL = {"fp32": 1e-4, "tf32": 2e-4, "bf16": 2e-3}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    return np.linalg.norm(a - b) / den if den > 0 else np.linalg.norm(a)


def gradient_errors(got, want, tol):
    """Each tensor's relative error against want, the worst one's name, and
    the tensors whose error is not within tol.  A bias bk's true gradient
    is 0 (q.bk is the same for every key of a row, which the softmax
    cancels): both sides hold rounding, measured against bq's."""
    errs = {k: rel(got[k], want[k]) if ".bk" not in k else
            rel(got[k] - want[k], 0) / np.linalg.norm(want[k.replace(".bk", ".bq")])
            for k in want}
    worst = max(errs, key=errs.get)
    return errs, worst, {k: v for k, v in errs.items() if not v <= tol}


def grads(tmp, model, data, device, precision="fp32", tag="", env=None,
          batch=3):
    out = os.path.join(tmp, f"g-{device}-{precision}{tag}.ats")
    p = run("train", "-m", model, "--data", data, "--steps", 1, "--batch", batch,
        "--seq", 32, "--lr", 0, "--warmup", 0, "--val-fraction", 0,
        "--threads", 2, "--device", device, "--precision", precision,
        "--dump-grads", out, "-o", os.path.join(tmp, f"m-{device}{tag}.ats"),
        env=env, check=0)
    loss = float(records(out)[0][1]["loss"])
    g = read_params(tmp, out, f"g{device}{precision}{tag}")
    return loss, g, p.stderr.decode()


# the GELU in the MLP product's epilogue (cuBLASLt; d_model = 64 allows
# it), and a kernel apart; by default andrea-train fuses in bf16 only
FUSION = {"fused": {"ANDREA_TRAIN_FUSE_GELU": "1"},
          "unfused": {"ANDREA_TRAIN_FUSE_GELU": "0"}}


@pytest.mark.parametrize("fusion", FUSION)
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_gradients_match_the_cpu(tmp_path, precision, fusion):
    rng = np.random.default_rng(11)
    model, _ = write_model(tmp_path, rng, CFG)
    data = tokens_file(tmp_path, rng.integers(0, CFG["vocab"], 2000))
    lc, gc, _ = grads(tmp_path, model, data, "cpu")
    lg, gg, err = grads(tmp_path, model, data, "cuda", precision,
                        env=FUSION[fusion])
    # the report says which path ran
    assert ("GELU fused" in err) == (fusion == "fused"), err
    assert np.array_equal(gc.pop("tokens"), gg.pop("tokens"))
    assert set(gc) == set(gg)
    errs, worst, bad = gradient_errors(gg, gc, GRAD_TOL[precision])
    print(f"{precision} {fusion}: loss cpu {lc:.8f} gpu {lg:.8f} "
          f"(rel {abs(lg - lc) / lc:.2e}); worst gradient {worst} "
          f"{errs[worst]:.2e}, median {np.median(list(errs.values())):.2e}")
    assert abs(lg - lc) <= LOSS_TOL[precision] * abs(lc)
    assert not bad, bad


def matches_the_cpu(tmp, cfg, seed, n_tokens, precision, env=None):
    """One step's loss and gradients of a random model of cfg on the GPU
    against the CPU's, within the precision's tolerances; the GPU's
    closing line."""
    rng = np.random.default_rng(seed)
    model, _ = write_model(tmp, rng, cfg)
    data = tokens_file(tmp, rng.integers(0, cfg["vocab"], n_tokens))
    lc, gc, _ = grads(tmp, model, data, "cpu")
    lg, gg, err = grads(tmp, model, data, "cuda", precision, env=env)
    assert np.array_equal(gc.pop("tokens"), gg.pop("tokens"))
    errs, worst, bad = gradient_errors(gg, gc, GRAD_TOL[precision])
    print(f"{precision}: loss cpu {lc:.8f} gpu {lg:.8f}; worst gradient "
          f"{worst} {errs[worst]:.2e}")
    assert abs(lg - lc) <= LOSS_TOL[precision] * abs(lc)
    assert not bad, bad
    return err


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_wide_vocabulary_matches_the_cpu(tmp_path, precision):
    """V = 2053 (rows padded to 2056): the loss takes a block a row and
    keeps the row in registers (2048 to 16384 columns), the narrower
    vocabularies above a warp a row; its losses and gradients equal the
    CPU's alike."""
    matches_the_cpu(tmp_path, dict(CFG, vocab=2053), 19, 4000, precision)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_kept_and_recomputed_gelus_match_the_cpu(tmp_path, precision):
    """Seven layers, the GELU in the product's epilogue: the top five keep
    their GELU(fc) from the forward pass (ANDREA_TRAIN_GELU_KEPT=5; at
    these shapes the memory rule of plan.cu would keep all seven), the
    lower two compute it again in the lowest kept layer's buffer
    (engine.cuh, gelu_at); every layer's gradients equal the CPU's
    alike."""
    err = matches_the_cpu(tmp_path, dict(CFG, n_layer=7), 23, 2000,
                          precision, env=dict(FUSION["fused"],
                                              ANDREA_TRAIN_GELU_KEPT="5"))
    assert "GELU fused" in err, err


@pytest.mark.parametrize("form", ["untied", "tied"])
def test_bf16_gradients_are_bf16_and_match_the_cpu(tmp_path, form):
    """In bf16 on one GPU the gradients are kept in bf16 (plan.cu), every
    dumped value a bf16 one; ANDREA_TRAIN_BF16_GRADS=0 keeps them in float,
    most values not.  Both match the CPU's within bf16's tolerance, a tied
    head's two shares (head and embedding, added in float) among them."""
    rng = np.random.default_rng(43)
    model, _ = write_model(tmp_path, rng, CFG, gpt2=form == "tied")
    data = tokens_file(tmp_path, rng.integers(0, CFG["vocab"], 2000))
    lc, gc, _ = grads(tmp_path, model, data, "cpu")
    gc.pop("tokens")
    for setting in ("1", "0"):
        lg, gg, _ = grads(tmp_path, model, data, "cuda", "bf16",
                          tag=setting,
                          env={"ANDREA_TRAIN_BF16_GRADS": setting})
        gg.pop("tokens")
        low = np.concatenate([np.asarray(v, np.float32).ravel().view(
            np.uint32) & 0xFFFF for v in gg.values()])
        errs, worst, bad = gradient_errors(gg, gc, GRAD_TOL["bf16"])
        print(f"{form} bf16 grads={setting}: worst {worst} "
              f"{errs[worst]:.2e}, values with low bits {np.mean(low != 0):.3f}")
        assert abs(lg - lc) <= LOSS_TOL["bf16"] * abs(lc)
        assert not bad, bad
        if setting == "1":
            assert not low.any()
        else:
            assert np.mean(low != 0) > 0.5


def test_odd_width_keeps_the_gelu_apart(tmp_path):
    # d_model = 9: the MLP is 36 wide, not a multiple of 8, which cuBLASLt's
    # GELU epilogue needs; the engine falls back to the separate kernel
    cfg = dict(n_layer=1, n_head=3, d_model=9, ctx=32, vocab=67)
    rng = np.random.default_rng(17)
    model, _ = write_model(tmp_path, rng, cfg)
    data = tokens_file(tmp_path, rng.integers(0, cfg["vocab"], 2000))
    lc, gc, _ = grads(tmp_path, model, data, "cpu")
    lg, gg, err = grads(tmp_path, model, data, "cuda", env=FUSION["fused"])
    assert "GELU fused" not in err, err
    assert abs(lg - lc) <= LOSS_TOL["fp32"] * abs(lc)
    gc.pop("tokens"), gg.pop("tokens")
    bad = {k: rel(gg[k], gc[k]) for k in gc if not rel(gg[k], gc[k]) <= 1e-4}
    assert not bad, bad


def curve(tmp, data, device, precision="fp32", *extra, env=None, tag=""):
    log = os.path.join(tmp, f"log-{device}-{precision}{'-'.join(extra)}{tag}.jsonl")
    p = run("train", "--config", "tiny", "--seed", 3, "--data", data,
            "--steps", 10, "--batch", 4, "--seq", 64, "--lr", 3e-3,
            "--warmup", 2, "--eval-every", 5, "--eval-batches", 2,
            "--threads", 2, "--device", device, "--precision", precision,
            "--log", log, "-o", os.path.join(tmp, f"c-{device}.ats"), "-f",
            *extra, env=env, check=0)
    return [json.loads(line) for line in open(log)], p


def test_ten_step_loss_curves_agree(tmp_path):
    rng = np.random.default_rng(12)
    data = tokens_file(tmp_path, rng.integers(0, 257, 20000))
    cpu, _ = curve(tmp_path, data, "cpu")
    for precision in ("fp32", "tf32", "bf16"):
        gpu, p = curve(tmp_path, data, "cuda", precision)
        assert [r["step"] for r in gpu] == list(range(1, 11))
        errs = [abs(g["loss"] - c["loss"]) / c["loss"] for g, c in zip(gpu, cpu)]
        verr = [abs(g["val_loss"] - c["val_loss"]) / c["val_loss"]
                for g, c in zip(gpu, cpu) if "val_loss" in c]
        print(f"{precision}: worst per-step loss error {max(errs):.2e}, "
              f"held-out {max(verr):.2e}; losses {[round(g['loss'], 5) for g in gpu]}")
        tol = 1e-4 if precision == "fp32" else 10 * LOSS_TOL[precision]
        assert max(errs) <= tol and max(verr) <= tol, (precision, errs, verr)
        assert all("device_peak" in g for g in gpu)
        last = p.stderr.decode().strip().splitlines()[-1]
        assert "tokens/s, peak device memory" in last and precision in last
        assert ("GELU fused" in last) == (precision == "bf16"), last
        assert "attention fused" in last, last


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_graph_replays_the_eager_step(tmp_path, precision):
    """From the second step on the step is one CUDA graph: the same
    kernels on the same buffers as launched one by one, so the same losses
    (to the order of the attention backward's atomic sums)."""
    rng = np.random.default_rng(13)
    data = tokens_file(tmp_path, rng.integers(0, 257, 20000))
    eager, pe = curve(tmp_path, data, "cuda", precision,
                      env={"ANDREA_CUDA_GRAPHS": "0"}, tag="eager")
    graph, pg = curve(tmp_path, data, "cuda", precision, tag="graph")
    assert "CUDA graph" in pg.stderr.decode().splitlines()[-1]
    assert "CUDA graph" not in pe.stderr.decode().splitlines()[-1]
    for key in ("loss", "val_loss", "grad_norm"):
        e = [r[key] for r in eager if key in r]
        g = [r[key] for r in graph if key in r]
        assert len(e) == len(g) > 0, key
        worst = max(abs(a - b) / abs(a) for a, b in zip(e, g))
        print(f"{precision} {key}: graph against eager {worst:.2e}")
        assert worst <= (1e-6 if precision == "fp32" else 1e-4), (key, e, g)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_step_launched_ahead_changes_nothing(tmp_path, precision):
    """Between evaluations, each step's forward and backward are launched
    before the last step's loss is read (engine.h, ahead); with an
    evaluation after every step, none is.  Both runs train alike: the same
    losses, norms, held-out losses, first-step gradients and models, with
    checkpoints saved in between."""
    rng = np.random.default_rng(14)
    data = tokens_file(tmp_path, rng.integers(0, 257, 20000))
    runs = {}
    for every in (1, 5):
        out = os.path.join(tmp_path, f"m{every}.ats")
        log = os.path.join(tmp_path, f"l{every}.jsonl")
        dump = os.path.join(tmp_path, f"g{every}.ats")
        run("train", "--config", "tiny", "--seed", 3, "--data", data,
            "--steps", 11, "--batch", 4, "--seq", 64, "--lr", 3e-3,
            "--warmup", 2, "--eval-every", every, "--eval-batches", 2,
            "--save-every", 3, "--device", "cuda", "--precision", precision,
            "--dump-grads", dump, "--log", log, "-o", out, "-f")
        recs = [json.loads(line) for line in open(log)]
        runs[every] = (recs, read_params(tmp_path, out, f"m{every}"),
                       read_params(tmp_path, dump, f"g{every}"))
    (each, m1, g1), (ahead, m5, g5) = runs[1], runs[5]
    assert [r["step"] for r in ahead] == list(range(1, 12))
    for key in ("loss", "grad_norm"):
        assert [r[key] for r in each] == [r[key] for r in ahead], key
    assert [r["val_loss"] for r in ahead if "val_loss" in r] == \
        [r["val_loss"] for r in each if r["step"] in (5, 10, 11)]
    for got, want in ((m5, m1), (g5, g1)):
        assert set(got) == set(want)
        assert all(np.array_equal(got[k], want[k]) for k in want)


def test_more_heads_than_a_fused_call_takes_go_explicit(tmp_path):
    """andrea's fused fp32 attention takes at most 65535 heads a call (a
    grid's y): with B*H past that, --attention auto takes the explicit
    attention at the start and --attention fused is refused there (both
    failed at the first step)."""
    rng = np.random.default_rng(21)
    data = tokens_file(tmp_path, rng.integers(0, 257, 100000))
    common = ("--config", "tiny", "--data", data, "--batch", 16385,
              "--seq", 2, "--steps", 1, "--val-fraction", 0, "--device",
              "cuda", "--precision", "fp32")
    p = run("train", *common, "-o", tmp_path / "auto.ats", check=0)
    last = p.stderr.decode().strip().splitlines()[-1]
    assert "tokens/s" in last and "attention fused" not in last, last
    p = run("train", *common, "--attention", "fused", "-o",
            tmp_path / "fused.ats", check=1)
    assert ("the fused attention takes at most 65535 heads a call on the "
            "GPU, not B*H = 65540") in one_line_error(p, "train")


def test_checkpoints_move_between_cpu_and_gpu(tmp_path):
    """Five steps on the GPU, five more resumed on the CPU, and the other
    way round: both continue to the same loss as ten steps on one device
    (within the fp32 tolerance)."""
    rng = np.random.default_rng(13)
    data = tokens_file(tmp_path, rng.integers(0, 257, 20000))
    full, _ = curve(tmp_path, data, "cpu")

    def half(dev1, dev2):
        out = tmp_path / f"h-{dev1}-{dev2}.ats"
        common = ["--config", "tiny", "--seed", 3, "--data", data, "--steps",
                  10, "--batch", 4, "--seq", 64, "--lr", 3e-3, "--warmup", 2,
                  "--eval-every", 5, "--eval-batches", 2, "--threads", 2,
                  "-o", out]
        run("train", *common, "--stop-at", 5, "--device", dev1, check=0)
        log = tmp_path / f"h-{dev1}-{dev2}.jsonl"
        run("train", "--resume", "--data", data, "-o", out, "--device", dev2,
            "--log", log, check=0)
        return [json.loads(line) for line in open(log)]

    for d1, d2 in (("cuda", "cpu"), ("cpu", "cuda")):
        rest = half(d1, d2)
        assert [r["step"] for r in rest] == list(range(6, 11))
        for r, f in zip(rest, full[5:]):
            assert abs(r["loss"] - f["loss"]) <= 1e-4 * f["loss"], (d1, d2)


def test_a_bf16_resume_carries_the_moments_as_the_cpu_reads_them(tmp_path):
    """With cuDNN's attention the engine keeps Wq|Wk|Wv side by side in
    its parameters and moments; its upload and download change the
    layout.  A bf16 checkpoint resumed for one step at lr 0 on the GPU and
    on the CPU: the parameters come back exactly, and the moments of the
    attention's weights agree to within a fifth of how far the step moved
    them (the bf16 gradients' error makes about 1e-2 of it; a moment read
    in the wrong layout, whose b1 * m1 is then another element's, 5 to 20
    times it)."""
    rng = np.random.default_rng(15)
    data = tokens_file(tmp_path, rng.integers(0, 257, 20000))
    first = tmp_path / "first.ats"
    p = run("train", "--config", "tiny", "--seed", 3, "--data", data,
            "--batch", 4, "--seq", 64, "--warmup", 0, "--val-fraction", 0,
            "--steps", 4, "--stop-at", 2, "--lr", 3e-3, "--device", "cuda",
            "--precision", "bf16", "-o", first, check=0)
    assert "attention fused" in p.stderr.decode(), p.stderr.decode()
    kept = {n: a for n, _, a in records(f"{first}.ckpt")}
    got = {}
    for dev, precision in (("cuda", "bf16"), ("cpu", "fp32")):
        out = tmp_path / f"resumed-{dev}.ats"
        shutil.copy(first, out)
        shutil.copy(f"{first}.ckpt", f"{out}.ckpt")
        run("train", "--resume", "--data", data, "-o", out, "--stop-at", 3,
            "--lr", 0, "--threads", 2, "--device", dev, "--precision",
            precision, check=0)
        got[dev] = {n: a for n, _, a in records(f"{out}.ckpt")}
    params = [n for n in kept
              if not n.startswith("adam.") and n not in ("train_state", "config")]
    attn = [n for n in kept if n.startswith("adam.") and ".attn.w" in n]
    assert len(attn) == 2 * 2 * 4  # m and v, two layers, wq wk wv wo
    for name in params:
        assert np.array_equal(got["cuda"][name], kept[name]), name
    for name in attn:
        err = rel(got["cuda"][name], got["cpu"][name])
        moved = rel(got["cpu"][name], kept[name])
        assert err <= 0.2 * moved, (name, err, moved)


def test_out_of_memory_names_the_batch(tmp_path):
    rng = np.random.default_rng(14)
    data = tokens_file(tmp_path, rng.integers(0, 257, 5000))
    p = run("train", "--config", "andrea-12m", "--data", data, "--batch",
            4096, "--seq", 1024, "--steps", 1, "--device", "cuda",
            "--val-fraction", 0, "-o", tmp_path / "m.ats", check=1,
            timeout=300)
    msg = one_line_error(p, "train")
    assert "out of memory" in msg and "reduce --batch (now 4096" in msg, msg


def test_no_gpu_is_one_line_and_auto_trains_on_the_cpu(tmp_path):
    rng = np.random.default_rng(15)
    data = tokens_file(tmp_path, rng.integers(0, 257, 3000))
    hide = {"CUDA_VISIBLE_DEVICES": ""}
    common = ["--config", "tiny", "--data", data, "--steps", 2, "--batch", 2,
              "--seq", 16, "--val-fraction", 0, "-o", tmp_path / "m.ats", "-f"]
    p = run("train", *common, "--device", "cuda", env=hide, check=1)
    assert "no usable CUDA device" in one_line_error(p, "train")
    p = run("train", *common, "--device", "auto", env=hide, check=0)
    assert b"steps on CPU (fp32)" in p.stderr  # auto took the CPU
    p = run("train", *common, "--precision", "bf16", "--device", "cpu",
            check=1)
    assert "needs the GPU" in one_line_error(p, "train")
    p = run("train", *common, "--device", "auto", check=0)
    assert b"steps on" in p.stderr  # auto took the GPU


def test_memcheck_is_clean(tmp_path):
    cs = os.environ.get("COMPUTE_SANITIZER") or shutil.which("compute-sanitizer")
    if not cs:
        pytest.skip("compute-sanitizer not found")
    import subprocess
    from conftest import tool, tool_env
    rng = np.random.default_rng(16)
    data = tokens_file(tmp_path, rng.integers(0, 67, 3000))
    model, _ = write_model(tmp_path, rng, CFG)
    # bf16 fuses the attention (cuDNN); fp32's fused kernels when asked;
    # 5 x 32 rows with ANDREA_TRAIN_HEAD_ROWS=1 put the head in two parts
    # of 128 and 32 rows (head.cu)
    for precision, how, batch, head_rows in (
            ("fp32", "auto", 2, None), ("bf16", "auto", 2, None),
            ("fp32", "fused", 2, None), ("fp32", "auto", 5, "1"),
            ("bf16", "auto", 5, "1")):
        env = tool_env()
        if head_rows:
            env["ANDREA_TRAIN_HEAD_ROWS"] = head_rows
        tag = f"{precision}-{how}-b{batch}"
        logf = tmp_path / f"memcheck-{tag}.txt"
        p = subprocess.run(
            [cs, "--tool", "memcheck", "--error-exitcode", "99",
             "--log-file", str(logf), tool("train"), "-m", model,
             "--data", str(data), "--steps", "3", "--batch", str(batch),
             "--seq", "32", "--eval-every", "2", "--eval-batches", "1",
             "--device", "cuda", "--precision", precision, "--attention",
             how, "-o", str(tmp_path / "m.ats"), "-f"],
            capture_output=True, env=env, timeout=600)
        text = logf.read_text()
        print(tag, text.strip().splitlines()[-1] if text.strip() else "")
        if head_rows:
            assert b"head in 2 parts" in p.stderr, p.stderr[-2000:]
        assert p.returncode == 0, text[-3000:]
        assert "ERROR SUMMARY: 0 errors" in text, text[-3000:]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_gpt2s_form_trains_on_the_gpu_as_on_the_cpu(tmp_path, precision):
    """Biases and a tied head (issue 16): every gradient, the biases' and
    wte's two shares among them, equals the CPU's; the GELU stays apart
    (cuBLASLt's epilogue is planned without a bias)."""
    rng = np.random.default_rng(31)
    model, _ = write_model(tmp_path, rng, CFG, gpt2=True)
    data = tokens_file(tmp_path, rng.integers(0, CFG["vocab"], 2000))
    lc, gc, _ = grads(tmp_path, model, data, "cpu")
    lg, gg, err = grads(tmp_path, model, data, "cuda", precision,
                        env=FUSION["fused"])
    assert "GELU fused" not in err, err
    gc.pop("tokens"), gg.pop("tokens")
    assert set(gc) == set(gg) and "layers.1.mlp.bfc" in gc
    assert "lm_head" not in gc
    errs, worst, bad = gradient_errors(gg, gc, GRAD_TOL[precision])
    print(f"gpt2 {precision}: loss rel {abs(lg - lc) / lc:.2e}, worst "
          f"gradient {worst} {errs[worst]:.2e}")
    assert abs(lg - lc) <= LOSS_TOL[precision] * abs(lc)
    assert not bad, bad


@pytest.mark.parametrize("form", ["untied", "tied"])
@pytest.mark.parametrize("vocab", [67, 64])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_head_by_parts_matches_the_cpu(tmp_path, precision, vocab, form):
    """The head's product and the loss a part of the rows at a time
    (head.cu): ANDREA_TRAIN_HEAD_ROWS=1 takes parts of 128 rows, so 5 rows
    of 32 positions run as 128 + 32, the head's gradient the sum of the
    parts'.  V = 67 goes by way of the padded head (72 columns), V = 64
    not; tied (GPT-2's form, biases too) and untied.  The loss and every
    gradient equal the CPU's as in one part."""
    rng = np.random.default_rng(37)
    model, _ = write_model(tmp_path, rng, dict(CFG, vocab=vocab),
                           gpt2=form == "tied")
    data = tokens_file(tmp_path, rng.integers(0, vocab, 2000))
    lc, gc, _ = grads(tmp_path, model, data, "cpu", batch=5)
    lg, gg, err = grads(tmp_path, model, data, "cuda", precision, batch=5,
                        env={"ANDREA_TRAIN_HEAD_ROWS": "1"})
    assert "head in 2 parts" in err, err
    assert np.array_equal(gc.pop("tokens"), gg.pop("tokens"))
    assert set(gc) == set(gg) and ("lm_head" in gc) == (form == "untied")
    errs, worst, bad = gradient_errors(gg, gc, GRAD_TOL[precision])
    print(f"parts {precision} V {vocab} {form}: loss rel "
          f"{abs(lg - lc) / lc:.2e}, worst gradient {worst} {errs[worst]:.2e}")
    assert abs(lg - lc) <= LOSS_TOL[precision] * abs(lc)
    assert not bad, bad
    # in one part the line says none
    _, _, err = grads(tmp_path, model, data, "cuda", precision, batch=5,
                      env={"ANDREA_TRAIN_HEAD_ROWS": "0"}, tag="one")
    assert "head in" not in err, err


@pytest.mark.parametrize("name, value, message", [
    ("ANDREA_TRAIN_HEAD_ROWS", "12x", "not a count of rows"),
    ("ANDREA_TRAIN_GELU_KEPT", "0", "not a count of layers")])
def test_a_setting_that_is_no_count_is_refused(tmp_path, name, value,
                                                message):
    rng = np.random.default_rng(41)
    model, _ = write_model(tmp_path, rng, CFG)
    data = tokens_file(tmp_path, rng.integers(0, CFG["vocab"], 2000))
    p = run("train", "-m", model, "--data", data, "--steps", 1,
            "--device", "cuda", "-o", str(tmp_path / "m.ats"),
            "--seq", 32, env={name: value})
    assert p.returncode != 0
    msg = one_line_error(p, "train")
    assert f"{name}={value}: {message}" in msg, msg
    assert not (tmp_path / "m.ats").exists()
