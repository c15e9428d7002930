"""bench/refmodel.py - what bench/generate.py and bench/forward.py share:
the model files they run andrea on, and the ANDREA model as their NumPy
(CPU) and PyTorch eager (GPU) references, with the same weights.

The references compute what andrea computes (DESIGN.md, andrea-model(5)):
x = wte[token] + wpe[position]; per layer, pre-norm,
x += merge(softmax(mask(split(LN1(x) Wq) split(LN1(x) Wk)^T / sqrt(D)))
split(LN1(x) Wv)) Wo, x += GELU_tanh(LN2(x) fc) proj; logits = LNf(x)
lm_head; no biases in the products, untied head, LayerNorm eps from
lib/model/arch.h, explicit attention (Q.K^T, mask, softmax, A.V: no fused
kernel) or, in PyTorch, its fused scaled_dot_product_attention (sdpa).
Wq, Wk and Wv are used as one [C,3C] product, as andrea-qkv fuses them.
One forward serves both backends: a full pass, a prefill that fills the
KV cache, or a decoding step of one position per row.  StaticDecoder is
the decoding step as a PyTorch user after speed writes it: a cache of
fixed shape and the step compiled into one CUDA graph.
"""
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "bin")
sys.path.insert(0, os.path.join(ROOT, "tests"))
import atsfmt  # noqa: E402  (tests/atsfmt.py: the stream reader and writer)

CONFIGS = {"andrea-12m": (6, 12, 384), "andrea-120m": (12, 12, 768)}  # L, H, C
GPU = "cuda"  # the PyTorch device of the GPU references


def arch_constant(name):
    """A number #defined in lib/model/arch.h (AT_LN_EPS, AT_BOS)."""
    with open(os.path.join(ROOT, "lib", "model", "arch.h")) as f:
        m = re.search(rf"#define\s+{name}\s+([0-9.eE+-]+)f?\b", f.read())
    if not m:
        sys.exit(f"bench: lib/model/arch.h defines no {name}")
    return float(m.group(1))


EPS = arch_constant("AT_LN_EPS")
BOS = int(arch_constant("AT_BOS"))


def median(xs):
    return statistics.median(xs)


def machine_line():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                   if k.startswith(("OMP_", "GOMP_", "OPENBLAS_", "ANDREA_")))
    return (f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
            f"machine: {cpu}, {os.cpu_count()} cpus, load {load_average()}, "
            f"numpy {np.__version__}" + (f"\nenvironment: {env}" if env else ""))


def load_average():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _record_bytes(buf, r):
    """The bytes of record r of buf as they stand, header and chunks."""
    end = r.offset + r.header_len
    if r.chunks:
        off, _, stored = r.chunks[-1]
        end = off + 16 + stored
    return buf[r.offset:end]


def make_model(tmp, name, no_bos=True):
    """An initialised model of config name, written by andrea-train
    --steps 0 into tmp; returns (path, {parameter: float32 array}, config).

    no_bos: greedy decoding must never draw BOS, which would end a row
    before its 256 steps.  lnf.bias becomes 1 and lm_head's BOS column
    -0.1, so that BOS's logit is -0.1 C (LNf's normalised part sums to
    zero) against ~N(0, 0.02^2 2C) for the others; the two records are
    written again at level 1, every other record is copied as
    andrea-train wrote it."""
    path = os.path.join(tmp, f"{name}.ats")
    p = subprocess.run([os.path.join(BIN, "andrea-train"), "--config", name,
                        "--steps", "0", "-o", path],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench: andrea-train --config {name} --steps 0 failed: "
                 f"{p.stderr.strip()}")
    with open(path, "rb") as f:
        buf = f.read()
    recs = atsfmt.read(buf, label=path)
    cfg = {k: int(v) for r in recs if r.name == "config" for k, v in r.attrs}
    w = {r.name: np.frombuffer(r.payload, np.float32).reshape(r.dims).copy()
         for r in recs if r.dtype == "f32"}
    if no_bos:
        w["lnf.bias"][:] = 1.0
        w["lm_head"][:, BOS] = -0.1
        parts = [atsfmt.record(r.name, "f32", r.dims, w[r.name].tobytes(),
                               r.attrs, level=1, chunk=r.chunk)
                 if r.name in ("lnf.bias", "lm_head") else _record_bytes(buf, r)
                 for r in recs]
        with open(path + ".tmp", "wb") as f:
            f.write(b"".join(parts) + atsfmt.end_record())
        os.replace(path + ".tmp", path)
    return path, w, cfg


