"""One reference forward as a process of its own, what a user would run
instead of the andrea pipeline: python3 refrun.py WEIGHTS.npz TOKENS.npy
cpu|cuda.  Loads the weights (an uncompressed .npz of refmodel's names,
its config as the int array "config.KEY") and the tokens [B,T], computes
the logits [B,T,V] with refmodel.Model (NumPy float32, or PyTorch eager
fp32 with TF32 off on cuda) and writes them as .npy to /dev/null.
bench/forward.py times it from start to exit: the interpreter's and
PyTorch's start, CUDA's, the loading and the upload included."""
import os
import sys

import numpy as np


def main():
    weights, tokens, dev = sys.argv[1:4]
    torch = None
    if dev == "cuda":
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    from refmodel import Model
    with np.load(weights) as z:
        w = {k: z[k] for k in z.files if not k.startswith("config.")}
        cfg = {k[7:]: int(z[k]) for k in z.files if k.startswith("config.")}
    tok = np.load(tokens).astype(np.int64)
    m = Model(w, cfg, dev=dev if torch else None)
    with m.o.inference():
        logits = m.forward(m.o.tokens(tok, m.dev))
        if torch:
            logits = logits.cpu().numpy()
    with open(os.devnull, "wb") as f:
        np.save(f, logits)


if __name__ == "__main__":
    main()
