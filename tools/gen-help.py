"""gen-help.py - writes cmd/help/andrea-NAME.h from man/man1/andrea-NAME.1:
the tool's --help text, its SYNOPSIS as man prints it at 80 columns, then
one entry per option of OPTIONS, in the page's order, with the first
sentence of the option's paragraph.  The page is the one source; run
`make help` after changing a page (tests/test_manpages.py checks that the
headers are up to date).

    python3 tools/gen-help.py [PAGE ...]    (default: every man1 page)
"""
import glob
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WIDTH = 80
TAG = 24  # the column descriptions start at


def render(page, width):
    env = {**os.environ, "MANWIDTH": str(width), "LC_ALL": "C",
           "MAN_KEEP_FORMATTING": ""}
    env.pop("MANROFFOPT", None)
    out = subprocess.run(["man", "-l", page], capture_output=True, text=True,
                         env=env, check=True).stdout
    return re.sub(r".\x08", "", out)


def section(text, name):
    body = text.split(f"\n{name}\n", 1)[1]
    return re.split(r"\n(?=[A-Z][A-Z ]+\n)", body, maxsplit=1)[0]


LONG = 160  # a first sentence longer than this is cut at a ; or :


def first_sentence(par):
    m = re.search(r"(?<=[A-Za-z0-9)\]'\"])\.(\s|$)", par)
    s = par[:m.start() + 1] if m else par
    # a section of the page named as "above" is not above in --help
    s = re.sub(r"(\(|see )([A-Z][A-Za-z ]*?) above\b",
               r"\1\2 in the manual page", s)
    s = re.sub(r"\((see|as) above\)", r"(\1 the manual page)", s)
    s = re.sub(r"\bas above\b", "as the manual page says", s)
    if len(s) <= LONG:
        return s
    depth = 0
    for i, ch in enumerate(s[:LONG]):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and ch in ";:" and i > 20:
            return s[:i] + "."
    return s[:s.rfind(" ", 0, LONG - 3)] + "..."


def is_tag(line):
    """A line of OPTIONS that names options: at the tags' indent, a dash."""
    return line.startswith("       ") and not line.startswith("        ") \
        and line.strip().startswith("-")


def options(text):
    """[(tags, first sentence)] of OPTIONS, rendered without wrapping:
    tags the lines naming options that share the paragraph (.TP, .TQ)."""
    lines = section(text, "OPTIONS").split("\n")
    out, held = [], []
    for i, line in enumerate(lines):
        if not is_tag(line):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if is_tag(nxt):  # a .TQ follows: the paragraph is both lines'
            held.append(line.strip())
            continue
        if nxt.startswith(" " * 14) and nxt.strip():
            tag, par = line.strip(), nxt.strip()
        elif len(line) > 14 and line[13] == " " and line[14] != " ":
            # a tag of up to six columns shares the line with its paragraph
            tag, par = line[7:14].strip(), line[14:].strip()
        else:  # a paragraph of the section that names options
            held = []
            continue
        # a paragraph past the rendering width comes justified: its
        # spaces are one again
        par = " ".join(par.replace("<sqrt>", "sqrt ").split())
        out.append((held + [tag], first_sentence(par)))
        held = []
    return out


ESCAPES = [("\\-", "-"), ("\\fB", ""), ("\\fI", ""), ("\\fR", ""),
           ("\\fP", ""), ("\\&", ""), ("\\(aq", "'")]


def words(args):
    """The arguments of a man macro line (double quotes group)."""
    return [a[1:-1] if a.startswith('"') else a
            for a in re.findall(r'"[^"]*"|\S+', args)]


def synopsis(page):
    """The page's SYNOPSIS as plain text, its .br breaks kept, each macro
    line one word (.B joins its arguments with spaces; .RB, .IR and kin
    alternate fonts, so they join theirs without), continuation lines
    indented under the first operand."""
    src = open(page).read().split("\n.SH SYNOPSIS\n", 1)[1].split("\n.SH ", 1)[0]
    lines, cur = [], []
    for raw in src.split("\n"):
        line = raw
        for roff, plain in ESCAPES:
            line = line.replace(roff, plain)
        if raw == ".br":
            lines.append(" ".join(cur))
            cur = []
        elif raw.startswith("."):
            macro, _, args = line.partition(" ")
            sep = " " if macro in (".B", ".I") else ""
            cur.append(sep.join(words(args)))
        elif line.strip():
            cur.append(line.strip())
    lines.append(" ".join(cur))
    prog = lines[0].split(" ", 1)[0]
    indent = " " * len(f"usage: {prog} ")
    text = ""
    for i, line in enumerate(lines):
        # a second form starts at the program's name, under "usage: "'s end
        lead = "usage: " if i == 0 else "       " if \
            line.startswith(prog + " ") else indent
        text += wrap(line, lead, indent)
    return text


def groups(line):
    """The words of line, a [...] group (nested ones too) one word."""
    out, cur, depth = [], "", 0
    for ch in line:
        if ch == " " and depth == 0:
            if cur:
                out.append(cur)
            cur = ""
            continue
        depth += (ch == "[") - (ch == "]")
        cur += ch
    return out + ([cur] if cur else [])


def wrap(line, lead, indent):
    """line after lead, broken at WIDTH between its [...] groups."""
    out, cur = "", lead
    for tok in groups(line):
        if cur.strip() and len(cur) + 1 + len(tok) > WIDTH and \
                cur != lead:
            out += cur + "\n"
            cur = indent
        cur += ("" if cur in (lead, indent) else " ") + tok
    return out + cur + "\n"


def help_text(page):
    text = synopsis(page) + "\noptions (see the man page for more):\n"
    for tags, sentence in options(render(page, 1000)):
        text += "".join(f"  {tag}\n" for tag in tags[:-1])
        first = f"  {tags[-1]}"
        if len(first) >= TAG - 1:
            text += first + "\n"
            first = ""
        wrapped = textwrap.wrap(sentence, WIDTH - TAG,
                                break_on_hyphens=False) or [""]
        text += first.ljust(TAG) + wrapped[0] + "\n"
        text += "".join(" " * TAG + w + "\n" for w in wrapped[1:])
    return text


def c_string(text):
    lines = text.split("\n")[:-1]
    body = "\n".join('\t"' + line.replace("\\", "\\\\").replace('"', '\\"') +
                     '\\n"' for line in lines)
    return body


def header(page):
    name = os.path.basename(page)[:-2]
    return (f"/* {name}'s --help, written by tools/gen-help.py from "
            f"man/man1/{name}.1:\n * do not edit; run `make help`. */\n"
            f"static const char usage[] =\n{c_string(help_text(page))};\n")


def main(pages):
    pages = pages or sorted(glob.glob(os.path.join(ROOT, "man", "man1", "*.1")))
    os.makedirs(os.path.join(ROOT, "cmd", "help"), exist_ok=True)
    for page in pages:
        name = os.path.basename(page)[:-2]
        with open(os.path.join(ROOT, "cmd", "help", f"{name}.h"), "w") as f:
            f.write(header(page))


if __name__ == "__main__":
    main(sys.argv[1:])
