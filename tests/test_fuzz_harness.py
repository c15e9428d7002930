"""The argv fuzz target (fuzz/fuzz_argv.c) keeps its promise: it runs
every tool's option parsing and stops where the tool turns to work, so
that it never reads or writes a file.  A tool that hands its work to a
function of lib/ the harness does not stop at (as andrea-train did with
train_run) trains, writes its model into the fuzzer's folder and times
out; this replays the seed command lines of fuzz/make-corpus.sh, and
more that reach each tool's work, in an empty folder.  Needs clang with
libFuzzer (Debian: clang); skipped without it.
"""
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

# Command lines that pass every check of their options, so that the tool
# would go on to its work; beside the seeds of fuzz/make-corpus.sh.
WORKING = [
    "andrea-train -o m.ats --steps 0 --config tiny",
    "andrea-train -o m.ats --steps 0 --config tiny --gpus 2 --device cuda",
    "andrea-train -o m.ats --steps 0 --config tiny --rank 0 --world 2 "
    "--init file:id --device cuda",
    "andrea-train --forward --tokens 1,2 --config tiny -o f.ats",
    "andrea-embed --tokens 1,2 -o x.ats",
    "andrea-import -o g.ats gpt2",
    "andrea-export -m m.ats out",
    "andrea-unpack -d out x.ats",
    "andrea-generate --prompt hi -n 2",
    "andrea-heads -m m.ats --text t.txt",
    "andrea-heads --tokens 15",  # the default model, seeded: a timeout
    "andrea-lens --token 1 x.ats",
    "andrea-patch --clean a.ats --corrupted b.ats --answer 1 --wrong 2",
    "andrea-tokenize --pieces t.txt",
]


def seed_lines():
    with open(os.path.join(ROOT, "fuzz", "make-corpus.sh")) as f:
        text = f.read()
    body = text.split("<<'LINES'\n", 1)[1].split("\nLINES\n", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def libfuzzer_works(tmp):
    cc = shutil.which("clang-14") or shutil.which("clang")
    if not cc:
        return False
    src = tmp / "probe.c"
    src.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                   "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                   "\n{ return 0; }\n")
    p = subprocess.run([cc, "-fsanitize=fuzzer", "-o", tmp / "probe", src],
                       capture_output=True)
    return p.returncode == 0


def test_argv_target_stops_before_work(tmp_path):
    if not libfuzzer_works(tmp_path):
        pytest.skip("no clang with libFuzzer")
    p = subprocess.run(["make", "-s", "build/fuzz/fuzz_argv"], cwd=ROOT,
                       capture_output=True, timeout=900)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    lines = seed_lines()
    assert any(line.startswith("andrea-train -o m.ats --steps 0")
               for line in lines), "make-corpus.sh's seeds changed form"
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for n, line in enumerate(lines + WORKING):
        (inputs / f"cmd{n}").write_bytes(line.replace(" ", "\0").encode())
    work = tmp_path / "work"
    work.mkdir()
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    env["TMPDIR"] = str(temp)
    # -runs=0: each input once; a unit past -timeout is a failure
    p = subprocess.run([os.path.join(ROOT, "build", "fuzz", "fuzz_argv"),
                        "-runs=0", "-timeout=30", "-close_fd_mask=2",
                        "-detect_leaks=0", str(inputs)],
                       cwd=work, env=env, capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    assert sorted(os.listdir(work)) == [], "the harness wrote files"
    assert sorted(os.listdir(temp)) == [], "the harness wrote files"


def test_every_target_runs_its_seeds(tmp_path):
    """Each target (fuzz/fuzz.mk's FUZZ_NAMES) over the seed corpus
    fuzz/make-corpus.sh makes from the tools in bin/ and over its kept
    regression inputs, each input once: no sanitizer report, no abort of
    the harness's own checks (a checkpoint's layout counted right, a
    refusal in one line, a tokenizer that round-trips)."""
    if not libfuzzer_works(tmp_path):
        pytest.skip("no clang with libFuzzer")
    with open(os.path.join(ROOT, "fuzz", "fuzz.mk")) as f:
        mk = f.read()
    names = mk.split("FUZZ_NAMES   :=", 1)[1].split("\nFUZZ_BINS", 1)[0]
    names = names.replace("\\\n", " ").split()
    assert "checkpoint" in names and "stream" in names, names
    p = subprocess.run(["make", "-s", "fuzz-bins"], cwd=ROOT,
                       capture_output=True, timeout=1800)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    corpus = tmp_path / "corpus"
    p = subprocess.run(["sh", os.path.join(ROOT, "fuzz", "make-corpus.sh"),
                        str(corpus)], capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    env["TMPDIR"] = str(temp)
    for name in names:
        if name == "argv":  # test_argv_target_stops_before_work's
            continue
        seeds = corpus / name
        assert len(os.listdir(seeds)) >= 1, f"no seeds for {name}"
        dirs = [str(seeds)]
        kept = os.path.join(ROOT, "tests", "fuzz-regressions", name)
        if os.path.isdir(kept) and os.listdir(kept):
            dirs.append(kept)
        p = subprocess.run([os.path.join(ROOT, "build", "fuzz", f"fuzz_{name}"),
                            "-runs=0", "-timeout=30", "-rss_limit_mb=2048",
                            *dirs], cwd=tmp_path, env=env,
                           capture_output=True, timeout=600)
        assert p.returncode == 0, (
            f"fuzz_{name}: " + p.stderr.decode(errors="replace")[-3000:])
