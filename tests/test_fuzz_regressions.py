"""Every input that ever crashed or hung a fuzz target (fuzz/, kept in
tests/fuzz-regressions/NAME/) replayed through the normal tools: each must
end with exit 0, 1 or 2 (never a signal or a sanitizer's report) and, when
it fails, with exactly one line on stderr.  Under `make SAN=1` the tools
run with ASan and UBSan, so this replays the findings the way the fuzzers
saw them.  tests/fuzz-regressions/README gives each directory's format.
"""
import os
import subprocess

import pytest

import atsfmt
from conftest import ROOT, one_line_error, run, tool

HERE = os.path.join(ROOT, "tests", "fuzz-regressions")


def inputs(name):
    d = os.path.join(HERE, name)
    files = sorted(f for f in os.listdir(d)) if os.path.isdir(d) else []
    return [pytest.param(os.path.join(d, f), id=f) for f in files] or [
        pytest.param(None, marks=pytest.mark.skip(reason=f"no {name} inputs"))]


def ok(p, prog, statuses=(0, 1)):
    """Ended by exit in statuses; a failure says one line."""
    assert p.returncode in statuses, (
        f"andrea-{prog}: exit {p.returncode}; stderr: "
        f"{p.stderr.decode(errors='replace')[-3000:]}")
    if p.returncode:
        one_line_error(p, prog)


@pytest.mark.parametrize("path", inputs("stream"))
def test_stream(tmp_path, path):
    with open(path, "rb") as f:
        data = f.read()[1:]  # byte 0 steers the fuzzer only
    ok(run("unpack", "-d", tmp_path / "out", input=data), "unpack")
    ok(run("show", input=data), "show")
    # a stage copies what it does not consume without decoding it
    ok(run("mask", input=data), "mask")


@pytest.mark.parametrize("path", inputs("npy"))
def test_npy(path):
    ok(run("pack", f"x={path}"), "pack")


@pytest.mark.parametrize("path", inputs("model"))
def test_model(tmp_path, path):
    with open(path, "rb") as f:
        data = f.read()
    model = tmp_path / "m.ats"
    model.write_bytes(data[1:])
    heads = ["--heads", data[0] & 7] if data and data[0] & 7 else []
    ok(run("embed", "-m", model, *heads, "--tokens", "1,2"), "embed")
    x = atsfmt.stream(atsfmt.record("x", "f32", (1, 2, 8), bytes(64)))
    ok(run("qkv", "-m", model, *heads, input=x), "qkv")
    ok(run("train", "--forward", "-m", model, "--tokens", "1,2"), "train")


@pytest.mark.parametrize("path", inputs("attrs"))
def test_attrs(tmp_path, path):
    with open(path, "rb") as f:
        block = f.read()
    data = atsfmt.stream(atsfmt.header("x", "u8", (0,), block))
    ok(run("unpack", "-d", tmp_path / "out", input=data), "unpack")


def hashed_tool(name):
    """The tool fuzz_argv picks for a name that matches none: FNV-1a of
    the name modulo the tool count, tools in the sorted order of cmd/."""
    tools = sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "cmd"))
                   if f.startswith("andrea-") and f.endswith(".c"))
    h = 2166136261
    for byte in name:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return tools[h % len(tools)]


@pytest.mark.parametrize("path", inputs("argv"))
def test_argv(tmp_path, path):
    with open(path, "rb") as f:
        args = f.read().split(b"\0")
    prog = args[0].decode(errors="replace")
    if not os.path.exists(os.path.join(ROOT, "bin", prog)):
        prog = hashed_tool(args[0])
    # no path may leave the scratch directory the tool runs in
    args = [a.replace(b"/", b"_") for a in args[1:]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    p = subprocess.run([tool(prog[7:]), *args], stdin=subprocess.DEVNULL,
                       capture_output=True, cwd=tmp_path, env=env, timeout=60)
    ok(p, prog[7:], (0, 1, 2))


@pytest.mark.parametrize("path", inputs("safetensors") + inputs("llmc"))
def test_import_checkpoint(tmp_path, path):
    (tmp_path / "config.json").write_text(
        '{"n_layer": 1, "n_head": 1, "n_embd": 2, "n_positions": 2, '
        '"vocab_size": 3}')
    with open(path, "rb") as f:
        (tmp_path / "model.safetensors").write_bytes(f.read())
    ok(run("import", tmp_path / "model.safetensors", "-o", tmp_path / "m.ats"),
       "import")


@pytest.mark.parametrize("path", inputs("gpt2config"))
def test_import_config(tmp_path, path):
    (tmp_path / "model.safetensors").write_bytes(b"\x02" + b"\0" * 7 + b"{}")
    ok(run("import", tmp_path / "model.safetensors", "--config", path, "-o",
           tmp_path / "m.ats"), "import")


def import_and_tokenize(tmp_path, data, *tokenizer):
    """The tokenizer files imported with a checkpoint (test_import's, its V
    over any vocabulary an input can spell), then the input tokenized
    through the model file."""
    import numpy as np
    import test_import as ti
    d, _ = ti.checkpoint(tmp_path, np.random.default_rng(0), L=1, H=1, C=2,
                         V=16384, ctx=2)
    model = tmp_path / "m.ats"
    p = run("import", d, "-o", model, *tokenizer)
    ok(p, "import")
    if p.returncode == 0:
        ok(run("tokenize", "-m", model, "--ids", input=data), "tokenize")


@pytest.mark.parametrize("path", inputs("vocab"))
def test_vocab(tmp_path, path):
    with open(path, "rb") as f:
        data = f.read()
    vocab, _, merges = data.partition(b"\0")
    (tmp_path / "vocab.json").write_bytes(vocab)
    (tmp_path / "merges.txt").write_bytes(merges)
    import_and_tokenize(tmp_path, data, "--vocab", tmp_path / "vocab.json",
                        "--merges", tmp_path / "merges.txt")


@pytest.mark.parametrize("path", inputs("tokjson"))
def test_tokjson(tmp_path, path):
    with open(path, "rb") as f:
        data = f.read()
    import_and_tokenize(tmp_path, data, "--tokenizer", path)


@pytest.mark.parametrize("path", inputs("tokrecords"))
def test_tokrecords(path):
    with open(path, "rb") as f:
        data = f.read()
    ok(run("tokenize", "-m", path, "--ids", input=data), "tokenize")
