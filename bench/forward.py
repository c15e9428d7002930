"""make bench-forward: the whole model as filters,

    andrea-embed TOKENS | andrea-block -l all | andrea-logits > /dev/null

at andrea-120m (initialised by andrea-train --steps 0), B = 1 and 8,
T = 1024 (BOS and 1023 random bytes a row, packed as tokens [B,T] with
andrea-pack -z 0 beforehand), against a reference computing the same
logits [B,T,V] in one process: PyTorch eager fp32 (TF32 off) on the GPU,
timed between torch.cuda.synchronize() calls, after one warm-up, beside
it in-process the same with F.scaled_dot_product_attention (eager + SDPA)
and that compiled by torch.compile (compiled + SDPA; its compilation in
the warm-up), what a PyTorch user after speed writes; NumPy
float32 on the CPU (refmodel.Model, no cache, both: the same weights and
tokens).  The tools run with --device cuda (a tool that refuses it runs
with --device auto, which is said) or --device cpu.

Figures, each the median of 3 runs, andrea's taking turns with the
reference's:
- wall: the three processes from the first start to the last exit, at the
  default -z 1 and at -z 0 (ANDREA_ZLEVEL): process starts, model loading,
  device set-up, the embedding and the stream coding of x and logits
  included.  Its reference, "ref wall", is the reference as a process of
  its own (refrun.py: the interpreter's start, PyTorch's import, the
  weights' loading from an uncompressed .npz and upload, the forward, the
  logits written to /dev/null as .npy), what a user would run instead.
- in-process: the time a record takes in a running pipeline, past every
  tool's start: the -z 0 wall of a stream of 1 + EXTRA copies of the
  tokens record less that of one, over EXTRA (EXTRA[dev][B]: enough
  records that their time stands above the starts' spread).  Its reference is one
  forward of the reference's, timed in its process after a warm-up (on the
  GPU between torch.cuda.synchronize() calls): both past their first-use
  costs (cuBLAS's kernels, the buffers).
- first: the first record's share of the -z 0 wall, that wall less the
  wall of the same pipeline over T = 1 (one BOS a row: the starts, model
  loading and device set-up, nearly no compute); an estimate, printed
  beside the others.
ratio = reference ms / andrea ms, on the in-process and on the wall
figures (and on the GPU against each in-process reference); the goal is
>= 1.0x.
A check run (untimed) compares andrea's logits with the reference's.

Arguments filter the rows (andrea-120m, andrea-12m: named only; cpu, cuda,
1, 8); --quick runs T = 256 once per row.
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from refmodel import (BIN, BOS, CONFIGS, GPU, Model, atsfmt, bench_args,
                      bench_start, load_average, make_model, median, scratch)

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES, DEVICES, TOOLS = (1, 8), ("cpu", "cuda"), ("embed", "block", "logits")
# records more than one, for the in-process figure: on the GPU some 2 s
# of work, well above the spread of the starts (tens of ms); with 0.5 s
# (64 and 16) the B = 8 figure moved from 35.8 to 41.9 ms between calls
EXTRA = {"cuda": {1: 256, 8: 64}, "cpu": {1: 4, 8: 2}}
USAGE = ("usage: forward.py [--quick] [andrea-120m] [andrea-12m] [cpu] "
         "[cuda] [1] [8]")


def pack_tokens(tmp, tok, tag, copies=1):
    """tokens [B,T] int32 as a stream file for andrea-embed: `copies`
    records of it, one after another."""
    npy = os.path.join(tmp, f"tok-{tag}.npy")
    path = os.path.join(tmp, f"tok-{tag}-{copies}.ats")
    np.save(npy, np.ascontiguousarray(tok, np.int32))
    subprocess.run([os.path.join(BIN, "andrea-pack"), "-z", "0", "-f", "-o",
                    path] + [f"tokens={npy}"] * copies, check=True)
    return path


def pipeline(model, tokens, devs, level=None, out=None):
    """One run of embed | block -l all | logits; (seconds, None) or
    (None, (tool, its stderr)).  devs: the --device of each tool; out: a
    file for the logits (None: /dev/null)."""
    env = {k: v for k, v in os.environ.items() if k != "ANDREA_ZLEVEL"}
    if level is not None:
        env["ANDREA_ZLEVEL"] = str(level)
    args = {"embed": [tokens], "block": ["-l", "all"], "logits": []}
    sink = open(out or os.devnull, "wb")
    errs = [tempfile.TemporaryFile() for _ in TOOLS]
    procs = []
    t0 = time.perf_counter()
    for i, tool in enumerate(TOOLS):
        procs.append(subprocess.Popen(
            [os.path.join(BIN, f"andrea-{tool}"), "-m", model, "--device",
             devs[tool]] + args[tool],
            stdin=procs[-1].stdout if procs else subprocess.DEVNULL,
            stdout=sink if tool == TOOLS[-1] else subprocess.PIPE,
            stderr=errs[i], env=env))
        if i:
            procs[-2].stdout.close()
    rcs = [p.wait() for p in procs]
    dt = time.perf_counter() - t0
    sink.close()
    msgs = []
    for f in errs:
        f.seek(0)
        msgs.append(f.read().decode(errors="replace").strip())
        f.close()
    for tool, rc, msg in zip(TOOLS, rcs, msgs):
        if rc != 0 and msg:  # the first tool that says why
            return None, (tool, msg)
    if any(rcs):
        return None, ("pipeline", f"exit status {rcs}")
    return dt, None


def settle_devices(model, tokens, dev):
    """The --device of each tool: dev, or auto for a tool that refuses it
    (tried on the T = 1 input); (devs, notes) or (None, the failure)."""
    devs = {t: dev for t in TOOLS}
    notes = []
    for _ in TOOLS:
        dt, err = pipeline(model, tokens, devs)
        if err is None:
            return devs, notes
        tool, msg = err
        if dev != "cuda" or tool not in devs or devs[tool] == "auto":
            return None, f"andrea-{tool}: {msg}"
        devs[tool] = "auto"
        notes.append(f"andrea-{tool} ran with --device auto ({msg})")
    return None, "no device settles"


def reference(ref, tok):
    """Seconds of one reference forward pass to logits [B,T,V], and them
    (a NumPy array)."""
    o = ref.o
    with o.inference():
        t = o.tokens(tok, ref.dev)
        o.sync()
        t0 = time.perf_counter()
        logits = ref.forward(t)
        o.sync()
        dt = time.perf_counter() - t0
        return dt, (logits if ref.dev is None else logits.cpu().numpy())


def check(tmp, model, tokens, devs, ref, tok):
    """The largest |andrea - reference| over the logits, from one untimed
    run; and the largest |logit|."""
    out = os.path.join(tmp, "logits.ats")
    _, err = pipeline(model, tokens, devs, level=0, out=out)
    if err:
        return None, None
    with open(out, "rb") as f:
        rec = next(r for r in atsfmt.read(f.read()) if r.name == "logits")
    os.remove(out)
    ours = np.frombuffer(rec.payload, np.float32).reshape(rec.dims)
    theirs = reference(ref, tok)[1]
    return float(np.abs(ours - theirs).max()), float(np.abs(theirs).max())


def row(tmp, torch, name, model, w, cfg, B, T, dev, reps):
    """One row's figures (dict), or None after saying why."""
    rng = np.random.default_rng(B)
    tok = np.concatenate([np.full((B, 1), BOS), rng.integers(0, 256, (B, T - 1))],
                         1).astype(np.int64)
    tokens = pack_tokens(tmp, tok, f"{B}x{T}")
    extra = EXTRA[dev][B] if B in EXTRA[dev] else 4
    more = pack_tokens(tmp, tok, f"{B}x{T}", 1 + extra)
    base = pack_tokens(tmp, tok[:, :1], f"{B}x1")
    devs, notes = settle_devices(model, base, dev)
    if devs is None:
        print(f"{name} B={B} {dev}: andrea failed: {notes}", flush=True)
        return None
    for note in notes:
        print(f"  {name} B={B} {dev}: {note}", flush=True)
    gpu = torch if dev == "cuda" else None
    refrun = [sys.executable, os.path.join(HERE, "refrun.py"),
              save_weights(tmp, w, cfg), tokens[:-len("-1.ats")] + ".npy",
              dev]
    ref, fast = None, {}
    try:
        ref = Model(w, cfg, dev=GPU if gpu else None)
        if gpu:
            eager = reference(ref, tok)[1]  # warm-up: cuBLAS, the allocator
            fast = faster_references(gpu, w, cfg, tok, eager)
        runs = {"z1": [], "z0": [], "base": [], "more": [], "ref": [],
                "refwall": [], **{what: [] for what in fast}}
        labels = list(fast)
        for _ in range(reps):
            for key, level, path in (("z1", None, tokens), ("z0", 0, tokens),
                                     ("base", 0, base), ("more", 0, more)):
                dt, err = pipeline(model, path, devs, level)
                if err:
                    print(f"{name} B={B} {dev}: andrea-{err[0]} failed: {err[1]}",
                          flush=True)
                    return None
                runs[key].append(dt)
            runs["ref"].append(reference(ref, tok)[0])
            for what, m in fast.items():
                runs[what].append(reference(m, tok)[0])
            t0 = time.perf_counter()
            subprocess.run(refrun, check=True)
            runs["refwall"].append(time.perf_counter() - t0)
        diff, big = check(tmp, model, tokens, devs, ref, tok)
    finally:
        del ref, fast
        if gpu:
            gpu.cuda.empty_cache()
    f = {k: median(v) * 1e3 for k, v in runs.items()}
    f["first"] = f["z0"] - f["base"]
    f["inproc"] = (f["more"] - f["z0"]) / extra
    f["extra"] = extra
    f["fast"] = labels
    print(f"  {name} B={B} {dev}: logits max |andrea - reference| "
          + (f"{diff:.2e} (largest |logit| {big:.2f})" if diff is not None
             else "not checked (the check run failed)"), flush=True)
    return f


