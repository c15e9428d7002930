"""What every stage filter shares: pass-through of foreign records in order
and byte for byte, --keep, attributes, group-by-group processing of
concatenated streams, and the checks made before any output."""
import os

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack, random_model


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def record_bytes(data, rec):
    end = rec.offset + rec.header_len + sum(16 + s for _, _, s in rec.chunks)
    return bytes(data[rec.offset:end])


def names(data):
    return [r.name for r in atsfmt.read(data)]


def test_foreign_records_pass_through_in_order_and_verbatim(tmp_path):
    rng = np.random.default_rng(0)
    big = rand(rng, 300, 1000)  # several chunks
    s = pack(tmp_path, [("note", big), ("q", rand(rng, 1, 2, 5, 3)),
                        ("tokens", np.arange(4, dtype=np.int32)),
                        ("k", rand(rng, 1, 2, 5, 3)), ("v", rand(rng, 1, 2, 5, 3)),
                        ("tail", np.zeros(0, np.uint8))],
             attrs=["note:who=me", "q:layer=4"])
    out = run("scores", "-z", "6", input=s, check=0).stdout
    assert names(out) == ["note", "tokens", "scores", "v", "tail"]
    rin = {r.name: r for r in atsfmt.read(s)}
    for r in atsfmt.read(out):
        if r.name in ("note", "tokens", "v", "tail"):
            assert record_bytes(out, r) == record_bytes(s, rin[r.name]), r.name
        if r.name == "scores":
            assert dict(r.attrs)["layer"] == "4"
            assert dict(r.attrs)["scale"] == "0.577350259"


def test_keep_writes_the_consumed_records_before_the_outputs(tmp_path):
    rng = np.random.default_rng(1)
    q, k = rand(rng, 1, 1, 4, 2), rand(rng, 1, 1, 4, 2)
    s = pack(tmp_path, [("q", q), ("x", rand(rng, 3)), ("k", k)])
    out = run("scores", "--keep", input=s, check=0).stdout
    assert names(out) == ["q", "x", "k", "scores"]
    got = {r.name: r for r in atsfmt.read(out)}
    assert np.frombuffer(got["q"].payload, np.float32).tobytes() == q.tobytes()
    out = run("softmax", "--keep", input=pack(tmp_path, [("scores", q)]),
              check=0).stdout
    assert names(out) == ["scores", "attn"]


@pytest.mark.parametrize("prog,inputs", [
    ("scores", ["q", "k"]), ("mask", ["scores"]), ("softmax", ["scores"]),
    ("attend", ["attn", "v"])])
def test_concatenated_streams_are_processed_group_by_group(tmp_path, prog, inputs):
    rng = np.random.default_rng(2)
    streams, refs = [], []
    for T in (3, 6):
        arrs = [(n, rand(rng, 1, 2, T, T)) for n in inputs]
        streams.append(pack(tmp_path, arrs))
        refs.append(run(prog, input=streams[-1], check=0).stdout)
    out = run(prog, input=streams[0] + streams[1], check=0).stdout
    a = atsfmt.read(out)
    b = atsfmt.read(refs[0]) + atsfmt.read(refs[1])
    assert [(r.name, r.dims, r.payload) for r in a] == \
        [(r.name, r.dims, r.payload) for r in b]


def test_attributes_travel_down_the_pipeline(tmp_path):
    from stagekit import pipeline
    rng = np.random.default_rng(3)
    model, _ = random_model(tmp_path, rng, 3, 2, 8, 11, 16)
    s = pack(tmp_path, [("x", rand(rng, 1, 5, 8))])
    out = pipeline([("qkv", "-m", model, "-l", 2, "--head", 1), ("scores",),
                    ("mask", "--fill", "-1e9"), ("softmax",), ("attend",)], input=s)
    (r,) = atsfmt.read(out)
    assert r.name == "out"
    a = dict(r.attrs)
    assert a["layer"] == "2" and a["head"] == "1" and a["n_head"] == "2"
    assert a["norm"] == "ln1" and a["mask"] == "causal" and a["fill"] == "-1e+09"


