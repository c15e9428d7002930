"""make bench-train-gpu: andrea-train's training step on the GPU against
PyTorch models of exactly the same architecture, timed in the same run:
eager with explicit attention, eager with F.scaled_dot_product_attention
(is_causal=True: flash attention), and torch.compile of the SDPA model,
the one a user would pick (issue 18); the ratio is against it.

Both sides: B = 16 rows of T = 1024 positions, the ANDREA model (pre-norm,
no biases in the products, untied lm_head, GELU tanh, LayerNorm eps 1e-5,
learned positions; q, k and v from one product of 3C columns, as
nanoGPT's c_attn and andrea-train's Wq|Wk|Wv; attention explicit (Q.K^T,
mask, softmax, A.V) or through SDPA),
AdamW (PyTorch: torch.optim.AdamW(fused=True)) with weight decay on the
matrices, global-norm clipping at 1.0, one host synchronisation per step
(the loss is read back).  3 warm-up steps, then 10 timed ones.

andrea-train's time comes from its --log (the elapsed seconds between the
3rd and the 13th step); PyTorch's from perf_counter around its 10 steps.
With --runs N (an argument beside the filters), andrea-train as it
chooses and the compiled model run N times each, alternating, and the
table gives each one's median run, with the spreads on a line below;
the other runs stay one each.  With --same-cudnn, andrea-train loads the
cuDNN this PyTorch loads (LD_LIBRARY_PATH set to its folder) instead of
the one on the loader's path, so that both sides' attention runs on the
same library; the header says which.
andrea-train runs twice: as it chooses (the andrea column), then with
ANDREA_TRAIN_FUSE_GELU forcing the other GELU path; "fuse" is the tokens/s
with the GELU in the epilogue of the MLP's first product (cuBLASLt) over
those with a separate GELU kernel each way.  A third run has
ANDREA_CUDA_GRAPHS=0; "graph" is the tokens/s of the default run (its
steps replayed as one CUDA graph) over that one's (every kernel launched
from the host).
Memory: andrea's engine buffers and the device memory its process held
at its peak (total - free: its CUDA context and the cuBLAS and cuDNN
workspaces included), less what was in use before it started (this
process's own context and cached tensors), beside the compiled model's
tensors (torch.cuda.max_memory_allocated()) and what its process holds
counted the same way: the allocator's peak reservation
(max_memory_reserved()) plus a CUDA context of PyTorch's with cuBLAS and
SDPA loaded, measured in a child process (context_bytes).  The process
figures are the like-for-like pair: what nvidia-smi would show.  The
compiled model has COMPILE_WARM more warm-up steps, in which it compiles.

MFU = (6 N + 12 L C T) tokens/s / peak, N the parameters of the products
(12 L C^2 + C V; the embedding tables are gathers), 12 L C T the attention
products (full T x T, as both sides compute them).  Peaks: the H200 SXM's
dense datasheet rates, fp32 67, tf32 495, bf16 990 TFLOP/s.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, T, WARM, TIMED = 16, 1024, 3, 10
PEAK = {"fp32": 67e12, "tf32": 495e12, "bf16": 990e12}
CONFIGS = {"andrea-12m": (6, 12, 384), "andrea-120m": (12, 12, 768)}


def flops_per_token(L, C, V):
    return 6 * (12 * L * C * C + C * V) + 12 * L * C * T


def data_file(tmp, V):
    rng = np.random.default_rng(V)
    if V == 257:
        path = os.path.join(tmp, "bytes.bin")
        rng.integers(0, 256, 1 << 20, dtype=np.uint8).tofile(path)
        return path
    npy = os.path.join(tmp, f"tok{V}.npy")
    np.save(npy, rng.integers(0, V, 1 << 20).astype(np.int32))
    path = os.path.join(tmp, f"tok{V}.ats")
    subprocess.run([os.path.join(ROOT, "bin", "andrea-pack"), "-z", "0",
                    "-o", path, f"tokens={npy}"], check=True)
    return path


def ours(tmp, name, V, prec, data, fuse_gelu=None, extra=(), batch=B,
         graphs=True, root=ROOT, timed=TIMED, env=None):
    """andrea-train's run of `batch` rows a step, with extra options, for
    `timed` steps after the warm-up; fuse_gelu True/False forces a GELU
    path, None leaves the choice to andrea-train; graphs False launches
    every kernel from the host; root is the tree whose bin/andrea-train
    runs; env adds to the environment."""
    env = {**{k: v for k, v in os.environ.items()
              if k not in ("ANDREA_TRAIN_FUSE_GELU", "ANDREA_CUDA_GRAPHS")},
           **(env or {})}
    if fuse_gelu is not None:
        env["ANDREA_TRAIN_FUSE_GELU"] = "1" if fuse_gelu else "0"
    if not graphs:
        env["ANDREA_CUDA_GRAPHS"] = "0"
    log = os.path.join(tmp, "log.jsonl")
    out = os.path.join(tmp, "m.ats")
    free, total = torch.cuda.mem_get_info()  # the device is shared with us
    p = subprocess.run([os.path.join(root, "bin", "andrea-train"),
                        "--config", name, "--vocab", str(V), "--data", data,
                        "--steps", str(WARM + timed), "--batch", str(batch),
                        "--seq", str(T), "--warmup", "2", "--val-fraction", "0",
                        "--save-every", "0", "-z", "0", "--device", "cuda",
                        "--precision", prec, "--log", log, "-o", out,
                        *extra],
                       capture_output=True, text=True, env=env)
    for f in (out, out + ".ckpt"):
        if os.path.exists(f):
            os.remove(f)
    if p.returncode != 0:
        return None, p.stderr.strip()
    recs = [json.loads(line) for line in open(log)]
    dt = recs[-1]["elapsed"] - recs[WARM - 1]["elapsed"]
    summary = p.stderr.strip().splitlines()[-1]
    return dict(tps=timed * batch * T / dt, buf=recs[-1]["device_buffers"],
                peak=recs[-1]["device_peak"] - (total - free),
                loss=recs[-1]["loss"],
                fused="GELU fused" in summary), summary


class Andrea(torch.nn.Module):
    def __init__(self, L, H, C, V, sdpa=False):
        super().__init__()
        self.L, self.H, self.C, self.sdpa = L, H, C, sdpa
        P = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.02)
        self.wte, self.wpe = P(V, C), P(T, C)
        self.ln = torch.nn.ParameterList()
        self.mat = torch.nn.ParameterList()
        for _ in range(L):
            for _ in range(2):
                self.ln.append(torch.nn.Parameter(torch.ones(C)))
                self.ln.append(torch.nn.Parameter(torch.zeros(C)))
            # q, k, v in one product, as nanoGPT's c_attn: three products
            # of C columns each would make the reference slower
            for shape in [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)]:
                self.mat.append(P(*shape))
        self.lnf_w = torch.nn.Parameter(torch.ones(C))
        self.lnf_b = torch.nn.Parameter(torch.zeros(C))
        self.lm_head = P(C, V)
        self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, idx, tgt):
        Bn, Tn = idx.shape
        H, C, D = self.H, self.C, self.C // self.H
        x = self.wte[idx] + self.wpe[:Tn]
        heads = lambda t: t.view(Bn, Tn, H, D).transpose(1, 2)
        for l in range(self.L):
            # one item at a time: torch.compile cannot trace a slice of a
            # ParameterList (slice.indices), and would fall back to eager
            w1, b1, w2, b2 = (self.ln[4 * l + i] for i in range(4))
            wqkv, wo, fc, proj = (self.mat[4 * l + i] for i in range(4))
            h = F.layer_norm(x, (C,), w1, b1, 1e-5)
            q, k, v = map(heads, (h @ wqkv).split(C, -1))
            if self.sdpa:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-2, -1)) * D ** -0.5
                a = torch.softmax(s.masked_fill(self.causal[:Tn, :Tn],
                                                float("-inf")), -1)
                o = a @ v
            x = x + o.transpose(1, 2).reshape(Bn, Tn, C) @ wo
            h = F.layer_norm(x, (C,), w2, b2, 1e-5)
            x = x + F.gelu(h @ fc, approximate="tanh") @ proj
        x = F.layer_norm(x, (C,), self.lnf_w, self.lnf_b, 1e-5)
        return F.cross_entropy((x @ self.lm_head).reshape(-1, self.lm_head.shape[1]),
                               tgt.reshape(-1))


# the compiled model's extra warm-up steps: compiling, and any recompiling
# its first steps cause, stay out of the timed ones
COMPILE_WARM = 5

# Each precision and vocabulary is another compiled version of
# Andrea.forward; past Dynamo's limit of them (8 in PyTorch 2.15) it runs
# the model uncompiled, which a whole sweep of 12 configurations reached.
_dynamo = torch._dynamo.config
for _knob in ("recompile_limit", "cache_size_limit"):
    if hasattr(_dynamo, _knob):
        setattr(_dynamo, _knob, max(getattr(_dynamo, _knob), 64))

# PyTorch's three ways: (SDPA, torch.compile)
WAYS = {"eager": (False, False), "sdpa": (True, False), "compiled": (True, True)}


def reference_step(name, V, prec, way):
    """PyTorch's model of `way` (WAYS) on one fixed batch, and one training
    step of it as a function returning the loss: what bench-train-gpu
    times and bench-train-profile profiles."""
    L, H, C = CONFIGS[name]
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.manual_seed(0)
    sdpa, compiled = WAYS[way]
    m = Andrea(L, H, C, V, sdpa).cuda()
    step = torch.compile(m) if compiled else m
    decay = [p for p in m.mat] + [m.lm_head]
    rest = [m.wte, m.wpe, m.lnf_w, m.lnf_b] + list(m.ln)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.999), eps=1e-8, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    idx = torch.randint(0, V, (B, T + 1), device="cuda", generator=g)

    def one():
        for grp in opt.param_groups:
            grp["lr"] = 6e-4
        with torch.autocast("cuda", torch.bfloat16, enabled=prec == "bf16"):
            loss = step(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return one


def context_bytes():
    """The device memory a PyTorch process holds once it has run a
    product and an SDPA (its CUDA context, cuBLAS's and the kernels'
    modules), less its allocator's reservation: seen from here while a
    child holds it."""
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, torch, torch.nn.functional as F\n"
         "x = torch.ones(64, 64, device='cuda', dtype=torch.bfloat16)\n"
         "x @ x; F.scaled_dot_product_attention(x[None, None], "
         "x[None, None], x[None, None], is_causal=True)\n"
         "torch.cuda.synchronize()\n"
         "print(torch.cuda.memory_reserved(), flush=True)\n"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    free0, _ = torch.cuda.mem_get_info()
    reserved = int(child.stdout.readline())
    free1, _ = torch.cuda.mem_get_info()
    child.communicate("")
    return free0 - free1 - reserved


def theirs(name, V, prec, way, context, timed=TIMED):
    torch.cuda.reset_peak_memory_stats()
    one = reference_step(name, V, prec, way)
    warm = WARM + (COMPILE_WARM if WAYS[way][1] else 0)
    for s in range(warm + timed):
        if s == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        one()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated()
    process = torch.cuda.max_memory_reserved() + context
    del one
    torch.cuda.empty_cache()
    return dict(tps=timed * B * T / dt, peak=peak, process=process)


def paired(tmp, name, V, prec, data, context, runs, env=None):
    """andrea-train as it chooses and the compiled model, `runs` times
    each, alternating, so that the GPU's drift between calls falls on
    both sides: the run of the median tokens/s of each, with the most
    memory andrea held and the least the compiled model held (the ratio
    of memory no kinder to andrea than any one pair of runs), and a line
    of their spreads.  andrea failing: (None, its message, ...)."""
    ours_, theirs_ = [], []
    for _ in range(runs):
        a, msg = ours(tmp, name, V, prec, data, env=env)
        if a is None:
            return None, msg, theirs(name, V, prec, "compiled", context), ""
        ours_.append(a)
        theirs_.append(theirs(name, V, prec, "compiled", context))

    def median(rs, mem, pick):  # of an even count, the lower middle run
        r = dict(sorted(rs, key=lambda r: r["tps"])[(len(rs) - 1) // 2])
        for k in mem:
            r[k] = pick(x[k] for x in rs)
        return r
    a = median(ours_, ("buf", "peak"), max)
    t = median(theirs_, ("peak", "process"), min)
    span = lambda rs: (f"{min(r['tps'] for r in rs):.0f} to "
                       f"{max(r['tps'] for r in rs):.0f}")
    spread = (f"  {runs} runs each, alternating: andrea {span(ours_)}, "
              f"compiled {span(theirs_)} tok/s")
    return a, msg, t, spread


def torch_cudnn():
    """The path of the cuDNN library this PyTorch loaded, or None."""
    torch.backends.cudnn.version()  # loads it
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "/libcudnn.so" in path:
            return path
    return None


def same_cudnn_env():
    """--same-cudnn: the environment that has andrea-train load the
    cuDNN PyTorch loaded, and the header's words for it."""
    path = torch_cudnn()
    if path is None:
        sys.exit("bench-train-gpu: --same-cudnn: PyTorch loaded no cuDNN")
    if not os.path.basename(path).startswith("libcudnn.so.9"):
        sys.exit(f"bench-train-gpu: --same-cudnn: PyTorch's cuDNN ({path}) "
                 f"is not the major version andrea-train opens "
                 f"(libcudnn.so.9)")
    where = os.path.dirname(path)
    version = torch.backends.cudnn.version()
    if where.startswith(("/usr/", "/lib")):  # the loader finds it anyway
        return {}, f"the system's cuDNN {version}, which PyTorch loads too"
    return ({"LD_LIBRARY_PATH": ":".join(
                filter(None, [where, os.environ.get("LD_LIBRARY_PATH")]))},
            f"PyTorch's cuDNN {version} ({where})")


