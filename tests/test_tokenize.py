"""GPT-2's byte-level BPE tokenizer (andrea-tokenize, and --text through an
imported model's tokenizer) against Hugging Face's `tokenizers` (PyPI, no
torch; tools/setup.sh puts it in build/pydeps): a vocabulary trained by
`tokenizers` on fortunes text, saved as vocab.json + merges.txt and as
tokenizer.json, imported, and both sides' ids compared on held-out text.
"""
import glob
import json
import os
import sys

import numpy as np
import pytest

from conftest import ROOT, build_settings, run, one_line_error
from stagekit import pack, unpack
import test_import as ti

sys.path.insert(0, os.path.join(ROOT, "build", "pydeps"))
try:
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers
except ImportError:  # tools/setup.sh installs it
    tokenizers = None

needs_tokenizers = pytest.mark.skipif(
    tokenizers is None, reason="no `tokenizers` (tools/setup.sh installs it "
    "into build/pydeps)")
needs_json = pytest.mark.skipif(
    "JSON=0" in build_settings(),
    reason="a build without jansson reads no vocab.json or tokenizer.json")

VOCAB = 1500


def fortunes():
    """The fortunes text (Debian's fortunes package), split 9:1."""
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                   if "." not in os.path.basename(f))
    text = b"".join(open(f, "rb").read() for f in files)
    if len(text) < 100000:
        pytest.skip("no fortunes text (Debian's fortunes package)")
    cut = len(text) * 9 // 10
    return text[:cut], text[cut:]


# What a user hits: non-ASCII UTF-8 (accents, CJK, emoji, Unicode
# spaces and line separators), runs of spaces and newlines, tabs, digits,
# contractions, the byte-level alphabet's own letters.
CRAFTED = [
    "", "a", " ", "\n", "Hello, world!", "   three leading spaces",
    "trailing spaces   ", "tabs\t\tand\n\n\nnewlines \n \n", "x  \n y",
    "don't we'll they're I'M you've she'd it's 's 'S", "'''''",
    "123456789 3.14159 1,000,000 ½ ² ٣",
    "naïve café Ünïcödé ﬁ straße ΑΒΓ Привет", "日本語のテキスト 中文 한국어",
    "emoji 😀👍🏽 🇩🇪 x", "nbsp\u00a0ideographic\u3000sep\u2028nel\u0085end",
    "Ġ Ċ ĉ the alphabet's own letters", "<|endoftext|> is plain text here",
    # U+180E: in PCRE2's \s, not in Unicode's White_Space
    "mvs\u180e \u180e  \u180e x\u180e's\u180e\n",
]


def train_tokenizer(text):
    """GPT-2's byte-level BPE of VOCAB tokens, <|endoftext|> the special
    one, trained by Hugging Face tokenizers on text (bytes)."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [text.decode("utf-8", "replace")],
        trainers.BpeTrainer(vocab_size=VOCAB, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                            special_tokens=["<|endoftext|>"]))
    return tok


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tokenizer trained on fortunes, its files, and a small imported
    GPT-2 carrying it in each spelling: (tokenizer, dir, {spelling:
    model})."""
    if tokenizers is None:
        pytest.skip("no `tokenizers`")
    tmp = tmp_path_factory.mktemp("tok")
    train, _ = fortunes()
    tok = train_tokenizer(train)
    d = tmp / "gpt2"
    d.mkdir()
    tok.model.save(str(d))
    tok.save(str(d / "tokenizer.json"))
    params = ti.gpt2_params(np.random.default_rng(1), 1, 2, 8, VOCAB, 64)
    ti.save_safetensors(d / "model.safetensors", params)
    (d / "config.json").write_text(json.dumps(ti.hf_config(1, 2, 8, VOCAB, 64)))
    spellings = {"tokenizer.json": ["--tokenizer", d / "tokenizer.json"],
                 "vocab+merges": ["--vocab", d / "vocab.json",
                                  "--merges", d / "merges.txt"]}
    out = {}
    for name, args in spellings.items():
        out[name] = tmp / f"{name}.ats"
        run("import", d, "-o", out[name], *args, check=0)
    out["params"] = params
    return tok, d, out


def andrea_ids(model, data):
    out = run("tokenize", "-m", model, "--ids", input=data, check=0).stdout
    return [int(x) for x in out.decode().split(",")] if out.strip() else []


