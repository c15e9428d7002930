"""andrea-train's command line: bad options and outputs refused first, bad
data in one line, what a run says and keeps (its closing line, checkpoint,
log and schedule), a diverging run, a reader that leaves the log.  On the
CPU, as tests/test_train.py, whose helpers it uses.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import run, one_line_error, tool
from test_train import SMALL, fortunes_text, records, tokens_file, write_model


# ------------------------------------------------------------- the command

@pytest.mark.parametrize("args", [
    ["--steps", "x", "-o", "m.ats"],
    ["--config", "huge", "--steps", "0", "-o", "m.ats"],
    ["--data", "d"],                       # no -o
    ["-o", "m.ats"],                       # no --data
    ["--forward", "--lr", "1"],
    ["--text", "-o", "m.ats", "--steps", "0"],
    ["--bogus"],
    ["--val-fraction", "1", "--data", "d", "-o", "m.ats"],
    ["--resume", "-m", "x.ats", "--data", "d", "-o", "m.ats"],
    ["--d-model", "10", "--heads", "3", "--steps", "0", "-o", "m.ats"],
    ["--attention", "flash", "--data", "d", "-o", "m.ats"],
    ["--forward", "--attention", "fused"],
    # several GPUs (andrea-train(1), SEVERAL GPUS)
    ["--gpus", "0", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--rank", "0", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--dump-grads", "g.ats", "--data", "d", "-o", "m.ats"],
    ["--rank", "0", "--world", "2", "--data", "d", "-o", "m.ats"],
    ["--rank", "0", "--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--rank", "2", "--world", "2", "--init", "file:x", "--data", "d",
     "-o", "m.ats"],
    ["--init", "file:x", "--data", "d", "-o", "m.ats"],
    ["--shard-optimizer", "--data", "d", "-o", "m.ats"],
    ["--timeout", "30", "--data", "d", "-o", "m.ats"],
    ["--gpus", "2", "--timeout", "0", "--data", "d", "-o", "m.ats"],
    ["--forward", "--gpus", "2"],
    # an empty file name is refused before any work
    ["--checkpoint", "", "--data", "d", "-o", "m.ats"],
    ["--dump-grads", "", "--data", "d", "-o", "m.ats"],
    ["--log", "", "--data", "d", "-o", "m.ats"],
    ["--data", "", "-o", "m.ats"],
    ["--stop-at", "0", "--data", "d", "-o", "m.ats"],
    ["--data", "d", "-o", ""],
])
def test_bad_options_exit_2(tmp_path, args):
    p = run("train", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    one_line_error(p, "train")


def test_several_ranks_need_the_gpu(tmp_path):
    """--gpus, --init and an mpirun's ranks are refused on the CPU with one
    line, before any data is read or file written; so is an mpirun's
    environment that is not a rank and a size."""
    common = ["--data", tmp_path / "missing.txt", "-o", tmp_path / "m.ats",
              "--device", "cpu"]
    p = run("train", "--gpus", 2, *common, check=1)
    assert "--gpus: training on several ranks needs a GPU (--device cuda)" \
        in one_line_error(p, "train")
    p = run("train", "--gpus", 2, *common[:-2], env={"CUDA_VISIBLE_DEVICES":
                                                   ""}, check=1)
    assert "--gpus 2: this host has 0 GPUs" in one_line_error(p, "train")
    p = run("train", "--rank", 1, "--world", 2, "--init",
            f"file:{tmp_path}/id", *common, check=1)
    assert "--init: training on several ranks needs a GPU" \
        in one_line_error(p, "train")
    mpi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}
    p = run("train", "--init", f"file:{tmp_path}/id", *common, env=mpi,
            check=1)
    assert "needs a GPU" in one_line_error(p, "train")
    mpi["OMPI_COMM_WORLD_SIZE"] = "two"
    p = run("train", "--init", f"file:{tmp_path}/id", *common, env=mpi,
            check=1)
    assert "OMPI_COMM_WORLD_SIZE=two" in one_line_error(p, "train")
    assert os.listdir(tmp_path) == []


def test_outputs_that_cannot_hold_the_run_are_refused_first(tmp_path):
    """-o or the checkpoint that is a directory, the training data itself or
    a terminal, and -o a device with the checkpoint left to be put beside
    it, are refused before any work, with nothing written."""
    data = tmp_path / "d.txt"
    data.write_bytes(b"the cat sat on the mat. " * 200)
    (tmp_path / "dir").mkdir()
    common = ["--config", "tiny", "--data", data, "--steps", 2, "--seq", 16]
    before = sorted(os.listdir(tmp_path))
    for args, says in [
            (["-o", tmp_path / "dir"], "is a directory"),
            (["-o", data], "is the training data"),
            (["-o", tmp_path / "m.ats", "--checkpoint", data],
             "the checkpoint"),
            (["-o", tmp_path / "m.ats", "--log", data],
             "--log %s is the training data" % data),
            (["-o", tmp_path / "m.ats", "--dump-grads", data],
             "--dump-grads %s is the training data" % data),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "m.ats"],
             "is -o too"),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "m.ats.ckpt"],
             "is the checkpoint too"),
            (["-o", tmp_path / "m.ats", "--log", tmp_path / "x",
              "--dump-grads", tmp_path / "x"], "is --log too"),
            # one file by two spellings, none of them there yet
            (["-o", tmp_path / "m.ats", "--checkpoint",
              f"{tmp_path}/./m.ats"], "is -o too"),
            (["-o", tmp_path / "m.ats", "--dump-grads",
              f"{tmp_path}/dir/../m.ats"], "is -o too"),
            (["-o", "/dev/null"], "name the checkpoint with --checkpoint")]:
        p = run("train", *common, *args, check=2)
        assert says in one_line_error(p, "train")
        assert sorted(os.listdir(tmp_path)) == before
    # an output in a folder that is not there fails before the first step
    for args in (["-o", tmp_path / "no" / "m.ats"],
                 ["-o", tmp_path / "m.ats", "--checkpoint",
                  tmp_path / "no" / "c"]):
        p = run("train", *common, "--steps", 100000, *args, check=1)
        assert f"{tmp_path / 'no'}" in one_line_error(p, "train")
        assert "its folder: No such file or directory" in p.stderr.decode()
        assert sorted(os.listdir(tmp_path)) == before
    assert data.read_bytes() == b"the cat sat on the mat. " * 200
    # a device as the checkpoint holds no run -f would be needed to end
    run("train", *common, "-o", tmp_path / "dev.ats", "--checkpoint",
        "/dev/null", check=0)
    os.remove(tmp_path / "dev.ats")
    run("train", *common, "-o", "/dev/null", "--checkpoint",
        tmp_path / "c.ats", check=0)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["c.ats"])
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        p = run("train", *common, "-o", tty, "--checkpoint",
                tmp_path / "c2.ats", check=1)
        assert one_line_error(p, "train").endswith(
            f"{tty}: refusing to write binary data to a terminal (use -f)")
        # andrea-generate takes no -f, and says none
        model = tmp_path / "m.ats"
        run("train", "--config", "tiny", "--steps", 0, "-o", model, check=0)
        for opts in (["--logits", tty],
                     ["--capture", "x", "--capture-file", tty]):
            p = run("generate", "-m", model, "-n", 2, *opts, check=1)
            assert one_line_error(p, "generate").endswith(
                f"{tty}: refusing to write binary data to a terminal")
    finally:
        os.close(master)
        os.close(slave)


def test_bad_data_fails_with_one_line(tmp_path):
    data = tokens_file(tmp_path, [1, 2, 300])
    p = run("train", "--config", "tiny", "--data", data, "--seq", 1,
            "--val-fraction", 0, "-o", tmp_path / "m.ats", check=1)
    assert "300" in one_line_error(p, "train")
    short = tmp_path / "short.txt"
    short.write_bytes(b"abc")
    p = run("train", "--config", "tiny", "--data", short, "-o",
            tmp_path / "m.ats", check=1)
    assert "too few" in one_line_error(p, "train")
    assert not os.path.exists(tmp_path / "m.ats")


def test_the_fused_attention_needs_the_gpu(tmp_path):
    data = tokens_file(tmp_path, list(range(200)) * 5)
    p = run("train", "--config", "tiny", "--data", data, "--seq", 8,
            "--steps", 1, "--device", "cpu", "--attention", "fused",
            "-o", tmp_path / "m.ats", check=1)
    assert "fused attention" in one_line_error(p, "train")
    assert not os.path.exists(tmp_path / "m.ats")
    run("train", "--config", "tiny", "--data", data, "--seq", 8, "--steps",
        1, "--device", "cpu", "--attention", "explicit", "-o",
        tmp_path / "m.ats", check=0)


def test_a_run_says_what_it_did_and_keeps_its_checkpoint(tmp_path):
    """One summary line however stderr is connected; --progress into a
    file writes plain lines; an existing checkpoint is not replaced
    without --resume or -f; a resume says where it starts, and one with
    nothing left to do says so."""
    rng = np.random.default_rng(8)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--batch", 2, "--seq", 5, "--threads", 1,
              "--val-fraction", 0.2, "--eval-every", 2, "-o", out]
    p = run("train", "-m", model, *common, "--steps", 4, "--progress", check=0)
    lines = p.stderr.decode().splitlines()
    assert "\r" not in p.stderr.decode() and "\033" not in p.stderr.decode()
    assert lines[0].startswith("step ") and "loss" in lines[0]
    last = lines[-1]
    assert last.startswith("andrea-train: 4 steps on ") and "to step 4 of 4" in last
    assert f"wrote {out} and {out}.ckpt" in last and "held-out" in last
    p = run("train", "-m", model, *common, "--steps", 4, check=1)
    assert "m.ats.ckpt exists: --resume continues its run, -f replaces it" \
        in one_line_error(p, "train")
    run("train", "-m", model, *common, "--steps", 2, "-f", check=0)
    p = run("train", "--resume", *common, "--steps", 3, check=0)
    lines = p.stderr.decode().splitlines()
    assert lines[0] == f"andrea-train: resuming {out}.ckpt at step 2 of 3"
    assert "to step 3 of 3" in lines[-1]
    p = run("train", "--resume", *common, "--steps", 3, check=0)
    assert p.stderr.decode() == (f"andrea-train: {out}.ckpt is at step 3 of 3: "
                                 f"nothing to do (a larger --steps continues "
                                 f"it); wrote {out}\n")
    # a --stop-at behind the checkpoint, and a fresh --steps 0 (no step, so
    # no checkpoint), say so
    ckpt = open(f"{out}.ckpt", "rb").read()
    p = run("train", "--resume", *common, "--steps", 5, "--stop-at", 1,
            "--lr", 1, check=0)
    assert p.stderr.decode() == (f"andrea-train: {out}.ckpt is at step 3, "
                                 f"and --stop-at is 1: nothing to do; wrote "
                                 f"{out}\n")
    # ... and leaves the checkpoint as it was, its --steps and --lr too
    assert open(f"{out}.ckpt", "rb").read() == ckpt
    fresh = tmp_path / "z.ats"
    p = run("train", "-m", model, *common[:-1], fresh, "--steps", 0, check=0)
    assert p.stderr.decode() == (f"andrea-train: --steps 0: nothing to "
                                 f"train; wrote {fresh}\n")
    assert not os.path.exists(f"{fresh}.ckpt")


def test_the_schedule_is_the_formula_of_the_page_and_eval_every_is_kept(tmp_path):
    """andrea-train(1)'s formula, step by step from --log (its step counts
    the steps done: step s's record says s + 1); a resumed run keeps
    --eval-every from the checkpoint."""
    rng = np.random.default_rng(12)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    log, out = tmp_path / "log.jsonl", tmp_path / "m.ats"
    W, N, lr, mn = 3, 9, 1e-2, 2e-3
    run("train", "-m", model, "--data", data, "--batch", 2, "--seq", 5,
        "--steps", N, "--stop-at", 5, "--warmup", W, "--lr", lr, "--min-lr", mn,
        "--eval-every", 2, "--log", log, "-o", out, check=0)
    run("train", "--resume", "--data", data, "--log", log, "-o", out, check=0)
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(1, N + 1))

    def rate(s):
        if s < W:
            return lr * (s + 1) / W
        p = min(1.0, (s - W) / (N - W))
        return mn + (lr - mn) * (1 + np.cos(np.pi * p)) / 2
    for r in recs:
        assert abs(r["lr"] - rate(r["step"] - 1)) <= 1e-6 * lr, r
    assert [r["step"] for r in recs if "val_loss" in r] == [2, 4, 5, 6, 8, 9]


def test_a_run_that_diverges_writes_nothing_and_fails(tmp_path):
    """A last step whose update leaves a model that computes no finite loss
    (its own loss, taken before the update, is finite) ends the run with
    exit 1 and one line, with no model or checkpoint written: by the
    held-out loss where one is measured, and by the parameters, where one
    is not finite, in any case."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    common = ["--config", "tiny", "--data", data, "--seq", 16, "--batch", 2,
              "--steps", 1, "--warmup", 1, "--lr", 1e30, "--clip", 0,
              "--weight-decay", 0, "-o", tmp_path / "m.ats"]
    p = run("train", *common, check=1)
    assert "step 1: the held-out loss is nan: training diverged" \
        in one_line_error(p, "train")
    common[common.index(1e30)] = 1e39  # past float32: the weights overflow
    p = run("train", *common, "--eval-every", 0, check=1)
    line = one_line_error(p, "train")
    assert line.startswith("andrea-train: step 1: ") and \
        "training diverged (lower --lr?); nothing written" in line
    assert sorted(os.listdir(tmp_path)) == ["d.txt"]


