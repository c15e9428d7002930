"""GPT-2's tokenizer files as andrea-import reads them and andrea-export
writes them, hand-written to their edges: vocab.json and merges.txt,
tokenizer.json and the settings andrea refuses, the tokenizer records of a
model file, added tokens through an export and back.  The tokenizer of
real text against Hugging Face's is test_tokenize.py's."""
import json

import numpy as np
import pytest

import test_import as ti
from conftest import run, one_line_error
from stagekit import pack
from test_tokenize import (andrea_ids, byte_char, needs_json,
                           needs_tokenizers, tokenizers)


@needs_tokenizers
def test_export_keeps_the_added_tokens(tmp_path):
    """vocab.json and merges.txt hold no added tokens (but <|endoftext|>,
    by convention): the exported tokenizer.json carries them, to
    tokenizers and back to andrea-import, which reads it first."""
    extra = ["Ġt", "<|endoftext|>", "<pad>", "<|im start|>", "é!"]
    flags = {"single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False}
    doc = tokenizer_json(model_vocab=alphabet_vocab(extra), added_tokens=[
        dict(flags, id=256 + i, content=c, special=c == "<|endoftext|>")
        for i, c in enumerate(extra) if i])
    assert import_with(tmp_path, tokjson=doc).returncode == 0
    text = "a<pad>b<|endoftext|> t <|im start|>é! é!t"
    want = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(
        text, add_special_tokens=False).ids
    assert andrea_ids(tmp_path / "m.ats", text.encode()) == want
    out = tmp_path / "hf"
    run("export", "-m", tmp_path / "m.ats", out, check=0)
    again = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert again.encode(text, add_special_tokens=False).ids == want
    run("import", out, "-o", tmp_path / "back.ats", check=0)
    assert andrea_ids(tmp_path / "back.ats", text.encode()) == want
    bos = run("tokenize", "-m", tmp_path / "back.ats", "--bos", "--ids", input=b"",
              check=0).stdout
    assert bos == b"257\n"


@needs_json
def test_export_checks_the_tokenizer_before_writing_anything(tmp_path):
    """An added token that is not UTF-8 text (tokenizer.added naming the
    byte 0xff, which tokenizer.json cannot hold) is refused, naming the
    model and its record, before any file of DIR is written."""
    import atsfmt
    assert import_with(tmp_path, GOOD_VOCAB, GOOD_MERGES).returncode == 0
    recs = []
    for r in atsfmt.read((tmp_path / "m.ats").read_bytes()):
        recs.append(atsfmt.record(r.name, r.dtype, r.dims, r.payload, r.attrs))
        if r.name == "tokenizer.merges":
            recs.append(atsfmt.record("tokenizer.added", "i32", (1,),
                                      np.array([255], "<i4").tobytes()))
    bad = tmp_path / "bad.ats"
    bad.write_bytes(atsfmt.stream(*recs))
    hf = tmp_path / "hf"
    p = run("export", "-m", bad, hf, check=1)
    assert f"{bad}: record 'tokenizer.added': added token 255 is not UTF-8" \
        in one_line_error(p, "export")
    assert not hf.exists()


# -- bad tokenizer files -------------------------------------------------

def alphabet_vocab(extra=()):
    v = {byte_char(b): b for b in range(256)}
    for i, t in enumerate(extra):
        v[t] = 256 + i
    return v


def import_with(tmp, vocab=None, merges=None, tokjson=None):
    d, _ = ti.checkpoint(tmp, np.random.default_rng(0), V=300)
    args = []
    if tokjson is not None:
        (tmp / "tokenizer.json").write_text(tokjson)
        args = ["--tokenizer", tmp / "tokenizer.json"]
    else:
        (tmp / "vocab.json").write_text(vocab)
        (tmp / "merges.txt").write_text(merges)
        args = ["--vocab", tmp / "vocab.json", "--merges", tmp / "merges.txt"]
    return run("import", d, "-o", tmp / "m.ats", *args)


GOOD_VOCAB = json.dumps(alphabet_vocab(["Ġt", "he", "Ġthe"]))
GOOD_MERGES = "#version: 0.2\nĠ t\nh e\nĠt he\n"


@needs_json
def test_a_small_hand_written_tokenizer_imports_and_merges(tmp_path):
    p = import_with(tmp_path, GOOD_VOCAB, GOOD_MERGES)
    assert p.returncode == 0, p.stderr
    # " he": no merge of Ġ with he
    assert andrea_ids(tmp_path / "m.ats", b" the he t") == [258, 32, 257, 256]


@needs_json
@pytest.mark.parametrize("vocab,merges,says", ids=lambda x: str(x)[:24], argvalues=[
    ("{", GOOD_MERGES, "vocab.json"),
    ("[1, 2]", GOOD_MERGES, "not a JSON object"),
    (json.dumps({"a": 0}), GOOD_MERGES, "256 to"),
    (json.dumps({**alphabet_vocab(), "Ġt": 5}), GOOD_MERGES, "given twice"),
    (json.dumps({**alphabet_vocab(), "Ġt": 999}), GOOD_MERGES, "not an integer in"),
    (json.dumps({**alphabet_vocab(), "Ġt": "256"}), GOOD_MERGES, "not an integer in"),
    (json.dumps({**alphabet_vocab(), "日本": 256}), "", "not spelt in GPT-2's byte-level"),
    (json.dumps({**{byte_char(b): b for b in range(1, 256)}, "xy": 0}), "",
     "no token for the byte 0x00"),
    (GOOD_VOCAB, "#version: 0.2\nĠt\n", "line 2: expected two tokens"),
    (GOOD_VOCAB, "Ġ  t\n", "line 1: expected two tokens"),
    (GOOD_VOCAB, "Ġ q\n", "line 1: merge 0 of tokens 32 and 113: the two together"),
    (GOOD_VOCAB, "Ġ zz\n", "line 1: 'zz' is not a token"),
    (GOOD_VOCAB, "Ġ t\nĠ t\n", "repeats merge 0"),
])
def test_bad_vocab_or_merges_are_one_line_errors(tmp_path, vocab, merges, says):
    p = import_with(tmp_path, vocab, merges)
    assert p.returncode == 1
    line = one_line_error(p, "import")
    assert says in line, line
    assert "vocab.json" in line or "merges.txt" in line, line
    assert not (tmp_path / "m.ats").exists()


def tokenizer_json(**over):
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                             "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "vocab": alphabet_vocab(["Ġt"]), "merges": [["Ġ", "t"]]}}
    for k, v in over.items():
        if k.startswith("model_"):
            doc["model"][k[6:]] = v
        else:
            doc[k] = v
    return json.dumps(doc)


@needs_json
@pytest.mark.parametrize("doc,says", [
    (tokenizer_json(), None),
    (tokenizer_json(model_merges=["Ġ t"]), None),
    (tokenizer_json(normalizer={"type": "Lowercase"}), "normalizer"),
    (tokenizer_json(model_dropout=0.1), "dropout"),
    (tokenizer_json(model_type="WordPiece"), "not BPE"),
    (tokenizer_json(pre_tokenizer={"type": "Whitespace"}), "not ByteLevel"),
    (tokenizer_json(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True}),
     "prefix space"),
    (tokenizer_json(model_merges=[["Ġ"]]), "merge 0 is neither"),
    (tokenizer_json(model_merges="Ġ t"), "no model object"),
    (tokenizer_json(added_tokens=[{"id": 97, "content": "<pad>", "special": True}]),
     "added token 0 ('<pad>') is not the vocabulary's token of that id"),
    # a control byte is escaped, and the message stays one line
    (tokenizer_json(added_tokens=[{"id": 97, "content": "a\nb"}]),
     "added token 0 ('a\\x0ab') is not the vocabulary's token of that id"),
    ('{"model": 3}', "no model object"),
    # each makes tokenizers' ids other than andrea's
    (tokenizer_json(model_ignore_merges=True), "ignore_merges"),
    (tokenizer_json(model_ignore_merges=False), None),
    *[(tokenizer_json(added_tokens=[{"id": 256, "content": "Ġt", flag: True}]),
       "added token 0 ('Ġt') strips spaces or is a single word (lstrip, "
       "rstrip, single_word)") for flag in ("lstrip", "rstrip", "single_word")],
    (tokenizer_json(added_tokens=[{"id": 97, "content": "a", "lstrip": False,
                                   "rstrip": False, "single_word": False}]), None),
])
def test_tokenizer_json_is_checked_to_be_gpt2s(tmp_path, doc, says):
    p = import_with(tmp_path, tokjson=doc)
    if says is None:
        assert p.returncode == 0, p.stderr
        assert andrea_ids(tmp_path / "m.ats", b" t t") == [256, 256]
        return
    assert p.returncode == 1
    line = one_line_error(p, "import")
    assert says in line and "tokenizer.json" in line, line


