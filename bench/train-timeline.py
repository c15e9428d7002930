"""make bench-train-timeline: where the wall time of a training step goes
on the device's own clock, as the step runs (not serialized as under ncu,
at the clocks the run gets): the step's span, the time some kernel, copy
or memset runs (busy), the idle rest, and the idle gaps between
neighbours, summed over the pairs of kernels around them, largest first.
andrea-train's from CUPTI's activity records (bench/cupti/trace.c, built
here against the CUPTI of the CUDA toolkit or of PyTorch's wheels, and
injected with CUDA_INJECTION64_PATH); the compiled model of
bench/train-gpu.py's from torch.profiler's trace.

  python3 bench/train-timeline.py [--sequence] [CONFIG [V [PRECISION [andrea|torch]]]]

(defaults andrea-120m 8449 bf16, both sides).  andrea-train runs WARM +
STEPS steps; its steps are told apart by the embedding's kernel, which
starts each, and the first WARM are left out.  --sequence also lists
andrea's step kernel by kernel in the order they start, each place's
median time and the median idle gap before it over the traced steps:
which product or pass each kernel is, read off its place in the step.
The compiled model runs STEPS steps under torch.profiler after its
warm-up and compilation; its span is from its first kernel to its last
(a step's host work between them counts as idle, as andrea's does),
divided by STEPS.
"""
import collections
import glob
import os
import re
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM, STEPS, TOP_GAPS, TOP_KERNELS = 3, 10, 12, 20
STEP_MARK = "embed_kernel"  # andrea's first kernel of a training step
SHOW_SEQUENCE = False  # --sequence


def timeline(events, steps):
    """events: (start, end, name) of `steps` steps, any order, in seconds'
    any unit.  Returns per step: span, busy (the union of the events),
    idle, the count of gaps, the gaps summed by (before, after) pair
    (before: the event that ended last before the gap) and the events'
    time by name."""
    ev = sorted(events)
    gaps = collections.defaultdict(lambda: [0, 0.0])
    by_name = collections.defaultdict(float)
    busy, n_gaps = 0.0, 0
    end, last = ev[0][0], None
    for s, e, name in ev:
        if s > end and last is not None:
            g = gaps[(last, name)]
            g[0] += 1
            g[1] += s - end
            n_gaps += 1
        busy += max(0.0, e - max(s, end))
        if e > end:
            end, last = e, name
        by_name[name] += e - s
    span = end - ev[0][0]
    per = lambda x: x / steps
    return dict(span=per(span), busy=per(busy), idle=per(span - busy),
                gaps=n_gaps / steps,
                pairs={k: (c / steps, per(t)) for k, (c, t) in gaps.items()},
                names={k: per(t) for k, t in by_name.items()})


def sequence(steps):
    """steps: each step's events (start, end, name), in any order.  Per
    position in start order, as far as the shortest step goes: (median
    time, median idle gap before it from the latest end so far, name,
    whether every step has that name there); of an even count of steps,
    the upper middle."""
    steps = [sorted(st) for st in steps]
    med = lambda xs: sorted(xs)[len(xs) // 2]
    rows = []
    ends = [st[0][0] for st in steps]
    for i in range(min(len(st) for st in steps)):
        here = [st[i] for st in steps]
        gap = med([max(0, s - e) for (s, _, _), e in zip(here, ends)])
        ends = [max(e, end) for (_, end, _), e in zip(here, ends)]
        names = {n for _, _, n in here}
        rows.append((med([e - s for s, e, _ in here]), gap, here[0][2],
                     len(names) == 1))
    return rows


def report(title, t, unit=1e-3):
    """Prints timeline() in microseconds, given a unit of nanoseconds
    (unit 1e-3) or microseconds (unit 1)."""
    us = lambda x: x * unit
    print(f"{title}: a step {us(t['span']) / 1e3:.3f} ms, busy "
          f"{us(t['busy']) / 1e3:.3f}, idle {us(t['idle']) / 1e3:.3f} "
          f"({100 * t['idle'] / t['span']:.1f}%) in {t['gaps']:.0f} gaps")
    print(f"  the idle time a step by the pair around it, largest {TOP_GAPS}:")
    for (a, b), (c, g) in sorted(t["pairs"].items(),
                                 key=lambda kv: -kv[1][1])[:TOP_GAPS]:
        print(f"  {us(g):8.1f} us {c:5.1f}x  {a[:44]} -> {b[:44]}")
    print(f"  the time a step by kernel, largest {TOP_KERNELS}:")
    for name, x in sorted(t["names"].items(),
                          key=lambda kv: -kv[1])[:TOP_KERNELS]:
        print(f"  {us(x):9.1f} us  {name[:90]}")


def find_cupti():
    """CUPTI's include folder and library: the CUDA toolkit's, else the
    one in PyTorch's wheels (nvidia/cu13 or nvidia/cuda_cupti)."""
    homes = [os.path.join(h, "extras", "CUPTI") for h in (
        os.environ.get("CUDA_HOME", ""), "/usr/local/cuda") if h]
    site = sysconfig.get_paths()["purelib"]
    homes += sorted(glob.glob(os.path.join(site, "nvidia", "cu*"))) + \
        [os.path.join(site, "nvidia", "cuda_cupti")]
    for h in homes:
        libs = sorted(glob.glob(os.path.join(h, "lib*", "libcupti.so*")))
        if os.path.exists(os.path.join(h, "include", "cupti.h")) and libs:
            return os.path.join(h, "include"), libs[0]
    return None, None


def build_tracer():
    """build/bench/cupti-trace.so (from bench/cupti/trace.c), or None with a line saying why."""
    inc, lib = find_cupti()
    if not inc:
        print("andrea: no CUPTI (cupti.h and libcupti) found; not traced")
        return None
    heads = "".join(open(f).read() for f in glob.glob(os.path.join(inc, "cupti*.h")))
    def newest(kind):  # the record types' names carry their version
        found = re.findall(rf"\bCUpti_Activity{kind}(\d+);", heads)
        return f"CUpti_Activity{kind}{max(map(int, found))}"
    so = os.path.join(ROOT, "build", "bench", "cupti-trace.so")
    os.makedirs(os.path.dirname(so), exist_ok=True)
    cc = os.environ.get("CC", "cc")
    cuda_inc = [f"-I{h}/include" for h in (os.environ.get("CUDA_HOME", ""),
                                           "/usr/local/cuda") if h]
    p = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", so,
                        os.path.join(ROOT, "bench", "cupti", "trace.c"),
                        f"-I{inc}", *cuda_inc,
                        f"-DKERNEL_REC={newest('Kernel')}",
                        f"-DMEMCPY_REC={newest('Memcpy')}",
                        f"-DMEMSET_REC={newest('Memset')}", lib,
                        f"-Wl,-rpath,{os.path.dirname(lib)}"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"andrea: bench/cupti/trace.c did not build: {p.stderr.strip()[-400:]}")
        return None
    return so


