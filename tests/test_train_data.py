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


def test_a_padded_batch_trains_on_its_rows_own_tokens(tmp_path):
    """tokens [B,T] with lengths= (andrea-embed --lines): each row's own
    tokens, in order, not its padding; the checkpoint's data_size and
    data_crc are those of the tokens used (i32, little-endian)."""
    rng = np.random.default_rng(5)
    lengths = [40, 17, 60, 33]
    rows = np.full((4, 60), 10, np.int32)  # 10: the padding
    for b, n in enumerate(lengths):
        rows[b, :n] = rng.integers(0, 10, n)
    data = packed(tmp_path / "pad.ats", ("tokens", rows, {
        "lengths": ",".join(map(str, lengths))}))
    grads = tmp_path / "g.ats"
    train(tmp_path, data, "--batch", 16, "--dump-grads", grads)
    used = np.concatenate([rows[b, :n] for b, n in enumerate(lengths)])
    st = records(f"{tmp_path / 'm.ats'}.ckpt")[0][1]
    assert int(st["data_size"]) == used.size
    assert int(st["data_crc"]) == zlib.crc32(used.astype("<i4").tobytes())
    assert 10 not in records(grads)[0][2]
    bad = packed(tmp_path / "bad.ats", ("tokens", rows, {"lengths": "40,17"}))
    p = train(tmp_path, bad, check=1)
    assert "record 1 'tokens': lengths=40,17" in one_line_error(p, "train")


def test_a_token_out_of_range_names_its_record(tmp_path):
    """...and its place there: row and position, of a padded batch's too
    (not its place among the rows' tokens laid end to end)."""
    data = tokens_file(tmp_path, [1, 2, 3] * 30 + [11])
    p = train(tmp_path, data, check=1)
    assert one_line_error(p, "train") == (
        f"andrea-train: {data}: record 1 'tokens': token 11 at [0,90] "
        "is not in 0..10 (V=11)")
    rows = np.array([[1, 2] * 20, [3] * 5 + [11] + [0] * 34], np.int32)
    bad = packed(tmp_path / "pad.ats", ("tokens", rows, {"lengths": "40,6"}))
    assert "record 1 'tokens': token 11 at [1,5] is not in 0..10" in \
        one_line_error(train(tmp_path, bad, check=1), "train")


@pytest.mark.parametrize("key,value", [
    ("seq", 64), ("val_fraction", 5), ("val_fraction", -1),
    ("val_fraction", "nan"), ("lr", -1), ("min_lr", 1), ("weight_decay", -1),
    ("clip", "inf"), ("beta1", 1), ("beta2", 2), ("eps", 0)])
def test_a_checkpoint_value_out_of_range_is_refused(tmp_path, key, value):
    """A train_state the command line could not have given (a hand-edited
    or damaged checkpoint) ends the run with one line naming the record
    and the value, before any step: a --seq past the context read past
    wpe, a --val-fraction past 1 crashed."""
    data = tokens_file(tmp_path, np.arange(400) % 11)
    train(tmp_path, data, "--steps", 4, "--stop-at", 2)
    ck = tmp_path / "m.ats.ckpt"
    recs = atsfmt.read(ck.read_bytes())
    out = []
    for r in recs:
        attrs = dict(r.attrs)
        if r.name == "train_state":
            attrs[key] = value
        out.append(atsfmt.record(r.name, r.dtype, r.dims, r.payload, attrs))
    ck.write_bytes(atsfmt.stream(*out))
    p = run("train", "--resume", "--data", data, "--threads", 1,
            "-o", tmp_path / "m.ats", check=1)
    line = one_line_error(p, "train")
    assert line.startswith(f"andrea-train: {ck}: record 1: train_state: "
                           f"{key}={value} "), line


def test_the_checkpoint_holds_what_the_page_lists(tmp_path):
    """andrea-train(1)'s CHECKPOINT entry names every attribute of
    train_state (the GPT-2 form's biases and tied among them), then the
    config, the parameters and the moments in order."""
    import os
    import re
    from conftest import ROOT
    page = open(os.path.join(ROOT, "man/man1/andrea-train.1")).read()
    entry = page[page.index(".I CHECKPOINT"):]
    entry = entry[:entry.index(".PP")]
    named = {re.split(r"[ =]", w)[0] for w in
             re.findall(r"^\.BR? (\w+)", entry, re.M)}
    data = tokens_file(tmp_path, np.arange(400) % 11)
    for gpt2 in (False, True):
        model, p = write_model(tmp_path, np.random.default_rng(4), SMALL, gpt2)
        run("train", "-m", model, "--data", data, "--batch", 2, "--seq", 5,
            "--steps", 1, "--min-lr", 0, "--threads", 1, "-f",
            "-o", tmp_path / "m.ats", check=0)
        recs = records(f"{tmp_path / 'm.ats'}.ckpt")
        keys = set(recs[0][1])
        assert keys <= named and {"biases", "tied"} & keys == (
            {"biases", "tied"} if gpt2 else set()), (keys - named, keys)
        order = [r[0] for r in records(tmp_path / "m.ats")][1:]
        assert sorted(order) == sorted(p)
        assert [r[0] for r in recs] == ["train_state", "config"] + order + \
            ["adam.m." + k for k in order] + ["adam.v." + k for k in order]
    assert named - keys <= {"train_state", "config", "andrea"}, named - keys