def oracle_ids(tok, data):
    """tokenizers' ids of bytes: valid UTF-8 runs as text; each byte
    outside valid UTF-8 a piece of its own, its byte token."""
    text = data.decode("utf-8", "surrogateescape")
    ids, run_ = [], []
    for ch in text + "\udc00":  # a sentinel that ends the last run
        if "\udc80" <= ch <= "\udcff" or ch == "\udc00":
            if run_:
                ids += tok.encode("".join(run_), add_special_tokens=False).ids
                run_ = []
            if ch != "\udc00":
                b = ord(ch) - 0xdc00
                ids.append(tok.token_to_id(byte_char(b)))
        else:
            run_.append(ch)
    return ids


def byte_char(b):
    """GPT-2's byte-level alphabet (written from its definition)."""
    keep = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    if b in keep:
        return chr(b)
    return chr(256 + [c for c in range(256) if c not in keep].index(b))


@needs_tokenizers
@pytest.mark.parametrize("spelling", ["tokenizer.json", "vocab+merges"])
def test_ids_equal_tokenizers_on_held_out_text(trained, spelling):
    tok, _, model = trained
    _, held_out = fortunes()
    texts = [held_out[:200000]] + [t.encode() for t in CRAFTED]
    for data in texts:
        want = tok.encode(data.decode(), add_special_tokens=False).ids
        assert andrea_ids(model[spelling], data) == want, data[:80]


@needs_tokenizers
def test_invalid_utf8_bytes_are_pieces_of_their_own(trained):
    tok, _, model = trained
    rng = np.random.default_rng(7)
    texts = [b"ab\xffcd", b"\xff", b"  \xfe  x", b"caf\xc3", b"\xc3\xa9\xa9",
             b"\xe2\x82\x41 x", b"\xf0\x80\x80\x80", b"\xed\xa0\x80 surrogate",
             b"\xf4\x90\x80\x80 above U+10FFFF", b"over\xc0\xaflong"]
    # fortunes text with random bytes broken
    _, held_out = fortunes()
    for _ in range(20):
        a = bytearray(held_out[:2000])
        for i in rng.integers(0, len(a), 30):
            a[i] = rng.integers(128, 256)
        texts.append(bytes(a))
    for data in texts:
        assert andrea_ids(model["vocab+merges"], data) == oracle_ids(tok, data), data[:60]


@needs_tokenizers
def test_decode_of_encode_is_the_bytes(trained, tmp_path):
    _, _, model = trained
    rng = np.random.default_rng(3)
    for n in [0, 1, 2, 17, 1000, 30000]:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        enc = run("tokenize", "-m", model["tokenizer.json"], input=data, check=0).stdout
        assert unpack(tmp_path, enc)["tokens"].shape == (1, len(andrea_ids(model["tokenizer.json"], data)))
        back = run("tokenize", "-m", model["tokenizer.json"], "--decode",
                   input=enc, check=0).stdout
        assert back == data


@needs_tokenizers
def test_a_long_run_goes_through_the_heap_as_tokenizers_merges_it(trained):
    tok, _, model = trained
    for data in [b"a" * 5000, b"ab" * 3000, b"the" * 2000, b" " * 4000 + b"x",
                 b"\n" * 3000]:
        assert andrea_ids(model["vocab+merges"], data) == \
            tok.encode(data.decode(), add_special_tokens=False).ids


@needs_tokenizers
def test_text_through_the_model_tokenizer_everywhere(trained, tmp_path):
    """andrea-embed --text and --bos use the model's tokenizer; BOS is
    <|endoftext|>; --pieces shows each token's bytes."""
    tok, _, model = trained
    m = model["tokenizer.json"]
    text = "The quick brown fox, don't you know?\n"
    want = tok.encode(text).ids
    got = unpack(tmp_path, run("embed", "-m", m, "--text", "--bos",
                               input=text.encode(), check=0).stdout)["tokens"]
    assert got.tolist() == [[tok.token_to_id("<|endoftext|>")] + want]
    pieces = run("tokenize", "-m", m, "--pieces", input=b"a b\n",
                 check=0).stdout.decode().splitlines()
    ids = tok.encode("a b\n").ids
    assert pieces == [f"{i}\t{tok.decode([i]).replace(chr(10), chr(92) + 'x0a')}"
                      for i in ids]


