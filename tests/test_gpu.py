"""The GPU paths of the stages against their CPU paths, device selection and
CUDA errors.  Run by `make test-gpu` (ANDREA_TEST_DEVICE=cuda); skipped
elsewhere.  The NumPy-oracle suites (test_stages.py, test_filters.py) are
re-run on the GPU by the same target."""
import os

import numpy as np
import pytest

import oracle
from conftest import run, one_line_error, loader_env, loaded_by
from stagekit import pack, unpack, pipeline

ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"


def need_gpu():
    if not ON_GPU:
        pytest.skip("ANDREA_TEST_DEVICE=cuda is not set (make test-gpu)")


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def both(tmp_path, prog, args, stream):
    """(cpu, gpu) outputs of one stage as dicts of arrays."""
    cpu = unpack(tmp_path, run(prog, *args, "--device", "cpu", input=stream,
                               check=0).stdout, "cpu")
    gpu = unpack(tmp_path, run(prog, *args, "--device", "cuda", input=stream,
                               check=0).stdout, "gpu")
    assert set(cpu) == set(gpu)
    return cpu, gpu


@pytest.mark.parametrize("B,H,T,D", [(1, 1, 1, 1), (2, 3, 17, 5), (2, 12, 64, 64),
                                     (1, 2, 257, 8)])
def test_each_stage_on_the_gpu_agrees_with_the_cpu(tmp_path, B, H, T, D):
    need_gpu()
    rng = np.random.default_rng(B * 1000 + T)
    q, k, v = rand(rng, B, H, T, D), rand(rng, B, H, T, D), rand(rng, B, H, T, D)
    s = 3 * rand(rng, B, H, T, T)
    a = oracle.softmax(oracle.mask(s)).astype(np.float32)
    cases = [("scores", [], [("q", q), ("k", k)]),
             ("mask", [], [("scores", s)]),
             ("softmax", [], [("scores", oracle.mask(s).astype(np.float32))]),
             ("attend", [], [("attn", a), ("v", v)]),
             ("attend", ["--concat"], [("attn", a), ("v", v)])]
    for prog, args, arrays in cases:
        cpu, gpu = both(tmp_path, prog, args, pack(tmp_path, arrays))
        for name in cpu:
            if prog == "mask":
                assert np.array_equal(cpu[name], gpu[name])
            else:
                assert oracle.rel_err(gpu[name], cpu[name]) <= 1e-5, (prog, name)
                assert np.array_equal(np.isnan(gpu[name]), np.isnan(cpu[name]))


def test_embed_qkv_and_proj_on_the_gpu_agree_with_the_cpu(tmp_path):
    need_gpu()
    text = b"the cat sat on the mat, and the dog did not"
    cpu, gpu = both(tmp_path, "embed", ["--text", "--bos"], text)
    assert np.array_equal(cpu["x"], gpu["x"])  # one add: the same bits
    x = pack(tmp_path, [("x", cpu["x"])])
    for args in ([], ["--no-norm"], ["--head", "5"], ["-l", "3"]):
        c, g = both(tmp_path, "qkv", args, x)
        for name in "qkv":
            assert oracle.rel_err(g[name], c[name]) <= 1e-5, (args, name)
    rng = np.random.default_rng(9)
    a = oracle.softmax(oracle.mask(rand(rng, 2, 12, 9, 9))).astype(np.float32)
    c, g = both(tmp_path, "attend", ["--proj"],
                pack(tmp_path, [("attn", a), ("v", rand(rng, 2, 12, 9, 64))]))
    assert oracle.rel_err(g["y"], c["y"]) <= 1e-5


def test_tf32_is_close_but_optional(tmp_path):
    need_gpu()
    rng = np.random.default_rng(4)
    s = pack(tmp_path, [("q", rand(rng, 2, 4, 128, 64)),
                        ("k", rand(rng, 2, 4, 128, 64))])
    fp32 = unpack(tmp_path, run("scores", input=s, check=0).stdout, "a")
    tf32 = unpack(tmp_path, run("scores", "--tf32", input=s, check=0).stdout, "b")
    # TF32 ran (its 10-bit mantissas round 64-term dot products apart from
    # fp32's), within its rounding
    assert not np.array_equal(tf32["scores"], fp32["scores"])
    assert oracle.rel_err(tf32["scores"], fp32["scores"]) <= 1e-2
    cpu = unpack(tmp_path, run("scores", "--tf32", "--device", "cpu", input=s,
                               check=0).stdout, "c")
    assert oracle.rel_err(cpu["scores"], fp32["scores"]) <= 1e-5


