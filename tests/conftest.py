"""Shared helpers for the andrea test suite (run by `make test`).

Executables are taken from bin/ of this checkout; tests never depend on an
installed copy.  `run` returns a CompletedProcess with bytes stdout/stderr.

The tools run without the caller's ANDREA_* variables, except that
ANDREA_TEST_DEVICE=cuda (set by `make test-gpu`) becomes ANDREA_DEVICE=cuda,
so that the same suites check the GPU paths of the stages.
"""
import os
import re
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


def tool_env(env=None):
    """The environment the tools run in: ours without ANDREA_* variables,
    plus ANDREA_DEVICE from ANDREA_TEST_DEVICE, plus env."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("ANDREA_")}
    if os.environ.get("ANDREA_TEST_DEVICE"):
        full_env["ANDREA_DEVICE"] = os.environ["ANDREA_TEST_DEVICE"]
    full_env.update(env or {})
    return full_env


def run(name, *args, input=None, env=None, check=None, timeout=120, cwd=None):
    """Runs bin/andrea-NAME with args; check=0/1/2 asserts the exit code."""
    p = subprocess.run([tool(name), *map(str, args)], input=input,
                       capture_output=True, env=tool_env(env), timeout=timeout,
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


def loader_env(logdir):
    """Variables that make the dynamic loader log every library each tool
    looks for, one file per process under logdir (see loaded_by)."""
    os.makedirs(logdir, exist_ok=True)
    return {"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": os.path.join(logdir, "ld")}


def loaded_by(logdir, library):
    """{tool name: whether it looked for library} from loader_env's logs:
    'libcuda.so' is the CUDA driver, which any use of the GPU loads."""
    import glob
    found = {}
    for path in glob.glob(os.path.join(logdir, "ld.*")):
        text = open(path, errors="replace").read()
        m = re.search(r"initialize program: \S*andrea-([\w-]+)", text)
        if m:
            found[m[1]] = found.get(m[1], False) or library in text
    return found


def build_settings():
    """CUDA=, CUDNN=, BLAS=, PNG=, JSON=, PCRE=, MVEC=, SAN= of the build
    in bin/ (build/config, the Makefile's CONFIG), so that the nested make
    installs it instead of relinking another."""
    m = re.fullmatch(r"cuda(\d)-cudnn(\d)-(.+)-png(\d)-json(\d)-pcre(\d)"
                     r"-mvec(\d)-san(\d)-\d+",
                     open(os.path.join(ROOT, "build", "config")).read().strip())
    assert m, "build/config does not read as the Makefile's CONFIG"
    return [f"CUDA={m[1]}", f"CUDNN={m[2]}", f"BLAS={m[3]}", f"PNG={m[4]}",
            f"JSON={m[5]}", f"PCRE={m[6]}", f"MVEC={m[7]}", f"SAN={m[8]}"]
