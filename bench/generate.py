"""make bench-generate: andrea-generate's decoding speed against references
measured in the same run, on the same prompts and the same weights.

Each row decodes greedily (--temperature 0) 256 new tokens after a prompt
of 128 fixed bytes per row (BOS and the first 127 bytes are prefilled, 128
prompt tokens; the first step feeds the 128th byte), at batch 1 (--prompt)
and 8 (--prompts, eight different prompts of the same length), with
andrea-12m and andrea-120m shapes initialised by andrea-train --steps 0
(refmodel.make_model: BOS's logit is pushed down so that no row ends
early).  andrea's decode tokens/s is its --stats line's: steps x rows over
the time of the decoding steps, sampling left out.

References:
- CPU (--device cpu): NumPy float32 with a KV cache (refmodel.Model: the
  same architecture, prefill then one position a step); its decode time
  covers the 256 steps and their argmax.
- GPU (--device cuda --precision fp32), where PyTorch sees a GPU:
  PyTorch eager fp32 (TF32 off) with a preallocated KV cache, the same
  module on the device, the argmax kept on the device, the decode loop
  timed between torch.cuda.synchronize() calls; the same in the form a
  PyTorch user after speed writes (refmodel.StaticDecoder: gpt-fast's
  static cache, the step compiled by torch.compile(mode="reduce-overhead")
  into one CUDA graph, SDPA over a mask of the positions written; its
  compilation in the untimed warm-up); and Hugging Face
  transformers' GPT2LMHeadModel.generate (a random GPT2Config of the same
  sizes, V = 257: biases and a tied head, its own attention; greedy,
  use_cache, min_new_tokens = max_new_tokens = 256) timed around the
  whole call on BOS and the 128 bytes, prefill included.  Against it
  andrea's figure is prefill-included as well: rows x 256 over andrea's
  prefill plus decode time (both sides prefill 129 positions' worth and
  decode the rest; neither counts process start or model loading).
Then the wall clock of whole andrea-generate processes (start-up and
model loading included): -n 256 at andrea-120m on the GPU, -n 200 at
andrea-12m on the CPU, batch 1, the same prompt.

Median of 3 runs, andrea and its references taking turns.  Arguments
filter the rows (andrea-12m, andrea-120m, cpu, cuda, 1, 8); --quick
decodes 32 tokens once per row.  Goals: GPU decode at batch 1 >= 2x
PyTorch eager and >= 1.0x the compiled static cache; CPU >= 1.0x NumPy;
both wall clocks < 2 s.
"""
import os
import re
import subprocess
import sys
import time

import numpy as np

from refmodel import (BIN, BOS, CONFIGS, GPU, Model, StaticDecoder,
                      bench_args, bench_start, gpu_sync, load_average,
                      make_model, median, scratch)

PROMPT_BYTES, BATCHES, DEVICES = 128, (1, 8), ("cpu", "cuda")
TEXT = ("It was the best of times, it was the worst of times, it was the age "
        "of wisdom, it was the age of foolishness, it was the epoch of belief, "
        "it was the epoch of incredulity, it was the season of Light, it was "
        "the season of Darkness, it was the spring of hope, it was the winter "
        "of despair.")
STATS = re.compile(r"(\d+) rows?, (\d+) prompt tokens encoded in ([\d.]+) ms; "
                   r"(\d+) steps? in ([\d.]+) ms: (\d+) tokens/s \((.*)\)")
USAGE = ("usage: generate.py [--quick] [andrea-12m] [andrea-120m] [cpu] "
         "[cuda] [1] [8]")


def prompts(B):
    """B fixed prompts of PROMPT_BYTES bytes, row r from byte 16 r of TEXT."""
    return [TEXT[16 * r:16 * r + PROMPT_BYTES] for r in range(B)]


def token_rows(ps):
    """[B, 1 + PROMPT_BYTES]: BOS and the bytes of each prompt."""
    return np.array([[BOS] + list(p.encode()) for p in ps], np.int64)


def unescape(line):
    """A --prompts output line back to its bytes (\\n and \\\\)."""
    out, i = bytearray(), 0
    while i < len(line):
        if line[i] == 0x5C and i + 1 < len(line):
            out.append(0x0A if line[i + 1] == ord("n") else line[i + 1])
            i += 2
        else:
            out.append(line[i])
            i += 1
    return bytes(out)


