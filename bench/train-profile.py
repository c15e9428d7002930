"""make bench-train-profile: where one training step's GPU time goes,
kernel by kernel, in andrea-train and in the compiled PyTorch model of
bench/train-gpu.py (the reference of bench-train-gpu), to see which of
andrea's kernels fall behind and what the compiled graph does instead.

  python3 bench/train-profile.py [CONFIG [V [PRECISION [andrea|torch]]]]

(defaults andrea-120m 8449 bf16, both sides).  andrea-train runs
1 and then 1 + STEPS steps under Nsight Compute (ncu,
gpu__time_duration.sum; clocks and caches left as they are), its kernels
summed by name, the first run's taken from the second's and divided by
STEPS (so the first step's one-off work drops out: the plans, the
graph's recording), with ANDREA_TUNE=0 (the large products take
cuBLASLt's first algorithm, the attention cuDNN's first engine: timed
under ncu, the choice moves); the
compiled model runs under torch.profiler for PROFILED steps after its
warm-up and compilation.  ncu serializes the kernels, so the sums are
kernel time, not the step's wall time (bench-train-gpu measures that).
"""
import collections
import csv
import io
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, PROFILED, TOP = 2, 3, 30


def table(title, rows, steps):
    """rows: name -> [calls, ms]; prints the TOP largest per step."""
    total = sum(ms for _, ms in rows.values()) / steps
    print(f"{title}: {total:.2f} ms of kernels a step")
    for name, (calls, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:TOP]:
        print(f"  {ms / steps:8.3f} ms {calls / steps:6.1f}x  {name[:96]}")


def ncu_kernels(ncu, tg, tmp, name, V, prec, steps):
    """andrea-train's kernels over `steps` steps under ncu: name -> [calls,
    ms]."""
    data = tg.data_file(tmp, V)
    p = subprocess.run(
        [ncu, "--clock-control", "none", "--cache-control", "none",
         "--metrics", "gpu__time_duration.sum", "--csv", "--print-units",
         "base", os.path.join(ROOT, "bin", "andrea-train"), "--config", name,
         "--vocab", str(V), "--data", data, "--steps", str(steps), "--batch",
         str(tg.B), "--seq", str(tg.T), "--val-fraction", "0",
         "--save-every", "0", "-z", "0", "--device", "cuda", "--precision",
         prec, "-o", os.path.join(tmp, f"m{steps}.ats")],
        capture_output=True, text=True,
        # under ncu's serialized kernels the timed choice of cuBLASLt's
        # algorithms would differ from run to run: the heuristic's
        env=dict(os.environ, ANDREA_TUNE="0"))
    if p.returncode != 0:
        sys.exit(f"train-profile: andrea-train under ncu failed: "
                 f"{p.stderr.strip()[-500:]}")
    rows = collections.defaultdict(lambda: [0, 0.0])
    for r in csv.DictReader(io.StringIO(p.stdout[p.stdout.find('"ID"'):])):
        if r.get("Metric Name") == "gpu__time_duration.sum":
            k = rows[r["Kernel Name"]]
            k[0] += 1
            k[1] += float(r["Metric Value"].replace(",", "")) * 1e-6  # ns
    return rows


def andrea(tg, tmp, name, V, prec):
    """The kernels of STEPS steps less those of one: the first step's
    one-off work (cuBLASLt's timed choice of algorithms, the plans, the
    graph's recording) drops out."""
    ncu = shutil.which("ncu")
    if not ncu:
        print("andrea: ncu (Nsight Compute) is not on PATH; not profiled")
        return
    one = ncu_kernels(ncu, tg, tmp, name, V, prec, 1)
    rows = ncu_kernels(ncu, tg, tmp, name, V, prec, 1 + STEPS)
    for k, (calls, ms) in one.items():
        rows[k][0] -= calls
        rows[k][1] -= ms
    table(f"andrea-train {name} V {V} {prec} (ncu, {1 + STEPS} steps less "
          f"1)", {k: v for k, v in rows.items() if v[0] > 0}, STEPS)


def compiled(tg, name, V, prec):
    from train_gpu import profiled_compiled
    prof = profiled_compiled(name, V, prec, PROFILED)
    rows = {e.key: [e.count, e.self_device_time_total / 1e3]
            for e in prof.key_averages() if e.device_type.name == "CUDA"}
    table(f"torch.compile + SDPA {name} V {V} {prec} (torch.profiler, "
          f"{PROFILED} steps)", rows, PROFILED)


if __name__ == "__main__":
    from train_gpu import run_sides
    run_sides("train-profile", __doc__, andrea, compiled)
