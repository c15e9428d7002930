"""andrea-generate's decoding (andrea-generate(1)): the KV cache against
recomputing the whole window, on a trained model and against the float64
NumPy oracle on random models of odd shapes; --prompts batches and their
output lines; --top-p; --stats; the errors of the new options, and
--precision on every tool of the forward engine.

The oracle follows the tool's own text step by step (teacher forcing):
each step's window is rebuilt from what the tool drew, by the window rule
of oracle.window_start, so a near-tie that float32 breaks otherwise
cannot throw the comparison off course.  Everything runs with one
OpenMP thread: the suite shares two cores.
"""
import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import atsfmt
import oracle
from conftest import run, one_line_error, tool, tool_env
from stagekit import pack
from test_model_filters import agreeing_prefix, full_model, gen_model
from test_train import fortunes_text, read_params

ONE = {"OMP_NUM_THREADS": "1"}
TOL = 1e-5
BOS = 256


def generate(*args, **kw):
    return run("generate", *args, env=ONE, check=0, **kw).stdout


def logit_steps(path):
    """The records of a --logits file, as [rows,V] arrays in step order
    (asserting the names and the step attributes)."""
    out = []
    for i, r in enumerate(atsfmt.read(open(path, "rb").read())):
        assert r.name == "logits" and dict(r.attrs) == {"step": str(i)}
        assert r.dtype == "f32" and len(r.dims) == 2
        out.append(np.frombuffer(r.payload, "<f4").reshape(r.dims))
    return out


def windows(prompt, drawn, n, ctx):
    """The token windows andrea-generate runs, step by step, for a sequence
    that starts as BOS + prompt and drew `drawn`: n steps, or up to the
    step that drew a token >= 256 when drawn is shorter."""
    seq = [BOS] + list(prompt)
    w0 = max(len(seq) - ctx, 0)
    out = []
    for step in range(min(n, len(drawn) + 1)):
        w0 = oracle.window_start(len(seq), w0, ctx)
        out.append(seq[w0:])
        if step < len(drawn):
            seq.append(drawn[step])
    return out


def unescape(line):
    """A --prompts output line back to bytes: \\\\ and \\n are the only
    escapes."""
    out, i = bytearray(), 0
    while i < len(line):
        if line[i:i + 1] == b"\\":
            esc = line[i + 1:i + 2]
            assert esc in (b"\\", b"n"), line
            out += b"\\" if esc == b"\\" else b"\n"
            i += 2
        else:
            assert line[i] != 10, line
            out.append(line[i])
            i += 1
    return bytes(out)


def f64(p):
    return {k: v.astype(np.float64) for k, v in p.items()}


