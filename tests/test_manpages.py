"""Every executable has a man page whose SYNOPSIS is its --help text and
every page renders without warnings (the pages' examples are run by
test_page_examples.py)."""
import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, run, tool_env

PROGS = sorted(os.path.basename(p)[len("andrea-"):-2]
               for p in glob.glob(os.path.join(ROOT, "cmd", "andrea-*.c")))
PAGES = sorted(glob.glob(os.path.join(ROOT, "man", "man[157]", "*.[157]")))


def synopsis(page):
    """The SYNOPSIS of a man page as man renders it, as one line."""
    p = subprocess.run(["man", "-l", os.path.join(ROOT, "man", "man1", page)],
                       capture_output=True, text=True, check=True,
                       env={**os.environ, "MANWIDTH": "2000", "LC_ALL": "C",
                            "MAN_KEEP_FORMATTING": ""})
    text = re.sub(r".\x08", "", p.stdout)
    body = text.split("\nSYNOPSIS\n", 1)[1]
    body = re.split(r"\n[A-Z][A-Z ]+\n", body, maxsplit=1)[0]
    return " ".join(body.split())


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
@pytest.mark.parametrize("prog", PROGS)
def test_help_matches_synopsis(prog):
    assert os.path.exists(os.path.join(ROOT, "man", "man1", f"andrea-{prog}.1"))
    p = run(prog, "--help", check=0)
    usage = " ".join(p.stdout.decode().split("\n\noptions")[0].split())
    assert usage == "usage: " + synopsis(f"andrea-{prog}.1")
    assert run(prog, "--version", check=0).stdout.startswith(
        f"andrea-{prog} (andrea) ".encode())


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
@pytest.mark.parametrize("page", PAGES, ids=os.path.basename)
def test_man_page_renders(page):
    p = subprocess.run(["man", "--warnings", "-l", page], capture_output=True,
                       env={**os.environ, "MANWIDTH": "80"})
    assert p.returncode == 0 and p.stderr == b"", p.stderr


def option_tags(section):
    """The lines of a rendered OPTIONS section (unwrapped) that name
    options: a run of lines at the tags' indent (7) that start with a dash,
    followed by their paragraph at 14; or a tag of up to six columns that
    shares its line with the paragraph.  A paragraph at 7 is prose."""
    lines, tags, run = section.split("\n"), [], []
    for line in lines + [""]:
        if re.match(r" {7}-\S", line):
            run.append(line)
            continue
        if run and line.startswith(" " * 14):
            tags += [r.strip() for r in run]
        elif len(run) == 1 and len(run[0]) > 14 and run[0][13] == " " \
                and run[0][14] != " ":
            tags.append(run[0][7:14].strip())
        run = []
    return tags


@pytest.mark.skipif(shutil.which("man") is None, reason="man is missing")
def test_help_texts_are_those_the_pages_give(tmp_path):
    """cmd/help/*.h are tools/gen-help.py's output for today's pages (make
    help), and each --help lists the page's options in its order."""
    import runpy
    gen = runpy.run_path(os.path.join(ROOT, "tools", "gen-help.py"),
                         run_name="gen_help")
    for prog in PROGS:
        page = os.path.join(ROOT, "man", "man1", f"andrea-{prog}.1")
        with open(os.path.join(ROOT, "cmd", "help", f"andrea-{prog}.h")) as f:
            assert f.read() == gen["header"](page), f"make help ({prog})"
        text = gen["render"](page, 1000)
        tags = [t for ts, _ in gen["options"](text) for t in ts]
        shown = run(prog, "--help", check=0).stdout.decode()
        at = 0  # each in turn, after the one before (a tag may recur)
        for t in tags:
            at = shown.find("\n  " + t, at) + 1
            assert at > 0, (prog, t)
        assert len(tags) >= 3, prog
        # every line of OPTIONS that names options, read apart from
        # gen-help.py (it once dropped the first of a .TP/.TQ pair)
        section = text.split("\nOPTIONS\n", 1)[1]
        section = re.split(r"\n[A-Z][A-Z ]+\n", section, maxsplit=1)[0]
        named = option_tags(section)
        assert [t for t in named if "\n  " + t not in shown] == [], prog
        # the options every tool takes are on every page
        assert "-h, --help" in named and "--version" in named, prog


def test_every_page_is_referenced_and_present():
    assert len(PAGES) >= len(PROGS) + 2


# ---- the examples that show their output ----

# what starts a command line in an example: a command or an assignment
COMMANDS = ("andrea-", "printf ", "cmp ", "sed ", "echo ", "od ", "python3 ",
            "find ", "export ", "ls ", "cat ", "grep ", "for ", "seq ",
            "wait", "mpirun ")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
ROFF = [("\\e", "\\"), ("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'),
        ("\\&", ""), ("\\fB", ""), ("\\fI", ""), ("\\fR", ""), ("\\fP", "")]


def example_blocks(page, section="EXAMPLES", commands=COMMANDS):
    """[(commands, expected output)] of a section of a page (its .nf/.fi
    and .EX/.EE blocks), as text; a line is a command where it starts with
    one of commands or an assignment, or continues the one before (after
    a backslash, a pipe or &&, inside a double quote the command opened
    (python3 -c "...") or inside a for loop until its done), output
    otherwise."""
    text = open(os.path.join(ROOT, "man", page)).read()
    text = "\n" + text.split(f"\n.SH {section}\n", 1)[1].split("\n.SH ", 1)[0] + "\n"
    blocks = []
    for body in re.findall(r"\n\.(?:nf|EX)\n(.*?)\n\.(?:fi|EE)\n", text, re.S):
        cmds, out = [], []
        for line in body.split("\n"):
            for roff, plain in ROFF:
                line = line.replace(roff, plain)
            so_far = "\n".join(cmds)
            loops = len(re.findall(r"^for .*; do$", so_far, re.M)) - \
                len(re.findall(r"^done$", so_far, re.M))
            more = cmds and not out and (
                cmds[-1].rstrip().endswith(("\\", "|", "&&")) or
                so_far.count('"') % 2 == 1 or loops > 0)
            if more or line.startswith(commands) or ASSIGNMENT.match(line):
                cmds.append(line)
            else:
                out.append(line)
        blocks.append(("\n".join(cmds) + "\n", "\n".join(out) + "\n" if out else None))
    return blocks