def andrea(tmp, model, ps, n, dev):
    """One andrea-generate process; (figures, None) or (None, stderr)."""
    cmd = [os.path.join(BIN, "andrea-generate"), "-m", model, "-n", str(n),
           "--temperature", "0", "--stats", "--device", dev]
    if dev == "cuda":
        cmd += ["--precision", "fp32"]
    if len(ps) == 1:
        cmd += ["--prompt", ps[0]]
    else:
        path = os.path.join(tmp, "prompts.txt")
        with open(path, "w") as f:
            f.write("".join(p + "\n" for p in ps))
        cmd += ["--prompts", path]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - t0
    err = p.stderr.decode(errors="replace").strip()
    m = STATS.search(err.splitlines()[-1]) if err else None
    if p.returncode != 0 or not m:
        return None, err or f"exit status {p.returncode}"
    rows, steps = int(m.group(1)), int(m.group(4))
    pre, dec = float(m.group(3)) / 1e3, float(m.group(5)) / 1e3
    drawn = ([p.stdout] if len(ps) == 1 else
             [unescape(line) for line in p.stdout.split(b"\n")[:rows]])
    return dict(wall=wall, steps=steps, where=m.group(7),
                tps=steps * rows / dec if dec > 0 else 0.0,
                tps_all=rows * steps / (pre + dec) if pre + dec > 0 else 0.0,
                drawn=drawn), None


def agreement(a_drawn, ref_drawn):
    """How far andrea's bytes and the reference's tokens agree."""
    first = []
    for r, row in enumerate(a_drawn):
        ref = list(ref_drawn[r])
        k = next((i for i, (x, y) in enumerate(zip(row, ref)) if x != y),
                 min(len(row), len(ref)))
        first.append((k, r))
    k, r = min(first)
    n = ref_drawn.shape[1]
    return (f"all {n} tokens of every row agree" if k == n else
            f"first difference at step {k} of row {r}")


