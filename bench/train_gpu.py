"""train_gpu.py - bench/train-gpu.py as a module, for the scripts beside
it (train-ab.py, train-profile.py, train-ranks.py), whose file name is no
Python identifier: `from train_gpu import tg` (run from bench/, which is
then on sys.path)."""
import importlib.util
import os

spec = importlib.util.spec_from_file_location(
    "train_gpu_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "train-gpu.py"))
tg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tg)