# ---- the KV cache against recomputing the window, on a trained model ----

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small model (C 32, H 2, L 2) trained for 300 steps on 30 KB of the
    fortunes, with context 256, and the same model cut to context 64 (its
    first 64 positions): {ctx: (path, params)}."""
    tmp = tmp_path_factory.mktemp("trained")
    data = tmp / "fortunes.txt"
    data.write_bytes(fortunes_text(30000))
    big = tmp / "ctx256.ats"
    run("train", "--config", "tiny", "--d-model", 32, "--heads", 2, "--ctx", 256,
        "--data", data, "--steps", 300, "--batch", 8, "--seq", 64, "--lr", 1e-2,
        "--warmup", 20, "--threads", 1, "-o", big, check=0, timeout=300)
    p = read_params(tmp, big, "p")
    cut = dict(p, wpe=p["wpe"][:64])
    cfg = dict(n_layer=2, n_head=2, d_model=32, ctx=64, vocab=257)
    small = tmp / "ctx64.ats"
    small.write_bytes(pack(tmp, [("config", np.zeros(0, np.int32))] +
                           list(cut.items()),
                           [f"config:{k}={v}" for k, v in cfg.items()]))
    return {256: (big, p), 64: (small, cut)}


def assert_logits_agree(a, b):
    """Every step's logits agree within TOL of the step's largest."""
    assert len(a) == len(b)
    for step, (x, y) in enumerate(zip(a, b)):
        assert x.shape == y.shape
        assert np.abs(x - y).max() <= TOL * np.abs(y).max() + 1e-7, step


@pytest.mark.parametrize("ctx", [64, 256])
def test_cache_matches_recomputation_on_a_trained_model(tmp_path, trained, ctx):
    """200 greedy steps with the KV cache and with --no-cache: the same
    text and, step by step, the same logits.  BOS + 4 + 200 tokens: the
    window of context 64 slides (by halves, five times); that of 256 does
    not."""
    model, _ = trained[ctx]
    args = ["-m", model, "--prompt", "The ", "-n", 200, "--temperature", 0]
    a = generate(*args, "--logits", tmp_path / "a.ats")
    b = generate(*args, "--no-cache", "--logits", tmp_path / "b.ats")
    assert len(a) == 200 and a == b
    la, lb = logit_steps(tmp_path / "a.ats"), logit_steps(tmp_path / "b.ats")
    assert len(la) == 200 and la[0].shape == (1, 257)
    assert_logits_agree(la, lb)
    # context 64: the window slides when it would hold 65 tokens, 5 times
    wins = windows(b"The ", a, 200, ctx)
    slides = sum(len(w) < len(v) for v, w in zip(wins, wins[1:]))
    assert slides == (5 if ctx == 64 else 0)


def test_batch_cache_matches_recomputation(tmp_path, trained):
    """--prompts rows at different positions, one longer than the context
    and one that starts from BOS alone, decode with the cache as they do
    without it."""
    model, _ = trained[64]
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes(b"The \n\n" + b"Once upon a time " * 6 + b"\nQ:\n")
    args = ["-m", model, "--prompts", prompts, "-n", 120, "--temperature", 0]
    a = generate(*args, "--logits", tmp_path / "a.ats")
    b = generate(*args, "--no-cache", "--logits", tmp_path / "b.ats")
    assert a == b and a.count(b"\n") == 4
    la, lb = logit_steps(tmp_path / "a.ats"), logit_steps(tmp_path / "b.ats")
    assert la[0].shape == (4, 257)
    assert_logits_agree(la, lb)


# ---- the cached path against the float64 oracle, on random models ----

# (L, H, C, ctx, prompt): H = 1, C prime, D = 1 (C = H), ctx 1 and 2, an
# empty prompt, prompts longer than the context
ODD = [(2, 1, 7, 12, b"abc"), (1, 3, 15, 9, b""), (2, 5, 5, 16, b"x"),
       (2, 2, 6, 1, b"xy"), (1, 1, 5, 2, b"hello"),
       (3, 3, 9, 8, b"longer than the context")]


@pytest.mark.parametrize("L,H,C,ctx,prompt", ODD)
def test_cached_decoding_matches_numpy(tmp_path, L, H, C, ctx, prompt):
    rng = np.random.default_rng(100 + L * 31 + H * 7 + C + ctx)
    model, p = full_model(tmp_path, rng, L, H, C, 257, ctx)
    n = 24
    out = generate("-m", model, "--prompt", prompt.decode(), "-n", n,
                   "--temperature", 0, "--logits", tmp_path / "lg.ats")
    steps = logit_steps(tmp_path / "lg.ats")
    wins = windows(prompt, out, n, ctx)
    assert len(steps) == len(wins)
    for step, (got, win) in enumerate(zip(steps, wins)):
        assert 1 <= len(win) <= ctx
        ref = oracle.forward(np.array([win]), p, L, H)[0, -1]
        assert oracle.rel_err(got[0], ref) <= TOL, step
    ref, margins = oracle.greedy(prompt, p, L, H, ctx, n)
    k = agreeing_prefix(margins)
    assert k >= 8 and out[:k] == ref[:k]


# ---- --prompts ----

def test_prompts_give_what_each_prompt_gives_alone(tmp_path, trained):
    """Greedy, every line is the text of its prompt run alone; an empty
    line starts from BOS alone, a line longer than the context keeps its
    last 64 tokens, a backslash in a prompt is a byte like any other."""
    model, _ = trained[64]
    lines = [b"The ", b"", b"What is " * 12, b"C:\\DOS\\", b"Q:"]
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes(b"\n".join(lines))  # the last line without newline
    out = generate("-m", model, "--prompts", prompts, "-n", 80,
                   "--temperature", 0)
    assert out.endswith(b"\n")
    got = out[:-1].split(b"\n")
    assert len(got) == len(lines)
    for line, prompt in zip(got, lines):
        alone = generate("-m", model, "--prompt", prompt.decode(), "-n", 80,
                         "--temperature", 0)
        assert unescape(line) == alone, prompt
    # (whether the text holds a newline is the trained model's to say:
    # test_prompts_output_lines_escape_backslash_and_newline holds the
    # escapes of a model that writes them)
    # the same from standard input
    assert generate("-m", model, "--prompts", "-", "-n", 80, "--temperature",
                    0, input=prompts.read_bytes()) == out


def test_prompts_sample_with_their_row_of_the_counter(tmp_path, trained):
    """Row r draws with u = sample_uniform(seed, step, r): row 0 is the
    prompt run alone, every row is the oracle's draw at every step."""
    model, p = trained[64]
    p = f64(p)
    lines = [b"The ", b"", b"Once upon a time " * 5, b"\\"]
    prompts = tmp_path / "prompts.txt"
    prompts.write_bytes(b"\n".join(lines) + b"\n")
    n, seed = 40, 5
    out = generate("-m", model, "--prompts", prompts, "-n", n, "--seed", seed,
                   "--logits", tmp_path / "lg.ats")
    rows = [unescape(x) for x in out[:-1].split(b"\n")]
    assert len(rows) == len(lines)
    assert rows[0] == generate("-m", model, "--prompt", "The ", "-n", n,
                               "--seed", seed)
    steps = logit_steps(tmp_path / "lg.ats")
    assert steps[0].shape == (len(lines), 257)
    for r, (prompt, drawn) in enumerate(zip(lines, rows)):
        for step, win in enumerate(windows(prompt, drawn, n, 64)):
            lg = oracle.forward(np.array([win]), p, 2, 2)[0, -1]
            assert oracle.rel_err(steps[step][r], lg) <= TOL, (r, step)
            u = oracle.sample_uniform(seed, step, r)
            tok = oracle.sample(lg, 1.0, 0, u)
            if step < len(drawn):
                assert tok == drawn[step], (r, step)
            else:
                assert tok >= BOS, (r, step)
    assert len({bytes(x) for x in rows}) == len(rows)