def test_resuming_with_another_lr_keeps_a_given_min_lr(tmp_path):
    """andrea-train(1): the schedule comes from the checkpoint unless given
    again.  A --min-lr given to the run stays when only --lr is given on
    resuming; the default one (a tenth of --lr) follows the new --lr; a
    kept --min-lr above the new --lr is a usage error."""
    rng = np.random.default_rng(3)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, 11, 400))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--batch", 2, "--seq", 5, "--steps", 6,
              "--warmup", 0, "-o", out]

    def state():
        return records(f"{out}.ckpt")[0][1]
    for given, new_lr, want in [(["--min-lr", 0], 1e-3, 0.0),
                                (["--min-lr", 3e-4], 1e-3, 3e-4),  # a tenth
                                ([], 1e-3, 1e-4)]:
        run("train", "-m", model, *common, "--lr", 3e-3, *given,
            "--stop-at", 2, "-f", check=0)
        run("train", "--resume", *common, "--lr", new_lr, "--stop-at", 3,
            check=0)
        st = state()
        assert float(st["lr"]) == new_lr and float(st["min_lr"]) == want, st
    run("train", "-m", model, *common, "--lr", 3e-3, "--min-lr", 2e-3,
        "--stop-at", 2, "-f", check=0)
    p = run("train", "--resume", *common, "--lr", 1e-3, check=2)
    assert "--lr 0.001 is below the --min-lr 0.002 of the checkpoint" \
        in one_line_error(p, "train")


