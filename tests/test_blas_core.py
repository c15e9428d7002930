"""The products agree with the float64 NumPy oracle within 1e-5 whichever
of OpenBLAS's kernels runs them (issue 20): the generic SSE3 one that a
CPU too new for the library falls back to, and each AVX2 or AVX-512 one
this CPU can run, chosen with OPENBLAS_CORETYPE (which a tool keeps when
the user set it).  The rule that picks the kernel is
tests/unit/test_blas_core.c."""
import numpy as np
import pytest

import oracle
from conftest import build_settings, run
from stagekit import pack, random_model, unpack

TOL = 1e-5


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def cores():
    flags = cpu_flags()
    out = ["Prescott"]
    if {"avx2", "fma"} <= flags:
        out += ["Haswell", "Zen"]
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        out.append("SkylakeX")
    return out


def blas_build():
    return not any(s == "BLAS=none" for s in build_settings())


@pytest.mark.parametrize("core", cores())
def test_qkv_matches_numpy_on_each_kernel(tmp_path, core):
    if not blas_build():
        pytest.skip("a build without OpenBLAS (BLAS=none)")
    rng = np.random.default_rng(41)
    B, T, H, D = 2, 37, 3, 11
    model, p = random_model(tmp_path, rng, 1, H, H * D, 17, 64)
    x = rng.standard_normal((B, T, H * D)).astype(np.float32)
    out = unpack(tmp_path, run("qkv", "-m", model, "--threads", 2,
                               input=pack(tmp_path, [("x", x)]),
                               env={"OPENBLAS_CORETYPE": core},
                               check=0).stdout)
    for name, ref in zip("qkv", oracle.qkv(x, p, 0, H)):
        assert oracle.rel_err(out[name], ref) <= TOL, (core, name)