def faster_references(torch, w, cfg, tok, eager):
    """{label: Model} of the GPU's faster references, each warmed up (the
    compiled one compiled), with how far its logits are from eager's (the
    explicit reference's logits); a reference that cannot be made is left
    out, and said why."""
    out = {}
    for label in ("eager + SDPA", "compiled + SDPA"):
        try:
            m = Model(w, cfg, dev=GPU, sdpa=True)
            if label.startswith("compiled"):
                m.forward = torch.compile(m.forward)
            diff = float(np.abs(reference(m, tok)[1] - eager).max())
            print(f"  PyTorch {label}: logits max |it - eager| {diff:.2e}",
                  flush=True)
            out[label] = m
        except Exception as e:  # no Triton, or torch.compile's API moved
            print(f"  PyTorch {label} left out: {type(e).__name__}: {e}",
                  flush=True)
    return out


def save_weights(tmp, w, cfg):
    """The weights and config as refrun.py loads them (once per model)."""
    path = os.path.join(tmp, f"weights-{cfg['n_layer']}-{cfg['d_model']}.npz")
    if not os.path.exists(path):
        np.savez(path, **w, **{f"config.{k}": np.array(v)
                               for k, v in cfg.items()})
    return path


def ratio(ref, ours):
    """ref / ours as '1.23x'; n/a where ours is not above 0 (the
    in-process estimate of a short run can be)."""
    return f"{ref / ours:.2f}x" if ours > 0 else "n/a"