def test_data_is_read_whole_once_and_capped(tmp_path):
    """Text through a pipe trains as the same text in a file (the bytes
    that told text from a stream are not read twice), and text of more
    than ANDREA_MAX_BYTES is refused in one line rather than held."""
    text = fortunes_text(5000)
    data = tmp_path / "d.txt"
    data.write_bytes(text)
    common = ["--config", "tiny", "--seq", 16, "--batch", 2, "--steps", 2,
              "--threads", 1]
    run("train", *common, "--data", data, "-o", tmp_path / "a.ats", check=0)
    run("train", *common, "--data", "/dev/stdin", "-o", tmp_path / "b.ats",
        "--checkpoint", tmp_path / "b.ckpt", input=text, check=0)
    assert open(tmp_path / "a.ats", "rb").read() == \
        open(tmp_path / "b.ats", "rb").read()
    p = run("train", *common, "--data", data, "-o", tmp_path / "c.ats",
            env={"ANDREA_MAX_BYTES": "4999"}, check=1)
    assert one_line_error(p, "train") == (
        f"andrea-train: {data}: more than 4999 bytes of text (ANDREA_MAX_BYTES)")
    assert not os.path.exists(tmp_path / "c.ats")
    # a tokens stream is read twice: through a pipe it is refused as such
    # (it was once called a stream of bad magic)
    toks = run("tokenize", input=text, check=0).stdout
    p = run("train", *common, "--data", "/dev/stdin", "-o", tmp_path / "d.ats",
            input=toks, check=1)
    assert "/dev/stdin: a tokens stream must be a file, not a pipe" in \
        one_line_error(p, "train")


