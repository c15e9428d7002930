"""make bench-analysis: a full layer x head activation-patching sweep,

    andrea-patch -m MODEL --clean C --corrupted K --answer A --wrong W

(each head's output z from the clean run put into the corrupted run, the
normalised logit difference at the last position), against the same sweep
written as a user would with hooks: one forward pass per head, a forward
hook on the attention's per-head output replacing that head's z from the
clean run's cache, TransformerLens's hook_z.

Rows:
- cuda: andrea-120m (initialised by andrea-train --steps 0), B = 1,
  T = 64, against PyTorch eager fp32 (TF32 off) with
  scaled_dot_product_attention and register_forward_hook, on the same
  GPU.  The goal is >= 1.0x.
- cpu: the tiny preset, B = 1, T = 64, against the same hooks sweep in
  NumPy float32 (the reference where PyTorch is not installed; PyTorch on
  the CPU where it is).  The goal is under 10 s on the 2-core machine.

Figures, each the median of 3:
- wall: andrea-patch as a process (start, model loading, device set-up,
  the sweep, the record written), against the reference as a process of
  its own (the interpreter's start, the import, the weights' loading from
  an uncompressed pickle of the arrays, the device's set-up, a warm-up pass, the sweep):
  what a user would run instead.
- sweep: the sweep alone.  The reference's is timed in its process after
  the warm-up pass; andrea's is its wall less the wall of the same command
  over T = 1 (the start, the loading and the set-up, with next to no
  work), an estimate.
ratio = reference / andrea, on each.  A check compares the two [L,H]
effect tables (within 1e-3 of the largest effect).
"""
import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np

from refmodel import BIN, EPS, atsfmt, make_model, median

USAGE = "usage: analysis.py [cpu] [cuda]"
T, ANSWER, WRONG = 64, 101, 117


