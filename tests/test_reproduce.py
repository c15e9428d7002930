"""The stage filters reproduce a trained model's forward pass, as the
training engine reports it (andrea-train --forward), within 1e-5."""
import os

import numpy as np

import oracle
from conftest import run
from stagekit import pipeline, unpack
from test_train import fortunes_text, records

TEXT = b"Attention is all you need, said the fortune cookie."


def test_filters_reproduce_the_trained_engine(tmp_path):
    data = tmp_path / "fortunes.txt"
    data.write_bytes(fortunes_text(400000))
    model = tmp_path / "tiny.ats"
    run("train", "--config", "tiny", "--data", data, "--steps", 60,
        "--batch", 8, "--seq", 64, "--lr", 3e-3, "--warmup", 10,
        "--eval-every", 60, "--eval-batches", 2, "--threads", 1, "-o", model,
        check=0, timeout=200)
    acts = tmp_path / "acts.ats"
    run("train", "--forward", "-m", model, "--text", "-o", acts, input=TEXT,
        check=0)
    eng = {}
    for name, attrs, arr in records(acts):
        eng[(name, attrs.get("layer"))] = arr

    # embed | block -l 0 | qkv -l 1 --head 2 | scores | mask | softmax | attend
    head = unpack(tmp_path, pipeline(
        [("embed", "-m", model, "--text"), ("block", "-m", model, "-l", 0),
         ("qkv", "-m", model, "-l", 1, "--head", 2), ("scores",), ("mask",),
         ("softmax", "--keep"), ("attend", "--keep")], input=TEXT), "head")
    for name in ("scores", "attn", "v", "out"):
        ref = eng[(name, "1")][:, 2:3]
        assert head[name].shape == ref.shape, name
        assert oracle.rel_err(head[name], ref) <= 1e-5, name

    # embed | block -l 0 | block -l 1 | logits
    logits = unpack(tmp_path, pipeline(
        [("embed", "-m", model, "--text"), ("block", "-m", model, "-l", 0),
         ("block", "-m", model, "-l", 1), ("logits", "-m", model)],
        input=TEXT), "logits")["logits"]
    assert oracle.rel_err(logits, eng[("logits", None)]) <= 1e-5
    # the model was trained: it is no longer the seeded initial model
    init = tmp_path / "init.ats"
    run("train", "--config", "tiny", "--steps", 0, "-o", init, check=0)
    assert not np.array_equal(unpack(tmp_path, open(init, "rb").read(), "i")["wte"],
                              unpack(tmp_path, open(model, "rb").read(), "m")["wte"])
