"""make bench-train-profile: where one training step's GPU time goes,
kernel by kernel, in andrea-train and in the compiled PyTorch model of
bench/train-gpu.py (the reference of bench-train-gpu), to see which of
andrea's kernels fall behind and what the compiled graph does instead.

  python3 bench/train-profile.py [CONFIG [V [PRECISION [andrea|torch]]]]

(defaults andrea-120m 8449 bf16, both sides).  andrea-train runs
STEPS steps under Nsight Compute (ncu, gpu__time_duration.sum; clocks
and caches left as they are), its kernels summed by name and divided by
STEPS (the first step's one-off kernels are few and small); the
compiled model runs under torch.profiler for PROFILED steps after its
warm-up and compilation.  ncu serializes the kernels, so the sums are
kernel time, not the step's wall time (bench-train-gpu measures that).
"""
import collections
import csv
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, PROFILED, TOP = 2, 3, 30


def bench_module():
    spec = importlib.util.spec_from_file_location(
        "train_gpu", os.path.join(ROOT, "bench", "train-gpu.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def table(title, rows, steps):
    """rows: name -> [calls, ms]; prints the TOP largest per step."""
    total = sum(ms for _, ms in rows.values()) / steps
    print(f"{title}: {total:.2f} ms of kernels a step")
    for name, (calls, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:TOP]:
        print(f"  {ms / steps:8.3f} ms {calls / steps:6.1f}x  {name[:96]}")


def andrea(tg, tmp, name, V, prec):
    ncu = shutil.which("ncu")
    if not ncu:
        print("andrea: ncu (Nsight Compute) is not on PATH; not profiled")
        return
    data = tg.data_file(tmp, V)
    p = subprocess.run(
        [ncu, "--clock-control", "none", "--cache-control", "none",
         "--metrics", "gpu__time_duration.sum", "--csv", "--print-units",
         "base", os.path.join(ROOT, "bin", "andrea-train"), "--config", name,
         "--vocab", str(V), "--data", data, "--steps", str(STEPS), "--batch",
         str(tg.B), "--seq", str(tg.T), "--val-fraction", "0",
         "--save-every", "0", "-z", "0", "--device", "cuda", "--precision",
         prec, "-o", os.path.join(tmp, "m.ats")],
        capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"train-profile: andrea-train under ncu failed: "
                 f"{p.stderr.strip()[-500:]}")
    rows = collections.defaultdict(lambda: [0, 0.0])
    for r in csv.DictReader(io.StringIO(p.stdout[p.stdout.find('"ID"'):])):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            k = rows[r["Kernel Name"]]
            k[0] += 1
            k[1] += float(r["Metric Value"].replace(",", "")) * 1e-6  # ns
    table(f"andrea-train {name} V {V} {prec} (ncu, {STEPS} steps)", rows,
          STEPS)


def compiled(tg, name, V, prec):
    from torch.profiler import ProfilerActivity, profile
    one = tg.reference_step(name, V, prec, "compiled")
    for _ in range(tg.WARM + tg.COMPILE_WARM):  # as bench-train-gpu
        one()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            one()
    rows = {e.key: [e.count, e.self_device_time_total / 1e3]
            for e in prof.key_averages() if e.device_type.name == "CUDA"}
    table(f"torch.compile + SDPA {name} V {V} {prec} (torch.profiler, "
          f"{PROFILED} steps)", rows, PROFILED)


def main():
    a = sys.argv[1:]
    name = a[0] if a else "andrea-120m"
    V = int(a[1]) if len(a) > 1 else 8449
    prec = a[2] if len(a) > 2 else "bf16"
    side = a[3] if len(a) > 3 else "both"
    tg = bench_module()
    if name not in tg.CONFIGS or prec not in tg.PEAK or side not in (
            "both", "andrea", "torch"):
        sys.exit(__doc__)
    if not torch.cuda.is_available():
        sys.exit("train-profile: PyTorch sees no GPU")
    with tempfile.TemporaryDirectory() as tmp:
        if side != "torch":
            andrea(tg, tmp, name, V, prec)
        if side != "andrea":
            compiled(tg, name, V, prec)


if __name__ == "__main__":
    main()
