"""bench/long_contexts.py - the six-stage pipeline at long contexts on the
CPU (issue 20), run by `make bench-stages` after bench/stages.py:

    andrea-embed TOKENS | andrea-qkv | andrea-scores | andrea-mask |
        andrea-softmax | andrea-attend --proj > /dev/null

with a one-layer andrea-120m of context 16384 (andrea-train --steps 0),
at B = 1 and 4, T = 4096 and 16384 (BOS and random printable bytes),
each tool with --device cpu, at the default compression and at -z 0
(ANDREA_ZLEVEL=0), against NumPy float32 doing the same six stages in one
process (bench/stages.py's arithmetic), where its scores and attention
fit in memory.

Figures: wall seconds from the first start to the last exit (the median
of 3 runs at T = 4096, one at 16384; NumPy's, one run in a process of its
own, counts its arithmetic alone), the default's over -z 0's and over
NumPy's, and each process's peak resident memory (its own ru_maxrss, from
wait4).

Arguments filter the rows: T (4096, 16384) and B (1, 4); `4096 1` runs
B = 1, T = 4096 alone.
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
H, D, C, V, BOS, CTX = 12, 64, 768, 257, 256, 16384
SIZES = [(1, 4096), (4, 4096), (1, 16384), (4, 16384)]
STAGES = ["embed", "qkv", "scores", "mask", "softmax", "attend"]


def make_model(tmp):
    text = os.path.join(tmp, "text.txt")
    with open(text, "wb") as f:
        f.write(np.random.default_rng(0).integers(32, 127, 20000, np.uint8).tobytes())
    path = os.path.join(tmp, "ctx16384.ats")
    subprocess.run([os.path.join(BIN, "andrea-train"), "--steps", "0",
                    "--config", "andrea-120m", "--layers", "1", "--ctx", str(CTX),
                    "--batch", "1", "--seq", "64", "--device", "cpu",
                    "--data", text, "-o", path], check=True, capture_output=True)
    return path


def tokens_file(tmp, B, T):
    tok = np.random.default_rng(B * T).integers(32, 127, (B, T)).astype(np.int32)
    tok[:, 0] = BOS
    npy, path = os.path.join(tmp, f"tok{B}x{T}.npy"), os.path.join(tmp, f"tok{B}x{T}.ats")
    np.save(npy, tok)
    subprocess.run([os.path.join(BIN, "andrea-pack"), "-z", "0", "-f", "-o", path,
                    f"tokens={npy}"], check=True)
    return path


def pipeline(model, tokens, level):
    """(wall s, {stage: peak MiB}) of one run, or raises on a failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    env["ANDREA_DEVICE"] = "cpu"
    if level is not None:
        env["ANDREA_ZLEVEL"] = str(level)
    args = {"embed": ["-m", model, tokens], "qkv": ["-m", model],
            "attend": ["-m", model, "--proj"]}
    procs, t0 = [], time.perf_counter()
    for i, name in enumerate(STAGES):
        last = i == len(STAGES) - 1
        procs.append(subprocess.Popen(
            [os.path.join(BIN, f"andrea-{name}")] + args.get(name, []),
            stdin=procs[-1].stdout if procs else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if last else subprocess.PIPE, env=env))
        if i:
            procs[-2].stdout.close()
    peaks = {}
    for name, p in zip(STAGES, procs):
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise RuntimeError(f"andrea-{name} exited {p.returncode}")
        peaks[name] = ru.ru_maxrss / 1024
    return time.perf_counter() - t0, peaks


def numpy_bytes(B, T):
    """What NumPy's six stages hold at once: the scores and the attention."""
    return 2 * B * H * T * T * 4


def numpy_run(B, T):
    """The six stages in float32 NumPy in this process; prints seconds."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: (0.02 * rng.standard_normal(s)).astype(np.float32)
    tok = rng.integers(0, V, (B, T))
    wte, wpe, wo = f32(V, C), f32(T, C), f32(C, C)
    w = [f32(C, C) for _ in range(3)]
    t0 = time.perf_counter()
    x = wte[tok] + wpe[:T]
    m = x.mean(-1, keepdims=True)
    h = (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    q, k, v = (np.ascontiguousarray((h @ wm).reshape(B, T, H, D).transpose(0, 2, 1, 3))
               for wm in w)
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(D))
    s[..., np.triu(np.ones((T, T), bool), k=1)] = -np.inf
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    y = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, C) @ wo
    print(time.perf_counter() - t0, float(y[0, 0, 0]))


def numpy_ref(B, T):
    """(seconds, peak MiB) of numpy_run in a child, or None where it would
    not fit in the memory available."""
    with open("/proc/meminfo") as f:
        avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable"))
    if numpy_bytes(B, T) > 0.8 * avail:
        return None
    p = subprocess.Popen([sys.executable, __file__, "--numpy", str(B), str(T)],
                         stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return float(out.split()[0]), ru.ru_maxrss / 1024


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main(argv):
    if argv[:1] == ["--numpy"]:
        return numpy_run(int(argv[1]), int(argv[2]))
    Ts = {int(a) for a in argv if a in ("4096", "16384")}
    Bs = {int(a) for a in argv if a in ("1", "4")}
    rows = [(B, T) for B, T in SIZES
            if (not Ts or T in Ts) and (not Bs or B in Bs)]
    print(f"# the six stages at long contexts, --device cpu, {os.cpu_count()} cores; "
          "wall s (median of 3 at T = 4096, 1 run at 16384), peak MiB per stage")
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        model = make_model(tmp)
        for B, T in rows:
            tokens = tokens_file(tmp, B, T)
            reps = 3 if T <= 4096 else 1
            runs = {None: [], 0: []}
            peaks = {}
            for _ in range(reps):
                for level in (None, 0):
                    dt, pk = pipeline(model, tokens, level)
                    runs[level].append(dt)
                    peaks[level] = pk
            ref = numpy_ref(B, T)
            table.append((B, T, median(runs[None]), median(runs[0]), peaks, ref))
            print(f"  B={B} T={T}: default {median(runs[None]):.2f} s, -z 0 "
                  f"{median(runs[0]):.2f} s", flush=True)
    print(f"\n{'B':>2}{'T':>7}{'default s':>11}{'-z 0 s':>9}{'ratio':>7}{'numpy s':>9}"
          f"{'x numpy':>9}{'numpy MiB':>10}  peak MiB (default): "
          + " ".join(f"{s:>7}" for s in STAGES))
    for B, T, d, z, peaks, ref in table:
        np_s = f"{ref[0]:9.2f}{d / ref[0]:8.2f}x{ref[1]:10.0f}" if ref else (
            f"{'n/a':>9}{'':>9}{'> RAM':>10}")
        print(f"{B:>2}{T:>7}{d:>11.2f}{z:>9.2f}{d / z:>7.2f}{np_s}  "
              f"{'':>20}" + " ".join(f"{peaks[None][s]:7.0f}" for s in STAGES))
    print("ratio = default / -z 0; x numpy = default / numpy; numpy: its six "
          "stages in one process (n/a: its scores and attention, 2 B H T^2 4 "
          "bytes, exceed 80% of MemAvailable)")
    print("\n# goals")
    for B, T, d, z, _, _ in table:
        if T == 4096:
            print(f"B={B} T=4096 default within 1.5x of -z 0: "
                  f"{'met' if d <= 1.5 * z else 'NOT met'} ({d / z:.2f}x)")
    for B, T, *_ in table:
        if B == 1 and T == 16384:
            print("B=1 T=16384 completes with the default settings: met")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
