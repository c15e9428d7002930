"""The scripts a user runs to see andrea work: tools/demo.sh (`make demo`)
and examples/training-tour.sh, run as they are (the tour with few steps)."""
import os
import subprocess

import pytest

from conftest import ROOT, tool_env

FORTUNES = "/usr/share/games/fortunes"


def sh(script, env=None, timeout=300):
    p = subprocess.run(["sh", os.path.join(ROOT, script)], capture_output=True,
                       env=tool_env(env), timeout=timeout)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode(errors="replace")


def test_the_demo_shows_one_head_stage_by_stage():
    out = sh("tools/demo.sh")
    assert "attn f32 [1,12,23,23]" in out  # BOS and 22 bytes
    assert "\n<bos> @" in out               # the labelled map's first row
    assert "examples/training-tour.sh" in out


@pytest.mark.skipif(not os.path.isdir(FORTUNES), reason="no fortunes package")
def test_the_training_tour_trains_writes_and_looks_inside():
    out = sh("examples/training-tour.sh", {"ANDREA_TOUR_STEPS": "20"})
    assert '"step": 20' in out and "val_loss" in out
    assert "attn f32 [1,1,38,38]" in out  # head 2 of layer 1, 38 bytes