def hf_model(torch, L, H, C, V, ctx):
    """transformers' GPT-2 of the same sizes, random init, fp32, on the GPU."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=V, n_positions=ctx, n_embd=C, n_layer=L,
                     n_head=H, bos_token_id=BOS, eos_token_id=BOS,
                     pad_token_id=BOS)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg).to(GPU).eval()


def hf_generate(torch, m, tok, n):
    """Seconds of one m.generate over tok [B,P], n new tokens exactly."""
    ids = torch.as_tensor(tok, device=GPU)
    gpu_sync(torch)
    t0 = time.perf_counter()
    out = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                     max_new_tokens=n, min_new_tokens=n, do_sample=False,
                     num_beams=1, use_cache=True, pad_token_id=BOS,
                     eos_token_id=BOS)
    gpu_sync(torch)
    dt = time.perf_counter() - t0
    if out.shape[1] - ids.shape[1] != n:
        raise RuntimeError(f"generate made {out.shape[1] - ids.shape[1]} "
                           f"tokens, not {n}")
    return dt


def row(tmp, torch, name, model, w, cfg, B, dev, n, reps):
    """The table rows of one config, batch and device:
    [(reference, andrea tok/s, reference tok/s)]."""
    ps = prompts(B)
    tok = token_rows(ps)
    L, H, C = CONFIGS[name]
    ours, refs, drawn = [], {}, None
    ref = hf = static = None
    try:
        if dev == "cuda":
            ref = Model(w, cfg, rows=B, dev=GPU)
            ref.greedy(tok, min(n, 8))  # cuBLAS and the allocator warm
            try:
                static = StaticDecoder(torch, w, cfg, B, GPU)
                static.greedy(tok, min(n, 8))  # compiles, records the graph
            except Exception as e:  # no Triton, or torch.compile's API moved
                print(f"  PyTorch compiled left out: {type(e).__name__}: {e}",
                      flush=True)
                static = None
            try:
                hf = hf_model(torch, L, H, C, cfg["vocab"], cfg["ctx"])
                hf_generate(torch, hf, tok, min(n, 8))
                print(f"  {name} B={B}: HF GPT2LMHeadModel, attention "
                      f"{getattr(hf.config, '_attn_implementation', '?')}",
                      flush=True)
            except Exception as e:  # transformers missing, or its API moved
                print(f"  Hugging Face generate left out: "
                      f"{type(e).__name__}: {e}", flush=True)
                hf = None
        else:
            ref = Model(w, cfg, rows=B)
        for _ in range(reps):
            a, err = andrea(tmp, model, ps, n, dev)
            if a is None:
                print(f"{name:<12}{B:>3} {dev:<5} andrea-generate failed: {err}",
                      flush=True)
                return []
            ours.append(a)
            if dev == "cuda":
                _, dec, drawn = ref.greedy(tok, n)
                refs.setdefault("PyTorch eager, KV cache", []).append(B * n / dec)
                if static is not None:
                    _, dec, static_drawn = static.greedy(tok, n)
                    refs.setdefault("PyTorch compiled, static", []).append(
                        B * n / dec)
                if hf is not None:
                    refs.setdefault("HF generate *", []).append(
                        B * n / hf_generate(torch, hf, tok, n))
            else:
                _, dec, drawn = ref.greedy(tok, n)
                refs.setdefault("NumPy, KV cache", []).append(B * n / dec)
    finally:
        del ref, hf, static
        if dev == "cuda":
            torch.cuda.empty_cache()
    steps = min(a["steps"] for a in ours)
    note = agreement(ours[-1]["drawn"], drawn)
    if steps < n:
        note += f"; andrea stopped after {steps} steps"
    print(f"  {name} B={B} {dev}: andrea on {ours[-1]['where']}; andrea vs "
          f"{next(iter(refs)).split(',')[0]}: {note}", flush=True)
    if "PyTorch compiled, static" in refs:
        print(f"  {name} B={B} {dev}: andrea vs PyTorch compiled: "
              f"{agreement(ours[-1]['drawn'], static_drawn)}", flush=True)
    out = []
    for what, tps in refs.items():
        key = "tps_all" if what.startswith("HF") else "tps"
        out.append((what, median([a[key] for a in ours]), median(tps)))
    return out


def wall(tmp, model, n, dev, reps):
    """Median seconds of whole andrea-generate processes, batch 1."""
    ts = []
    for _ in range(reps):
        a, err = andrea(tmp, model, prompts(1), n, dev)
        if a is None:
            return None, err
        ts.append(a["wall"])
    return median(ts), None


def main():
    quick, _, keep = bench_args(sys.argv[1:], DEVICES, BATCHES, USAGE)
    n, reps = (32, 1) if quick else (256, 3)
    torch, devs = bench_start(keep, DEVICES, ("transformers",))
    print(f"greedy decoding, prompt {PROMPT_BYTES} tokens (BOS + bytes), {n} new "
          f"tokens, median of {reps}{', --quick' if quick else ''}", flush=True)
    table, walls = [], []
    with scratch() as tmp:
        for name in CONFIGS:
            if not keep(name, CONFIGS) or not devs:
                continue
            model, w, cfg = make_model(tmp, name)
            for dev in devs:
                for B in BATCHES:
                    if not keep(B, BATCHES):
                        continue
                    try:
                        for r in row(tmp, torch, name, model, w, cfg, B, dev,
                                     n, reps):
                            table.append((name, B, dev) + r)
                    except Exception as e:  # one row's failure ends no run
                        print(f"{name} B={B} {dev}: the row failed: "
                              f"{type(e).__name__}: {e}", flush=True)
            for wname, wdev, wn in (("andrea-120m", "cuda", 256),
                                    ("andrea-12m", "cpu", 200)):
                if name == wname and wdev in devs:
                    s, err = wall(tmp, model, wn, wdev, reps)
                    walls.append((name, wdev, wn, s, err))
            os.remove(model)
    print(f"\n{'config':<12}{'B':>3} {'device':<7}{'reference':<25}"
          f"{'andrea tok/s':>13}{'ref tok/s':>11}{'ratio':>8}")
    for name, B, dev, what, a, r in table:
        print(f"{name:<12}{B:>3} {dev:<7}{what:<25}{a:>13.0f}{r:>11.0f}"
              f"{a / r:>7.2f}x")
    if any(t[3].startswith("HF") for t in table):
        print("* prefill included on both sides: HF's whole generate call "
              "against andrea's prefill + decode time (rows x steps over it); "
              "the other rows are decode only")
    for name, dev, wn, s, err in walls:
        what = f"andrea-generate -n {wn}, {name}, {dev}, whole process"
        print(f"wall: {what}: " + (f"{s:.2f} s" if err is None
                                   else f"failed: {err}"))
    print(f"\ngoals (load average now {load_average()}):")
    for name, B, dev, what, a, r in table:
        if dev == "cuda" and B == 1 and what.startswith("PyTorch eager"):
            print(f"  GPU decode, batch 1, {name} >= 2x PyTorch eager: "
                  f"{'met' if a >= 2 * r else 'NOT met'} ({a / r:.2f}x)")
        if dev == "cuda" and what.startswith("PyTorch compiled"):
            print(f"  GPU decode, batch {B}, {name} >= 1.0x PyTorch compiled "
                  f"(static cache): {'met' if a >= r else 'NOT met'} "
                  f"({a / r:.2f}x)")
    for name, B, dev, what, a, r in table:
        if dev == "cpu":
            print(f"  CPU decode, batch {B}, {name} >= 1.0x NumPy: "
                  f"{'met' if a >= r else 'NOT met'} ({a / r:.2f}x)")
    for name, dev, wn, s, err in walls:
        cores = f", {os.cpu_count()} cpus here" if dev == "cpu" else ""
        print(f"  andrea-generate -n {wn} {name} {dev} wall < 2 s{cores}: "
              + ("failed" if err else
                 f"{'met' if s < 2 else 'NOT met'} ({s:.2f} s)"))


if __name__ == "__main__":
    main()
