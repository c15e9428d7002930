"""Shared helpers for the andrea test suite (run by `make test`).

Executables are taken from bin/ of this checkout; tests never depend on an
installed copy.  `run` returns a CompletedProcess with bytes stdout/stderr.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def tool(name):
    """Absolute path of bin/andrea-NAME."""
    path = os.path.join(BIN, "andrea-" + name)
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built: run make first")
    return path


def run(name, *args, input=None, env=None, check=None, timeout=120, cwd=None):
    """Runs bin/andrea-NAME with args; check=0/1/2 asserts the exit code."""
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("ANDREA_"):
            del full_env[k]
    if env:
        full_env.update(env)
    p = subprocess.run([tool(name), *map(str, args)], input=input,
                       capture_output=True, env=full_env, timeout=timeout,
                       cwd=cwd)
    if check is not None:
        assert p.returncode == check, (
            f"andrea-{name} {args}: exit {p.returncode}, expected {check}; "
            f"stderr: {p.stderr.decode(errors='replace')}")
    return p


def one_line_error(p, prog):
    """Asserts stderr is exactly one line starting with 'andrea-PROG: '."""
    err = p.stderr.decode(errors="replace")
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert lines[0].startswith(f"andrea-{prog}: "), lines[0]
    return lines[0]