@needs_json
def test_config_without_a_checkpoint_is_a_usage_error(tmp_path):
    (tmp_path / "vocab.json").write_text(GOOD_VOCAB)
    (tmp_path / "merges.txt").write_text(GOOD_MERGES)
    (tmp_path / "config.json").write_text("{}")
    p = run("import", "-o", tmp_path / "t.ats", "--config", tmp_path / "config.json",
            "--vocab", tmp_path / "vocab.json", "--merges", tmp_path / "merges.txt",
            check=2)
    assert "--config" in one_line_error(p, "import")
    assert not (tmp_path / "t.ats").exists()


@needs_json
def test_a_tokenizer_larger_than_the_model_is_refused(tmp_path):
    d, _ = ti.checkpoint(tmp_path, np.random.default_rng(0), V=257)
    (tmp_path / "vocab.json").write_text(GOOD_VOCAB)
    (tmp_path / "merges.txt").write_text(GOOD_MERGES)
    p = run("import", d, "-o", tmp_path / "m.ats", "--vocab", tmp_path / "vocab.json",
            "--merges", tmp_path / "merges.txt", check=1)
    assert "259 tokens, but the model's V is 257" in one_line_error(p, "import")


def test_bad_tokenizer_records_in_a_model_are_one_line_errors(tmp_path):
    vocab = np.frombuffer(bytes(range(256)) + b"ab", np.uint8)
    lengths = np.array([1] * 256 + [2], np.int32)
    merges = np.array([[97, 98]], np.int32)
    attrs = ["tokenizer.vocab:kind=gpt2-bpe", "tokenizer.vocab:bos=-1"]

    def model(v=vocab, ln=lengths, mg=merges, at=attrs):
        path = tmp_path / f"m{len(list(tmp_path.glob('m*.ats')))}.ats"
        path.write_bytes(pack(tmp_path, [("tokenizer.vocab", v),
                                         ("tokenizer.lengths", ln),
                                         ("tokenizer.merges", mg)], at))
        return path

    assert andrea_ids(model(), b"abab") == [256, 256]
    for m, says in [
        (model(ln=lengths[:-1]), "add up to 256 bytes"),
        (model(ln=np.array([1] * 255 + [0, 3], np.int32)), "length 0"),
        (model(mg=np.array([[97, 99]], np.int32)), "not a token"),
        (model(mg=np.array([[97, 9999]], np.int32)), "not in 0..256"),
        (model(v=np.frombuffer(bytes(range(255)) + b"aab", np.uint8)), "repeats token"),
        (model(at=["tokenizer.vocab:kind=wordpiece"]), "kind=wordpiece"),
        (model(at=attrs[:1] + ["tokenizer.vocab:bos=900"]), "bos=900"),
        (model(mg=merges.astype(np.float32)), "i32 [M,2]"),
    ]:
        p = run("tokenize", "-m", m, "--ids", input=b"ab", check=1)
        assert says in one_line_error(p, "tokenize"), says


