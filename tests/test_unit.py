"""Runs every C unit test in build/tests/ (built from tests/unit/*.c)."""
import glob
import os
import subprocess

import pytest

from conftest import ROOT

SOURCES = sorted(glob.glob(os.path.join(ROOT, "tests", "unit", "*.c")))


@pytest.mark.parametrize("src", SOURCES, ids=os.path.basename)
def test_unit(src):
    exe = os.path.join(ROOT, "build", "tests",
                       os.path.basename(src)[:-2])
    if not os.path.exists(exe):
        pytest.fail(f"{exe} is not built: run make first")
    p = subprocess.run([exe], capture_output=True, timeout=120)
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 0, out
    assert " 0 failed" in out, out


def test_every_built_unit_has_a_source():
    built = glob.glob(os.path.join(ROOT, "build", "tests", "*"))
    names = {os.path.basename(b) for b in built
             if os.path.isfile(b) and os.access(b, os.X_OK)}
    assert names <= {os.path.basename(s)[:-2] for s in SOURCES}