def test_the_embed_page_says_text_and_bos_are_the_tokenizers():
    """andrea-embed(1) says what the test above holds: --text is encoded by
    the model's tokenizer, and --bos puts its BOS, not always byte 256."""
    page = open(os.path.join(ROOT, "man", "man1", "andrea-embed.1")).read()
    text = page.split(".B \\-\\-text\n.I FILE", 1)[1].split(".TP", 1)[0]
    assert "tokenizer" in text and "every byte becomes one token, 0 to 255." not in text
    bos = page.split(".B \\-\\-bos\n", 1)[1].split(".TP", 1)[0]
    assert "<|endoftext|>" in bos, bos


def token_bytes(tok, i):
    """The bytes of token i, from its spelling in the byte-level alphabet."""
    back = {byte_char(b): b for b in range(256)}
    return bytes(back[c] for c in tok.id_to_token(i))


@needs_tokenizers
def test_greedy_generation_writes_the_tokens_text(trained):
    """andrea-generate starts at <|endoftext|> and the prompt's tokens and
    writes each drawn token's bytes; against the NumPy GPT-2's greedy
    choice (a near-tie ends the comparison: float32's call)."""
    tok, _, model = trained
    prompt = "Once upon a time"
    out = run("generate", "-m", model["tokenizer.json"], "--device", "cpu",
              "--prompt", prompt, "-n", 25, "--temperature", 0, check=0).stdout
    seq = [tok.token_to_id("<|endoftext|>")] + tok.encode(prompt).ids
    want = b""
    for _ in range(25):
        lg = ti.gpt2_forward(model["params"], np.array([seq]), 1, 2)[0, -1]
        order = np.argsort(lg)
        if lg[order[-1]] - lg[order[-2]] < 1e-3 or order[-1] == seq[0]:
            break
        seq.append(int(order[-1]))
        want += token_bytes(tok, seq[-1])
    assert len(want) > 10 and out.startswith(want)


@needs_tokenizers
def test_export_writes_a_tokenizer_that_tokenizers_loads(trained, tmp_path):
    tok, _, model = trained
    out = tmp_path / "hf"
    out.mkdir()
    run("export", "-m", model["tokenizer.json"], out, check=0)
    again = tokenizers.Tokenizer(models.BPE.from_file(
        str(out / "vocab.json"), str(out / "merges.txt")))
    again.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    _, held_out = fortunes()
    text = held_out[:50000].decode("utf-8", "replace")
    assert again.encode(text).ids == tok.encode(text).ids
    whole = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    text += "<|endoftext|>" + text[:1000]
    assert whole.encode(text).ids == tok.encode(text).ids


@needs_tokenizers
def test_a_run_longer_than_a_piece_may_be_is_one_line(trained):
    _, _, model = trained
    p = run("tokenize", "-m", model["vocab+merges"], "--ids",
            input=b"a" * ((1 << 24) + 1), check=1)
    assert "longer than the 16777216 bytes one piece may have" in \
        one_line_error(p, "tokenize")


def test_the_byte_tokenizer_without_a_model(tmp_path):
    data = bytes(range(256)) + b"hello"
    ids = [int(x) for x in run("tokenize", "--ids", "--bos", input=data,
                               check=0).stdout.decode().split(",")]
    assert ids == [256] + list(data)
    enc = run("tokenize", input=data, check=0).stdout
    assert unpack(tmp_path, enc)["tokens"].tolist() == [list(data)]
    assert run("tokenize", "--decode", input=enc, check=0).stdout == data
    # a batch decodes one row a line; BOS has no text
    two = pack(tmp_path, [("tokens", np.array([[256, 104, 105], [256, 111, 107]],
                                              dtype=np.int32))])
    assert run("tokenize", "--decode", input=two, check=0).stdout == b"hi\nok"


