"""make bench-train-ab: andrea-train against itself, built from another
commit or run with other settings, on the GPU, alternating run by run so
that the machine's drift falls on every variant alike, with the compiled
PyTorch model of bench/train-gpu.py timed in the same call as the
reference.  The A/B figures of bench/README.md's train-gpu section come
from it.

  python3 bench/train-ab.py [--config NAME] [--vocab V] [--precision P]
      [--runs N] [--ref-runs N] [--steps N] NAME=SPEC ...

Each NAME=SPEC is one variant: SPEC is empty (this tree's andrea-train as
it is) or comma-separated KEY:VALUE settings, each an environment
variable for andrea-train (ANDREA_PDL:0) or ROOT:DIR, a tree whose
bin/andrea-train runs instead (DIR relative to this tree; for a commit:
git archive REF | tar -x -C DIR, then make in DIR).  Defaults:
andrea-120m, V 8449, bf16, 3 runs of each variant and 3 of the compiled
model, 30 timed steps a run after bench-train-gpu's warm-up.  Prints each
run as it ends, then each variant's median (of an even count, the lower
middle run, as bench-train-gpu's), its ratio to the first variant's and
to the compiled model's median.
"""
import argparse
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def variant(arg):
    """NAME=SPEC as (name, root, env); argparse's type."""
    name, eq, spec = arg.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"'{arg}': a variant is NAME=SPEC")
    root, env = ROOT, {}
    for item in filter(None, spec.split(",")):
        key, colon, value = item.partition(":")
        if not colon or not key:
            raise argparse.ArgumentTypeError(
                f"'{item}': a setting is KEY:VALUE (ROOT:DIR or an "
                f"environment variable)")
        if key == "ROOT":
            root = os.path.join(ROOT, value)
            if not os.access(os.path.join(root, "bin", "andrea-train"),
                             os.X_OK):
                raise argparse.ArgumentTypeError(
                    f"'{value}': no bin/andrea-train built there")
        else:
            env[key] = value
    return name, root, env


def parse(argv):
    p = argparse.ArgumentParser(prog="bench-train-ab", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="andrea-120m")
    p.add_argument("--vocab", type=int, default=8449)
    p.add_argument("--precision", default="bf16",
                   choices=("fp32", "tf32", "bf16"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--ref-runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("variants", nargs="+", type=variant, metavar="NAME=SPEC")
    a = p.parse_args(argv)
    if a.runs < 1 or a.ref_runs < 0 or a.steps < 1:
        p.error("--runs and --steps want 1 or more, --ref-runs 0 or more")
    names = [v[0] for v in a.variants]
    if len(set(names)) != len(names):
        p.error("two variants of one name")
    return a


def report(results, refs):
    """The table's lines: each variant's median, against the first
    variant's and against the reference's median (where it ran)."""
    ref = statistics.median_low(refs) if refs else None
    first = None
    lines = []
    if refs:
        lines.append(f"{'compiled':<12} median {ref:10.0f}  runs "
                     f"{[round(x) for x in refs]}")
    for name, tps in results.items():
        m = statistics.median_low(tps) if tps else 0.0
        first = m if first is None else first
        line = f"{name:<12} median {m:10.0f}  runs {[round(x) for x in tps]}"
        if first and m:
            line += f"  {m / first:.3f}x the first"
        if ref and m:
            line += f"  {m / ref:.3f}x compiled"
        lines.append(line)
    return lines


def main(argv):
    a = parse(argv)
    from train_gpu import tg  # PyTorch, only where it runs
    if not tg.torch.cuda.is_available():
        sys.exit("bench-train-ab: PyTorch sees no GPU")
    results = {name: [] for name, _, _ in a.variants}
    refs = []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm")
                                     else None) as tmp:
        data = tg.data_file(tmp, a.vocab)
        context = tg.context_bytes() if a.ref_runs else 0
        for run in range(max(a.runs, a.ref_runs)):
            for name, root, env in a.variants if run < a.runs else ():
                r, msg = tg.ours(tmp, a.config, a.vocab, a.precision, data,
                                 root=root, timed=a.steps, env=env)
                if r is None:
                    sys.exit(f"bench-train-ab: {name}: andrea-train failed: "
                             f"{msg}")
                results[name].append(r["tps"])
                print(f"{name:<12} {r['tps']:10.0f} tokens/s  peak "
                      f"{r['peak'] / (1 << 30):.2f} GiB", flush=True)
            if run < a.ref_runs:
                t = tg.theirs(a.config, a.vocab, a.precision, "compiled",
                              context, timed=a.steps)
                refs.append(t["tps"])
                print(f"{'compiled':<12} {t['tps']:10.0f} tokens/s", flush=True)
    print(f"bench-train-ab: {a.config}, V {a.vocab}, {a.precision}, "
          f"{a.steps} timed steps a run, medians")
    for line in report(results, refs):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