def main():
    if not torch.cuda.is_available():
        sys.exit("bench-train-gpu: PyTorch sees no GPU")
    args = sys.argv[1:]
    runs = 1
    if "--runs" in args:  # andrea's and the reference's runs, each
        i = args.index("--runs")
        try:
            runs = int(args[i + 1])
        except (IndexError, ValueError):
            runs = 0
        if runs < 1:
            sys.exit("bench-train-gpu: --runs wants a count of 1 or more")
        del args[i:i + 2]
    brief = "--brief" in args  # andrea and the compiled model alone
    if brief:
        args.remove("--brief")
    precompile = "--precompile" in args  # only fill Inductor's cache
    if precompile:
        args.remove("--precompile")
    env, cudnn = {}, "the system's cuDNN (the loader's path)"
    if "--same-cudnn" in args:  # andrea on the compiled model's cuDNN
        args.remove("--same-cudnn")
        env, cudnn = same_cudnn_env()
    only = set(args)  # optional filters: config names, V, precisions
    known = set(CONFIGS) | {"257", "8449"} | set(PEAK)
    if only - known:
        sys.exit(f"bench-train-gpu: {' '.join(sorted(only - known))}: not a "
                 f"configuration, vocabulary or precision, nor --runs N, "
                 f"--same-cudnn, --brief or --precompile")

    def keep(*dims):  # each (value, all values): filtered where named
        return all(str(v) in only or not only & set(map(str, vals))
                   for v, vals in dims)
    selected = [(name, V, prec) for name in CONFIGS for V in (257, 8449)
                for prec in ("fp32", "tf32", "bf16")
                if keep((name, CONFIGS), (V, (257, 8449)), (prec, PEAK))]
    if precompile:
        for name, V, prec in selected:
            t0 = time.perf_counter()
            one = reference_step(name, V, prec, "compiled")
            for _ in range(WARM):
                one()
            del one
            torch.cuda.empty_cache()
            print(f"bench-train-gpu: compiled {name} V {V} {prec} in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
        return
    context = context_bytes()
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"B={B} T={T}, {WARM} warm-up + {TIMED} timed steps"
          f"{f', andrea and the compiled model {runs} runs each (medians)' if runs > 1 else ''}"
          f"; MFU peaks "
          f"(TFLOP/s) fp32 67, tf32 495, bf16 990; a PyTorch process's "
          f"context {context / (1 << 30):.2f} GiB; andrea-train on {cudnn}")
    print(f"{'config':<12}{'V':>5} {'prec':<5}{'andrea tok/s':>13}{'MFU':>6}"
          f"{'fuse':>6}{'graph':>6}{'eager':>9}{'+SDPA':>9}{'compiled':>10}{'MFU':>6}"
          f"{'ratio':>7}  {'andrea GiB buf/process':>22}"
          f"{'torch GiB tensors/process':>26}")
    rows, gains, lighter = [], {}, []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm")
                             else None) as tmp:
        data = {V: data_file(tmp, V) for V in {V for _, V, _ in selected}}
        for name, V, prec in selected:
            L, H, C = CONFIGS[name]
            fpt = flops_per_token(L, C, V)
            # as andrea-train chooses, alternating with the
            # reference `runs` times; then the other GELU path
            a, msg, t, spread = paired(tmp, name, V, prec, data[V],
                                       context, runs, env)
            if brief:
                o = e = a
                omsg = ""
                ts = {}
            else:
                o, omsg = (ours(tmp, name, V, prec, data[V],
                                not a["fused"], env=env)
                           if a else (None, ""))
                e, emsg = (ours(tmp, name, V, prec, data[V],
                                graphs=False, env=env)
                           if o else (None, omsg))
                ts = {w: theirs(name, V, prec, w, context)
                      for w in WAYS if w != "compiled"}
            ts["compiled"] = t
            if a is None or e is None:
                print(f"{name:<12}{V:>5} {prec:<5} andrea failed: "
                      f"{msg if a is None else emsg}")
                continue
            f, u = (a, o) if a["fused"] else (o, a)
            r = a["tps"] / t["tps"]
            rows.append(r)
            lighter.append(a["peak"] <= t["process"])
            gain = (" -" if brief else
                    f"{f['tps'] / u['tps']:>5.2f}x" if f["fused"]
                    else "  n/a")
            if f["fused"] and not brief:
                gains.setdefault(prec, []).append(f["tps"] / u["tps"])
            gib = 1 << 30
            graph = "-" if brief else f"{a['tps'] / e['tps']:.2f}x"
            column = lambda w: (f"{ts[w]['tps']:.0f}" if w in ts
                                else "-")
            print(f"{name:<12}{V:>5} {prec:<5}{a['tps']:>13.0f}"
                  f"{fpt * a['tps'] / PEAK[prec]:>6.1%}"
                  f"{gain:>6}{graph:>6}"
                  f"{column('eager'):>9}{column('sdpa'):>9}"
                  f"{t['tps']:>10.0f}"
                  f"{fpt * t['tps'] / PEAK[prec]:>6.1%}{r:>6.2f}x  "
                  f"{a['buf'] / gib:>12.2f}/{a['peak'] / gib:<9.2f}"
                  f"{t['peak'] / gib:>17.2f}/"
                  f"{t['process'] / gib:<8.2f}", flush=True)
            if runs > 1:
                print(spread, flush=True)
    if rows:
        print(f"bench-train-gpu: {sum(r >= 1.0 for r in rows)}/{len(rows)} "
              f"configurations >= 1.0x torch.compile + SDPA; geometric mean "
              f"{float(np.exp(np.mean(np.log(rows)))):.2f}x; "
              f"{sum(lighter)}/{len(lighter)} hold at most the compiled "
              f"model's process memory")
    for prec, g in gains.items():
        print(f"{prec}: the GELU fused into the MLP product (cuBLASLt) against "
              f"a kernel apart, geometric mean over {len(g)} configurations "
              f"{float(np.exp(np.mean(np.log(g)))):.3f}x")


if __name__ == "__main__":
    main()
