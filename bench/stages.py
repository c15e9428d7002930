"""bench/stages.py - each stage's CPU compute against NumPy, and the whole
pipeline's wall clock against NumPy doing all six stages in one process.

Everything is measured in this one run, at ANDREA-120M size (B=1, H=12,
T=1024, D=64, C=768), float32 on both sides, best of several repetitions.
Run it with `make bench-stages`.
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, H, T, D = 1, 12, 1024, 64
C, V = H * D, 257
REPS = 7
WHOLE_REPS = 5  # the whole-run measures: NumPy's six stages and each pipeline


def best_ms(fn, reps=REPS):
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def numpy_stages():
    rng = np.random.default_rng(0)
    f32 = lambda *s: (0.02 * rng.standard_normal(s)).astype(np.float32)
    tok = rng.integers(0, V, (B, T))
    wte, wpe, wo = f32(V, C), f32(T, C), f32(C, C)
    w = [f32(C, C) for _ in range(3)]
    lnw, lnb = np.ones(C, np.float32), np.zeros(C, np.float32)
    upper = np.triu(np.ones((T, T), bool), k=1)
    st = {}

    def embed():
        st["x"] = wte[tok] + wpe[:T]

    def qkv():
        x = st["x"]
        m = x.mean(-1, keepdims=True)
        h = (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * lnw + lnb
        st["q"], st["k"], st["v"] = (
            np.ascontiguousarray((h @ wm).reshape(B, T, H, D).transpose(0, 2, 1, 3))
            for wm in w)

    def scores():
        st["s"] = (st["q"] @ st["k"].transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(D))

    def mask():
        st["s"][..., upper] = -np.inf

    def softmax():
        s = st["s"]
        e = np.exp(s - s.max(-1, keepdims=True))
        st["a"] = e / e.sum(-1, keepdims=True)

    def attend():
        st["o"] = st["a"] @ st["v"]

    def proj():
        st["y"] = st["o"].transpose(0, 2, 1, 3).reshape(B, T, C) @ wo

    steps = [("embed", embed), ("qkv", qkv), ("scores", scores), ("mask", mask),
             ("softmax", softmax), ("attend", attend)]
    times = {}
    for name, fn in steps:
        times[name] = best_ms(fn)
    total = best_ms(lambda: [fn() for _, fn in steps] + [proj()],
                    reps=WHOLE_REPS)
    return times, total


def andrea_stages():
    out = subprocess.run([os.path.join(ROOT, "build", "bench", "stages")],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


def pipeline_ms(text_path, level):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    if level is not None:
        env["ANDREA_ZLEVEL"] = str(level)
    b = os.path.join(ROOT, "bin")
    cmd = (f"{b}/andrea-embed --text --bos {text_path} | {b}/andrea-qkv | "
           f"{b}/andrea-scores | {b}/andrea-mask | {b}/andrea-softmax | "
           f"{b}/andrea-attend --proj > /dev/null")
    return best_ms(lambda: subprocess.run(["bash", "-o", "pipefail", "-c", cmd],
                                          env=env, check=True),
                   reps=WHOLE_REPS)


def main():
    ours = andrea_stages()
    ref, np_total = numpy_stages()
    print(f"# stages at B={B} H={H} T={T} D={D} C={C}, float32, best of {REPS}; "
          f"{os.cpu_count()} cores")
    print(f"{'stage':<9}{'andrea ms':>11}{'numpy ms':>11}{'ratio':>8}")
    ok = True
    for name in ref:
        r = ours[name] / ref[name]
        ok &= r <= 1.0
        print(f"{name:<9}{ours[name]:>11.2f}{ref[name]:>11.2f}{r:>8.2f}")
    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(np.random.default_rng(1).integers(32, 127, T - 1, dtype=np.uint8).tobytes())
        f.flush()
        wall = pipeline_ms(f.name, None)
        wall0 = pipeline_ms(f.name, 0)
    print(f"\n# six-stage pipeline (embed --bos ... attend --proj), wall clock, "
          f"best of {WHOLE_REPS} (NumPy's total too)")
    print(f"numpy, all six stages in one process: {np_total:8.1f} ms")
    print(f"pipeline, default -z 1:               {wall:8.1f} ms  "
          f"({wall / np_total:.2f}x numpy)")
    print(f"pipeline, -z 0:                       {wall0:8.1f} ms  "
          f"({wall0 / np_total:.2f}x numpy)")
    print("\n# goals")
    print(f"every stage <= 1.0x numpy:       {'met' if ok else 'NOT met'}")
    print(f"default pipeline <= 1000 ms:      {'met' if wall <= 1000 else 'NOT met'}")
    print(f"default pipeline <= 5x numpy:     {'met' if wall <= 5 * np_total else 'NOT met'}")
    print(f"-z 0 pipeline <= 2x numpy:        {'met' if wall0 <= 2 * np_total else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
