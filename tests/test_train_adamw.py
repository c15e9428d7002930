"""One AdamW step of andrea-train against NumPy in float64, from the
gradients it dumps (--dump-grads): the global norm it logs, the moments of
its checkpoint and the new parameters, the gradient clipped to --clip and
weight decay on the matrices alone, as andrea-train(1) says."""
import json

import numpy as np
import pytest

from conftest import run
from test_train import SMALL, read_params, records, tokens_file, write_model

DECAYED = ("attn.wq", "attn.wk", "attn.wv", "attn.wo", "mlp.fc", "mlp.proj",
           "lm_head")


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    return np.linalg.norm(a - b) / den if den > 0 else np.linalg.norm(a)


@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_one_adamw_step_matches_numpy(tmp_path, clip):
    rng = np.random.default_rng(5)
    model, _ = write_model(tmp_path, rng, SMALL)
    data = tokens_file(tmp_path, rng.integers(0, SMALL["vocab"], 400))
    out, log = tmp_path / "m.ats", tmp_path / "log.txt"
    run("train", "-m", model, "--data", data, "--steps", 1, "--batch", 2,
        "--seq", 5, "--lr", "0.01", "--warmup", 0, "--val-fraction", 0,
        "--weight-decay", "0.1", "--clip", clip, "--threads", 1,
        "--dump-grads", tmp_path / "g.ats", "--log", log, "-o", out, check=0)
    step = json.loads(log.read_text().splitlines()[0])
    g = read_params(tmp_path, tmp_path / "g.ats", "g")
    g.pop("tokens")
    p0 = read_params(tmp_path, model, "p0")
    p1 = read_params(tmp_path, out, "p1")
    mom = {r[0]: r[2] for r in records(str(out) + ".ckpt")
           if r[0].startswith("adam.")}
    assert set(mom) == {f"adam.{k}.{n}" for k in "mv" for n in g}
    b1, b2, eps, wd, lr = 0.9, 0.999, 1e-8, 0.1, step["lr"]
    assert lr == 0.01
    norm = np.sqrt(sum((v.astype(np.float64) ** 2).sum() for v in g.values()))
    assert abs(step["grad_norm"] - norm) <= 1e-5 * norm
    assert clip == 0 or norm > clip  # the clip case clips
    scale = clip / norm if clip else 1.0
    for name, grad in g.items():
        gj = grad.astype(np.float64) * scale
        m, v = (1 - b1) * gj, (1 - b2) * gj * gj
        w0 = p0[name].astype(np.float64)
        decay = wd if name.endswith(DECAYED) else 0.0
        w1 = w0 - lr * (m / (1 - b1) / (np.sqrt(v / (1 - b2)) + eps)
                        + decay * w0)
        assert rel(mom["adam.m." + name], m) <= 1e-6, name
        assert rel(mom["adam.v." + name], v) <= 1e-6, name
        assert np.allclose(p1[name], w1, rtol=1e-6, atol=1e-7), name
