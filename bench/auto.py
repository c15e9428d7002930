"""The --device auto benchmark (bench/run-auto.sh), for a CUDA build on a
GPU machine; plain Python 3, no packages.

(a) What starting CUDA costs a process: build/bench/cuda-start's steps
    (driver, context, cuBLAS, the upload of andrea-qkv's weights), each the
    median over fresh processes; six of them started at once, as a pipe
    starts its stages; and andrea-qkv on one token with --device cuda
    against --device cpu, the whole process timed from outside.  The last
    is what ANDREA_AUTO_MIN_WORK stands for.
(b) The six-stage pipeline

        andrea-embed --text | andrea-qkv | andrea-scores | andrea-mask |
        andrea-softmax | andrea-attend | andrea-show

    at T = 64, 256, 1024 (the default model) and 4096 (a one-layer model
    of context 4096 made with andrea-train --steps 0) with ANDREA_DEVICE
    cpu, cuda, auto, and auto with ANDREA_AUTO_MIN_WORK=0 (every product
    worth its copies on the GPU), the modes taking turns, each figure the
    median wall time of REPS runs after one run not counted.  Every run
    has LD_DEBUG=libs, which shows which stages loaded the CUDA driver
    (the "gpu stages" column); all modes pay its small cost alike.

Usage: bench/auto.py [REPS [BUDGET_S]]; default 5 runs, and a budget of
150 s for (b), after which each size gets one run only.
"""
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
STAGES = ["embed", "qkv", "scores", "mask", "softmax", "attend"]
MODES = [("cpu", {"ANDREA_DEVICE": "cpu"}), ("cuda", {"ANDREA_DEVICE": "cuda"}),
         ("auto", {"ANDREA_DEVICE": "auto"}),
         ("auto0", {"ANDREA_DEVICE": "auto", "ANDREA_AUTO_MIN_WORK": "0"})]
SIZES = [64, 256, 1024, 4096]
DEFAULT_CTX = 1024


def env_of(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ANDREA_") and not k.startswith("LD_DEBUG")}
    env.update(extra)
    return env


def timed(cmd, extra, ld=None):
    """Wall seconds of `bash -c cmd`, or None when it failed; with ld, the
    dynamic loader's log goes to files ld.PID."""
    env = env_of(extra)
    if ld:
        env.update(LD_DEBUG="libs", LD_DEBUG_OUTPUT=ld)
    t0 = time.perf_counter()
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        # the first line: the stage that failed first, not those after it
        msg = p.stderr.decode(errors="replace").strip().splitlines()
        timed.last_error = msg[0] if msg else f"exit {p.returncode}"
        return None
    return dt


timed.last_error = ""


def gpu_stages(ld):
    """The stages whose process looked for the CUDA driver (libcuda)."""
    found = set()
    for path in glob.glob(ld + ".*"):
        text = open(path, errors="replace").read()
        m = re.search(r"initialize program: \S*andrea-(\w+)", text)
        if m and "libcuda.so" in text:
            found.add(m[1])
        os.remove(path)
    return [s for s in STAGES if s in found]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, unit=1.0, width=8, prec=3):
    return f"{x * unit:{width}.{prec}f}" if x is not None else f"{'fail':>{width}}"


def machine():
    lines = [f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "?"
    config = open(os.path.join(ROOT, "build", "config")).read().strip() \
        if os.path.exists(os.path.join(ROOT, "build", "config")) else "?"
    gpu = "none found"
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True)
        gpu = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else gpu
    lines.append(f"machine: {os.cpu_count()} cpus, GPU {gpu}")
    lines.append(f"tree: {commit}, build {config}")
    return "\n".join(lines)


def part_a(tmp, reps):
    print("(a) what starting CUDA costs a process")
    probe = os.path.join(ROOT, "build", "bench", "cuda-start")
    start = None
    if not os.path.exists(probe):
        print("  build/bench/cuda-start is not built (a build without CUDA?)")
    else:
        steps = {}
        for _ in range(reps):
            p = subprocess.run([probe], capture_output=True, text=True, env=env_of({}))
            if p.returncode != 0:
                print("  " + (p.stderr.strip() or "cuda-start failed"))
                steps = {}
                break
            for line in p.stdout.split("\n"):
                if line.strip():
                    name, ms = line.split()
                    steps.setdefault(name, []).append(float(ms))
        if steps:
            print("  one process, median of", reps, "(ms): " + ", ".join(
                f"{k} {med(v):.1f}" for k, v in steps.items()))
            six = med([timed(" & ".join([probe + " >/dev/null"] * 6) + "; wait", {})
                       for _ in range(3)])
            print(f"  six started at once (as a pipe's stages), wall: {fmt(six, 1e3, 1, 1)} ms")
    # andrea-qkv on one token, whole process: what a stage pays for the GPU
    x = os.path.join(tmp, "x1.ats")
    subprocess.run(f"printf a | {BIN}/andrea-embed --text --device cpu -o {x}",
                   shell=True, check=True, env=env_of({}))
    cmd = f"{BIN}/andrea-qkv --device DEV < {x}"
    times = {"cpu": [], "cuda": []}
    for i in range(reps + 1):
        for dev in ("cpu", "cuda"):
            t = timed(cmd.replace("DEV", dev), {})
            if i:
                times[dev].append(t)
    cpu, cuda = med(times["cpu"]), med(times["cuda"])
    print(f"  andrea-qkv, one token, whole process (median of {reps}): "
          f"--device cpu {fmt(cpu, 1e3, 1, 1)} ms, --device cuda {fmt(cuda, 1e3, 1, 1)} ms")
    if cpu is not None and cuda is not None:
        start = cuda - cpu
        h = open(os.path.join(ROOT, "lib", "ops", "device.h")).read()
        default = re.search(r"#define AT_AUTO_MIN_WORK (\S+)", h)[1]
        print(f"  a stage's CUDA start: {start * 1e3:.1f} ms "
              f"(ANDREA_AUTO_MIN_WORK, default {default} s, stands for it)")
    else:
        print("  --device cuda failed:", timed.last_error)
    return start