def test_a_log_whose_reader_left_stops_the_run_saved(tmp_path):
    """--log into a pipe whose reader has gone: the run stops after that
    step as a signal stops it, saves the model and the checkpoint, says
    so in one line and exits 1 (not killed by SIGPIPE)."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    out = tmp_path / "m.ats"
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([tool("train"), "--config", "tiny", "--data", data,
                        "--seq", "16", "--batch", "2", "--steps", "50",
                        "--log", "/dev/stdout", "-o", out], stdout=w,
                       stderr=subprocess.PIPE)
    os.close(w)
    assert p.returncode == 1, p.stderr
    last = p.stderr.decode().splitlines()[-1]
    assert last == (f"andrea-train: /dev/stdout: write error: Broken pipe; "
                    f"stopped after step 1, saved {out} and {out}.ckpt")
    assert records(f"{out}.ckpt")[0][1]["step"] == "1"
    run("train", "--resume", "--data", data, "-o", out, check=0)


def test_a_resumed_log_whose_reader_left_stops_the_run_too(tmp_path):
    """A resumed run appends to its log opened for writing alone: a pipe
    whose reader has gone fails the write (opened to read too, the run
    was a reader of its own pipe, never saw EPIPE, and ran on)."""
    data = tmp_path / "d.txt"
    data.write_bytes(fortunes_text(20000))
    out = tmp_path / "m.ats"
    common = ["--data", data, "--seq", 16, "--batch", 2, "--threads", 1,
              "-o", out]
    run("train", "--config", "tiny", "--steps", 2, *common, check=0)
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run(list(map(str, [tool("train"), "--resume", "--steps",
                                      100000, *common, "--log",
                                      "/dev/stdout"])),
                       stdout=w, stderr=subprocess.PIPE, timeout=60)
    os.close(w)
    assert p.returncode == 1, p.stderr
    assert b"Broken pipe; stopped after step 3" in p.stderr