def constant_model(tmp, tok, name="const.ats", value=1):
    """A model whose logits are value (1) for token tok and 0 elsewhere at
    every position: LNf gives all ones (weight 0, bias 1) and lm_head is
    value in column tok."""
    rng = np.random.default_rng(tok)
    path, p = full_model(tmp, rng, 1, 1, 4, 257, 8, name=name)
    p["lnf.weight"][:] = 0
    p["lnf.bias"][:] = 1
    p["lm_head"][:] = 0
    p["lm_head"][:, tok] = value
    cfg = dict(n_layer=1, n_head=1, d_model=4, ctx=8, vocab=257)
    with open(path, "wb") as f:
        f.write(pack(tmp, [("config", np.zeros(0, np.int32))] + list(p.items()),
                     [f"config:{k}={v}" for k, v in cfg.items()]))
    return path


def test_prompts_output_lines_escape_backslash_and_newline(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_bytes(b"a\n\nb\\c\n")
    for tok, line in ((ord("\\"), b"\\\\" * 5), (ord("\n"), b"\\n" * 5),
                      (ord("x"), b"x" * 5), (BOS, b"")):
        model = constant_model(tmp_path, tok)
        for temp in ("0", "0.01"):
            out = generate("-m", model, "--prompts", prompts, "-n", 5,
                           "--temperature", temp)
            assert out == (line + b"\n") * 3, (tok, temp)
    # -n 0: one empty line per prompt
    assert generate("-m", model, "--prompts", prompts, "-n", 0) == b"\n" * 3


# ---- --top-p ----

@pytest.mark.parametrize("temp", [1.0, 0.7])
@pytest.mark.parametrize("top_p", [0.5, 0.9])
@pytest.mark.parametrize("top_k", [0, 5])
def test_top_p_follows_the_documented_draws(tmp_path, temp, top_p, top_k):
    model, p = gen_model(tmp_path, seed=41, ctx=16)
    n, seed = 12, 9
    out = generate("-m", model, "--prompt", "hi", "-n", n, "--temperature", temp,
                   "--top-k", top_k, "--top-p", top_p, "--seed", seed)
    for step, win in enumerate(windows(b"hi", out, n, 16)):
        lg = oracle.forward(np.array([win]), p, 2, 2)[0, -1]
        tok = oracle.sample(lg, temp, top_k, oracle.sample_uniform(seed, step),
                            top_p)
        if step < len(out):
            assert tok == out[step], step
        else:
            assert tok >= BOS


def test_top_p_edges(tmp_path):
    """A tiny P keeps the most probable token alone (greedy); P 1 keeps
    them all (the default)."""
    model, _ = gen_model(tmp_path, seed=42, ctx=16)
    args = ["-m", model, "--prompt", "hey", "-n", 16, "--seed", 3]
    greedy = generate(*args, "--temperature", 0)
    assert generate(*args, "--top-p", 1e-9) == greedy
    assert generate(*args, "--top-p", 1e-9, "--temperature", 5) == greedy
    assert generate(*args, "--top-p", 1) == generate(*args)


# ---- --stats ----

def test_stats_line(tmp_path, trained):
    model, _ = trained[64]
    for extra, rows in (([], 1), (["--no-cache"], 1)):
        p = run("generate", "-m", model, "--prompt", "The ", "-n", 100,
                "--temperature", 0, "--stats", *extra, env=ONE, check=0)
        line = one_line_error(p, "generate")
        m = re.fullmatch(r"andrea-generate: (\d+) rows?, (\d+) prompt tokens "
                         r"encoded in (\d+\.\d) ms; (\d+) steps? in (\d+\.\d) ms: "
                         r"(\d+) tokens/s \((.+) \(fp32\)(, no cache)?\)", line)
        assert m, line
        assert int(m[1]) == rows and int(m[4]) == 100
        wins = windows(b"The ", p.stdout, 100, 64)
        # the first prefill, then each slide's re-encoding, all but the
        # token the next step feeds
        fed = len(wins[0]) - 1 + sum(len(w) - 1 for v, w in zip(wins, wins[1:])
                                     if len(w) <= len(v))
        assert int(m[2]) == (0 if extra else fed)
        assert bool(m[8]) == bool(extra)
    prompts = tmp_path / "p.txt"
    prompts.write_bytes(b"a\nb\n")
    p = run("generate", "-m", model, "--prompts", prompts, "-n", 3, "--stats",
            env=ONE, check=0)
    assert re.match(r"andrea-generate: 2 rows, 2 prompt tokens encoded in .* "
                    r"3 steps in", one_line_error(p, "generate"))


# ---- errors ----

def test_errors_of_the_new_options(tmp_path):
    model, _ = gen_model(tmp_path, seed=43)
    prompts = tmp_path / "p.txt"
    prompts.write_bytes(b"x\n")
    for bad, what in ((["--prompt", "a", "--prompts", prompts], "--prompts"),
                      (["--top-p", "0"], "--top-p"),
                      (["--top-p", "1.5"], "--top-p"),
                      (["--top-p", "-0.1"], "--top-p"),
                      (["--top-p", "x"], "--top-p"),
                      (["--precision", "fp16"], "--precision"),
                      (["--logits", "-"], "--logits"),
                      (["--logits", ""], "--logits: expected a file name"),
                      (["--prompts", ""], "--prompts: expected a file name"),
                      (["--capture", "q", "--capture-file", ""],
                       "--capture-file: expected a file name")):
        p = run("generate", "-m", model, *bad, check=2)
        assert what in one_line_error(p, "generate") and p.stdout == b"", bad
    missing = tmp_path / "missing.txt"
    p = run("generate", "-m", model, "--prompts", missing, check=1)
    assert str(missing) in one_line_error(p, "generate") and p.stdout == b""
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    p = run("generate", "-m", model, "--prompts", empty, check=1)
    assert "no prompts" in one_line_error(p, "generate") and p.stdout == b""
    # standard input is named <stdin>, as the other tools name it
    for data, what in ((b"", "<stdin>: no prompts"),
                       (b"x\n" * 4097, "<stdin>: more than 4096 prompts")):
        p = run("generate", "-m", model, "--prompts", "-", input=data, check=1)
        assert one_line_error(p, "generate").startswith(
            f"andrea-generate: {what}") and p.stdout == b""
    # nothing is written to --logits when the run fails before its first step
    lg = tmp_path / "lg.ats"
    run("generate", "-m", model, "--prompts", missing, "--logits", lg, check=1)
    assert not lg.exists()


def test_logits_without_a_finite_maximum_or_with_a_nan_fail(tmp_path):
    """A NaN logit (a broken model) fails the run, naming the model, step
    and row, greedy or not; it was once skipped, so that its token was
    quietly never drawn.  +inf fails too; -inf weighs 0."""
    for value in (np.nan, np.inf):
        model = constant_model(tmp_path, ord("x"), value=value)
        for args in (["--temperature", "0"], ["--top-k", "5"], []):
            p = run("generate", "-m", model, "--prompt", "a", "-n", 3, *args,
                    env=ONE, check=1)
            msg = one_line_error(p, "generate")
            assert f"{model}: step 0, row 0: logits that are not finite" in msg
            assert p.stdout == b"", (value, args)
    model = constant_model(tmp_path, ord("x"), value=-np.inf)
    out = generate("-m", model, "--prompt", "a", "-n", 200, "--seed", 4)
    assert len(out) > 100 and b"x" not in out


def test_stats_on_a_terminal_start_a_line_of_their_own(tmp_path):
    """On a terminal the --stats line goes below a text that does not end
    a line, not onto it; into a pipe the text is left as drawn."""
    import pty
    model = constant_model(tmp_path, ord("x"))
    args = [tool("generate"), "-m", model, "--prompt", "ab", "-n", 3,
            "--temperature", 0, "--stats"]
    master, slave = pty.openpty()
    try:
        p = subprocess.run([str(a) for a in args], stdout=slave,
                           stderr=subprocess.PIPE, timeout=60)
        shown = os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 0
    assert shown.replace(b"\r\n", b"\n") == b"xxx\n"
    assert p.stderr.startswith(b"andrea-generate: 1 row, ")
    assert generate("-m", model, "--prompt", "ab", "-n", 3, "--temperature",
                    0, "--stats") == b"xxx"


def test_outputs_may_not_replace_the_model_or_the_prompts(tmp_path):
    """--logits or --capture-file naming the model or the --prompts file
    (under any spelling) is a usage error before anything is written: the
    renamed output once replaced the model, and the run exited 0."""
    model, _ = gen_model(tmp_path, seed=45)
    model, prompts = Path(model), tmp_path / "p.txt"
    prompts.write_bytes(b"ab\n")
    before = {f: f.read_bytes() for f in (model, prompts)}
    for opt, out, what in (("--logits", model, "model"),
                           ("--logits", tmp_path / "." / "p.txt", "--prompts"),
                           ("--capture-file", f"{tmp_path}//p.txt",
                            "--prompts")):
        extra = ["--capture", "x"] if opt == "--capture-file" else []
        p = run("generate", "-m", model, "--prompts", prompts, "-n", 2, opt,
                out, *extra, check=2)
        assert f"{opt} {out} is the {what} file" in \
            one_line_error(p, "generate")
        assert p.stdout == b""
    assert before == {f: f.read_bytes() for f in (model, prompts)}


def test_capture_file_and_logits_cannot_share_a_file(tmp_path):
    """--capture-file and --logits naming one file under two spellings is
    a usage error before anything is written; the renamed --logits once
    replaced the captures, and the run exited 0."""
    model, _ = gen_model(tmp_path, seed=45)
    lg = tmp_path / "l.ats"
    for cap in (lg, tmp_path / "." / "l.ats", f"{tmp_path}//l.ats"):
        for exists in (False, True):
            if exists:
                lg.write_bytes(b"old")
            elif lg.exists():
                lg.unlink()
            p = run("generate", "-m", model, "-n", 2, "--logits", lg,
                    "--capture", "x", "--capture-file", cap, check=2)
            assert "--logits file too" in one_line_error(p, "generate")
            assert p.stdout == b""
            assert (lg.read_bytes() == b"old") if exists else not lg.exists()
    # two files are fine
    run("generate", "-m", model, "-n", 2, "--logits", lg, "--capture", "x",
        "--capture-file", tmp_path / "c.ats", check=0)
    assert [r.name for r in atsfmt.read(lg.read_bytes())] == ["logits"] * 2


def test_no_cache_captures_name_their_row(tmp_path):
    """With --no-cache a step runs each row's window in its own pass, and
    each pass's records say whose (row=r), as the prompt passes of the
    cache do; they once said only the step."""
    model, _ = gen_model(tmp_path, seed=46, ctx=16)
    prompts = tmp_path / "p.txt"
    prompts.write_bytes(b"ab\nxyz\n")
    cap = tmp_path / "c.ats"
    run("generate", "-m", model, "--prompts", prompts, "-n", 2, "--no-cache",
        "--temperature", 0, "--capture", "logits", "--capture-file", cap,
        check=0)
    got = [(dict(r.attrs)["step"], dict(r.attrs).get("row"), r.dims)
           for r in atsfmt.read(cap.read_bytes())]
    assert got == [("0", "0", (1, 3, 257)), ("0", "1", (1, 4, 257)),
                   ("1", "0", (1, 4, 257)), ("1", "1", (1, 5, 257))], got


def test_long_prompts_give_the_text_of_their_window(tmp_path):
    """Prompts far longer than the context give the text of their last ctx
    bytes, as the page says: three lines of a million bytes against their
    last 16 bytes, in one batch.  (Each row keeps only its window's tokens;
    what that saves is memory, which is a benchmark's to measure, not a
    test's: under the sanitizers freed memory is held back.)"""
    line = bytes(range(97, 123)) * 40000
    model, _ = gen_model(tmp_path, seed=47, ctx=16)
    short, long = tmp_path / "s.txt", tmp_path / "l.txt"
    short.write_bytes((line[-16:] + b"\n") * 3)
    long.write_bytes((line + b"\n") * 3)
    assert generate("-m", model, "--prompts", long, "-n", 8, "--seed", 3) == \
        generate("-m", model, "--prompts", short, "-n", 8, "--seed", 3)


def test_andrea_zlevel_sets_the_files_compression(tmp_path):
    """generate takes no -z, but ANDREA_ZLEVEL compresses its --logits and
    --capture-file records (level 0 stores them, 9 deflates them best),
    and a bad value is a usage error (the variable was once ignored)."""
    model, _ = gen_model(tmp_path, seed=44, C=64)
    size = {}
    for z in ("0", "9"):
        lg, cap = tmp_path / f"l{z}.ats", tmp_path / f"c{z}.ats"
        run("generate", "-m", model, "--prompt", "ab", "-n", 8, "--logits",
            lg, "--capture", "x", "--capture-file", cap,
            env={"ANDREA_ZLEVEL": z}, check=0)
        size[z] = (lg.stat().st_size, cap.stat().st_size)
    assert size["0"][0] > size["9"][0] and size["0"][1] > size["9"][1], size
    p = run("generate", "-m", model, "--prompt", "ab", "-n", 2, "--logits",
            tmp_path / "x.ats", env={"ANDREA_ZLEVEL": "x"}, check=2)
    assert "ANDREA_ZLEVEL='x'" in one_line_error(p, "generate")
    assert not (tmp_path / "x.ats").exists()


def test_a_closed_pipe_leaves_no_logits_file(tmp_path):
    """Standard output closed early ends the run quietly (SIGPIPE), and
    the --logits file, not complete, is not left behind, nor its
    temporary."""
    model = constant_model(tmp_path, ord("\n"))
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.Popen([tool("generate"), "-m", model, "-n", str(1 << 24),
                          "--temperature", "0", "--logits", out / "lg.ats"],
                         stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=tool_env(ONE))
    assert p.stdout.read(1) == b"\n"
    p.stdout.close()
    assert p.wait(timeout=60) == -signal.SIGPIPE
    assert p.stderr.read() == b""
    assert os.listdir(out) == []


def test_precision_beyond_fp32_needs_the_gpu(tmp_path):
    rng = np.random.default_rng(44)
    model, _ = full_model(tmp_path, rng, 1, 1, 4, 257, 8)
    x = pack(tmp_path, [("x", np.zeros((1, 2, 4), np.float32))])
    for prec in ("bf16", "tf32"):
        for prog, args, inp in (
                ("block", ["-m", model], x), ("logits", ["-m", model], x),
                ("generate", ["-m", model], None),
                ("train", ["--forward", "-m", model, "--text"], b"hi")):
            p = run(prog, *args, "--precision", prec, "--device", "cpu",
                    input=inp, check=1)
            msg = one_line_error(p, prog)
            assert f"--precision {prec}" in msg and p.stdout == b"", (prog, prec)
    # fp32 is the CPU's own
    out = run("logits", "-m", model, "--precision", "fp32", "--device", "cpu",
              input=x, check=0).stdout
    assert [r.name for r in atsfmt.read(out)] == ["logits"]