def test_attend_proj_layer_from_attribute_or_option(tmp_path):
    rng = np.random.default_rng(4)
    model, p = random_model(tmp_path, rng, 3, 2, 6, 11, 16)
    a = oracle.softmax(oracle.mask(rand(rng, 1, 2, 4, 4))).astype(np.float32)
    v = rand(rng, 1, 2, 4, 3)
    s = pack(tmp_path, [("attn", a), ("v", v)], attrs=["attn:layer=2"])
    cat = oracle.merge_heads(oracle.attend(a, v))
    y = unpack(tmp_path, run("attend", "--proj", "-m", model, input=s,
                             check=0).stdout)["y"]
    assert oracle.rel_err(y, cat @ p["layers.2.attn.wo"]) <= 1e-5
    y = unpack(tmp_path, run("attend", "--proj", "-m", model, "-l", 1, input=s,
                             check=0).stdout)["y"]
    assert oracle.rel_err(y, cat @ p["layers.1.attn.wo"]) <= 1e-5
    p5 = run("attend", "--proj", "-m", model, "-l", 5, input=s, check=1)
    assert "layer 5 out of range" in one_line_error(p5, "attend")
    assert p5.stdout == b""


def test_scores_refuses_keys_of_another_head(tmp_path):
    rng = np.random.default_rng(5)
    s = pack(tmp_path, [("q", rand(rng, 1, 1, 3, 2)), ("k", rand(rng, 1, 1, 3, 2))],
             attrs=["q:head=1", "k:head=2"])
    msg = one_line_error(run("scores", input=s, check=1), "scores")
    assert "record 2 'k'" in msg and "head=2" in msg


@pytest.mark.parametrize("attr", ["head", "layer"])
def test_attend_refuses_values_of_another_head(tmp_path, attr):
    rng = np.random.default_rng(7)
    a = np.full((1, 1, 3, 3), 1 / 3, np.float32)
    s = pack(tmp_path, [("attn", a), ("v", rand(rng, 1, 1, 3, 2))],
             attrs=[f"attn:{attr}=3", f"v:{attr}=4"])
    p = run("attend", input=s, check=1)
    msg = one_line_error(p, "attend")
    assert "record 2 'v'" in msg and f"{attr}=4 but attn has {attr}=3" in msg
    assert p.stdout == b""
    s = pack(tmp_path, [("attn", a), ("v", rand(rng, 1, 1, 3, 2))],
             attrs=[f"attn:{attr}=3", f"v:{attr}=3"])
    assert "out" in names(run("attend", input=s, check=0).stdout)


def test_model_problems_are_found_before_any_output(tmp_path):
    rng = np.random.default_rng(6)
    model, _ = random_model(tmp_path, rng, 1, 2, 8, 11, 16)
    s = pack(tmp_path, [("first", rand(rng, 2)), ("x", rand(rng, 1, 3, 8))])
    for args in (["-l", "3"], ["--head", "2"]):
        p = run("qkv", "-m", model, *args, input=s, check=1)
        assert p.stdout == b"", args
        one_line_error(p, "qkv")
    # a model file lacking a parameter the stage needs
    small = tmp_path / "small.ats"
    small.write_bytes(pack(tmp_path, [("wte", rand(rng, 11, 8))]))
    p = run("embed", "-m", small, "--tokens", "1,2", check=1)
    assert "'wpe'" in one_line_error(p, "embed") and p.stdout == b""


def test_option_misuse_is_status_2(tmp_path):
    for prog, args in [("mask", ["--fill", "-1e39"]), ("mask", ["--fill", "x"]),
                       ("scores", ["--scale", "1", "--no-scale"]),
                       ("qkv", ["-m", "m.ats", "--seed", "3"]),
                       ("attend", ["--concat", "--proj"]),
                       ("embed", ["--text", "--tokens", "1"]),
                       ("softmax", ["--device", "tpu"]), ("softmax", ["--bogus"]),
                       ("softmax", ["a", "b"])]:
        p = run(prog, *args, input=b"", check=2)
        one_line_error(p, prog)


def test_device_cuda_without_a_gpu_path_is_a_failure():
    if os.environ.get("ANDREA_TEST_DEVICE") == "cuda":
        pytest.skip("a GPU is in use: tests/test_gpu.py covers --device cuda")
    p = run("softmax", "--device", "cuda", input=b"", check=1)
    assert "--device cuda" in one_line_error(p, "softmax")
    p = run("softmax", "--device", "cpu", input=b"", check=1)
    assert "empty input" in one_line_error(p, "softmax")