def test_decoding_an_id_without_text_is_an_error(tmp_path):
    s = pack(tmp_path, [("tokens", np.array([1, 2, 300], dtype=np.int32))])
    p = run("tokenize", "--decode", input=s, check=1)
    assert "token 300 at [0,2]" in one_line_error(p, "tokenize")
    p = run("tokenize", "--decode", input=pack(tmp_path, [("x", np.zeros(2, np.float32))]),
            check=1)
    assert "no 'tokens' record" in one_line_error(p, "tokenize")
    # a padded batch (andrea-embed --lines): each row's own tokens
    lines = run("embed", "--lines", input=b"ab\nabcd\nc\n", check=0).stdout
    assert run("tokenize", "--decode", input=lines, check=0).stdout == b"ab\nabcd\nc"
    bad = pack(tmp_path, [("tokens", np.array([[104, 105]], np.int32))],
               ["tokens:lengths=3"])
    p = run("tokenize", "--decode", input=bad, check=1)
    assert "record 1 'tokens': lengths=3" in one_line_error(p, "tokenize")
    # a batch of no rows is a record all the same: no text, no error
    empty = pack(tmp_path, [("tokens", np.zeros((0, 3), np.int32))])
    assert run("tokenize", "--decode", input=empty, check=0).stdout == b""
    p = run("tokenize", "--ids", "-o", tmp_path / "x", input=b"a", check=2)
    one_line_error(p, "tokenize")


@needs_tokenizers
def test_training_on_text_through_the_tokenizer(trained, tmp_path):
    """andrea-train --tokenizer MODEL: a new model with that tokenizer (V
    from it), --data encoded by it, the tokenizer kept in the model file
    and the checkpoint, and a resumed run keeps it."""
    tok, _, model = trained
    train, _ = fortunes()
    data = tmp_path / "data.txt"
    data.write_bytes(train[:60000])
    out, ckpt = tmp_path / "m.ats", tmp_path / "m.ckpt"
    run("train", "--config", "tiny", "--tokenizer", model["tokenizer.json"],
        "--data", data, "--steps", 2, "--batch", 2, "--seq", 32,
        "--dump-grads", tmp_path / "g.ats", "-o", out, "--checkpoint", ckpt,
        "--device", "cpu", check=0)
    ids = tok.encode(train[:60000].decode("utf-8", "replace")).ids
    windows = unpack(tmp_path, (tmp_path / "g.ats").read_bytes())["tokens"]
    text = ",".join(map(str, ids))
    for w in windows:  # each row is a window of the encoded text
        assert ",".join(map(str, w)) in text
    assert andrea_ids(out, b"Hello there") == tok.encode("Hello there").ids
    run("train", "--resume", "--data", data, "--steps", 3, "-o", out,
        "--checkpoint", ckpt, "--device", "cpu", check=0)
    assert andrea_ids(out, b"Hello there") == tok.encode("Hello there").ids
    p = run("train", "--config", "tiny", "--tokenizer", model["tokenizer.json"],
            "--vocab", 300, "--data", data, "-o", out, check=2)
    assert "1500 tokens" in one_line_error(p, "train")


def labelled_map(model, text, select="0,0"):
    """andrea-show --ascii --labels of the attention of text's head."""
    m = ("-m", model) if model else ()
    from stagekit import pipeline
    out = pipeline([("embed", *m, "--text", "--bos"), ("qkv", *m), ("scores",),
                    ("mask",), ("softmax",),
                    ("show", "--ascii", "--labels", *m, "--name", "attn",
                     "--select", select)], input=text)
    return out.decode().splitlines()[1:]


def test_show_labels_a_map_with_the_byte_tokens():
    lines = labelled_map(None, b"hi there")
    T = 1 + len(b"hi there")
    cols, rows = lines[:-T], lines[-T:]
    assert [r[:6] for r in rows] == ["<bos> "] + [f"{c:6s}" for c in "hiĠthere"]
    assert all(len(r) == 6 + T for r in rows)
    assert [c[6:] for c in cols] == ["<hiĠthere", "b        ", "o        ",
                                     "s        ", ">        "]


