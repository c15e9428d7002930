"""The bench scripts on the CPU: bench/train-ab.py's command line and
table (its runs need a GPU and PyTorch: make bench-train-ab),
bench/train-timeline.py's sums over a timeline, no script
named as a module of Python's own, and the CPU benchmarks run at their
smallest settings to their end (what they print is checked, never how
fast: the speed is the benchmark's to say)."""
import contextlib
import glob
import importlib.util
import io
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "train_ab", os.path.join(ROOT, "bench", "train-ab.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)
spec = importlib.util.spec_from_file_location(
    "train_timeline", os.path.join(ROOT, "bench", "train-timeline.py"))
tl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tl)


def test_variants_name_their_settings():
    a = ab.parse(["base=", "off=ANDREA_PDL:0,ANDREA_TUNE:v"])
    assert a.variants == [("base", ROOT, {}),
                          ("off", ROOT, {"ANDREA_PDL": "0",
                                         "ANDREA_TUNE": "v"})]
    assert (a.config, a.vocab, a.precision, a.runs, a.ref_runs, a.steps) == \
        ("andrea-120m", 8449, "bf16", 3, 3, 30)


@pytest.mark.parametrize("argv", [
    ["base"], ["=x"], ["a=NOCOLON"], ["a=:1"], ["a=", "a=X:1"],
    ["a=ROOT:no-such-tree"], ["--runs", "0", "a="], ["--steps", "0", "a="],
    ["--precision", "fp16", "a="], []])
def test_a_bad_command_line_is_a_usage_error(argv):
    err, code = io.StringIO(), None
    try:
        with contextlib.redirect_stderr(err):
            ab.parse(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2, argv
    assert "bench-train-ab: error:" in err.getvalue()


def test_the_table_gives_medians_and_ratios():
    lines = ab.report({"a": [700.0, 710.0, 690.0], "b": [750.0, 749.0, 751.0]},
                      [580.0, 600.0, 590.0])
    assert lines[0].split()[:3] == ["compiled", "median", "590"]
    a, b = lines[1].split(), lines[2].split()
    assert a[:3] == ["a", "median", "700"] and "1.000x" in a
    assert b[:3] == ["b", "median", "750"]
    assert f"{750 / 700:.3f}x" in b and f"{750 / 590:.3f}x" in b
    # without the reference, no ratio to it
    assert "compiled" not in " ".join(ab.report({"a": [1.0]}, []))


@pytest.mark.parametrize("seed", range(12))
def test_the_timeline_sums_busy_and_idle_time(seed):
    # random overlapping intervals on a grid of whole units, against the
    # covered cells counted one by one
    import numpy as np
    rng = np.random.default_rng(seed)
    n, steps = int(rng.integers(1, 40)), int(rng.integers(1, 4))
    starts = rng.integers(0, 300, n)
    ends = starts + rng.integers(1, 25, n)  # kernels take some time
    names = [f"k{int(i)}" for i in rng.integers(0, 5, n)]
    ev = list(zip(starts.tolist(), ends.tolist(), names))
    t = tl.timeline(ev, steps)
    lo, hi = starts.min(), ends.max()
    cover = np.zeros(hi - lo, bool)
    for a, b, _ in ev:
        cover[a - lo:b - lo] = True
    idle_cells = ~cover
    runs = np.flatnonzero(np.diff(np.r_[0, idle_cells.astype(int)]) == 1)
    per = lambda x: pytest.approx(x / steps, rel=1e-12)
    assert t["span"] == per(hi - lo)
    assert t["busy"] == per(cover.sum())
    assert t["idle"] == per(idle_cells.sum())
    assert t["gaps"] == per(len(runs))
    assert sum(g for _, g in t["pairs"].values()) == per(idle_cells.sum())
    assert sum(t["names"].values()) == per((ends - starts).sum())


def test_the_timeline_names_the_kernels_around_a_gap():
    t = tl.timeline([(0, 10, "a"), (2, 12, "b"), (15, 20, "c"),
                     (20, 30, "a"), (33, 40, "c")], 1)
    assert t["pairs"] == {("b", "c"): (1, 3), ("a", "c"): (1, 3)}
    assert (t["span"], t["busy"], t["idle"], t["gaps"]) == (40, 34, 6, 2)


@pytest.mark.parametrize("seed", range(8))
def test_the_sequence_gives_each_place_its_median_time_and_gap(seed):
    # steps of the same kernels one after another with random times and
    # gaps (none overlapping), against numpy's median of each place
    import numpy as np
    rng = np.random.default_rng(seed)
    n, nsteps = int(rng.integers(1, 30)), int(rng.integers(1, 6)) * 2 + 1
    dur = rng.integers(1, 50, (nsteps, n))
    gap = rng.integers(0, 5, (nsteps, n))
    gap[:, 0] = 0  # a step starts with its first kernel
    steps = []
    for k in range(nsteps):
        t, ev = 1000 * k, []
        for i in range(n):
            t += int(gap[k, i])
            ev.append((t, t + int(dur[k, i]), f"k{i % 3}"))
            t += int(dur[k, i])
        rng.shuffle(ev)  # any order in
        steps.append(ev)
    rows = tl.sequence(steps)
    assert len(rows) == n
    for i, (t, g, name, same) in enumerate(rows):
        assert t == np.median(dur[:, i]) and g == np.median(gap[:, i])
        assert name == f"k{i % 3}" and same


def test_the_sequence_marks_places_where_steps_differ():
    a = [(0, 5, "x"), (5, 9, "y"), (9, 10, "z")]
    b = [(100, 104, "x"), (106, 108, "w")]  # shorter, another kernel second
    rows = tl.sequence([a, b, a])
    assert rows == [(5, 0, "x", True), (4, 0, "y", False)]
    # an overlap is no gap: the next gap counts from the latest end
    rows = tl.sequence([[(0, 10, "a"), (2, 4, "b"), (12, 13, "c")]])
    assert [g for _, g, _, _ in rows] == [0, 0, 2]


def test_no_bench_script_shadows_the_standard_library():
    # a script runs with bench/ first on sys.path: a bench/tokenize.py made
    # every `import torch` there fail (PyTorch's traceback reads tokenize)
    names = {os.path.basename(p)[:-3]
             for p in glob.glob(os.path.join(ROOT, "bench", "*.py"))}
    assert "train_gpu" in names  # the check sees the folder
    assert not names & set(sys.stdlib_module_names)


@pytest.mark.parametrize("argv, says", [
    (["bench/analysis.py", "cpu"], "| ok ("),
    (["bench/generate.py", "--quick", "andrea-12m", "cpu", "1"],
     "all 32 tokens of every row agree"),
    (["bench/forward.py", "--quick", "andrea-12m", "cpu", "1"],
     "andrea-12m B=1 cpu in-process >= 1.0x NumPy"),
])
def test_a_cpu_benchmark_runs_to_its_end(argv, says):
    # bench/analysis.py wrote its token files without an end record, and
    # andrea-patch, which reads them to their end since 9eb5225, refused
    # them: the benchmark ended in its first row
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    p = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert says in p.stdout, p.stdout
