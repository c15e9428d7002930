"""make bench-tokenize: andrea-tokenize's encoding speed against Hugging
Face's `tokenizers` (PyPI, Rust) measured in the same run on the same text
and the same vocabulary.

The vocabulary is a byte-level BPE trained by `tokenizers` itself on the
fortunes text (Debian's fortunes package; --vocab V tokens, default 16384,
with <|endoftext|>), saved as tokenizer.json and read by `andrea-import
--tokenizer` into a tokenizer stream.  The text is the fortunes text
repeated to --mb MB (default 8), as one file.

Rows, each the median of 3 runs taking turns, MB/s as 10^6 bytes of text
a second:
- andrea: the whole `andrea-tokenize -m TOK -z 0 -o /dev/null FILE`
  process (start, loading the tokenizer, reading the file, encoding on one
  thread, writing the tokens record);
- tokenizers encode: `Tokenizer.encode(text)` on the whole text as one
  string, in process (its one-thread path; loading and decoding the file
  to str not counted);
- tokenizers encode_batch: `encode_batch` on the text's lines, in
  process, on every core tokenizers uses (its thread pool).
andrea's ids are checked equal to encode's (encode_batch's differ where a
line ends in spaces: a line alone ends its last run of spaces, while in
the text the newline after them starts the next piece).  Goal: andrea
>= 1.0x tokenizers' encode.
"""
import glob
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "pydeps"))
BIN = os.path.join(ROOT, "bin")


def args():
    opts = {"--mb": 8, "--vocab": 16384}
    a = sys.argv[1:]
    while a:
        k = a.pop(0)
        if k not in opts or not a:
            sys.exit("usage: tokenizing.py [--mb MB] [--vocab V]")
        opts[k] = int(a.pop(0))
    return opts["--mb"], opts["--vocab"]


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main():
    mb, vocab = args()
    try:
        import tokenizers
        from tokenizers import models, pre_tokenizers, trainers
    except ImportError:
        sys.exit("bench/tokenizing.py: no `tokenizers` (tools/setup.sh puts it "
                 "in build/pydeps)")
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                   if "." not in os.path.basename(f))
    corpus = b"".join(open(f, "rb").read() for f in files)
    if not corpus:
        sys.exit("bench/tokenizing.py: no fortunes text (Debian's fortunes)")
    tmp = tempfile.mkdtemp(prefix="andrea-bench-tok-")
    t0 = time.perf_counter()
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        [corpus.decode("utf-8", "replace")],
        trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                            special_tokens=["<|endoftext|>"]))
    tok.save(os.path.join(tmp, "tokenizer.json"))
    tokfile = os.path.join(tmp, "tok.ats")
    subprocess.run([os.path.join(BIN, "andrea-import"), "--tokenizer",
                    os.path.join(tmp, "tokenizer.json"), "-o", tokfile],
                   check=True)
    data = (corpus * (mb * 10**6 // len(corpus) + 1))[:mb * 10**6]
    # cut at a line end, so that every side sees whole UTF-8 characters
    data = data[:data.rindex(b"\n") + 1]
    path = os.path.join(tmp, "text.txt")
    open(path, "wb").write(data)
    text = data.decode("utf-8")
    lines = text.splitlines(keepends=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.uname().nodename}  "
          f"{os.cpu_count()} CPUs  tokenizers {tokenizers.__version__}")
    print(f"# vocabulary {tok.get_vocab_size()} tokens (trained in "
          f"{time.perf_counter() - t0:.1f} s), text {len(data) / 1e6:.1f} MB")

    def andrea():
        t = time.perf_counter()
        subprocess.run([os.path.join(BIN, "andrea-tokenize"), "-m", tokfile,
                        "-z", "0", "-o", os.path.join(tmp, "ids.ats"), path],
                       check=True)
        return time.perf_counter() - t

    def encode():
        t = time.perf_counter()
        encode.ids = tok.encode(text).ids
        return time.perf_counter() - t

    def batch():
        t = time.perf_counter()
        batch.ids = [i for e in tok.encode_batch(lines) for i in e.ids]
        return time.perf_counter() - t

    rows = {"andrea-tokenize (1 thread, whole process)": andrea,
            "tokenizers encode (1 string)": encode,
            "tokenizers encode_batch (lines, its threads)": batch}
    times = {name: [] for name in rows}
    for _ in range(3):
        for name, f in rows.items():
            times[name].append(f())
    ids = subprocess.run([os.path.join(BIN, "andrea-tokenize"), "-m", tokfile,
                          "--ids", path], capture_output=True,
                         check=True).stdout.decode().strip()
    ids = [int(x) for x in ids.split(",")]
    assert ids == encode.ids, "andrea's ids differ from tokenizers' encode"
    mine = len(data) / median(times[next(iter(rows))]) / 1e6
    print(f"{'row':46s} {'MB/s':>8s} {'andrea x':>9s}")
    for name in rows:
        speed = len(data) / median(times[name]) / 1e6
        print(f"{name:46s} {speed:8.1f} {mine / speed:8.2f}x")
    print(f"# ids equal on all {len(ids)} tokens")
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
