"""The GPU stage benchmark (make bench-gpu): build/bench/gpu times each
stage's kernel work on device-resident inputs; this script times PyTorch
eager doing the same operations on the same shapes, in fp32 with TF32 off,
the same way (CUDA events, median of 50 runs after 5 warm-up runs), and
prints each stage's time, PyTorch's and the ratio, then the bandwidth mask
and softmax reach as a fraction of a device-to-device copy's.

Every call is timed two ways (bench/gpu.cu, above lead_kernel, says more):
per call, from an idle GPU, so the host's launch latency counts as it does
for a lone eager call; and queued, behind a spin kernel that keeps the GPU
busy while the call is queued, so only its GPU work counts.  The ratios
against PyTorch are judged per call, the bandwidth on the queued times.

Where PyTorch can do a stage more than one way, every way is timed and the
fastest is the reference.  Goals: every stage <= 1.0x PyTorch; mask and
softmax >= 80% of the copy bandwidth.
"""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, H, T, D = 8, 12, 1024, 64
C, V = H * D, 257
REPS = 50
LEAD_CYCLES = 1000000  # spin ahead of a queued call, as in bench/gpu.cu


def median_ms(fn, lead):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(REPS):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        if lead:
            torch.cuda._sleep(lead)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return sorted(ms)[REPS // 2]


def torch_times():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    rn = lambda *s, std=0.02: torch.randn(*s, device=dev, generator=g) * std
    tok = torch.randint(0, V, (B, T), device=dev, generator=g)
    wte, wpe = rn(V, C), rn(T, C)
    lnw, lnb = rn(C, std=1.0), rn(C, std=1.0)
    wq, wk, wv, wo = rn(C, C), rn(C, C), rn(C, C), rn(C, C)
    wqkv = torch.cat([wq, wk, wv], dim=1).contiguous()
    x = wte[tok] + wpe[:T]
    scale = D ** -0.5
    causal = torch.ones(T, T, dtype=torch.bool, device=dev).triu(1)

    def heads(t):
        return t.view(B, T, H, D).transpose(1, 2).contiguous()

    def qkv_three():
        h = F.layer_norm(x, (C,), lnw, lnb, 1e-5)
        return [heads(h @ w) for w in (wq, wk, wv)]

    def qkv_fused():
        h = F.layer_norm(x, (C,), lnw, lnb, 1e-5)
        return (h @ wqkv).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).contiguous()

    q, k, v = qkv_three()
    kt = k.transpose(-2, -1)
    s = (q @ kt) * scale
    s_out = torch.empty_like(s)
    a = torch.softmax(s.masked_fill(causal, float("-inf")), dim=-1)
    o = a @ v
    ways = {
        "embed": {"wte[tok] + wpe[:T]": lambda: wte[tok] + wpe[:T]},
        "qkv": {"LN, 3 x (h@W, heads)": qkv_three,
                "LN, h@Wqkv, heads": qkv_fused},
        "scores": {"(q@k^T)*scale": lambda: (q @ kt) * scale,
                   "baddbmm(alpha=scale)": lambda: torch.baddbmm(
                       s_out.view(B * H, T, T), q.view(B * H, T, D),
                       kt.reshape(B * H, D, T), beta=0.0, alpha=scale)},
        "mask": {"masked_fill_(-inf)": lambda: s.masked_fill_(causal, float("-inf"))},
        "softmax": {"softmax(dim=-1)": lambda: torch.softmax(s, dim=-1)},
        "attend": {"a@v": lambda: a @ v},
        "proj": {"concat@Wo": lambda: o.transpose(1, 2).reshape(B, T, C) @ wo},
    }
    best = {}  # stage -> (per-call ms, queued ms, name), the fastest way
    for stage, fns in ways.items():
        times = {name: (median_ms(fn, 0), median_ms(fn, LEAD_CYCLES))
                 for name, fn in fns.items()}
        name = min(times, key=lambda n: times[n][0])
        best[stage] = (*times[name], name)
    return best


def ours():
    exe = os.path.join(ROOT, "build", "bench", "gpu")
    p = subprocess.run([exe], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench-gpu: {exe} failed: {p.stderr.strip()}")
    return {f[0]: [float(x) for x in f[1:]]
            for f in (l.split() for l in p.stdout.splitlines())}


def main():
    if not torch.cuda.is_available():
        sys.exit("bench-gpu: PyTorch sees no GPU")
    print(f"GPU: {torch.cuda.get_device_name()}  B={B} H={H} T={T} D={D} "
          f"C={C}  fp32, TF32 off, median of {REPS}")
    us = ours()
    ref = torch_times()
    print(f"{'':<8} {'per call':^27}  {'queued':^27}")
    print(f"{'stage':<8} {'andrea ms':>9} {'torch ms':>9} {'ratio':>7}  "
          f"{'andrea ms':>9} {'torch ms':>9} {'ratio':>7}  torch's fastest way")
    met = 0
    stages = ["embed", "qkv", "scores", "mask", "softmax", "attend", "proj"]
    for st in stages:
        t_call, t_queued, name = ref[st]
        ours_call, ours_queued = us[st]
        r, rq = ours_call / t_call, ours_queued / t_queued
        met += r <= 1.0
        print(f"{st:<8} {ours_call:>9.4f} {t_call:>9.4f} {r:>6.2f}x  "
              f"{ours_queued:>9.4f} {t_queued:>9.4f} {rq:>6.2f}x  {name}"
              + ("" if r <= 1.0 else "   (goal <= 1.0x per call missed)"))
    copy_call, copy = us["copy_gbs"]
    print(f"device-to-device copy: {copy:.0f} GB/s queued, {copy_call:.0f} "
          f"per call (bytes read + written)")
    bw_met = 0
    for st in ("mask", "softmax"):
        nbytes = us[st + "_bytes"][0]
        ms_call, ms_queued = us[st]
        gbs = nbytes / ms_queued / 1e6
        frac, frac_call = gbs / copy, nbytes / ms_call / 1e6 / copy_call
        bw_met += frac >= 0.8
        print(f"{st:<8} {gbs:>7.0f} GB/s = {100 * frac:5.1f}% of copy queued "
              f"({100 * frac_call:.1f}% per call)"
              + ("" if frac >= 0.8 else "   (goal >= 80% missed)"))
    print(f"bench-gpu: {met}/{len(stages)} stages <= 1.0x PyTorch per call, "
          f"{bw_met}/2 bandwidth goals met")


if __name__ == "__main__":
    main()
