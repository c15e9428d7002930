"""The forward engine on the GPU against the CPU: andrea-block,
andrea-logits, andrea-train --forward and andrea-generate (KV cache and full
recompute).  Run by `make test-gpu` (ANDREA_TEST_DEVICE=cuda); skipped
elsewhere.

Tolerances (relative, as norms over a whole tensor, oracle.rel_err):
fp32 1e-5; tf32 and bf16 only run and stay
near fp32 (5e-3 and 5e-2).  Greedy texts agree up to the first step whose
two best logits are closer than 1e-4 (where float32 may pick either)."""
import glob
import os

import numpy as np
import pytest

import oracle
from conftest import run, ROOT
from stagekit import pack, unpack
from test_model_filters import full_model
from test_train import records

ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"
pytestmark = pytest.mark.skipif(not ON_GPU, reason="ANDREA_TEST_DEVICE=cuda "
                                "is not set (make test-gpu)")


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def on_both(tmp, prog, args, stream, precision="fp32"):
    out = {}
    for dev in ("cpu", "cuda"):
        extra = ["--precision", precision] if dev == "cuda" else []
        p = run(prog, *args, "--device", dev, *extra, input=stream, check=0)
        out[dev] = unpack(tmp, p.stdout, dev)
    return out["cpu"], out["cuda"]


@pytest.mark.parametrize("L,H,C,B,T", [(1, 1, 1, 1, 1), (2, 3, 15, 2, 17),
                                       (2, 4, 64, 1, 130), (1, 2, 8, 3, 1)])
def test_block_and_logits_on_the_gpu_agree_with_the_cpu(tmp_path, L, H, C, B, T):
    rng = np.random.default_rng(L * 100 + C + T)
    model, _ = full_model(tmp_path, rng, L, H, C, 41, max(T, 2))
    x = pack(tmp_path, [("x", rand(rng, B, T, C))])
    layers = "all" if L == 1 else "1,0,1"
    cpu, gpu = on_both(tmp_path, "block", ["-m", model, "-l", layers], x)
    assert oracle.rel_err(gpu["x"], cpu["x"]) <= 1e-5
    for last in ([], ["--last"]):
        cpu, gpu = on_both(tmp_path, "logits", ["-m", model, *last], x)
        assert oracle.rel_err(gpu["logits"], cpu["logits"]) <= 1e-5
    for prec, tol in (("tf32", 5e-3), ("bf16", 5e-2)):
        cpu, gpu = on_both(tmp_path, "block", ["-m", model, "-l", layers], x,
                           prec)
        assert oracle.rel_err(gpu["x"], cpu["x"]) <= tol, prec


def test_forward_records_on_the_gpu_agree_with_the_cpu(tmp_path):
    rng = np.random.default_rng(7)
    model, _ = full_model(tmp_path, rng, 2, 3, 24, 257, 40)
    out = {}
    for dev in ("cpu", "cuda"):
        path = os.path.join(tmp_path, f"{dev}.ats")
        run("train", "--forward", "-m", model, "--text", "--device", dev,
            "-o", path, input=b"the cat sat on the mat", check=0)
        out[dev] = records(path)
    assert [(n, a) for n, a, _ in out["cpu"]] == \
        [(n, a) for n, a, _ in out["cuda"]]
    for (name, _, c), (_, _, g) in zip(out["cpu"], out["cuda"]):
        if c.dtype.kind == "f":
            finite = np.isfinite(c)
            assert np.array_equal(finite, np.isfinite(g)), name
            assert np.array_equal(c[~finite], g[~finite]), name
            assert oracle.rel_err(g[finite], c[finite]) <= 1e-5, name
        else:
            assert np.array_equal(c, g), name


def training_text():
    """Some tens of KB of English from the manual, for a quick model."""
    text = b""
    for f in sorted(glob.glob(os.path.join(ROOT, "man", "*", "*"))) + \
            [os.path.join(ROOT, "README.md")]:
        text += open(f, "rb").read()
    return text


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trained")
    data = os.path.join(tmp, "data.txt")
    with open(data, "wb") as f:
        f.write(training_text())
    model = os.path.join(tmp, "m.ats")
    run("train", "--config", "tiny", "--ctx", 64, "--data", data, "--steps",
        300, "--batch", 16, "--seq", 64, "--device", "cuda", "-o", model,
        check=0)
    return model