def read_trace(path):
    """The tracer's lines as (start_ns, end_ns, name), each kernel named
    as demangled as c++filt makes it where c++filt is there."""
    rows = []
    for line in open(path):
        kind, s, e, _, name = line.rstrip("\n").split(",", 4)
        rows.append((int(s), int(e), name))
    names = sorted({n for _, _, n in rows})
    try:
        p = subprocess.run(["c++filt"], input="\n".join(names),
                           capture_output=True, text=True)
        plain = dict(zip(names, p.stdout.splitlines()))
    except OSError:
        plain = {}
    return [(s, e, plain.get(n, n)) for s, e, n in rows]


def andrea(tg, tmp, name, V, prec):
    so = build_tracer()
    if not so:
        return
    trace = os.path.join(tmp, "trace.csv")
    p = subprocess.run(
        [os.path.join(ROOT, "bin", "andrea-train"), "--config", name,
         "--vocab", str(V), "--data", tg.data_file(tmp, V), "--steps",
         str(WARM + STEPS + 1), "--batch", str(tg.B), "--seq", str(tg.T),
         "--val-fraction", "0", "--save-every", "0", "-z", "0", "--device",
         "cuda", "--precision", prec, "-o", os.path.join(tmp, "m.ats")],
        capture_output=True, text=True,
        env=dict(os.environ, CUDA_INJECTION64_PATH=so, ANDREA_TRACE_OUT=trace))
    if p.returncode != 0 or not os.path.exists(trace):
        sys.exit(f"train-timeline: andrea-train under the tracer failed: "
                 f"{p.stderr.strip()[-500:]}")
    rows = read_trace(trace)
    starts = sorted(s for s, _, n in rows if STEP_MARK in n)
    if len(starts) < WARM + STEPS + 1:
        sys.exit(f"train-timeline: {len(starts)} steps in the trace, "
                 f"not {WARM + STEPS + 1}")
    lo, hi = starts[WARM], starts[WARM + STEPS]
    report(f"andrea-train {name} V {V} {prec} (CUPTI, steps {WARM + 1} to "
           f"{WARM + STEPS})",
           timeline([r for r in rows if lo <= r[0] < hi], STEPS))
    if SHOW_SEQUENCE:
        print("  the step in order (median us, median idle gap before, "
              "* where the steps differ there):")
        steps = [[r for r in rows if a <= r[0] < b] for a, b in
                 zip(starts[WARM:WARM + STEPS], starts[WARM + 1:])]
        for i, (t, gap, n, same) in enumerate(sequence(steps)):
            print(f"  {i:4d} {t / 1e3:9.1f} {gap / 1e3:6.1f}"
                  f"{' ' if same else '*'} {n[:100]}")


def compiled(tg, name, V, prec):
    from train_gpu import profiled_compiled
    prof = profiled_compiled(name, V, prec, STEPS)
    ev = [(e.time_range.start, e.time_range.end, e.name) for e in prof.events()
          if e.device_type.name == "CUDA"]
    report(f"torch.compile + SDPA {name} V {V} {prec} (torch.profiler, "
           f"{STEPS} steps)", timeline(ev, STEPS), unit=1)


if __name__ == "__main__":
    from train_gpu import run_sides
    SHOW_SEQUENCE = "--sequence" in sys.argv
    if SHOW_SEQUENCE:
        sys.argv.remove("--sequence")
    run_sides("train-timeline", __doc__, andrea, compiled)
