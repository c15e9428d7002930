"""andrea-train through NCCL on one GPU (andrea-train(1), SEVERAL GPUS):
--gpus 1, --gpus 1 --shard-optimizer and one rank started by hand with
--rank 0 --world 1 --init give the plain run's model, checkpoint and
log exactly, in fp32 and bf16 (where the plain run keeps its gradients
fp32 as the ranks do, ANDREA_TRAIN_BF16_GRADS=0), on both forms of the
model; a run
resumes between them; a signal to the launcher stops the ranks with
their work saved; a rank that dies ends the run with one line and
leaves the last checkpoint whole; compute-sanitizer finds nothing.  Run by `make test-gpu`
(ANDREA_TEST_DEVICE=cuda); skipped elsewhere.  What needs two GPUs or
more (the sums over several ranks, a rank killed among others) cannot
run here.
"""
import json
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import run, one_line_error, tool, tool_env
from test_train import write_model, tokens_file, read_params, records

ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"
pytestmark = pytest.mark.skipif(not ON_GPU, reason="ANDREA_TEST_DEVICE=cuda "
                                "is not set (make test-gpu)")

# two layers, T = 32, V = 67 (odd), 4 rows of a batch
CFG = dict(n_layer=2, n_head=4, d_model=64, ctx=32, vocab=67)


def train(tmp, tag, data, model, precision, *extra, steps=6, check=0,
          env=None):
    out = os.path.join(tmp, f"{tag}.ats")
    log = os.path.join(tmp, f"{tag}.jsonl")
    p = run("train", "-m", model, "--data", data, "--steps", steps,
            "--batch", 4, "--seq", 32, "--lr", 3e-3, "--warmup", 2,
            "--eval-every", 3, "--eval-batches", 2, "--save-every", 2,
            "--device", "cuda", "--precision", precision, "--log", log,
            "-o", out, *extra, check=check, env=env)
    return out, log, p


def the_same(tmp, a, b, tag):
    """The model files and checkpoints of two runs hold equal arrays."""
    for suffix in ("", ".ckpt"):
        x = read_params(tmp, a + suffix, f"{tag}a{len(suffix)}")
        y = read_params(tmp, b + suffix, f"{tag}b{len(suffix)}")
        assert set(x) == set(y), (a + suffix, set(x) ^ set(y))
        for k in x:
            assert np.array_equal(x[k], y[k]), (tag, suffix, k)


def losses(log):
    return [(r["step"], r["loss"], r.get("val_loss"))
            for r in map(json.loads, open(log))]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("gpt2", [False, True])
def test_one_rank_through_nccl_is_the_plain_run(tmp_path, precision, gpt2):
    rng = np.random.default_rng(21)
    model, _ = write_model(tmp_path, rng, CFG, gpt2=gpt2)
    data = tokens_file(tmp_path, rng.integers(0, 67, 6000))
    # ranks keep float gradients; alone, bf16 keeps bf16 ones unless told
    plain, plain_log, _ = train(tmp_path, "plain", data, model, precision,
                                env={"ANDREA_TRAIN_BF16_GRADS": "0"})
    ways = {"gpus": ["--gpus", 1],
            "shard": ["--gpus", 1, "--shard-optimizer"],
            "rank": ["--rank", 0, "--world", 1, "--init",
                     f"file:{tmp_path}/rendezvous"]}
    peak = {}
    for tag, extra in ways.items():
        out, log, p = train(tmp_path, tag, data, model, precision, *extra)
        the_same(tmp_path, plain, out, tag)
        assert losses(log) == losses(plain_log), tag
        last = p.stderr.decode().strip().splitlines()
        assert len(last) == 1 and "6 steps on" in last[0], (tag, last)
        peak[tag] = [json.loads(line) for line in open(log)][-1]["device_peak"]
    # the rendezvous is cleared away once the rank has joined
    assert not os.path.exists(tmp_path / "rendezvous")
    # the launcher holds no CUDA context of its own (some 0.5 GiB): the
    # device's peak use is the rank's alone
    assert abs(peak["gpus"] - peak["rank"]) < 100 << 20, peak


def test_a_run_resumes_on_another_number_of_ranks(tmp_path):
    """Half a run plain, the rest sharded through NCCL, and the other way
    round: each ends where the whole run plain does."""
    rng = np.random.default_rng(22)
    model, _ = write_model(tmp_path, rng, CFG)
    data = tokens_file(tmp_path, rng.integers(0, 67, 6000))
    whole, _, _ = train(tmp_path, "whole", data, model, "fp32", steps=8)
    ranked = ["--gpus", 1, "--shard-optimizer"]
    for first, then in (([], ranked), (ranked, [])):
        tag = "half" + str(len(first))
        out, _, _ = train(tmp_path, tag, data, model, "fp32", "--stop-at", 4,
                          *first, steps=8)
        run("train", "--resume", "--data", data, "-o", out, "--device",
            "cuda", "--precision", "fp32", *then, check=0)
        the_same(tmp_path, whole, out, tag)