class _NumpyOps:
    """The elementwise pieces in float32 NumPy."""
    xp = np

    @staticmethod
    def layernorm(x, w, b):
        d = x - x.mean(-1, keepdims=True)
        var = (d * d).mean(-1, keepdims=True)
        d *= 1.0 / np.sqrt(var + np.float32(EPS))
        return d * w + b

    @staticmethod
    def gelu(x):
        u = x * x
        u *= np.float32(0.044715)
        u += 1.0
        u *= x
        u *= np.float32(np.sqrt(2.0 / np.pi))
        np.tanh(u, out=u)
        u += 1.0
        u *= x
        u *= 0.5
        return u

    @staticmethod
    def causal(ctx, dev):  # added to the scores: -inf where a key follows
        return np.triu(np.full((ctx, ctx), -np.inf, np.float32), 1)

    @staticmethod
    def softmax(s, mask):
        if mask is not None:
            s += mask
        s -= s.max(-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(-1, keepdims=True)
        return s

    @staticmethod
    def array(a, dev):
        return np.ascontiguousarray(a, dtype=np.float32)

    @staticmethod
    def heads(a):  # NumPy's matmul takes BLAS on contiguous stacks only
        return np.ascontiguousarray(a)

    @staticmethod
    def zeros(shape, dev):
        return np.zeros(shape, np.float32)

    @staticmethod
    def argmax(logits):
        return logits.argmax(-1)

    @staticmethod
    def tokens(a, dev):
        return np.asarray(a, np.int64)

    @staticmethod
    def sync():
        pass

    @staticmethod
    def inference():
        return contextlib.nullcontext()


class _TorchOps:
    """The same pieces in PyTorch eager (as bench/train-gpu.py writes them)."""

    def __init__(self, dev):
        import torch
        import torch.nn.functional as F
        self.xp, self.F, self.cuda = torch, F, str(dev).startswith("cuda")

    def layernorm(self, x, w, b):
        return self.F.layer_norm(x, (x.shape[-1],), w, b, EPS)

    def gelu(self, x):
        return self.F.gelu(x, approximate="tanh")

    def causal(self, ctx, dev):  # true where a key follows the query
        return self.xp.ones(ctx, ctx, dtype=self.xp.bool, device=dev).triu(1)

    def softmax(self, s, mask):
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return self.xp.softmax(s, -1)

    def sdpa(self, q, k, v, start):
        """softmax(q k^T / sqrt(D)) v, causal, by PyTorch's fused attention:
        queries at positions start.. over keys 0..; from 0 its causal form
        (the flash kernel), a query alone every key, else a mask."""
        F, T = self.F, q.shape[-2]
        if T == 1:
            return F.scaled_dot_product_attention(q, k, v)
        if start == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        seen = ~self.xp.ones(T, start + T, dtype=self.xp.bool,
                             device=q.device).triu(start + 1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=seen)

    def array(self, a, dev):
        return self.xp.from_numpy(np.ascontiguousarray(a, np.float32)).to(dev)

    def heads(self, a):  # torch.matmul takes strided batches as they are
        return a

    def zeros(self, shape, dev):
        return self.xp.zeros(shape, dtype=self.xp.float32, device=dev)

    def argmax(self, logits):
        return logits.argmax(-1)

    def tokens(self, a, dev):
        return self.xp.as_tensor(np.asarray(a, np.int64), device=dev)

    def sync(self):
        if self.cuda:
            self.xp.cuda.synchronize()

    def inference(self):
        return self.xp.inference_mode()


class Model:
    """The ANDREA model in NumPy (dev None) or PyTorch on dev ("cuda"),
    with a KV cache of `rows` rows (0: none); sdpa (PyTorch only): the
    attention by F.scaled_dot_product_attention.  A caller of forward holds
    self.o.inference() around it (torch.inference_mode() for PyTorch)."""

    def __init__(self, w, cfg, rows=0, dev=None, sdpa=False):
        self.o = _NumpyOps() if dev is None else _TorchOps(dev)
        self.dev, self.sdpa = dev, sdpa and dev is not None
        L, self.H, self.C = cfg["n_layer"], cfg["n_head"], cfg["d_model"]
        self.V, self.ctx = cfg["vocab"], cfg["ctx"]
        a = lambda name: self.o.array(w[name], dev)
        self.wte, self.wpe = a("wte"), a("wpe")
        self.layers = []
        for l in range(L):
            p = f"layers.{l}."
            wqkv = np.concatenate([w[p + "attn.wq"], w[p + "attn.wk"],
                                   w[p + "attn.wv"]], 1)
            self.layers.append(tuple(
                [a(p + "ln1.weight"), a(p + "ln1.bias"), self.o.array(wqkv, dev)]
                + [a(p + n) for n in ("attn.wo", "ln2.weight", "ln2.bias",
                                      "mlp.fc", "mlp.proj")]))
        self.lnf_w, self.lnf_b, self.lm_head = (a("lnf.weight"), a("lnf.bias"),
                                                a("lm_head"))
        self.causal = self.o.causal(self.ctx, dev)  # [query, key]
        D = self.C // self.H
        shape = (L, rows, self.H, self.ctx, D)
        self.kc = self.o.zeros(shape, dev) if rows else None
        self.vc = self.o.zeros(shape, dev) if rows else None

    def forward(self, tok, start=0, last=False):
        """logits [B,T,V] (last: [B,V], the last position's) of tokens
        [B,T] at positions start...; with a cache, row b's keys and values
        go to its positions start.. and the queries see positions 0..; a
        cache-less model needs start 0."""
        o, H, C = self.o, self.H, self.C
        B, T = tok.shape
        D, S = C // H, start + T
        x = (self.wte[tok] + self.wpe[start:S]).reshape(B * T, C)
        mask = self.causal[start:S, :S] if T > 1 else None
        scale = float(1.0 / np.sqrt(D))
        for l, (l1w, l1b, wqkv, wo, l2w, l2b, fc, proj) in enumerate(self.layers):
            qkv = (o.layernorm(x, l1w, l1b) @ wqkv).reshape(B, T, 3, H, D)
            q, k, v = (o.heads(qkv[:, :, i].swapaxes(1, 2)) for i in range(3))
            if self.kc is not None:
                self.kc[l, :B, :, start:S] = k
                self.vc[l, :B, :, start:S] = v
                k, v = self.kc[l, :B, :, :S], self.vc[l, :B, :, :S]
            if self.sdpa:
                a = o.sdpa(q, k, v, start)
            else:
                s = q @ k.swapaxes(-1, -2)
                s *= scale
                a = o.softmax(s, mask) @ v
            y = a.swapaxes(1, 2).reshape(B * T, C)
            x = x + y @ wo
            x = x + o.gelu(o.layernorm(x, l2w, l2b) @ fc) @ proj
        if last:
            x = x.reshape(B, T, C)[:, -1]
        logits = o.layernorm(x, self.lnf_w, self.lnf_b) @ self.lm_head
        return logits if last else logits.reshape(B, T, self.V)

    def greedy(self, tokens, n):
        """Prefill tokens [B,P] but the last column into the cache, then n
        decoding steps, each feeding one token per row (the last prompt
        token first, then the argmax drawn): andrea-generate's work at
        --temperature 0.  Returns (prefill s, decode s, drawn [B,n] int);
        the decode time covers the n steps and their argmax."""
        o = self.o
        P = tokens.shape[1]
        t = o.tokens(tokens, self.dev)
        with o.inference():
            o.sync()
            t0 = time.perf_counter()
            self.forward(t[:, :P - 1], 0, last=True)
            o.sync()
            t1 = time.perf_counter()
            cur, drawn = t[:, P - 1:], []
            for step in range(n):
                cur = o.argmax(self.forward(cur, P - 1 + step, last=True))
                drawn.append(cur)
                cur = cur[:, None]
            o.sync()
            t2 = time.perf_counter()
            out = o.xp.stack(drawn, 1)
        out = out if self.dev is None else out.cpu().numpy()
        return t1 - t0, t2 - t1, np.asarray(out)


class StaticDecoder:
    """Greedy decoding as gpt-fast and Hugging Face's static cache do it: the
    KV cache [L, rows, H, ctx, D] of fixed shape in a module's buffers, a
    step that writes its position with index_copy_ and attends over all ctx
    positions through a mask of those written (every step the same shapes),
    compiled with torch.compile(mode="reduce-overhead", fullgraph=True), so
    that each step replays one CUDA graph.  The prompt goes through the
    same step a position at a time (untimed)."""

    def __init__(self, torch, w, cfg, rows, dev):
        F, nn = torch.nn.functional, torch.nn
        L, H, C = cfg["n_layer"], cfg["n_head"], cfg["d_model"]
        ctx, D = cfg["ctx"], C // H
        self.torch, self.dev = torch, dev

        class Step(nn.Module):
            def __init__(self):
                super().__init__()
                put = lambda n, a: self.register_buffer(n, torch.from_numpy(
                    np.ascontiguousarray(a, np.float32)).to(dev))
                for n in ("wte", "wpe", "lnf.weight", "lnf.bias", "lm_head"):
                    put(n.replace(".", "_"), w[n])
                for l in range(L):
                    p = f"layers.{l}."
                    put(f"wqkv{l}", np.concatenate(
                        [w[p + "attn.wq"], w[p + "attn.wk"], w[p + "attn.wv"]], 1))
                    for n in ("ln1.weight", "ln1.bias", "attn.wo", "ln2.weight",
                              "ln2.bias", "mlp.fc", "mlp.proj"):
                        put(f"{n.replace('.', '_')}{l}", w[p + n])
                z = torch.zeros(L, rows, H, ctx, D, device=dev)
                self.register_buffer("kc", z)
                self.register_buffer("vc", z.clone())
                self.register_buffer("where", torch.arange(ctx, device=dev))

            def forward(self, tok, pos):
                """The argmax [B] after token tok [B] at position pos [1]."""
                B, g = tok.shape[0], lambda n: getattr(self, n)
                ln = lambda x, w, b: F.layer_norm(x, (C,), g(w), g(b), EPS)
                x = self.wte[tok] + self.wpe[pos]
                seen = (self.where <= pos)[None]  # [1, ctx]
                for l in range(L):
                    qkv = ln(x, f"ln1_weight{l}", f"ln1_bias{l}") @ g(f"wqkv{l}")
                    q, k, v = qkv.view(B, 3, H, 1, D).unbind(1)
                    kc, vc = self.kc[l, :B], self.vc[l, :B]
                    kc.index_copy_(2, pos, k)
                    vc.index_copy_(2, pos, v)
                    a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=seen)
                    x = x + a.reshape(B, C) @ g(f"attn_wo{l}")
                    h = ln(x, f"ln2_weight{l}", f"ln2_bias{l}")
                    x = x + F.gelu(h @ g(f"mlp_fc{l}"), approximate="tanh") \
                        @ g(f"mlp_proj{l}")
                return (ln(x, "lnf_weight", "lnf_bias") @ self.lm_head).argmax(-1)

        self.step = torch.compile(Step(), mode="reduce-overhead",
                                  fullgraph=True)

    def _next(self, tok, pos):
        """The step's argmax, copied out of the graph's output buffer, which
        the next replay writes over; pos [1] on the device moves on."""
        self.torch.compiler.cudagraph_mark_step_begin()
        out = self.step(tok, pos).clone()
        pos += 1
        return out

    def greedy(self, tokens, n):
        """As Model.greedy: (prompt s, decode s, drawn [B,n]) of the prompt
        tokens [B,P] and n steps; the first call compiles."""
        torch, P = self.torch, tokens.shape[1]
        t = torch.as_tensor(np.asarray(tokens, np.int64), device=self.dev)
        pos = torch.zeros(1, dtype=torch.int64, device=self.dev)
        with torch.no_grad():
            gpu_sync(torch)
            t0 = time.perf_counter()
            for i in range(P - 1):
                self._next(t[:, i], pos)
            gpu_sync(torch)
            t1 = time.perf_counter()
            cur, drawn = t[:, P - 1], []
            for _ in range(n):
                cur = self._next(cur, pos)
                drawn.append(cur)
            gpu_sync(torch)
            t2 = time.perf_counter()
            out = torch.stack(drawn, 1).cpu().numpy()
        return t1 - t0, t2 - t1, out