def text_file(tmp, T):
    path = os.path.join(tmp, f"text{T}.txt")
    src = open(os.path.join(ROOT, "README.md"), "rb").read()
    with open(path, "wb") as f:
        f.write((src * (T // len(src) + 1))[:T])
    return path


def part_b(tmp, reps, budget):
    print()
    print("(b) the six-stage pipeline, wall seconds, median of the runs counted")
    big_model = os.path.join(tmp, "ctx4096.ats")
    train = subprocess.run(
        [os.path.join(BIN, "andrea-train"), "--steps", "0", "--config", "andrea-120m",
         "--layers", "1", "--ctx", "4096", "--device", "cpu",
         "--data", text_file(tmp, 50000), "-o", big_model],
        capture_output=True, text=True, env=env_of({}))
    if train.returncode != 0:
        print("  no model of context 4096:", train.stderr.strip())
    ld = os.path.join(tmp, "ld")
    t_begin = time.perf_counter()
    rows = []
    print(f"  {'T':>5} {'runs':>4} {'cpu':>8} {'cuda':>8} {'auto':>8} {'auto0':>8}"
          f" {'auto/cpu':>8}  gpu stages: auto | auto0")
    for T in SIZES:
        m = f" -m {big_model}" if T > DEFAULT_CTX else ""
        if m and train.returncode != 0:
            continue
        text = text_file(tmp, T)
        cmd = (f"{BIN}/andrea-embed --text{m} < {text} | {BIN}/andrea-qkv{m} | "
               f"{BIN}/andrea-scores | {BIN}/andrea-mask | {BIN}/andrea-softmax | "
               f"{BIN}/andrea-attend | {BIN}/andrea-show")
        times = {name: [] for name, _ in MODES}
        on_gpu = {}
        errors = {}
        # one run not counted, then rounds while the budget lasts; at
        # least one counted round a size, only one for the largest
        rounds = 1 if T > DEFAULT_CTX else reps
        for r in range(rounds + (0 if T > DEFAULT_CTX else 1)):
            if r > 1 and time.perf_counter() - t_begin > budget:
                break
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            for name, extra in order:
                t = timed(cmd, extra, ld)
                stages = gpu_stages(ld)
                if t is None:
                    errors[name] = timed.last_error
                on_gpu[name] = stages
                if r or T > DEFAULT_CTX:
                    times[name].append(t)
        meds = {name: med(v) for name, v in times.items()}
        counted = len(times["cpu"])
        ratio = meds["auto"] / meds["cpu"] if meds["auto"] and meds["cpu"] else None
        three = [meds[k] for k in ("cpu", "cuda", "auto") if meds[k] is not None]
        slowest = meds["auto"] is not None and len(three) > 1 and meds["auto"] >= max(three)
        print(f"  {T:>5} {counted:>4} {fmt(meds['cpu'])} {fmt(meds['cuda'])} "
              f"{fmt(meds['auto'])} {fmt(meds['auto0'])} {fmt(ratio, 1, 8, 2)}  "
              f"{' '.join(on_gpu.get('auto') or ['-'])} | "
              f"{' '.join(on_gpu.get('auto0') or ['-'])}"
              f"{'   <- auto the slowest' if slowest else ''}")
        for name, why in errors.items():
            print(f"        {name} failed: {why}")
        rows.append((T, ratio, slowest))
    print(f"  ({time.perf_counter() - t_begin:.0f} s)")
    return rows


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 150.0
    for name in ["andrea-" + s for s in STAGES] + ["andrea-show", "andrea-train"]:
        if not os.access(os.path.join(BIN, name), os.X_OK):
            sys.exit(f"bench/auto.py: {BIN}/{name} is missing: run make first")
    print("andrea --device auto benchmark")
    print(machine())
    print()
    with tempfile.TemporaryDirectory(prefix="andrea-auto-") as tmp:
        part_a(tmp, reps)
        rows = part_b(tmp, reps, budget)
    print()
    print("verdict (auto no slower than cpu: median within 5%; auto never the slowest):")
    for T, ratio, slowest in rows:
        if ratio is None:
            print(f"  T = {T:>4}: no figure")
            continue
        goal = " (goal)" if T <= DEFAULT_CTX else ""
        ok = ratio <= 1.05 and not slowest
        print(f"  T = {T:>4}: auto/cpu {ratio:.2f}{', auto the slowest' if slowest else ''}: "
              f"{'met' if ok else 'NOT met'}{goal}")


if __name__ == "__main__":
    main()