def test_memcheck_of_a_rank_is_clean(tmp_path):
    """compute-sanitizer over one rank, sharded and not.  NCCL asks CUDA
    for kernels of other GPUs' architectures as it starts (API errors it
    expects), so API errors are not reported; every memory access is."""
    cs = os.environ.get("COMPUTE_SANITIZER") or shutil.which(
        "compute-sanitizer")
    if not cs:
        pytest.skip("compute-sanitizer not found")
    rng = np.random.default_rng(25)
    data = tokens_file(tmp_path, rng.integers(0, 67, 3000))
    model, _ = write_model(tmp_path, rng, CFG, gpt2=True)
    for precision, shard in (("fp32", []), ("bf16", ["--shard-optimizer"])):
        logf = tmp_path / f"memcheck-{precision}.txt"
        p = subprocess.run(
            [cs, "--tool", "memcheck", "--report-api-errors", "no",
             "--error-exitcode", "99", "--log-file", str(logf),
             tool("train"), "-m", str(model), "--data", str(data),
             "--steps", "3", "--batch", "2", "--seq", "32", "--eval-every",
             "2", "--eval-batches", "1", "--save-every", "2", "--device",
             "cuda", "--precision", precision, "--rank", "0", "--world", "1",
             "--init", f"file:{tmp_path}/id", "-o", str(tmp_path / "m.ats"),
             "-f", *shard], capture_output=True, env=tool_env(), timeout=600)
        text = logf.read_text()
        assert p.returncode == 0, text[-3000:]
        assert "ERROR SUMMARY: 0 errors" in text, text[-3000:]


def test_more_gpus_than_the_host_has_is_one_line(tmp_path):
    data = tokens_file(tmp_path, list(range(60)) * 20)
    have = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                          text=True).stdout.count("GPU ")
    p = run("train", "--config", "tiny", "--data", data, "--gpus", have + 1,
            "-o", tmp_path / "m.ats", check=1)
    assert f"--gpus {have + 1}: this host has {have} GPU" in \
        one_line_error(p, "train")
    assert not os.path.exists(tmp_path / "m.ats")


def long_run(tmp, data, *extra):
    out = tmp / "long.ats"
    args = [tool("train"), "--config", "tiny", "--data", str(data), "--steps",
            "100000", "--batch", 4, "--seq", 32, "--save-every", 50,
            "--val-fraction", 0, "--device", "cuda", "--gpus", 1, "-o",
            str(out), *extra]
    p = subprocess.Popen(list(map(str, args)), env=tool_env(),
                         stderr=subprocess.PIPE)
    deadline = time.time() + 60  # until the first checkpoint is there
    while not os.path.exists(str(out) + ".ckpt") and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    return p, out


def test_a_signal_to_the_launcher_stops_every_rank_with_its_work_saved(
        tmp_path):
    data = tokens_file(tmp_path, np.random.default_rng(23).integers(0, 257,
                                                                     5000))
    p, out = long_run(tmp_path, data)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    err = err.decode()
    assert "stopped by signal 15 after step" in err, err
    assert "ranks were stopped" not in err, err
    state = records(str(out) + ".ckpt")[0]
    assert state[0] == "train_state"
    step = int(err.split("after step ")[1].split(";")[0])
    assert int(state[1]["step"]) == step


def test_a_rank_that_dies_ends_the_run_and_keeps_the_checkpoint(tmp_path):
    data = tokens_file(tmp_path, np.random.default_rng(24).integers(0, 257,
                                                                     5000))
    p, out = long_run(tmp_path, data)
    ranks = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                           text=True).stdout.split()
    assert len(ranks) == 1, ranks
    os.kill(int(ranks[0]), signal.SIGKILL)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    line = err.decode().strip().splitlines()[-1]
    assert line == ("andrea-train: rank 0 was killed by signal 9 (Killed); "
                    "the other ranks were stopped"), line
    # the last checkpoint is whole: the run resumes from it
    state = records(str(out) + ".ckpt")[0][1]
    run("train", "--resume", "--data", data, "-o", out, "--stop-at",
        int(state["step"]) + 2, "--device", "cuda", check=0)
