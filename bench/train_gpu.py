"""train_gpu.py - bench/train-gpu.py as a module, for the scripts beside
it (train-ab.py, train-profile.py, train-timeline.py, train-ranks.py),
whose file name is no Python identifier: `from train_gpu import tg` (run
from bench/, which is then on sys.path); and what train-profile.py and
train-timeline.py share: their command line and the compiled model's
profiled steps."""
import importlib.util
import os
import sys
import tempfile

spec = importlib.util.spec_from_file_location(
    "train_gpu_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "train-gpu.py"))
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)



def config_and_side(argv, usage):
    """[CONFIG [V [PRECISION [andrea|torch]]]] as (name, V, precision,
    side), defaults andrea-120m 8449 bf16 and both sides; exits with
    `usage` where an argument is not one of tg's."""
    name = argv[0] if argv else "andrea-120m"
    V = argv[1] if len(argv) > 1 else "8449"
    prec = argv[2] if len(argv) > 2 else "bf16"
    side = argv[3] if len(argv) > 3 else "both"
    if name not in tg.CONFIGS or not V.isdigit() or prec not in tg.PEAK or \
            side not in ("both", "andrea", "torch") or len(argv) > 4:
        sys.exit(usage)
    return name, int(V), prec, side


def run_sides(prog, usage, andrea, compiled):
    """The main of train-profile.py and train-timeline.py: andrea(tg, tmp,
    name, V, prec) and compiled(tg, name, V, prec) for the sides the
    command line names."""
    name, V, prec, side = config_and_side(sys.argv[1:], usage)
    import torch
    if not torch.cuda.is_available():
        sys.exit(f"{prog}: PyTorch sees no GPU")
    with tempfile.TemporaryDirectory() as tmp:
        if side != "torch":
            andrea(tg, tmp, name, V, prec)
        if side != "andrea":
            compiled(tg, name, V, prec)


def profiled_compiled(name, V, prec, steps):
    """torch.profiler's record (CUDA activity) of `steps` steps of the
    compiled model, after bench-train-gpu's warm-up and compilation."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    one = tg.reference_step(name, V, prec, "compiled")
    for _ in range(tg.WARM + tg.COMPILE_WARM):
        one()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            one()
    return prof
