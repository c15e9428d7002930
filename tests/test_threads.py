"""The CPU threads sleep between bursts (issue 15): the arithmetic and the
codec run on the pool of lib/core/parallel.c, whose workers are named
andrea-pool and wait on a condition variable, never on OpenMP's or
OpenBLAS's threads, whose idle workers spin between parallel regions and
take the cores of the other stages of a pipeline or of a busy machine.
--threads (or ANDREA_THREADS) sets the pool's size for the arithmetic too.
On a pipe the stream's bytes move on two more threads, andrea-pump
(lib/stream/pump.c), which sleep on the pipe or on a condition variable."""
import os
import re
import select
import subprocess
import time

import numpy as np
import pytest

import atsfmt
from conftest import ROOT, tool, tool_env

SOURCES = (".c", ".h", ".cu", ".cuh")
# any OpenMP construct but simd: under -fopenmp-simd it would be ignored
# (the loop silently on one thread), under -fopenmp it would start a team
OMP_NOT_SIMD = re.compile(r"^\s*#\s*pragma\s+omp\s+(?!simd\b)\w+", re.M)


def test_no_openmp_threads_in_the_sources():
    for top in ("lib", "cmd", "kernels", "bench", "tests/unit"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith(SOURCES):
                    path = os.path.join(folder, name)
                    text = open(path, encoding="utf-8").read()
                    hit = OMP_NOT_SIMD.search(text)
                    assert not hit, (f"{os.path.relpath(path, ROOT)}: "
                                     f"{hit.group(0).strip()}: use "
                                     "at_parallel_range (core/parallel.h)")
                    assert "omp_" not in text, path
    make = open(os.path.join(ROOT, "Makefile")).read()
    assert "-fopenmp-simd" in make
    assert not re.search(r"-fopenmp(?!-simd)", make), "Makefile: -fopenmp"


def threads_of(pid):
    """{tid: (name, state, utime + stime in clock ticks)} of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
        except FileNotFoundError:  # a thread that just ended
            continue
        f = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, f[0], int(f[11]) + int(f[12]))
    return out


def qkv_waiting(args, env):
    """Starts andrea-qkv (the default model: C 768) on a pipe, sends it one
    x record and no end record, reads what it writes, and returns (process,
    its threads) once it has written something and all its threads have
    slept for a quarter of a second without using CPU time: it has done
    its work and waits for more input."""
    T = 256
    x = np.random.default_rng(5).standard_normal((1, T, 768), np.float32)
    p = subprocess.Popen([tool("qkv"), "--device", "cpu", *args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=tool_env(env))
    p.stdin.write(atsfmt.record("x", "f32", x.shape, x.tobytes(),
                                attrs=b"layer=0\n"))
    p.stdin.flush()
    out, before, deadline = b"", None, time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, f"never idle: {before}"
        assert p.poll() is None, p.stderr.read().decode(errors="replace")
        if select.select([p.stdout], [], [], 0.25)[0]:
            out += os.read(p.stdout.fileno(), 1 << 20)
            continue
        now = threads_of(p.pid)
        if out and now == before and all(s == "S" for _, s, _ in now.values()):
            return p, now
        before = now


def finish(p):
    p.stdin.write(atsfmt.end_record())
    p.stdin.close()
    p.stdout.read()
    assert p.wait(timeout=60) == 0, p.stderr.read().decode(errors="replace")


def test_a_stage_computes_on_the_pool_and_sleeps_on_its_pipe():
    p, threads = qkv_waiting([], {})
    try:
        main = threads.pop(p.pid)
        assert main[0] == "andrea-qkv"
        pumps = [t for t, (name, _, _) in threads.items() if name == "andrea-pump"]
        assert len(pumps) == 2, f"stdin and stdout are pipes: {threads}"
        for t in pumps:
            del threads[t]
        # the draws of the weights, LayerNorm and the product ran on more
        # than one thread where there is more than one processor
        if os.cpu_count() > 1:
            assert threads, "no worker started: the work ran on one thread"
        for tid, (name, _, _) in threads.items():
            assert name == "andrea-pool", (
                f"thread {tid} '{name}' is not the pool's (OpenMP's? "
                "OpenBLAS's?)")
    finally:
        finish(p)


@pytest.mark.parametrize("args, env", [(["--threads", "1"], {}),
                                       ([], {"ANDREA_THREADS": "1"})],
                         ids=["--threads 1", "ANDREA_THREADS=1"])
def test_one_thread_starts_no_worker(args, env):
    p, threads = qkv_waiting(args, env)
    try:
        workers = [t for t, (name, _, _) in threads.items()
                   if name != "andrea-pump"]
        assert workers == [p.pid], threads
    finally:
        finish(p)
