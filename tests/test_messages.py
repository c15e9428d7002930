"""The rough edges issue 19 lists, each as a user hits it: one clear line
naming what is wrong, and no complaint about what a tool does not use."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT, run, one_line_error
from stagekit import pack


def test_tools_that_never_compress_ignore_a_bad_zlevel(tmp_path):
    s = pack(tmp_path, [("x", np.ones((2, 2), np.float32))])
    env = {"ANDREA_ZLEVEL": "fast"}
    for prog, args in (("show", []), ("diff", ["-", "-"])):
        run(prog, *args, input=s if prog == "show" else None, env=env,
            check=None)
    assert run("show", input=s, env=env, check=0).stdout.startswith(b"x f32")
    r = run("qkv", input=b"", env=env, check=2)
    assert "ANDREA_ZLEVEL='fast'" in one_line_error(r, "qkv")


def test_a_bad_andrea_device_is_named_as_the_variable(tmp_path):
    p = run("qkv", input=b"", env={"ANDREA_DEVICE": ""}, check=1)  # empty: unset
    assert "empty input" in p.stderr.decode()
    r = run("qkv", input=b"", env={"ANDREA_DEVICE": "gpu"}, check=2)
    assert one_line_error(r, "qkv") == \
        "andrea-qkv: ANDREA_DEVICE='gpu': expected auto, cpu or cuda"
    r = run("qkv", "--device", "gpu", input=b"", check=2)
    assert "--device 'gpu'" in one_line_error(r, "qkv")
    s = pack(tmp_path, [("x", np.ones((2, 2), np.float32))])
    run("show", input=s, env={"ANDREA_DEVICE": "gpu"}, check=0)  # no device


def test_a_directory_as_training_data_says_so(tmp_path):
    r = run("train", "--config", "tiny", "--data", tmp_path, "--steps", 1,
            "-o", tmp_path / "m.ats", check=1)
    assert "is a directory" in one_line_error(r, "train")


def test_an_activation_stream_given_as_a_model_is_not_a_model_file(tmp_path):
    x = tmp_path / "x.ats"
    x.write_bytes(run("embed", "--text", input=b"hi", check=0).stdout)
    r = run("qkv", "-m", x, input=x.read_bytes(), check=1)
    assert "is not a model file" in one_line_error(r, "qkv")


@pytest.mark.parametrize("scale", ["1e-50", "1e50"])
def test_a_scale_float32_cannot_hold_is_a_usage_error(tmp_path, scale):
    for prog in ("scores", "attention"):
        r = run(prog, "--scale", scale, input=b"", check=2)
        assert "beyond float32's range" in one_line_error(r, prog)


def test_attend_names_weights_that_are_not_square(tmp_path):
    a = np.ones((1, 1, 5, 64), np.float32)
    r = run("attend", input=pack(tmp_path, [("attn", a), ("v", a)]), check=1)
    assert "record 1 'attn': shape [1,1,5,64]: expected [B,H,T,T]" in \
        one_line_error(r, "attend")


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
def test_pages_say_what_the_tools_do(tmp_path):
    def page(name):
        p = subprocess.run(["man", "-l", os.path.join(ROOT, "man", name)],
                           capture_output=True, text=True,
                           env={**os.environ, "MANWIDTH": "2000", "LC_ALL": "C"})
        return " ".join(p.stdout.split())
    assert "(- means standard output)" in page("man1/andrea-pack.1")
    assert "planned" not in page("man5/andrea-model.5")
    m = tmp_path / "m.ats"
    run("train", "--config", "tiny", "--steps", 0, "-o", m, check=0)
    for tool, extra in (("attend", ["--proj"]), ("embed", ["--text"]),
                        ("qkv", [])):
        text = page(f"man1/andrea-{tool}.1")
        assert "has no effect with -m" not in text
        assert "it is a usage error" in text
        r = run(tool, *extra, "-m", m, "--seed", 3, input=b"", check=2)
        assert "--seed" in one_line_error(r, tool)


def test_a_fill_beyond_float32_is_an_error_as_the_page_says(tmp_path):
    s = pack(tmp_path, [("scores", np.zeros((1, 1, 3, 3), np.float32))])
    r = run("mask", "--fill", "-1e39", input=s, check=2)
    assert "beyond float32's range" in one_line_error(r, "mask")
    page = open(os.path.join(ROOT, "man", "man1", "andrea-mask.1")).read()
    assert "becomes an\ninfinity" not in page and "usage error" in page