def test_show_labels_follow_the_axis_named_row(tmp_path):
    """A record whose batch axis is not its first (andrea-lens's
    depth,row,position,rank) takes its labels, and its padding, from the
    row that --select gives that axis, not from its first index; the
    positions the map's own lengths pad are unnamed, as they are drawn."""
    np.save(tmp_path / "t.npy", np.array([list(b"abc"), list(b"xyz")], np.int32))
    np.save(tmp_path / "l.npy", np.ones((2, 2, 3, 2), np.float32))
    stream = run("pack", "-a", "lens_logits:axes=depth,row,position,rank",
                 "-a", "lens_logits:lengths=1,3", f"tokens={tmp_path / 't.npy'}",
                 f"lens_logits={tmp_path / 'l.npy'}", check=0).stdout
    def rows(select):
        out = run("show", "--ascii", "--labels", "--name", "lens_logits",
                  "--select", select, input=stream, check=0).stdout
        return out.decode().splitlines()[1:]
    assert rows("1,0") == ["a ++", "    ", "    "]  # depth 1, row 0
    assert rows("0,1") == ["x ++", "y ++", "z ++"]  # depth 0, row 1


def test_show_labels_leave_a_padded_rows_tail_unnamed():
    """The positions past a padded row's length (andrea-embed --lines)
    hold no token: their labels are blank, not the padding's byte 0."""
    from stagekit import pipeline
    out = pipeline([("embed", "--text", "--lines"), ("qkv", "--head", 0),
                    ("scores",), ("mask",), ("softmax",),
                    ("show", "--ascii", "--labels", "--name", "attn")],
                   input=b"hi\nabcd\n")
    lines = out.decode().splitlines()[1:]
    assert lines[0] == "  hi  "
    assert [r[:2] for r in lines[1:]] == ["h ", "i ", "  ", "  "]


def test_show_labels_a_png_with_the_tokens(tmp_path):
    """--labels --png names the rows at the left and the columns below by
    their tokens: the map moves right by the widest row label (<bos>, 5
    characters of 6 pixels, against one digit) and the figure grows by
    the column labels' height; a map of up to 64 positions gets cells a
    line (13 pixels) high, so that each label has its own."""
    from stagekit import pipeline
    from test_show_png import map_box, read_png
    boxes = {}
    for text in (b"hi there", b"the cat sat on the mat"):
        for labels in ((), ("--labels",)):
            out = tmp_path / f"{len(text)}{len(labels)}.png"
            pipeline([("embed", "--text", "--bos"), ("qkv",), ("scores",),
                      ("mask",), ("softmax",),
                      ("show", *labels, "--name", "attn", "--png", out)],
                     input=text)
            w, h, rows = read_png(out)
            boxes[len(text), bool(labels)] = (w, h) + map_box(rows)
    plain, lab = boxes[8, False], boxes[8, True]
    assert lab[2] - plain[2] == 4 * 6          # "<bos>" against "8"
    assert lab[1] > plain[1] and lab[4:] == plain[4:] == (9 * 29, 9 * 29)
    assert boxes[22, False][4] == 23 * 12 and boxes[22, True][4] == 23 * 13


@needs_tokenizers
def test_show_labels_a_map_with_gpt2_tokens(trained):
    tok, _, model = trained
    text = "The cat sat on the mat."
    ids = [tok.token_to_id("<|endoftext|>")] + tok.encode(text).ids
    lines = labelled_map(model["tokenizer.json"], text.encode(), "0,1")
    spelt = [tok.id_to_token(i) for i in ids]
    rows = lines[-len(ids):]
    width = min(max(map(len, spelt)), 12) + 1
    assert [r[:width].rstrip() for r in rows] == [s[:width - 1] for s in spelt]
    assert ["".join(line[width + i] for line in lines[:-len(ids)]).rstrip()
            for i in range(len(ids))] == [s[:8] for s in spelt]


@needs_tokenizers
def test_fine_tuning_an_imported_gpt2_lowers_its_held_out_loss(trained, tmp_path):
    """andrea-train -m on an imported GPT-2 (biases, tied head, its
    tokenizer): the text goes through the tokenizer, every parameter
    trains, the held-out loss falls, and the model written keeps GPT-2's
    form and tokenizer."""
    tok, _, model = trained
    train, _ = fortunes()
    data = tmp_path / "data.txt"
    data.write_bytes(train[:40000])
    log, out = tmp_path / "log.jsonl", tmp_path / "tuned.ats"
    run("train", "-m", model["tokenizer.json"], "--data", data, "--steps", 80,
        "--batch", 4, "--seq", 32, "--lr", 1e-2, "--warmup", 5,
        "--eval-every", 20, "--eval-batches", 4, "--device", "cpu",
        "--log", log, "-o", out, check=0, timeout=300)
    val = [json.loads(line)["val_loss"] for line in log.read_text().splitlines()
           if "val_loss" in line]
    assert len(val) >= 3 and val[-1] < val[0] - 0.3, val
    names = set(unpack(tmp_path, out.read_bytes()))
    assert "layers.0.attn.bq" in names and "lm_head" not in names
    assert andrea_ids(out, b"Hello there") == tok.encode("Hello there").ids


