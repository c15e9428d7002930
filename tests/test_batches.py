"""Batches from text (issue 19): andrea-embed --lines makes one padded row
a line with the rows' lengths in an attribute, and every row computes as
it would alone (the causal mask hides the padding), andrea-logits --last
taking each row's own last position."""
import numpy as np
import pytest

import oracle
from conftest import run, one_line_error
from stagekit import pack, unpack
from test_model_filters import full_model

LINES = [b"the cat", b"sat on the mat", b"hi", b"a\xc3\xa9b"]


def test_lines_become_padded_rows_with_their_lengths(tmp_path):
    out = run("embed", "--lines", "--bos", input=b"\n".join(LINES) + b"\n",
              check=0).stdout
    (tmp_path / "s.ats").write_bytes(out)
    from test_train import records
    recs = {n: (a, arr) for n, a, arr in records(tmp_path / "s.ats")}
    tok, lengths = recs["tokens"][1], [len(l) + 1 for l in LINES]
    assert recs["tokens"][0]["lengths"] == ",".join(map(str, lengths))
    assert recs["x"][0]["lengths"] == recs["tokens"][0]["lengths"]
    assert tok.shape == (len(LINES), max(lengths))
    for row, line, n in zip(tok, LINES, lengths):
        assert list(row[:n]) == [256] + list(line)
        assert not row[n:].any()  # padded with token 0


def test_every_row_computes_as_it_would_alone(tmp_path):
    rng = np.random.default_rng(3)
    model, _ = full_model(tmp_path, rng, 2, 2, 16, 257, 32)
    batch = unpack(tmp_path, run(
        "logits", "-m", model, "--last",
        input=run("block", "-m", model, "-l", "all", input=run(
            "embed", "-m", model, "--lines", input=b"\n".join(LINES),
            check=0).stdout, check=0).stdout, check=0).stdout, "b")
    assert batch["logits"].shape == (len(LINES), 1, 257)
    for i, line in enumerate(LINES):
        alone = unpack(tmp_path, run(
            "logits", "-m", model, "--last",
            input=run("block", "-m", model, "-l", "all", input=run(
                "embed", "-m", model, "--text", input=line, check=0).stdout,
                check=0).stdout, check=0).stdout, f"a{i}")
        assert oracle.rel_err(batch["logits"][i], alone["logits"][0]) <= 1e-5


def test_bad_lines_and_lengths_are_one_line_errors(tmp_path):
    r = run("embed", "--lines", input=b"one\n\nthree\n", check=1)
    assert "line 2 is empty" in one_line_error(r, "embed")
    r = run("embed", "--lines", input=b"x\n" * 80, check=1)
    assert "more than the lengths attribute holds" in one_line_error(r, "embed")
    x = np.ones((2, 3, 768), np.float32)
    for bad in ("5,1", "1", "2,x", "0,1"):
        s = pack(tmp_path, [("x", x)], [f"x:lengths={bad}"])
        r = run("logits", "--last", input=s, check=1)
        assert "lengths=" in one_line_error(r, "logits"), bad