@needs_json
def test_many_added_tokens_survive_the_model_file(tmp_path):
    """A tokenizer.json with 40 added tokens: each is found in text as it
    is spelt and encodes to its id, in the model file as imported (the
    tokenizer.added record) and after andrea-train --tokenizer wrote it
    into a new model."""
    extra = [f"<|x{i}|>" for i in range(40)]
    vocab = alphabet_vocab(["Ġt"] + extra)
    doc = json.loads(tokenizer_json())
    doc["model"]["vocab"] = vocab
    doc["added_tokens"] = [{"id": vocab[t], "content": t, "special": True}
                           for t in extra]
    p = import_with(tmp_path, tokjson=json.dumps(doc))
    assert p.returncode == 0, p.stderr
    text = b"a<|x39|> t<|x0|>"
    want = [97, vocab["<|x39|>"], 256, vocab["<|x0|>"]]
    assert andrea_ids(tmp_path / "m.ats", text) == want
    tok = tmp_path / "tok.ats"
    run("import", "--tokenizer", tmp_path / "tokenizer.json", "-o", tok, check=0)
    assert andrea_ids(tok, text) == want
    run("train", "--config", "tiny", "--tokenizer", tok, "--steps", 0,
        "-o", tmp_path / "new.ats", check=0)
    assert andrea_ids(tmp_path / "new.ats", text) == want
