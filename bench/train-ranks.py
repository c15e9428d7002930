"""make bench-train-ranks: andrea-train on several GPUs of this host
(--gpus N) against PyTorch DDP of the same model (torchrun, one process a
GPU, the model compiled with SDPA: nanoGPT's way), in one run (issue 21).

1. Scaling: andrea-120m, V 8449, bf16, T = 1024, 16 rows a GPU (the
   global batch 16 N): tokens/s on N = 1, 2, 4, ... GPUs (up to what the
   host has), the speed-up over one GPU, and the ratio to DDP's tokens/s
   on the same N GPUs.
2. The loss curve: 20 fp32 steps of andrea-12m, V 257, one global batch
   of 16 x 256 on every N: each step's loss against the one-GPU run's
   (the issue asks for 1e-5 relative), plain and with --shard-optimizer.
3. A rank killed: with the most GPUs, SIGKILL to rank 1 mid-run; the
   seconds until andrea-train has ended, its last line, and whether the
   last checkpoint resumes.

Every process gets NCCL_NVLS_ENABLE=0 (no NVLink multicast).  Each part
needs two GPUs or more to say anything about ranks; on one it runs N = 1
only (the machinery, and the cost of NCCL on one GPU).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"
HERE = os.path.dirname(os.path.abspath(__file__))
from train_gpu import tg  # noqa: E402 (after NCCL's setting)
ROOT, T = tg.ROOT, tg.T
ROWS = 16  # a GPU's rows in the scaling runs
TRAIN = os.path.join(ROOT, "bin", "andrea-train")


def ddp_worker(name, V, prec, rows):
    """One torchrun process: the bench's model compiled, in DDP, timed
    as train-gpu.py times it; rank 0 prints one JSON line."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    L, H, C = tg.CONFIGS[name]
    torch.manual_seed(0)
    m = tg.Andrea(L, H, C, V, sdpa=True).cuda()
    model = DDP(torch.compile(m), device_ids=[local])
    decay = list(m.mat) + [m.lm_head]
    rest = [m.wte, m.wpe, m.lnf_w, m.lnf_b] + list(m.ln)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=6e-4, fused=True)
    g = torch.Generator(device="cuda").manual_seed(1 + dist.get_rank())
    idx = torch.randint(0, V, (rows, T + 1), device="cuda", generator=g)
    warm = tg.WARM + tg.COMPILE_WARM
    for s in range(warm + tg.TIMED):
        if s == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with torch.autocast("cuda", torch.bfloat16, enabled=prec == "bf16"):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # one host sync a step, as andrea-train's
    dt = time.perf_counter() - t0
    if dist.get_rank() == 0:
        print(json.dumps({"tps": tg.TIMED * rows * world * T / dt}),
              flush=True)
    dist.destroy_process_group()


def ddp(name, V, prec, n):
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run",
                        "--standalone", f"--nproc_per_node={n}", __file__,
                        "--ddp-worker", name, str(V), prec, str(ROWS)],
                       capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)["tps"]
    print(f"  DDP on {n} GPUs failed: {p.stderr.strip()[-2000:]}")
    return None


def gpus_of_host():
    import torch
    return torch.cuda.device_count()


def scaling(tmp, counts):
    name, V, prec = "andrea-120m", 8449, "bf16"
    data = tg.data_file(tmp, V)
    print(f"1. {name}, V {V}, {prec}, {ROWS} x {T} a GPU")
    print(f"{'GPUs':>5}{'andrea tok/s':>14}{'speed-up':>10}{'DDP tok/s':>12}"
          f"{'ratio':>8}")
    one = None
    for n in counts:
        extra = ("--gpus", str(n)) if n > 1 else ()
        a, msg = tg.ours(tmp, name, V, prec, data, extra=extra,
                         batch=ROWS * n)
        if a is None:
            print(f"{n:>5}  andrea-train failed: {msg}")
            continue
        one = one or a["tps"]
        t = ddp(name, V, prec, n)
        ratio = f"{a['tps'] / t:>7.2f}x" if t else "    n/a"
        print(f"{n:>5}{a['tps']:>14.0f}{a['tps'] / one:>9.2f}x"
              f"{t or 0:>12.0f}{ratio}", flush=True)
    # one GPU through NCCL: what the communicator costs alone
    a, _ = tg.ours(tmp, name, V, prec, data, extra=("--gpus", "1"),
                   batch=ROWS)
    if a and one:
        print(f"  --gpus 1 (through NCCL) against the plain run: "
              f"{a['tps'] / one:.3f}x")


