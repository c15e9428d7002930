"""Capture, ablation and patching on the GPU engine against the CPU's (which
tests/test_capture.py and test_interventions.py hold against NumPy), and
andrea-patch's sweeps on both.  Run by `make test-gpu`
(ANDREA_TEST_DEVICE=cuda); skipped elsewhere.

Tolerances (relative, oracle.rel_err): fp32 1e-5 (a sweep's effects,
ratios of logit differences, 1e-4); bf16 records 5e-2."""
import os
import sys

import numpy as np
import pytest

import oracle
from conftest import ROOT, run, one_line_error
from stagekit import pack, unpack
from test_model_filters import full_model
from test_patch import clean_and_corrupted
from test_train import records

ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"
pytestmark = pytest.mark.skipif(not ON_GPU, reason="ANDREA_TEST_DEVICE=cuda "
                                "is not set (make test-gpu)")

NAMES = ["ln1", "q", "k", "v", "scores", "attn", "out", "result", "y", "xmid",
         "ln2", "fc", "gelu", "mlp", "x"]


def both(tmp, args, stream, precision="fp32"):
    """The records of andrea-block args on the CPU and the GPU."""
    out = []
    for dev in ("cpu", "cuda"):
        extra = ["--precision", precision] if dev == "cuda" else []
        path = tmp / f"{dev}.ats"
        path.write_bytes(run("block", *args, "--device", dev, *extra, input=stream,
                             check=0).stdout)
        out.append(records(path))
    return out


@pytest.mark.parametrize("L,H,C,B,T,biases", [(2, 3, 15, 2, 17, True),
                                              (1, 1, 4, 1, 1, False),
                                              (2, 4, 64, 1, 70, False)])
def test_every_hook_point_on_the_gpu(tmp_path, L, H, C, B, T, biases):
    rng = np.random.default_rng(L + H + C + T)
    model, _ = full_model(tmp_path, rng, L, H, C, 41, max(T, 2), biases=biases)
    x = pack(tmp_path, [("x", (0.5 * rng.standard_normal((B, T, C))).astype(np.float32))])
    args = ["-m", model, "-l", "all", *[a for n in NAMES for a in ("--capture", n)]]
    cpu, gpu = both(tmp_path, args, x)
    assert [(r[0], r[1].get("layer")) for r in gpu] == \
        [(r[0], r[1].get("layer")) for r in cpu]
    for c, g in zip(cpu, gpu):
        assert g[1] == c[1], c[0]
        assert oracle.rel_err(g[2], c[2]) <= 1e-5, (c[0], c[1].get("layer"))
    cpu, gpu = both(tmp_path, args, x, "bf16")
    for c, g in zip(cpu, gpu):
        assert oracle.rel_err(g[2], c[2]) <= 5e-2, (c[0], c[1].get("layer"))


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-5), ("bf16", 5e-2)])
def test_ablation_and_patching_on_the_gpu(tmp_path, precision, tol):
    rng = np.random.default_rng(5)
    L, H, C = 3, 4, 32
    model, _ = full_model(tmp_path, rng, L, H, C, 41, 16, biases=True)
    clean = pack(tmp_path, [("x", (0.5 * rng.standard_normal((3, 9, C))).astype(np.float32))])
    corrupt = pack(tmp_path, [("x", (0.5 * rng.standard_normal((3, 9, C))).astype(np.float32))])
    cap = tmp_path / "clean.ats"
    cap.write_bytes(run("block", "-m", model, "-l", "all", "--device", "cpu",
                        "--capture", "out:1:2", "--capture", "x:0@3-4",
                        "--capture", "mlp:2", "--capture", "attn:0:1",
                        "--capture", "result:1", "--capture", "ln2:1", input=clean,
                        check=0).stdout)
    cases = [["--ablate", "0.1", "--ablate", "2.3:mean", "--ablate", "1.0@2,5"],
             ["--patch", str(cap)],
             ["--patch", f"{cap}@4"],
             ["--ablate", "1.1", "--patch", str(cap), "--capture", "y:1"]]
    for case in cases:
        cpu, gpu = both(tmp_path, ["-m", model, "-l", "all", *case], corrupt, precision)
        # the same records in the same order, with the same attributes
        # in fp32 (bf16's may say so)
        assert [r[0] for r in gpu] == [r[0] for r in cpu], case
        for c, g in zip(cpu, gpu):
            assert precision != "fp32" or g[1] == c[1], (case, c[0])
            assert oracle.rel_err(g[2], c[2]) <= tol, (case, c[0])
    # patching every block's x gives the clean output, on the GPU too
    every = tmp_path / "every.ats"
    every.write_bytes(run("block", "-m", model, "-l", "all", "--device", "cuda",
                          "--capture", "x", input=clean, check=0).stdout)
    want = records(every)[-1][2]
    got = unpack(tmp_path, run("block", "-m", model, "-l", "all", "--device", "cuda",
                               "--patch", every, input=corrupt, check=0).stdout)["x"]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("sweep", ["heads", "positions"])
