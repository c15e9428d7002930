"""The experiment scripts of examples/experiments (make experiments, issue
19), each run at a small size, their tables checked against theory or a
NumPy float64 recomputation, and their figures checked to be PNGs."""
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT
from test_page_examples import page_env, skip_long_training

SCRIPTS = os.path.join(ROOT, "examples", "experiments")


def run_script(tmp, name, **env):
    out = tmp / "out"
    e = page_env(tmp)
    e.update({"EXP_OUT": "out", **env})  # relative to cwd, as a user types
    p = subprocess.run(["sh", os.path.join(SCRIPTS, name)], capture_output=True,
                       env=e, cwd=tmp, timeout=600)
    assert p.returncode == 0, p.stderr.decode()
    stem = name[:-3]
    rows = [line.split() for line in
            (out / f"{stem}.txt").read_text().splitlines()[1:]]
    return rows, out


GNUPLOT_FIGURES = {"scale.png", "fill.png", "training-story.png"}


def is_png(path):
    """A PNG; or, where gnuplot is missing, no line plot (the script says
    so and goes on)."""
    if path.name in GNUPLOT_FIGURES and not shutil.which("gnuplot"):
        return not path.exists()
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scale_spread_grows_as_sqrt_d_and_scaling_keeps_the_softmax_soft(tmp_path):
    rows, out = run_script(tmp_path, "scale.sh")
    assert [int(r[0]) for r in rows] == [64, 256, 4096]
    for D, std, root, h_raw, h_scaled in ((int(r[0]), *map(float, r[1:]))
                                          for r in rows):
        assert abs(std - np.sqrt(D)) <= 0.05 * np.sqrt(D), D
        assert root == pytest.approx(np.sqrt(D), rel=1e-3)
        assert h_scaled > 2.0 > 1.0 > h_raw  # sharp without, soft with
    raw = [float(r[3]) for r in rows]
    assert raw[0] > raw[1] > raw[2]  # sharper as D grows
    assert is_png(out / "scale.png")


def test_fill_leaks_as_numpy_says_and_not_at_all_for_inf_or_1e9(tmp_path):
    T = 64
    rows, out = run_script(tmp_path, "fill.sh")
    s = (np.random.default_rng(0).standard_normal((1, 1, T, T)) * 2).astype(
        np.float32)[0, 0].astype(np.float64)
    hidden = np.triu(np.ones((T, T), bool), 1)
    for fill, leaked in ((r[0], float(r[1])) for r in rows):
        f = -np.inf if fill == "-inf" else float(fill)
        m = np.where(hidden, f, s)
        p = np.exp(m - m.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        want = np.where(hidden, p, 0).sum(-1).mean()
        if fill in ("-inf", "-1e9"):
            assert leaked == 0
        else:
            assert leaked == pytest.approx(want, rel=1e-3), fill
    assert is_png(out / "fill.png")


def test_masked_rows_sum_to_one_with_nothing_above_the_diagonal(tmp_path):
    rows, out = run_script(tmp_path, "masked-rows.sh", EXP_TEXT="a short one")
    assert len(rows) == 12
    for r in rows:
        assert float(r[1]) <= 1e-6 and float(r[2]) == 0
    assert is_png(out / "masked-rows.png")


def test_one_head_alone_equals_its_slice_of_all(tmp_path):
    rows, out = run_script(tmp_path, "one-head.sh")
    assert [r[0] for r in rows] == ["v", "scores"]
    # float32 rounding of the products' sums: how OpenBLAS blocks a product of
    # 192 columns and one of 2304 depends on the CPU (1.9e-6 on one here)
    assert all(float(r[1]) <= 1e-5 for r in rows)
    assert is_png(out / "one-head.png") and is_png(out / "one-head-diff.png")


def test_the_training_story_lowers_the_held_out_loss(tmp_path):
    skip_long_training()
    rows, out = run_script(tmp_path, "training-story.sh", EXP_STEPS="120")
    steps = [int(r[0]) for r in rows]
    val = [float(r[2]) for r in rows]
    assert steps == [30, 60, 90, 120]
    assert val[-1] < val[0] - 0.3
    assert is_png(out / "training-story.png")
    assert is_png(out / "training-story-heads.png")