def step_logits(path):
    return [a for n, _, a in records(path) if n == "logits"]


def first_near_tie(logits, eps=1e-4):
    for i, lg in enumerate(logits):
        for row in lg:
            top = np.sort(row)[-2:]
            if top[1] - top[0] < eps:
                return i
    return len(logits)


@pytest.mark.parametrize("prompt", ["The ", ""])
def test_kv_cache_gives_the_full_recompute_greedy_text(tmp_path, trained, prompt):
    # 200 steps from a context of 64: the window slides several times
    # (and on the GPU with every step eager, without the decoding graphs)
    out = {}
    runs = [("cuda", [], None), ("cuda-full", ["--no-cache"], None),
            ("cuda-eager", [], {"ANDREA_CUDA_GRAPHS": "0"}),
            ("cpu", [], None), ("cpu-full", ["--no-cache"], None)]
    for tag, cache, env in runs:
        lg = os.path.join(tmp_path, tag + ".ats")
        p = run("generate", "-m", trained, "--prompt", prompt, "-n", 200,
                "--temperature", 0, "--device", tag.split("-")[0],
                "--logits", lg, *cache, env=env, check=0)
        out[tag] = (p.stdout, step_logits(lg))
    ref_text, ref_logits = out["cpu-full"]
    k = first_near_tie(ref_logits)
    for tag, (text, logits) in out.items():
        assert text[:k] == ref_text[:k], tag
        for i in range(min(k + 1, len(logits))):
            assert oracle.rel_err(logits[i], ref_logits[i]) <= 1e-5, (tag, i)
    assert k >= 50  # a trained model decides: the comparison means something


def test_a_batch_of_prompts_on_the_gpu(tmp_path, trained):
    prompts = os.path.join(tmp_path, "p.txt")
    with open(prompts, "w") as f:
        f.write("The \n\nA long line that is longer than nothing at all\nx\n")
    res = {}
    for dev in ("cpu", "cuda"):
        lg = os.path.join(tmp_path, dev + ".ats")
        p = run("generate", "-m", trained, "--prompts", prompts, "-n", 40,
                "--temperature", 0, "--device", dev, "--logits", lg, check=0)
        res[dev] = (p.stdout.split(b"\n"), step_logits(lg))
    k = first_near_tie(res["cpu"][1])
    for i in range(min(k + 1, len(res["cpu"][1]))):
        assert oracle.rel_err(res["cuda"][1][i], res["cpu"][1][i]) <= 1e-5, i
    if k == len(res["cpu"][1]):
        assert res["cuda"][0] == res["cpu"][0]
    for prec in ("tf32", "bf16"):
        p = run("generate", "-m", trained, "--prompts", prompts, "-n", 8,
                "--device", "cuda", "--precision", prec, check=0)
        assert p.stdout.count(b"\n") == 4


def test_biases_and_a_tied_head_stay_on_the_cpu_for_now(tmp_path):
    """The GPU engine does not run biases or a tied head yet: --device cuda
    says so in one line, auto computes the model on the CPU (issue 16)."""
    from conftest import one_line_error
    rng = np.random.default_rng(31)
    model, p = full_model(tmp_path, rng, 2, 2, 8, 29, 16, biases=True,
                          tied=True)
    x = rand(rng, 2, 5, 8)
    s = pack(tmp_path, [("x", x)])
    r = run("block", "-m", model, "-l", "all", "--device", "cuda", input=s,
            check=1)
    assert "--device cpu" in one_line_error(r, "block")
    y = unpack(tmp_path, run("block", "-m", model, "-l", "all", "--device",
                             "auto", input=s, check=0).stdout)["x"]
    want = oracle.block(oracle.block(x, p, 0, 2), p, 1, 2)
    assert oracle.rel_err(y, want) <= 1e-5
