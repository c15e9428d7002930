"""--device auto, cpu and cuda where no GPU is used: auto computes on the
CPU without touching CUDA (not even loading the driver's library) until a
piece of work is large enough, an explicit cuda fails as it always did,
ANDREA_AUTO_MIN_WORK is checked, and the man pages state the rule that
lib/ops/device.h implements.  The rule itself is tests/unit/test_device_auto.c;
tests/test_gpu.py has auto on a GPU."""
import glob
import os
import re

import numpy as np
import pytest

from conftest import ROOT, run, one_line_error, loader_env, loaded_by
from stagekit import pack, pipeline

STAGES = ["embed", "qkv", "scores", "mask", "softmax", "attend"]
# where these are all missing, auto does not look for a GPU (device.c)
DRIVER_FILES = ["/dev/nvidiactl", "/proc/driver/nvidia/gpus", "/dev/dxg"]
ON_GPU = os.environ.get("ANDREA_TEST_DEVICE") == "cuda"


def cuda_build():
    with open(os.path.join(ROOT, "build", "config")) as f:
        return f.read().startswith("cuda1")


def six(text_args=("--text",)):
    return [("embed", *text_args), ("qkv",), ("scores",), ("mask",),
            ("softmax",), ("attend",)]


def test_auto_computes_on_the_cpu_and_loads_nothing_of_cuda(tmp_path):
    # at the size of a sentence, on any machine, GPU or not
    text = b"the cat sat on the mat, and the dog did not " * 4
    logs = str(tmp_path / "logs")
    auto = pipeline(six(), input=text,
                    env={"ANDREA_DEVICE": "auto", **loader_env(logs)})
    cpu = pipeline(six(), input=text, env={"ANDREA_DEVICE": "cpu"})
    assert auto == cpu  # the CPU's numbers, bit for bit
    looked = loaded_by(logs, "libcuda.so")
    assert set(looked) == set(STAGES), looked
    assert not any(looked.values()), looked
    assert not any(loaded_by(logs, "libcublas").values())
    # the default is auto
    logs = str(tmp_path / "logs2")
    env = {k: v for k, v in loader_env(logs).items()}
    if ON_GPU:
        env["ANDREA_DEVICE"] = ""  # unset ANDREA_TEST_DEVICE's cuda
    assert pipeline(six(), input=text, env=env) == cpu
    assert not any(loaded_by(logs, "libcuda.so").values())


@pytest.mark.skipif(any(os.path.exists(f) for f in DRIVER_FILES),
                    reason="the NVIDIA driver's files are here")
def test_large_work_without_a_driver_stays_on_the_cpu_unprobed(tmp_path):
    # no start cost and one thread: the rule asks for the GPU; with no
    # driver here auto takes the CPU without loading libcuda, silently
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 300, 64)).astype(np.float32)
    s = pack(tmp_path, [("q", q), ("k", q[:, ::-1].copy())])
    logs = str(tmp_path / "logs")
    env = {"ANDREA_DEVICE": "auto", "ANDREA_AUTO_MIN_WORK": "0",
           "OMP_NUM_THREADS": "1"}
    auto = run("scores", input=s, env={**env, **loader_env(logs)}, check=0)
    assert auto.stderr == b""
    assert loaded_by(logs, "libcuda.so") == {"scores": False}
    cpu = run("scores", "--device", "cpu", input=s, check=0)
    assert auto.stdout == cpu.stdout


@pytest.mark.skipif(ON_GPU or any(os.path.exists(f) for f in DRIVER_FILES),
                    reason="a GPU may be usable here")
def test_device_cuda_where_none_can_be_used_fails_as_before():
    want = ("--device cuda: no usable CUDA device (" if cuda_build()
            else "--device cuda: this build has no CUDA support")
    for prog in STAGES:
        for args, env in ((["--device", "cuda"], None),
                          ([], {"ANDREA_DEVICE": "cuda"})):
            p = run(prog, *args, input=b"", env=env, check=1)
            assert want in one_line_error(p, prog)
            assert p.stdout == b""


@pytest.mark.parametrize("value", ["x", "-1", "inf", "nan", "1e999", "0.3s"])
def test_a_bad_auto_min_work_is_a_usage_error(value):
    p = run("softmax", input=b"", env={"ANDREA_AUTO_MIN_WORK": value}, check=2)
    msg = one_line_error(p, "softmax")
    assert f"ANDREA_AUTO_MIN_WORK='{value}'" in msg


def test_auto_min_work_takes_seconds(tmp_path):
    rng = np.random.default_rng(2)
    s = pack(tmp_path, [("scores", rng.standard_normal((2, 3, 9, 9)).astype(np.float32))])
    cpu = run("softmax", "--device", "cpu", input=s, check=0).stdout
    for value in ["0", "0.3", "12", "1e-3"]:
        out = run("softmax", "--device", "auto", input=s,
                  env={"ANDREA_AUTO_MIN_WORK": value}, check=0).stdout
        assert out == cpu


def defines():
    """The constants of auto's rule, from lib/ops/device.h."""
    text = open(os.path.join(ROOT, "lib", "ops", "device.h")).read()
    d = dict(re.findall(r"#define (AT_AUTO_MIN_WORK|AT_AUTO_COPY_BYTES) (\S+)", text))
    rates = re.findall(r"#define AT_AUTO_CPU_MADDS (\S+)", text)
    assert len(d) == 2 and len(rates) == 2, (d, rates)
    return d, rates


def page(path):
    return open(os.path.join(ROOT, path)).read()


def test_andrea7_states_the_rule_of_device_h():
    d, (blas, plain) = defines()
    man = page("man/man7/andrea.7")
    sec = man.split(".SH DEVICES\n", 1)[1].split("\n.SH ", 1)[0]
    for line in ["cpu = M / (N \\(mu R)", "gpu = S + Y / P"]:
        assert line in sec
    assert f"costs, {d['AT_AUTO_MIN_WORK']} seconds\n" in sec
    assert f"= {d['AT_AUTO_COPY_BYTES']} bytes a second" in sec
    assert f"({blas} in a build with\nOpenBLAS, {plain} with" in sec
    assert "ANDREA_AUTO_MIN_WORK" in sec and "/dev/nvidiactl" in sec
    env = man.split(".SH ENVIRONMENT\n", 1)[1].split("\n.SH ", 1)[0]
    assert f".B ANDREA_AUTO_MIN_WORK\n" in env and f"{d['AT_AUTO_MIN_WORK']})" in env


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "man", "man1", "*.1"))),
                         ids=os.path.basename)
def test_every_page_with_device_says_what_auto_does(path):
    text = open(path).read()
    syn = text.split(".SH SYNOPSIS", 1)[1].split(".SH ", 1)[0]
    if "device" not in syn:
        return
    opt = text.split(".BI \\-\\-device \" DEV\"\n", 1)[1].split("\n.TP\n", 1)[0]
    assert "DEVICES in\n.BR andrea (7)" in opt, os.path.basename(path)
    prog = os.path.basename(path)[len("andrea-"):-2]
    if prog in STAGES:
        d, _ = defines()
        assert "touches nothing of CUDA" in opt
        env = text.split(".SH ENVIRONMENT\n", 1)[1].split("\n.SH ", 1)[0]
        assert f"(default {d['AT_AUTO_MIN_WORK']})" in env
        assert ".B ANDREA_AUTO_MIN_WORK\nis a usage error" in env
