"""andrea-train's data and checkpoint as inputs: what a tokens stream
gives (andrea-train(1), Data) and what a checkpoint's train_state may hold
(Files written), each bad one refused with one line.  Beside
test_train.py, whose helpers it uses; CPU only, a few seconds."""
import zlib

import numpy as np
import pytest

import atsfmt
from conftest import run, one_line_error
from test_train import SMALL, records, tokens_file, write_model


def packed(path, *recs):
    """Writes the stream of recs [(name, int32 array, attrs dict)]."""
    path.write_bytes(atsfmt.stream(*(
        atsfmt.record(n, "i32", a.shape, a.astype("<i4").tobytes(), at)
        for n, a, at in recs)))
    return path


def train(tmp, data, *extra, check=0):
    model, _ = write_model(tmp, np.random.default_rng(4), SMALL)
    return run("train", "-m", model, "--data", data, "--batch", 2, "--seq", 5,
               "--steps", 1, "--lr", 0, "--threads", 1, "-f",
               "-o", tmp / "m.ats", *extra, check=check)


def test_a_tokens_stream_cut_short_is_refused(tmp_path):
    """The tokens record whole, the stream after it cut short (a stage that
    died while writing it): an error, as wherever a stream is read."""
    ids = np.arange(200) % 11
    whole = packed(tmp_path / "w.ats", ("tokens", ids, {}),
                   ("x", np.arange(60000), {})).read_bytes()
    cut = tmp_path / "cut.ats"
    cut.write_bytes(whole[:len(whole) - 5000])
    p = train(tmp_path, cut, check=1)
    assert "record 2 'x'" in one_line_error(p, "train")

