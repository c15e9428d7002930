"""Helpers for the stage tests: pack arrays into streams, unpack streams,
build random model files.  Streams travel as bytes between tools."""
import os
import subprocess

import numpy as np

from conftest import run, tool, tool_env


def pack(tmp, arrays, attrs=()):
    """arrays: list of (name, ndarray); attrs: 'NAME:KEY=VALUE' strings."""
    args = []
    for a in attrs:
        args += ["-a", a]
    for i, (name, arr) in enumerate(arrays):
        path = os.path.join(tmp, f"in{i}_{name}.npy")
        np.save(path, arr)
        args.append(f"{name}={path}")
    return run("pack", *args, check=0).stdout


def unpack(tmp, stream, sub="out"):
    d = os.path.join(tmp, sub)
    if os.path.isdir(d):
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
    run("unpack", "-d", d, input=stream, check=0)
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)}


def pipeline(stages, input=None, env=None):
    """Runs [(tool, args...), ...] as a shell-free pipeline; returns the
    final stdout, asserting every stage exits 0."""
    procs, prev = [], None
    e = tool_env(env)
    for i, (name, *args) in enumerate(stages):
        p = subprocess.Popen([tool(name), *map(str, args)],
                             stdin=prev.stdout if prev else subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=e)
        if prev:
            prev.stdout.close()
        elif input is not None:
            p.stdin.write(input)
            p.stdin.close()
        procs.append(p)
        prev = p
    out = procs[-1].stdout.read()
    for (name, *_), p in zip(stages, procs):
        err = p.stderr.read()
        assert p.wait() == 0, f"andrea-{name} failed: {err.decode()}"
    return out


def random_model(tmp, rng, L, H, C, V, ctx, config=True, scale=0.3):
    """Writes a model file with random parameters; returns (path, params).
    LayerNorm weights and biases are random too, so a wrong one shows."""
    p = {"wte": rng.standard_normal((V, C)), "wpe": rng.standard_normal((ctx, C))}
    for l in range(L):
        pre = f"layers.{l}."
        p[pre + "ln1.weight"] = 1 + 0.2 * rng.standard_normal(C)
        p[pre + "ln1.bias"] = 0.2 * rng.standard_normal(C)
        for m in "qkvo":
            p[pre + "attn.w" + m] = rng.standard_normal((C, C)) / np.sqrt(C)
    p = {k: (scale * v if k in ("wte", "wpe") else v).astype(np.float32)
         for k, v in p.items()}
    arrays = list(p.items())
    attrs = []
    if config:
        arrays.insert(0, ("config", np.zeros(0, np.int32)))
        attrs = [f"config:{k}={v}" for k, v in
                 dict(n_layer=L, n_head=H, d_model=C, ctx=ctx, vocab=V).items()]
    path = os.path.join(tmp, "model.ats")
    with open(path, "wb") as f:
        f.write(pack(tmp, arrays, attrs))
    return path, p