def curve(tmp, data, extra):
    log = os.path.join(tmp, "curve.jsonl")
    out = os.path.join(tmp, "curve.ats")
    p = subprocess.run([TRAIN, "--config", "andrea-12m", "--vocab", "257",
                        "--data", data, "--steps", "20", "--batch", "16",
                        "--seq", "256", "--warmup", "2", "--val-fraction", "0",
                        "--save-every", "0", "-z", "0", "--device", "cuda",
                        "--precision", "fp32", "--log", log, "-o", out, "-f",
                        *extra], capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr.strip()
    return [json.loads(line)["loss"] for line in open(log)], ""


def curves(tmp, counts):
    data = tg.data_file(tmp, 257)
    print("2. 20 fp32 steps of andrea-12m, V 257, one global batch 16 x 256")
    want, msg = curve(tmp, data, ())
    if want is None:
        print(f"  the plain run failed: {msg}")
        return
    for n in counts:
        for shard in ((), ("--shard-optimizer",)):
            got, msg = curve(tmp, data, ("--gpus", str(n), *shard))
            tag = f"{n} GPUs{' sharded' if shard else ''}"
            if got is None:
                print(f"  {tag}: failed: {msg}")
                continue
            worst = max(abs(g - w) / w for g, w in zip(got, want))
            print(f"  {tag}: worst per-step relative difference from one "
                  f"GPU {worst:.2e} ({'within' if worst <= 1e-5 else 'OVER'}"
                  f" 1e-5); last loss {got[-1]:.6f} (one GPU {want[-1]:.6f})",
                  flush=True)


def rank_pid(launcher, rank):
    """The pid of rank `rank` among the launcher's children."""
    kids = subprocess.run(["pgrep", "-P", str(launcher)], capture_output=True,
                          text=True).stdout.split()
    for pid in kids:
        try:
            args = open(f"/proc/{pid}/cmdline").read().split("\0")
        except OSError:
            continue
        if "--rank" in args and args[args.index("--rank") + 1] == str(rank):
            return int(pid)
    return None


def kill_one(tmp, n):
    print(f"3. SIGKILL to rank 1 of {n}")
    data = tg.data_file(tmp, 257)
    out = os.path.join(tmp, "kill.ats")
    common = ["--data", data, "--device", "cuda", "-o", out]
    p = subprocess.Popen([TRAIN, "--config", "andrea-12m", "--vocab", "257",
                          "--steps", "100000", "--batch", str(4 * n), "--seq",
                          "256", "--save-every", "20", "--val-fraction", "0",
                          "--gpus", str(n), *common],
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not os.path.exists(out + ".ckpt") and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    victim = rank_pid(p.pid, 1)
    if victim is None:
        p.kill()
        print("  rank 1 not found")
        return
    t0 = time.time()
    os.kill(victim, signal.SIGKILL)
    _, err = p.communicate(timeout=300)
    took = time.time() - t0
    last = err.strip().splitlines()[-1] if err.strip() else ""
    print(f"  andrea-train ended {took:.1f} s later with status {p.returncode}:"
          f" {last!r}")
    step = None
    try:
        import atsfmt
        rec = next(iter(atsfmt.read(open(out + ".ckpt", "rb").read())))
        step = int(dict(rec.attrs)["step"])
    except Exception as e:  # what the check is for
        print(f"  the checkpoint does not read: {e}")
        return
    r = subprocess.run([TRAIN, "--resume", "--stop-at", str(step + 2),
                        "--gpus", str(n), *common], capture_output=True,
                       text=True)
    print(f"  the checkpoint (step {step}) resumes on {n} GPUs: "
          f"{'yes' if r.returncode == 0 else 'NO: ' + r.stderr.strip()}")


def main():
    have = gpus_of_host()
    if have == 0:
        sys.exit("bench-train-ranks: PyTorch sees no GPU")
    counts = [n for n in (1, 2, 4, 8) if n <= have]
    print(f"bench-train-ranks: {have} GPU(s) on this host; NCCL_NVLS_ENABLE=0")
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm")
                                     else None) as tmp:
        scaling(tmp, counts)
        curves(tmp, counts)
        if have >= 2:
            kill_one(tmp, counts[-1])
        else:
            print("3. SIGKILL to a rank: needs two GPUs or more")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ddp-worker"]:
        name, V, prec, rows = sys.argv[2:6]
        ddp_worker(name, int(V), prec, int(rows))
    else:
        main()