def test_patch_sweeps_on_the_gpu(tmp_path, sweep):
    rng = np.random.default_rng(9)
    L, H, C, V, T = 3, 4, 32, 60, 11
    model, _ = full_model(tmp_path, rng, L, H, C, V, 16, biases=True)
    clean_and_corrupted(tmp_path, rng, V, T, 4, 7)
    out = {}
    for dev in ("cpu", "cuda"):
        out[dev] = unpack(tmp_path, run(
            "patch", "-m", model, "--clean", tmp_path / "c.ats", "--corrupted",
            tmp_path / "k.ats", "--answer", 3, "--wrong", 8, "--sweep", sweep,
            "--device", dev, check=0).stdout, dev)["effect"]
    assert out["cuda"].shape == (L, H if sweep == "heads" else T)
    assert oracle.rel_err(out["cuda"], out["cpu"]) <= 1e-4


def test_generate_on_the_gpu_captures_what_it_reports(tmp_path):
    rng = np.random.default_rng(10)
    model, _ = full_model(tmp_path, rng, 2, 2, 16, 257, 32)
    caps = {}
    for dev in ("cpu", "cuda"):
        caps[dev] = tmp_path / f"{dev}.ats"
        run("generate", "-m", model, "--prompt", "abc", "-n", 3, "--temperature", 0,
            "--capture", "embed", "--capture", "y:1", "--capture", "lnf",
            "--capture", "logits", "--capture-file", caps[dev], "--device", dev,
            check=0)
    cpu, gpu = records(caps["cpu"]), records(caps["cuda"])
    assert [(r[0], r[1]) for r in gpu] == [(r[0], r[1]) for r in cpu]
    for c, g in zip(cpu, gpu):
        assert oracle.rel_err(g[2], c[2]) <= 1e-5, (c[0], c[1])
    p = run("generate", "-m", model, "--prompt", "abc", "-n", 1, "--capture", "q",
            "--capture-file", tmp_path / "q.ats", "--device", "cuda", check=1)
    assert "--capture q: the GPU engine reports q, k, v" in one_line_error(p, "generate")


def test_patch_sweep_matches_pytorch_forward_hooks(tmp_path):
    """andrea-patch's layer x head sweep against the same sweep written
    with PyTorch forward hooks (bench/analysis.py's Hooked model: one pass
    a head, its z replaced from the clean run's cache), fp32, TF32 off."""
    torch = pytest.importorskip("torch")
    sys.path.append(os.path.join(ROOT, "bench"))
    import analysis
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(12)
    L, H, C, V, T = 3, 4, 32, 60, 13
    model, p = full_model(tmp_path, rng, L, H, C, V, 16)
    clean, corrupt = clean_and_corrupted(tmp_path, rng, V, T, 5, 11)
    ours = unpack(tmp_path, run(
        "patch", "-m", model, "--clean", tmp_path / "c.ats", "--corrupted",
        tmp_path / "k.ats", "--answer", analysis.ANSWER % V, "--wrong",
        analysis.WRONG % V, "--device", "cuda", check=0).stdout)["effect"]
    analysis.ANSWER, analysis.WRONG = analysis.ANSWER % V, analysis.WRONG % V
    hooked = analysis.Hooked(p, {"n_layer": L, "n_head": H}, torch, "cuda")
    tok = [torch.tensor(t, device="cuda", dtype=torch.long) for t in (clean, corrupt)]
    with torch.inference_mode():
        theirs = analysis.sweep(hooked, *tok, torch.cuda.synchronize)
    assert oracle.rel_err(ours, theirs) <= 1e-4