class Hooked:
    """The ANDREA model with a hook point on each layer's z [B,H,T,D]:
    forward(tok, hook) calls hook(layer, z) and uses what it returns."""

    def __init__(self, w, cfg, xp, dev=None):
        self.xp, self.dev = xp, dev
        self.L, self.H = cfg["n_layer"], cfg["n_head"]
        if xp.__name__ == "torch":
            self.w = {k: xp.tensor(v, device=dev) for k, v in w.items()}
        else:
            self.w = w

    def ln(self, x, g, b):
        mean = x.mean(-1, keepdims=True) if self.xp is np else x.mean(-1, keepdim=True)
        d = x - mean
        var = (d * d).mean(-1, keepdims=True) if self.xp is np else \
            (d * d).mean(-1, keepdim=True)
        return d / self.xp.sqrt(var + EPS) * g + b

    def gelu(self, x):
        return 0.5 * x * (1 + self.xp.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))

    def attend(self, q, k, v):
        if self.xp is not np:
            import torch.nn.functional as F
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
        n = s.shape[-1]
        s = s + np.triu(np.full((n, n), -np.inf, np.float32), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ v

    def forward(self, tok, hook):
        w, B, H = self.w, tok.shape[0], self.H
        x = w["wte"][tok] + w["wpe"][:tok.shape[1]]
        C = x.shape[-1]
        split = lambda a: a.reshape(B, -1, H, C // H).transpose(1, 2) \
            if self.xp is not np else a.reshape(B, -1, H, C // H).transpose(0, 2, 1, 3)
        for l in range(self.L):
            p = f"layers.{l}."
            h = self.ln(x, w[p + "ln1.weight"], w[p + "ln1.bias"])
            z = self.attend(split(h @ w[p + "attn.wq"]), split(h @ w[p + "attn.wk"]),
                            split(h @ w[p + "attn.wv"]))
            z = hook(l, z)
            merged = z.transpose(1, 2) if self.xp is not np else z.transpose(0, 2, 1, 3)
            x = x + merged.reshape(B, -1, C) @ w[p + "attn.wo"]
            h = self.ln(x, w[p + "ln2.weight"], w[p + "ln2.bias"])
            x = x + self.gelu(h @ w[p + "mlp.fc"]) @ w[p + "mlp.proj"]
        x = self.ln(x[:, -1], w["lnf.weight"], w["lnf.bias"])
        return x @ w["lm_head"]


def sweep(model, clean, corrupt, sync):
    """The effect [L,H] of each head's z patched, one pass each."""
    cache = {}

    def keep(l, z):
        cache[l] = z
        return z

    def metric(logits):
        d = logits[:, ANSWER] - logits[:, WRONG]
        return float(d.mean())
    m_clean = metric(model.forward(clean, keep))
    m_corrupt = metric(model.forward(corrupt, lambda l, z: z))
    effect = np.zeros((model.L, model.H))
    for l in range(model.L):
        for h in range(model.H):
            def patch(layer, z, l=l, h=h):
                if layer != l:
                    return z
                z = z.clone() if model.xp is not np else z.copy()
                z[:, h] = cache[l][:, h]
                return z
            effect[l, h] = (metric(model.forward(corrupt, patch)) - m_corrupt) / \
                (m_clean - m_corrupt)
    sync()
    return effect


def reference(w, cfg, dev, clean, corrupt, runs=3):
    """(seconds, effect) of the hooks sweep: PyTorch on dev where it is
    installed (required for cuda), else NumPy on the CPU."""
    try:
        import torch
    except ImportError:
        if dev == "cuda":
            sys.exit("bench-analysis: the cuda row needs PyTorch")
        torch = None
    if torch:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        model = Hooked(w, cfg, torch, dev)
        tensors = [torch.tensor(t, device=dev, dtype=torch.long) for t in (clean, corrupt)]
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        name = f"PyTorch {dev}, forward hooks"
        ctx = torch.inference_mode()
    else:
        model, tensors, sync = Hooked(w, cfg, np), [clean, corrupt], lambda: None
        name, ctx = "NumPy float32, hooks", contextlib.nullcontext()
    times = []
    with ctx:
        model.forward(tensors[1], lambda l, z: z)  # warm-up
        sync()
        for _ in range(runs):
            t0 = time.perf_counter()
            effect = sweep(model, *tensors, sync)
            times.append(time.perf_counter() - t0)
    return name, median(times), effect


def reference_process(tmp, dev, cfg):
    """The wall seconds of the reference as a process of its own."""
    with open(os.path.join(tmp, "tokens.pickle"), "wb") as f:
        pickle.dump({"clean": CLEAN[0], "corrupt": CLEAN[1]}, f)
    cmd = [sys.executable, os.path.abspath(__file__), "--reference", tmp, dev,
           str(cfg["n_layer"]), str(cfg["n_head"])]
    return median_wall(cmd, "the reference process")


def median_wall(cmd, what):
    """The median wall seconds of three runs of cmd; a failure ends the
    benchmark, naming what ran."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode:
            sys.exit(f"bench-analysis: {what}: {p.stderr.strip()}")
    return median(times)


def reference_main(tmp, dev, L, H):
    """The reference process: weights from weights.pickle, one sweep."""
    with open(os.path.join(tmp, "weights.pickle"), "rb") as f:
        w = pickle.load(f)
    with open(os.path.join(tmp, "tokens.pickle"), "rb") as f:
        tok = pickle.load(f)
    reference(w, {"n_layer": int(L), "n_head": int(H)}, dev, tok["clean"],
              tok["corrupt"], runs=1)


CLEAN = [None, None]  # the row's clean and corrupted tokens


def andrea(model, dev, tmp, clean, corrupt):
    paths = []
    for name, tok in (("clean", clean), ("corrupt", corrupt)):
        path = os.path.join(tmp, f"{name}.ats")
        with open(path, "wb") as f:
            f.write(atsfmt.stream(atsfmt.record(
                "tokens", "i32", tok.shape, tok.astype("<i4").tobytes())))
        paths.append(path)
    out = os.path.join(tmp, "effect.ats")
    cmd = [os.path.join(BIN, "andrea-patch"), "-m", model, "--clean", paths[0],
           "--corrupted", paths[1], "--answer", str(ANSWER), "--wrong", str(WRONG),
           "--device", dev, "-f", "-o", out]
    wall = median_wall(cmd, " ".join(cmd))
    rec = [r for r in atsfmt.read(open(out, "rb").read(), label=out) if r.name == "effect"][0]
    return wall, np.frombuffer(rec.payload, np.float32).reshape(rec.dims)


def main(argv):
    if argv[:1] == ["--reference"]:
        return reference_main(*argv[1:])
    rows = [a for a in argv if a in ("cpu", "cuda")] or ["cpu", "cuda"]
    if len(rows) != len(argv) and argv:
        sys.exit(USAGE)
    print(f"T = {T}, B = 1; seconds, median of 3")
    print(f"{'row':>26} {'reference':>30} | {'andrea':>7} {'ref':>7} {'ratio':>6} "
          f"| {'andrea':>7} {'ref':>7} {'ratio':>6} | check")
    print(f"{'':>26} {'':>30} | {'wall':^22} | {'sweep':^22} |")
    with tempfile.TemporaryDirectory() as tmp:
        for dev in rows:
            config = "andrea-120m" if dev == "cuda" else "tiny"
            path, w, cfg = make_model(tmp, config, no_bos=False)
            with open(os.path.join(tmp, "weights.pickle"), "wb") as f:
                pickle.dump(w, f)
            rng = np.random.default_rng(1)
            clean = rng.integers(0, 256, (1, T)).astype(np.int64)
            corrupt = clean.copy()
            corrupt[0, T // 2] = (corrupt[0, T // 2] + 1) % 256
            CLEAN[:] = clean, corrupt
            a_wall, a_eff = andrea(path, dev, tmp, clean, corrupt)
            a_start, _ = andrea(path, dev, tmp, clean[:, :1], corrupt[:, :1])
            a_sweep = max(a_wall - a_start, 1e-6)
            name, r_sweep, r_eff = reference(w, cfg, dev, clean, corrupt)
            r_wall = reference_process(tmp, dev, cfg)
            err = np.abs(a_eff - r_eff).max() / max(np.abs(r_eff).max(), 1e-30)
            label = f"{config} {dev} L{cfg['n_layer']}xH{cfg['n_head']}"
            print(f"{label:>26} {name:>30} | {a_wall:7.3f} {r_wall:7.3f} "
                  f"{r_wall / a_wall:5.2f}x | {a_sweep:7.3f} {r_sweep:7.3f} "
                  f"{r_sweep / a_sweep:5.2f}x | "
                  f"{'ok' if err <= 1e-3 else 'DIFFERS'} ({err:.1e})")


if __name__ == "__main__":
    main(sys.argv[1:])
