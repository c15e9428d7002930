"""bench/attention.py - the fused attention stage (make bench-attention,
issue 18) against what a user would run instead, in the same run.

CPU: andrea-attention --device cpu on q, k, v [1,12,T,64] against the four
stages it replaces (andrea-scores | -mask | -softmax | -attend, --device
cpu; only where their T x T records fit, T <= 4096) and against NumPy
float32 doing the same causal attention head by head.  Wall seconds of the
whole command (median of 3; one run at T = 8192) and the peak resident
memory of the largest process (ru_maxrss).

GPU (where PyTorch sees one and the build has CUDA): the forward and the
forward + backward, B = 8, H = 12, D = 64, causal: in fp32 andrea's own
kernels (build/kernels/attention-check's timings: TF32 tensor cores on
operands split in two, about fp32's accuracy), in bf16 cuDNN's fused
attention as andrea builds it (build/kernels/sdpa-check's), both CUDA
events, median of 10 or 20; against F.scaled_dot_product_attention(
is_causal=True) in the same precision (TF32 off), timed with CUDA events as
bench/gpu.py times (median of 50 after 5 warm-up runs).  The ratio is
PyTorch's time over andrea's (above 1: andrea is faster).

Arguments: cpu or gpu runs one part.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from stagekit import pack  # noqa: E402

H, D = 12, 64


def run_procs(cmds, stdin_path, stdout_path):
    """Runs cmds as one pipeline; (wall seconds, largest peak MiB)."""
    t0 = time.perf_counter()
    procs, prev = [], open(stdin_path, "rb")
    for i, c in enumerate(cmds):
        out = open(stdout_path, "wb") if i == len(cmds) - 1 else subprocess.PIPE
        p = subprocess.Popen(c, stdin=prev, stdout=out)
        prev.close()  # the child has it (and a reader's exit reaches us)
        prev = p.stdout
        procs.append(p)
    peak = 0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"bench/attention: {cmds} failed")
        peak = max(peak, ru.ru_maxrss / 1024)
    return time.perf_counter() - t0, peak


def numpy_attention(q, k, v):
    T = q.shape[2]
    mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    out = np.empty_like(q)
    for h in range(q.shape[1]):
        s = q[0, h] @ k[0, h].T * np.float32(D ** -0.5) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        out[0, h] = (s / s.sum(-1, keepdims=True)) @ v[0, h]
    return out


def cpu_part():
    print("CPU: causal attention of q, k, v [1,12,T,64] (seconds, peak MiB)")
    print(f"{'T':>6} {'andrea-attention':>18} {'four stages':>18} "
          f"{'NumPy f32':>12} {'stages/fused':>13} {'NumPy/fused':>12}")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        for T in (1024, 4096, 8192):
            q, k, v = (rng.standard_normal((1, H, T, D), np.float32)
                       for _ in range(3))
            src = os.path.join(tmp, "qkv.ats")
            with open(src, "wb") as f:
                f.write(pack(tmp, [("q", q), ("k", k), ("v", v)]))
            dst = os.path.join(tmp, "out.ats")
            reps = 3 if T <= 4096 else 1
            dev = ["--device", "cpu"]
            fused = sorted(run_procs([[f"{BIN}/andrea-attention", *dev]], src,
                                     dst) for _ in range(reps))[reps // 2]
            staged = None
            if T <= 4096:
                cmds = [[f"{BIN}/andrea-{s}", *dev]
                        for s in ("scores", "mask", "softmax", "attend")]
                staged = sorted(run_procs(cmds, src, dst)
                                for _ in range(reps))[reps // 2]
            t0 = time.perf_counter()
            numpy_attention(q, k, v)
            npt = time.perf_counter() - t0
            st = f"{staged[0]:8.2f} {staged[1]:7.0f}M" if staged else \
                f"{'(3 GiB scores)':>18}"
            ratio = f"{staged[0] / fused[0]:12.2f}x" if staged else f"{'':>13}"
            print(f"{T:>6} {fused[0]:8.2f} {fused[1]:7.0f}M {st} {npt:11.2f}s "
                  f"{ratio} {npt / fused[0]:11.2f}x")


def harness_times(name, pattern):
    """{(T, part): ms} from a kernel harness's timing lines."""
    out = subprocess.run([os.path.join(ROOT, "build", "kernels", name)],
                         capture_output=True, text=True, check=True).stdout
    times = {}
    for m in re.finditer(pattern, out):
        T = int(m.group(1))
        times[(T, "fwd")] = float(m.group(2))
        times[(T, "fwd+bwd")] = float(m.group(3))
    return times


def gpu_part():
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu import median_ms  # bench/gpu.py's timing: events, median
    if not torch.cuda.is_available() or not os.path.exists(
            os.path.join(ROOT, "build", "kernels", "attention-check")):
        print("GPU: skipped (no CUDA device for PyTorch, or no CUDA build)")
        return
    ours = {"fp32": harness_times(
        "attention-check",
        r"time attention fp32 causal B=8 H=12 T=(\d+) D=64: ([\d.]+) ms"
        r"(?s:.*?)forward \+ backward ([\d.]+) ms")}
    ours["bf16"] = harness_times(
        "sdpa-check",
        r"time cudnn attention bf16 causal B=8 H=12 T=(\d+) D=64: forward "
        r"([\d.]+) ms.*forward \+ backward ([\d.]+) ms")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    print("GPU: causal attention, B = 8, H = 12, D = 64 (ms; ratio = SDPA's "
          "time over andrea's)")
    print(f"{'T':>6} {'prec':>5} {'part':>8} {'andrea':>9} {'SDPA':>9} "
          f"{'ratio':>7}")
    Ts = sorted({T for t in ours.values() for T, _ in t})
    for T in Ts:
        for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            q, k, v = (torch.randn(8, H, T, D, device="cuda", dtype=dt,
                                   requires_grad=True) for _ in range(3))
            g = torch.randn_like(q)

            def fwd():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def fwd_bwd():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                o.backward(g)
            for part, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
                ms = ours[prec].get((T, part))
                if ms is None:
                    continue
                ref = median_ms(fn, 0)
                print(f"{T:>6} {prec:>5} {part:>8} {ms:9.3f} {ref:9.3f} "
                      f"{ref / ms:6.2f}x")
            del q, k, v, g
    print("(fp32: andrea's own kernels, tensor cores on split operands; "
          "bf16: cuDNN's fused attention "
          "through andrea's graph, kernels/ops/attention_cudnn.cu)")


if __name__ == "__main__":
    parts = sys.argv[1:] or ["cpu", "gpu"]
    if "cpu" in parts:
        cpu_part()
    if "gpu" in parts:
        try:
            gpu_part()
        except ImportError:
            print("GPU: skipped (no PyTorch)")
