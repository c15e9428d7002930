"""Every shell example of the pages runs (issue 19): README.md's tour
(its GPT-2 block is tests/test_tokenize.py's), andrea(7)'s sessions (the
GPT-2 one is tests/test_tokenize.py's too), andrea-model(5)'s, and the
man1 pages': a page's
EXAMPLES blocks run in order, with sh -e, in one fresh directory holding
the files the examples name but do not make (FIXTURES), bin/ first on
PATH and python3 the interpreter running this (with NumPy).  A block that
prints output on the page must print exactly that.  A block that needs what
this machine lacks (a GPU, transformers, minutes of training) is skipped
with its reason; the test prints how many blocks of each page ran."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, BIN, build_settings, tool_env
from test_manpages import example_blocks
from test_tokenize import trained  # noqa: F401 (the fixture gpt2/ needs)

PAGES = sorted(f"man1/{p}" for p in os.listdir(os.path.join(ROOT, "man", "man1")))

# The files examples name without making them, and how to make them (sh,
# in order); gpt2/ and gpt2.ats come from tests/test_tokenize.py's
# trained tokenizer where Hugging Face tokenizers is there.
FIXTURES = """
printf 'the cat sat on the mat' > in.txt
andrea-embed --text in.txt -o x.ats
cp x.ats ref.ats
andrea-qkv x.ats -o qkv.ats
andrea-scores qkv.ats -o scores.ats
andrea-mask scores.ats -o masked.ats
andrea-softmax masked.ats -o attn.ats
cp scores.ats run.ats
andrea-train --config tiny --steps 0 -o tiny.ats 2>/dev/null
cp tiny.ats m.ats
printf 'Q: what is a cat?\\nQ: where is the mat?\\nQ: who sat?\\n' > questions.txt
python3 -c "import numpy as np; np.save('tok.npy', np.array([[1, 2, 3]], np.int32))"
python3 -c "import numpy as np; np.save('x.npy', np.ones((2, 3), 'f4'))"
"""


def has_gpu():
    return os.environ.get("ANDREA_TEST_DEVICE") == "cuda"


def has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def gpus():
    """The GPUs the tests may use: none without ANDREA_TEST_DEVICE=cuda."""
    if not has_gpu():
        return 0
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return p.stdout.count("GPU ")


def why_skip(cmds):
    """The reason this machine cannot run a block, or None."""
    if cmds.startswith("mpirun "):
        return "needs mpirun and two hosts"
    if "--device cuda" in cmds and not has_gpu():
        return "needs a GPU"
    ranks = re.search(r"--(?:gpus|world) (\d+)", cmds)
    if ranks and gpus() < int(ranks.group(1)):
        return f"needs {ranks.group(1)} GPUs"
    if "transformers" in cmds and not has("transformers"):
        return "needs Hugging Face transformers"
    if "--steps 2000" in cmds or "--resume --data fortunes.txt" in cmds:
        return "trains for minutes (andrea(7)'s TRAINING session runs its 2000 steps)"
    return None


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixtures")
    subprocess.run(["sh", "-ec", FIXTURES], cwd=d, env=page_env(d), check=True,
                   timeout=300)
    return d


def page_env(tmp):
    shim = os.path.join(tmp, ".shim")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "python3"), "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    os.chmod(os.path.join(shim, "python3"), 0o755)
    env = tool_env({"OMP_NUM_THREADS": "1"})
    env["PATH"] = os.pathsep.join([shim, BIN, env["PATH"]])
    return env


# the pages' prompt, whose names are one token each in GPT-2's vocabulary
# (lens, patch): the tokenizer here learns them from it
IOI = b"When Mary and John went to the store, John gave a drink to Mary.\n"


def gpt2_files(request, tmp):
    """gpt2/ as a user downloads it (tests/test_tokenize.py's, with a
    tokenizer that knows the names) and gpt2.ats imported from it, in
    tmp; skips where tokenizers is missing."""
    from test_tokenize import fortunes, gpt2_dir, train_tokenizer
    trained = request.getfixturevalue("trained")
    d = gpt2_dir(tmp, trained, tok=train_tokenizer(fortunes()[0] + IOI * 300))
    subprocess.run([os.path.join(BIN, "andrea-import"), "-o", tmp / "gpt2.ats",
                    d], env=tool_env(), check=True, capture_output=True)


@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_every_example_of_the_page_runs(request, tmp_path, fixtures, page):
    blocks = example_blocks(page)
    if not blocks:
        pytest.skip("the page has no examples")
    for f in os.listdir(fixtures):
        if not f.startswith("."):
            shutil.copy(fixtures / f, tmp_path / f)
    if any("gpt2" in c for c, _ in blocks):
        gpt2_files(request, tmp_path)
    skipped = [why_skip(c) for c, _ in blocks if why_skip(c)]
    runnable = [(c, o) for c, o in blocks if not why_skip(c)]
    run_blocks(tmp_path, runnable)
    print(f"{page}: {len(runnable)} of {len(blocks)} examples ran"
          + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    assert runnable or skipped


def run_blocks(tmp, blocks, same=lambda want, got: got == want, timeout=300):
    """Runs each (commands, shown output) of blocks with sh -e in tmp, in
    order: each exits 0 and, where the page shows output, prints what
    same(shown, printed) accepts (exactly the shown text by default)."""
    env = page_env(tmp)
    for cmds, want in blocks:
        p = subprocess.run(["sh", "-ec", cmds], capture_output=True, env=env,
                           cwd=tmp, timeout=timeout)
        assert p.returncode == 0, (cmds, p.stderr.decode())
        if want is not None:
            assert same(want, p.stdout.decode()), \
                (cmds, p.stdout.decode(), p.stderr.decode())


MAP_ROW = set(".:-=+*#%@_ ")  # andrea-show --ascii's cells


def line_shown_as(want, got):
    """Whether the line got is want, each "..." of want any text: its
    pieces in order, the first at the start and the last at the end, each
    middle one where it first fits (which never loses a match).  A row of
    an --ascii map (its cells alone, dots among them) is literal, so
    that a map is held cell by cell."""
    parts = want.split("...")
    if len(parts) == 1 or (set(want) <= MAP_ROW and set(want) - {"."}):
        return want == got
    head, tail = parts[0], parts[-1]
    if len(got) < len(head) + len(tail) or not got.startswith(head) or \
            not got.endswith(tail):
        return False
    at, end = len(head), len(got) - len(tail)
    for part in parts[1:-1]:
        i = got.find(part, at, end)
        if i < 0:
            return False
        at = i + len(part)
    return True


def shown_as(want, got):
    """Whether got is what the page shows as want, where "..." within a
    line stands for any text and a line of "..." alone for any lines; got
    ends each of its lines with a newline."""
    import functools
    if got and not got.endswith("\n"):
        return False
    w, g = want.split("\n"), got[:-1].split("\n") if got else []
    w = w[:-1] if w and w[-1] == "" else w

    @functools.lru_cache(maxsize=None)
    def match(i, j):  # want's lines from i against got's from j
        if i == len(w):
            return j == len(g)
        if w[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(g) + 1))
        return j < len(g) and line_shown_as(w[i], g[j]) and \
            match(i + 1, j + 1)
    return match(0, 0)


def test_shown_as_reads_the_pages_wildcards():
    """'...' in a line is any text of that line, a line of '...' alone any
    lines (none too); a map row's dots are cells; the output ends each
    line with a newline."""
    assert shown_as("a\n", "a\n") and not shown_as("a\n", "a")
    assert shown_as("x 2.594...\n", "x 2.5941234\n")
    assert not shown_as("x 2.594...\n", "x 2.5951234\n")
    assert shown_as("min=1.9...e-11 max\n", "min=1.98e-11 max\n")
    assert not shown_as("a...b\n", "a\nb\n")  # not across lines
    assert shown_as("a\n...\nb\n", "a\nq\nr\nb\n")
    assert shown_as("a\n...\nb\n", "a\nb\n")
    assert not shown_as("a\n...\nb\n", "a\nq\n")
    assert shown_as("...\n", "") and shown_as("", "")
    row = "..................*-__"
    assert shown_as(row + "\n", row + "\n")
    assert not shown_as(row + "\n", "." + row + "\n")  # a cell more
    assert not shown_as(("." * 40 + "#\n") * 30, ("." * 40 + "%\n") * 30)


def skip_long_training():
    """Where the fortunes are missing, or under the sanitizers (a minute of
    training becomes several; the plain build's run covers the pages)."""
    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.skip("no fortunes text (Debian's fortunes package)")
    if "SAN=1" in build_settings():
        pytest.skip("trains for minutes under the sanitizers")


# andrea(7)'s sessions, each in order in one directory; TRAINING trains
# tiny for 2000 steps on the fortunes as printed (about a minute), INDUCTION
# HEADS andrea-12m on the GPU (16 seconds on an H200), and every block after
# its training needs that model
ANDREA7 = ["DESCRIPTION", "A WALK THROUGH ONE HEAD", "EXPERIMENTS", "TRAINING",
           "INDUCTION HEADS"]


@pytest.mark.parametrize("section", ANDREA7)
def test_every_session_of_andrea7_runs_as_printed(tmp_path, section):
    blocks = [(c, o) for c, o in example_blocks("man7/andrea.7", section)
              if c.strip()]  # formulas and tables are not shell
    if section in ("TRAINING", "INDUCTION HEADS"):
        skip_long_training()
    if section == "INDUCTION HEADS" and not has_gpu():
        pytest.skip("trains andrea-12m on the GPU (ANDREA_TEST_DEVICE=cuda)")
    run_blocks(tmp_path, blocks, shown_as, timeout=600)
    print(f"andrea(7) {section}: {len(blocks)} examples ran")


def test_the_readme_tour_runs(tmp_path):
    """README.md's short tour, command by command with bash (a user's
    shell), after make: each exits 0, or 1 where its comment says so."""
    text = open(os.path.join(ROOT, "README.md")).read()
    tour = text.split("## A short tour\n", 1)[1].split("\n## ", 1)[0]
    tour = tour.split("\n\n`man 7 andrea`", 1)[0]
    lines = [line[4:] for line in tour.splitlines() if line.startswith("    ")]
    cmds = []
    for line in lines:
        if cmds and cmds[-1].rstrip().endswith("\\"):
            cmds[-1] += "\n" + line
        elif line.strip() and not line.lstrip().startswith("#"):
            cmds.append(line)
    assert cmds[0].startswith("make ") and len(cmds) > 10
    skip_long_training()
    env = page_env(tmp_path)
    subprocess.run([sys.executable, "-c", "import numpy as np\n"
                    "r = np.random.default_rng(0)\n"
                    "for n in 'qkv': np.save(n + '.npy', "
                    "r.standard_normal((1, 2, 5, 8)))"], cwd=tmp_path,
                   check=True)  # the user's own arrays, float64 as NumPy makes
    for c in cmds[1:]:  # the build is done
        p = subprocess.run(["bash", "-c", c], capture_output=True, env=env,
                           cwd=tmp_path, timeout=600)
        want = 1 if "# exit status 1" in c else 0
        assert p.returncode == want, (c, p.stderr.decode())
    print(f"README tour: {len(cmds) - 1} commands ran")


def test_the_readme_several_gpus_commands_run(tmp_path):
    """README.md's commands for several GPUs, in order, where the machine
    has the GPUs they name."""
    text = open(os.path.join(ROOT, "README.md")).read()
    part = text.split("### Training on several GPUs\n", 1)[1]
    part = part.split("\n## ", 1)[0]
    cmds = []
    for line in part.splitlines():
        if not line.startswith("    "):
            continue
        if cmds and cmds[-1].rstrip().endswith("\\"):
            cmds[-1] += "\n" + line[4:]
        else:
            cmds.append(line[4:])
    assert len(cmds) == 3 and cmds[1].startswith("andrea-train --gpus")
    why = [why_skip(c) for c in cmds if why_skip(c)]
    if why:
        pytest.skip(why[0])
    run_blocks(tmp_path, [(c, None) for c in cmds])


def test_the_sessions_of_andrea_model5_run_as_printed(tmp_path):
    """andrea-model(5)'s two shell sessions (a model file made by hand and
    run through the stages; Wq of the default model read through an
    identity); its other blocks are messages and formulas."""
    blocks = [(c, o) for c, o in example_blocks("man5/andrea-model.5",
                                                "DESCRIPTION")
              if c.startswith("python3 ")]
    assert len(blocks) == 2
    run_blocks(tmp_path, blocks)
    assert (tmp_path / "y.ats").stat().st_size > 0