def main():
    quick, only, keep = bench_args(sys.argv[1:], DEVICES, BATCHES, USAGE)
    T, reps = (256, 1) if quick else (1024, 3)
    names = [n for n in CONFIGS if n in only] or ["andrea-120m"]
    torch, devs = bench_start(keep, DEVICES)
    print(f"andrea-embed | andrea-block -l all | andrea-logits, T={T}, "
          f"median of {reps}{', --quick' if quick else ''}", flush=True)
    table = []
    with scratch() as tmp:
        for name in names:
            if not devs:
                continue
            model, w, cfg = make_model(tmp, name, no_bos=False)
            for dev in devs:
                for B in BATCHES:
                    if not keep(B, BATCHES):
                        continue
                    try:
                        f = row(tmp, torch, name, model, w, cfg, B, T, dev, reps)
                    except Exception as e:  # one row's failure ends no run
                        print(f"{name} B={B} {dev}: the row failed: "
                              f"{type(e).__name__}: {e}", flush=True)
                        f = None
                    if f:
                        table.append((name, B, dev, f))
            os.remove(model)
    print(f"\n{'config':<12}{'B':>3}{'T':>6} {'device':<7}{'wall ms':>9}"
          f"{'-z 0 ms':>9}{'first':>8}{'in-proc':>9}  {'reference':<14}"
          f"{'ref ms':>8}{'ratio':>8}{'ref wall':>9}{'wall r':>8}")
    for name, B, dev, f in table:
        what = "PyTorch eager" if dev == "cuda" else "NumPy"
        print(f"{name:<12}{B:>3}{T:>6} {dev:<7}{f['z1']:>9.1f}{f['z0']:>9.1f}"
              f"{f['first']:>8.1f}{f['inproc']:>9.1f}  {what:<14}"
              f"{f['ref']:>8.1f}{ratio(f['ref'], f['inproc']):>8}"
              f"{f['refwall']:>9.1f}{ratio(f['refwall'], f['z1']):>8}")
    extras = ", ".join(f"{d} B={b}: {e}" for d, v in EXTRA.items()
                       for b, e in v.items())
    for name, B, dev, f in table:
        for what in f["fast"]:
            print(f"{name:<12}{B:>3}{T:>6} {dev:<7}{'':>35}  {what:<15}"
                  f"{f[what]:>7.1f}{ratio(f[what], f['inproc']):>8}")
    print("ms; wall: default -z 1; first: the -z 0 wall less that over "
          f"T = 1; in-proc: each record after the first of a stream of "
          f"1 + EXTRA ({extras}; -z 0); ref ms: one warm forward in the reference's "
          "process; ref wall: the reference as a process (refrun.py); "
          "ratio = ref ms / in-proc, wall r = ref wall / wall")
    print(f"\ngoals (load average now {load_average()}):")
    for name, B, dev, f in table:
        what = "PyTorch eager" if dev == "cuda" else "NumPy"
        for fig, ref, ours in (("in-process", f["ref"], f["inproc"]),
                               ("wall", f["refwall"], f["z1"])):
            met = ours > 0 and ref >= ours
            print(f"  {name} B={B} {dev} {fig} >= 1.0x {what}: "
                  f"{'met' if met else 'NOT met'} ({ratio(ref, ours)})")
        for what in f["fast"]:
            met = f["inproc"] > 0 and f[what] >= f["inproc"]
            print(f"  {name} B={B} {dev} in-process >= 1.0x PyTorch {what}: "
                  f"{'met' if met else 'NOT met'} "
                  f"({ratio(f[what], f['inproc'])})")


if __name__ == "__main__":
    main()
