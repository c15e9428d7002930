"""The forward engine on the GPU against the CPU: andrea-block,
andrea-logits, andrea-train --forward and andrea-generate (KV cache and full
recompute).  Run by `make test-gpu` (ANDREA_TEST_DEVICE=cuda); skipped
elsewhere.

Tolerances (relative, as norms over a whole tensor, oracle.rel_err):
fp32 1e-5; tf32 and bf16 only run and stay
near fp32 (5e-3 and 5e-2).  Greedy texts agree up to the first step whose
two best logits are closer than 1e-4 (where float32 may pick either)."""
import gzip
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


# heads of D = 16, 32, 128 and 4 take the fused attention (no hook, no
# cache), D = 1 and 5 the explicit one; T = 130 and 67 end mid-tile
@pytest.mark.parametrize("L,H,C,B,T", [(1, 1, 1, 1, 1), (2, 3, 15, 2, 17),
                                       (2, 4, 64, 1, 130), (1, 2, 8, 3, 1),
                                       (1, 2, 64, 2, 67), (1, 1, 128, 1, 67)])
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
    """About 300 KB of English, for a quick model: the manual's pages and
    README.md as of 2026-12-06, frozen (tests/data/forward-corpus.txt.gz),
    so that an edit of the manual does not retrain the model that the
    greedy comparisons below need decisive (near ties one step in)."""
    with gzip.open(os.path.join(ROOT, "tests", "data",
                                "forward-corpus.txt.gz")) as f:
        return f.read()


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


FORMS = {"biases+tied": (True, True), "biases": (True, False),
         "tied": (False, True)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("L,H,C,B,T", [(2, 3, 15, 2, 17), (1, 1, 1, 1, 1)])
def test_gpt2s_form_on_the_gpu_agrees_with_the_cpu(tmp_path, form, L, H, C,
                                                    B, T):
    """Biases and a tied head (issue 16) through the GPU's blocks, head
    and hooks: the same numbers as the CPU and the NumPy oracle."""
    biases, tied = FORMS[form]
    rng = np.random.default_rng(31 + C + T)
    model, p = full_model(tmp_path, rng, L, H, C, 29, max(T, 2),
                          biases=biases, tied=tied)
    x = rand(rng, B, T, C)
    s = pack(tmp_path, [("x", x)])
    cpu, gpu = on_both(tmp_path, "block", ["-m", model, "-l", "all"], s)
    want = x
    for l in range(L):
        want = oracle.block(want, p, l, H)
    assert oracle.rel_err(gpu["x"], want) <= 1e-5
    assert oracle.rel_err(gpu["x"], cpu["x"]) <= 1e-5
    cpu, gpu = on_both(tmp_path, "logits", ["-m", model], s)
    assert oracle.rel_err(gpu["logits"], cpu["logits"]) <= 1e-5
    # the hooks see the biased q and y (bo inside) as the CPU does
    capture = ["--capture", "q", "--capture", "attn", "--capture", "y"]
    cpu, gpu = on_both(tmp_path, "block", ["-m", model, "-l", "all",
                                           *capture], s)
    for k in cpu:
        assert oracle.rel_err(gpu[k], cpu[k]) <= 1e-5, k
    for prec, tol in (("tf32", 5e-3), ("bf16", 5e-2)):
        cpu, gpu = on_both(tmp_path, "logits", ["-m", model], s, prec)
        assert oracle.rel_err(gpu["logits"], cpu["logits"]) <= tol, prec


@pytest.mark.parametrize("form", FORMS)
def test_gpt2s_form_decodes_on_the_gpu_as_on_the_cpu(tmp_path, form):
    """The KV cache's steps with biases and a tied head: each step's
    logits equal the CPU's full recompute, in fp32 and near it in bf16."""
    biases, tied = FORMS[form]
    rng = np.random.default_rng(5)
    model, _ = full_model(tmp_path, rng, 2, 2, 16, 257, 48, biases=biases,
                          tied=tied)
    out = {}
    for tag, dev, extra in (("cpu", "cpu", ["--no-cache"]),
                            ("cuda", "cuda", []),
                            ("bf16", "cuda", ["--precision", "bf16"])):
        lg = os.path.join(tmp_path, tag + ".ats")
        run("generate", "-m", model, "--prompt", "ab", "-n", 20,
            "--temperature", 0, "--device", dev, "--logits", lg, *extra,
            check=0)
        out[tag] = step_logits(lg)
    ref = out["cpu"]
    k = first_near_tie(ref)
    for i in range(min(k + 1, len(ref))):
        assert oracle.rel_err(out["cuda"][i], ref[i]) <= 1e-5, i
    assert oracle.rel_err(out["bf16"][0], ref[0]) <= 5e-2