def gpt2_dir(tmp, trained, L=6, H=2, C=8, ctx=64, tok=None):
    """gpt2/ as a user downloads it: config.json, model.safetensors (a
    random GPT-2 of these sizes) and the trained tokenizer's vocab.json
    and merges.txt (or those of tok, a tokenizers.Tokenizer)."""
    _, src, _ = trained
    d = tmp / "gpt2"
    d.mkdir()
    ti.save_safetensors(d / "model.safetensors",
                        ti.gpt2_params(np.random.default_rng(9), L, H, C, VOCAB, ctx))
    (d / "config.json").write_text(json.dumps(ti.hf_config(L, H, C, VOCAB, ctx)))
    if tok:
        tok.model.save(str(d))
    else:
        for f in ("vocab.json", "merges.txt"):
            (d / f).write_bytes((src / f).read_bytes())
    return d


def run_session(tmp, blocks):
    """Runs the blocks' commands as one sh session in tmp (set -e), bin/
    first on PATH; returns each block's standard output."""
    from conftest import BIN, tool_env
    import subprocess
    script = "set -e\n" + "".join(f"echo '@@{i}'\n{c}" for i, (c, _) in
                                  enumerate(blocks))
    env = tool_env()
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    p = subprocess.run(["sh", "-c", script], cwd=tmp, env=env,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode().split("@@")[1:]


@needs_tokenizers
def test_the_gpt2_session_of_andrea7_runs_as_printed(trained, tmp_path):
    from test_manpages import example_blocks
    gpt2_dir(tmp_path, trained)
    blocks = example_blocks("man7/andrea.7", "GPT\\-2 SMALL, HEAD BY HEAD",
                            ("andrea-", "printf ", "ls ", "export "))
    outs = run_session(tmp_path, blocks)
    for (cmds, want), got in zip(blocks, outs):
        assert got.split("\n", 1)[1] == (want or ""), cmds
    tok, _, _ = trained
    text = "The cat sat on the mat. The cat sat on the mat."
    ids = tok.encode(text).ids
    pieces = (tmp_path / "pieces.txt").read_text().splitlines()
    assert [int(line.split("\t")[0]) for line in pieces] == ids
    x5 = unpack(tmp_path, (tmp_path / "x5.ats").read_bytes(), "u1")
    assert x5["x"].shape == (1, len(ids) + 1, 8)
    head = unpack(tmp_path, (tmp_path / "head5.1.ats").read_bytes(), "u2")
    assert head["out"].shape == (1, 1, len(ids) + 1, 4)
    rows = (tmp_path / "map.txt").read_text().splitlines()[-(len(ids) + 1):]
    assert rows[0].startswith("<|endoftext|")
    assert (tmp_path / "next.txt").stat().st_size > 0
    assert sorted(os.listdir(tmp_path / "out")) == [
        "config.json", "merges.txt", "model.safetensors", "tokenizer.json",
        "vocab.json"]


@needs_tokenizers
def test_the_gpt2_session_of_the_readme_runs(trained, tmp_path):
    """README.md's GPT-2 block, line for line (comments cut), on gpt2/ as
    a user downloads it."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text.split("## GPT-2 small, head by head\n", 1)[1].split("\n## ", 1)[0]
    lines = [line[4:] for line in section.splitlines() if line.startswith("    ")]
    cmds = "\n".join(line.split("  #")[0].rstrip() for line in lines) + "\n"
    assert "andrea-import" in cmds and "andrea-show" in cmds
    gpt2_dir(tmp_path, trained)
    out = run_session(tmp_path, [(cmds, None)])[0]
    tok, _, _ = trained
    ids = tok.encode("The cat sat on the mat. The cat sat on the mat.").ids
    assert "<|endoftext|" in out and f"{ids[1]}\t" in out
    assert sorted(os.listdir(tmp_path / "out")) == [
        "config.json", "merges.txt", "model.safetensors", "tokenizer.json",
        "vocab.json"]
