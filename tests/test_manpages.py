"""Every executable has a man page whose SYNOPSIS is its --help text, and
every page renders without warnings."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, run

PROGS = sorted(os.path.basename(p)[len("andrea-"):-2]
               for p in glob.glob(os.path.join(ROOT, "cmd", "andrea-*.c")))
PAGES = sorted(glob.glob(os.path.join(ROOT, "man", "man[157]", "*.[157]")))


def synopsis(page):
    """The SYNOPSIS of a man page as man renders it, as one line."""
    p = subprocess.run(["man", "-l", os.path.join(ROOT, "man", "man1", page)],
                       capture_output=True, text=True, check=True,
                       env={**os.environ, "MANWIDTH": "2000", "LC_ALL": "C",
                            "MAN_KEEP_FORMATTING": ""})
    text = re.sub(r".\x08", "", p.stdout)
    body = text.split("\nSYNOPSIS\n", 1)[1]
    body = re.split(r"\n[A-Z][A-Z ]+\n", body, maxsplit=1)[0]
    return " ".join(body.split())


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
@pytest.mark.parametrize("prog", PROGS)
def test_help_matches_synopsis(prog):
    assert os.path.exists(os.path.join(ROOT, "man", "man1", f"andrea-{prog}.1"))
    p = run(prog, "--help", check=0)
    usage = " ".join(p.stdout.decode().split())
    assert usage == "usage: " + synopsis(f"andrea-{prog}.1")
    assert run(prog, "--version", check=0).stdout.startswith(
        f"andrea-{prog} (andrea) ".encode())


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_man_page_renders(page):
    p = subprocess.run(["man", "--warnings", "-l", page], capture_output=True,
                       env={**os.environ, "MANWIDTH": "80"})
    assert p.returncode == 0 and p.stderr == b"", p.stderr


def test_every_page_is_referenced_and_present():
    assert len(PAGES) >= len(PROGS) + 2