def test_auto_takes_the_gpu_only_for_large_work(tmp_path):
    need_gpu()
    rng = np.random.default_rng(5)
    # small: the CPU's numbers, and the CUDA driver never loaded
    s = pack(tmp_path, [("scores", rand(rng, 3, 4, 33, 33))])
    cpu = run("softmax", "--device", "cpu", input=s, check=0).stdout
    logs = str(tmp_path / "small")
    for env in ({"ANDREA_DEVICE": "auto"}, {"ANDREA_DEVICE": ""}):
        assert run("softmax", input=s, env={**env, **loader_env(logs)},
                   check=0).stdout == cpu
    assert loaded_by(logs, "libcuda.so") == {"softmax": False}
    # large enough once starting CUDA counts for nothing and the CPU has
    # one thread: the GPU's numbers
    big = pack(tmp_path, [("q", rand(rng, 1, 2, 512, 64)),
                          ("k", rand(rng, 1, 2, 512, 64))])
    gpu = run("scores", "--device", "cuda", input=big, check=0).stdout
    logs = str(tmp_path / "big")
    auto = run("scores", input=big, check=0,
               env={"ANDREA_DEVICE": "auto", "ANDREA_AUTO_MIN_WORK": "0",
                    "ANDREA_THREADS": "1", **loader_env(logs)}).stdout
    assert loaded_by(logs, "libcuda.so") == {"scores": True}
    assert auto == gpu


def test_no_visible_gpu_is_a_one_line_failure_and_auto_falls_back(tmp_path):
    need_gpu()
    rng = np.random.default_rng(6)
    s = pack(tmp_path, [("scores", rand(rng, 2, 5, 5))])
    hide = {"CUDA_VISIBLE_DEVICES": ""}
    for prog in ("embed", "qkv", "scores", "mask", "softmax", "attend"):
        p = run(prog, "--device", "cuda", input=s, env=hide, check=1)
        msg = one_line_error(p, prog)
        assert "--device cuda: no usable CUDA device" in msg, msg
        assert p.stdout == b""
    cpu = run("softmax", "--device", "cpu", input=s, check=0).stdout
    assert run("softmax", input=s, env={**hide, "ANDREA_DEVICE": "auto"},
               check=0).stdout == cpu
    # work large enough for the GPU, none visible: the CPU, silently
    rng = np.random.default_rng(8)
    big = pack(tmp_path, [("q", rand(rng, 1, 2, 512, 64)),
                          ("k", rand(rng, 1, 2, 512, 64))])
    p = run("scores", input=big, check=0,
            env={**hide, "ANDREA_DEVICE": "auto", "ANDREA_AUTO_MIN_WORK": "0",
                 "OMP_NUM_THREADS": "1"})
    assert p.stderr == b""
    assert p.stdout == run("scores", "--device", "cpu", input=big,
                           check=0).stdout


def test_pipeline_on_the_gpu_matches_numpy(tmp_path):
    need_gpu()
    rng = np.random.default_rng(7)
    from stagekit import random_model
    B, T, H, D = 3, 40, 4, 8
    model, p = random_model(tmp_path, rng, 2, H, H * D, 29, 64)
    tokens = rng.integers(0, 29, (B, T)).astype(np.int32)
    y = pipeline([("embed", "-m", model), ("qkv", "-m", model, "-l", 1),
                  ("scores",), ("mask",), ("softmax",),
                  ("attend", "--proj", "-m", model)],
                 input=pack(tmp_path, [("tokens", tokens)]),
                 env={"ANDREA_DEVICE": "cuda"})
    out = unpack(tmp_path, y)
    x = oracle.embed(tokens, p["wte"], p["wpe"])
    q, k, v = oracle.qkv(x, p, 1, H)
    att = oracle.softmax(oracle.mask(oracle.scores(q, k)))
    ref = oracle.merge_heads(oracle.attend(att, v)) @ p["layers.1.attn.wo"]
    assert oracle.rel_err(out["y"], ref) <= 1e-5