def gpu_sync(torch):
    """Waits for the GPU's queued work."""
    if GPU.startswith("cuda"):
        torch.cuda.synchronize()


def torch_cuda():
    """(torch, None) where PyTorch sees a GPU, else (None, the reason)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, "PyTorch sees no GPU"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return torch, None


def bench_args(argv, devices, batches, usage):
    """(quick, only, keep) from a benchmark's arguments: --quick, and the
    filters only (config names, devices, batch sizes); keep(value,
    values) is true where value is named or none of values is."""
    quick = "--quick" in argv
    only = {a for a in argv if a != "--quick"}
    if only - set(CONFIGS) - set(devices) - {str(b) for b in batches}:
        print(usage, file=sys.stderr)
        sys.exit(2)

    def keep(value, values):
        return str(value) in only or not only & {str(v) for v in values}
    return quick, only, keep


def bench_start(keep, devices, libs=()):
    """Prints the machine and the GPU with the versions of torch and of
    libs (module names), or why the GPU rows are skipped; returns (torch
    or None, the devices to run)."""
    torch, why = torch_cuda()
    print(machine_line())
    if torch is not None:
        versions = [f"torch {torch.__version__}"]
        for lib in libs:
            try:
                versions.append(f"{lib} {__import__(lib).__version__}")
            except ImportError:
                versions.append(f"{lib} not installed")
        print(f"GPU: {torch.cuda.get_device_name()}, {', '.join(versions)}")
    elif keep("cuda", devices):
        print(f"GPU rows skipped: {why}")
    return torch, [d for d in devices if keep(d, devices)
                   and (d == "cpu" or torch is not None)]


def scratch():
    """A temporary directory, in /dev/shm where there is one."""
    return tempfile.TemporaryDirectory(
        dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
