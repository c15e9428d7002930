"""The stream tools' output side (andrea-stream(5), tests/test_stream.py's
format end to end): full disks, closed pipes, outputs replaced whole or not
at all through links, pipes and missing folders; andrea-unpack's file names;
no stream read from a terminal; an attribute a stage adds never dropped.
"""
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import atsfmt
import stagekit
from conftest import one_line_error, run, tool
from test_stream import RNG, run_limited, save


# ------------------------------------------------------------- output side

def test_full_disk(tmp_path):
    src = save(tmp_path / "a.npy", RNG.standard_normal(1000).astype(np.float32))
    p = run("pack", "-o", "/dev/full", f"a={src}", check=1)
    assert "/dev/full: write error" in one_line_error(p, "pack")
    with open("/dev/full", "wb") as full:
        p = run_limited("pack", f"a={src}", stdout=full)
    assert p.returncode == 1
    assert "<stdout>: write error" in one_line_error(p, "pack")


def test_closed_pipe_ends_quietly(tmp_path):
    src = save(tmp_path / "a.npy", RNG.standard_normal(1 << 20)
               .astype(np.float32))
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([tool("pack"), f"a={src}"], stdout=w,
                           stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == -signal.SIGPIPE and p.stderr == b""


def test_atomic_output(tmp_path):
    arr = RNG.integers(0, 256, 300_000, dtype=np.uint8)  # incompressible
    src = save(tmp_path / "a.npy", arr)
    out = tmp_path / "out.ats"
    run("pack", "-o", out, f"a={src}", check=0)
    good = out.read_bytes()
    before = sorted(os.listdir(tmp_path))
    # a bad operand is found before anything is written
    p = run("pack", "-o", out, f"a={src}", f"b={tmp_path / 'no.npy'}",
            check=1)
    one_line_error(p, "pack")
    # a write that fails half way (file size limit, SIGXFSZ ignored)
    p = run_limited("pack", "-o", out, f"b={src}", fsize=64 << 10)
    assert p.returncode == 1
    assert "write error" in one_line_error(p, "pack")
    assert out.read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == before
    # and a successful rewrite replaces it
    small = save(tmp_path / "s.npy", np.ones(2, np.float32))
    run("pack", "-o", out, f"s={small}", check=0)
    assert [r.name for r in atsfmt.read(out.read_bytes())] == ["s"]
    assert sorted(os.listdir(tmp_path)) == before + ["s.npy"]


def test_pack_attributes_go_to_the_records_they_name(tmp_path):
    """-a NAME:KEY=VALUE: NAME ends at the last ':' before the first '='
    (a name may hold ':', a key not), the option reaches every record of
    that NAME, and a malformed option, one naming no operand or one
    setting a key of a name again is a usage error (the first of these
    was once dropped without a word, the last overrode)."""
    src = save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    out = run("pack", "-a", "a:b:k=v:w=1", "-a", "c:x=1", f"a:b={src}",
              f"c={src}", f"c={src}", check=0).stdout
    got = [(r.name, dict(r.attrs)) for r in atsfmt.read(out)]
    assert got == [("a:b", {"k": "v:w=1"}), ("c", {"x": "1"}), ("c", {"x": "1"})]
    for args, says in (
            (["-a", "ak=v"], "-a 'ak=v': expected NAME:KEY=VALUE"),
            (["-a", "a:=v"], "-a 'a:=v': expected NAME:KEY=VALUE"),
            (["-a", "a:k"], "-a 'a:k': expected NAME:KEY=VALUE"),
            (["-a", "b:k=v"], "-a 'b:k=v': names no NAME=FILE operand"),
            (["-a", "a:k=1", "-a", "a:k=2"],
             "-a 'a:k=2': sets k of that name again (after -a 'a:k=1')"),
            (["-a", "a:k!=1"], "-a 'a:k!=1': bad key or value")):
        p = run("pack", *args, f"a={src}", f"a={src}", check=2)
        assert says in one_line_error(p, "pack") and p.stdout == b"", args


def test_output_through_a_link_keeps_link_and_mode(tmp_path):
    """-o replaces a link's target and keeps the link, a replaced file
    keeps its permissions, a new one gets 0666 less the umask (as the
    shell's > would), and -o '' is a usage error before any work."""
    src = save(tmp_path / "a.npy", np.arange(5, dtype=np.float32))
    target, link = tmp_path / "t.ats", tmp_path / "l.ats"
    run("pack", "-o", target, f"a={src}", check=0)
    os.chmod(target, 0o640)
    os.symlink("t.ats", link)
    run("pack", "-o", link, f"b={src}", check=0)
    assert os.path.islink(link)
    assert [r.name for r in atsfmt.read(target.read_bytes())] == ["b"]
    assert os.stat(target).st_mode & 0o777 == 0o640
    old = os.umask(0o027)
    try:
        run("pack", "-o", tmp_path / "new.ats", f"a={src}", check=0)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new.ats").st_mode & 0o777 == 0o640
    before = sorted(os.listdir(tmp_path))
    p = run("pack", "-o", "", f"a={src}", check=2, cwd=tmp_path)
    assert "expected a file name" in one_line_error(p, "pack")
    assert sorted(os.listdir(tmp_path)) == before


def test_a_replaced_file_keeps_its_owner_and_its_other_names_the_old(tmp_path):
    """-o keeps a replaced file's owner and group where the tool may give
    them (root here: any; else a group of the user's), and replaces that
    name alone: a hard link to it keeps the earlier contents (andrea(7))."""
    src = save(tmp_path / "a.npy", np.arange(5, dtype=np.float32))
    target, other = tmp_path / "t.ats", tmp_path / "other.ats"
    run("pack", "-o", target, f"a={src}", check=0)
    os.link(target, other)
    before = other.read_bytes()
    root = os.geteuid() == 0
    if root:
        os.chown(target, 4321, 4322)
    run("pack", "-o", target, f"b={src}", check=0)
    assert [r.name for r in atsfmt.read(target.read_bytes())] == ["b"]
    assert other.read_bytes() == before
    st = os.stat(target)
    if root:
        assert (st.st_uid, st.st_gid) == (4321, 4322)
    else:  # a group of the user's other than the file's, where there is one
        other = [g for g in os.getgroups() if g != st.st_gid]
        if not other:
            pytest.skip("no second group to give the file")
        os.chown(target, -1, other[0])
        run("pack", "-o", target, f"a={src}", check=0)
        assert os.stat(target).st_gid == other[0]


def test_output_to_a_pipe_by_name(tmp_path):
    """-o /dev/stdout into a pipe, -o >(cmd) (a /dev/fd link to a pipe)
    and -o FIFO with its reader waiting are written in place, whole; the
    terminal check never opens the fifo ahead of the writer."""
    src = save(tmp_path / "a.npy", np.arange(7, dtype=np.float32))
    run("pack", "-z", 1, "-o", tmp_path / "w.ats", f"a={src}", check=0)
    want = (tmp_path / "w.ats").read_bytes()
    os.remove(tmp_path / "w.ats")
    p = subprocess.run([tool("pack"), "-z", "1", "-o", "/dev/stdout",
                        f"a={src}"], capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == want, p.stderr
    got = tmp_path / "got.ats"
    p = subprocess.run(["bash", "-c", f"'{tool('pack')}' -z 1 -o >(cat > "
                        f"'{got}') a='{src}'; wait"], capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    for _ in range(100):
        if got.exists() and got.stat().st_size == len(want):
            break
        time.sleep(0.05)
    assert got.read_bytes() == want
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    time.sleep(0.2)  # the reader waits in open()
    run("pack", "-z", 1, "-o", fifo, f"a={src}", check=0)
    assert reader.communicate(timeout=60)[0] == want
    assert sorted(os.listdir(tmp_path)) == ["a.npy", "fifo", "got.ats"]
    # without a level, a pipe by name is stored as standard output's pipe
    # is (it was deflated)
    stored = run("pack", "-z", 0, f"a={src}", check=0).stdout
    assert stored != want
    p = subprocess.run([tool("pack"), "-o", "/dev/stdout", f"a={src}"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stdout == stored, p.stderr
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    time.sleep(0.2)
    run("pack", "-o", fifo, f"a={src}", check=0)
    assert reader.communicate(timeout=60)[0] == stored


def test_unpack_replaces_npy_whole_or_not_at_all(tmp_path):
    """An .npy that cannot be written whole leaves the earlier one."""
    small = save(tmp_path / "s.npy", np.ones(3, np.float32))
    big = save(tmp_path / "b.npy", RNG.standard_normal(100_000)
               .astype(np.float32))
    out = tmp_path / "out"
    s = run("pack", f"x={small}", check=0).stdout
    run("unpack", "-d", out, input=s, check=0)
    good = (out / "x.npy").read_bytes()
    b = run("pack", f"x={big}", check=0).stdout
    p = run_limited("unpack", "-d", out, input=b, fsize=64 << 10)
    assert p.returncode == 1
    assert "write error" in one_line_error(p, "unpack")
    assert (out / "x.npy").read_bytes() == good
    assert os.listdir(out) == ["x.npy"]


def test_output_into_missing_directory(tmp_path):
    src = save(tmp_path / "a.npy", np.ones(2, np.float32))
    p = run("pack", "-o", tmp_path / "nodir" / "o.ats", f"a={src}", check=1)
    one_line_error(p, "pack")


def test_refuses_terminal(tmp_path):
    src = save(tmp_path / "a.npy", np.ones(2, np.float32))
    master, slave = os.openpty()
    try:
        for args in ([], ["-o", "-"]):
            p = subprocess.run([tool("pack"), *args, f"a={src}"],
                               stdout=slave, stderr=subprocess.PIPE,
                               timeout=60)
            assert p.returncode == 1
            assert "refusing to write binary data to a terminal" in \
                one_line_error(p, "pack")
        p = subprocess.run([tool("pack"), "-f", f"a={src}"], stdout=slave,
                           stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 0 and p.stderr == b""
    finally:
        os.close(master)
        os.close(slave)


# ----------------------------------------------------------- andrea-unpack

@pytest.mark.parametrize("name", ["a/b", "../evil", "..", ".", "/abs",
                                  "dir/"])
def test_unpack_refuses_names_leaving_dir(tmp_path, name):
    data = atsfmt.stream(atsfmt.record(name, "u8", (2,), b"\1\2"))
    out = tmp_path / "d"
    p = run("unpack", "-d", out, input=data, check=1)
    line = one_line_error(p, "unpack")
    assert line == (f"andrea-unpack: <stdin>: record 1 '{name}': the name "
                    f"would leave {out}")
    assert os.listdir(out) == []
    assert sorted(os.listdir(tmp_path)) == ["d"]


def test_unpack_long_names(tmp_path):
    """A name of 251 bytes makes a file name of 255, the most a name may
    have (its temporary is cut to fit); one of 252 is refused in one line
    naming the record, before anything is written."""
    longest = "a" * 251
    data = atsfmt.stream(atsfmt.record(longest, "u8", (2,), b"\1\2"))
    run("unpack", "-d", tmp_path / "d", input=data, check=0)
    assert os.listdir(tmp_path / "d") == [longest + ".npy"]
    assert np.load(tmp_path / "d" / (longest + ".npy")).tolist() == [1, 2]
    over = "b" * 252
    data = atsfmt.stream(atsfmt.record(over, "u8", (2,), b"\1\2"))
    p = run("unpack", "-d", tmp_path / "e", input=data, check=1)
    assert one_line_error(p, "unpack") == (
        f"andrea-unpack: <stdin>: record 1 '{over}': the file name {over}.npy "
        "would be 256 bytes, over the 255 a name may have")
    assert os.listdir(tmp_path / "e") == []
    # a stream written by name with -o: the temporary fits as well
    out = tmp_path / ("s" * 255)
    run("pack", "-o", out, f"x={tmp_path / 'd' / (longest + '.npy')}", check=0)
    assert run("show", out).returncode == 0


def test_unpack_names_repeated_records_apart(tmp_path):
    """A later record of a name already written goes to NAME.layerL.headH
    (its attributes), else NAME.N (its record number), across FILEs too:
    nothing is overwritten or refused."""
    r = atsfmt.record("x", "u8", (2,), b"\1\2")
    r2 = atsfmt.record("x", "u8", (1,), b"\3", attrs=[("layer", "1"), ("head", "2")])
    r3 = atsfmt.record("x", "u8", (1,), b"\4", attrs=[("layer", "1"), ("head", "2")])
    data = atsfmt.stream(r, atsfmt.record("y", "u8", (1,), b"\5"), r2, r3, r)
    run("unpack", "-d", tmp_path / "d", input=data, check=0)
    got = {f: np.load(tmp_path / "d" / f).tolist()
           for f in sorted(os.listdir(tmp_path / "d"))}
    assert got == {"x.npy": [1, 2], "y.npy": [5], "x.layer1.head2.npy": [3],
                   "x.4.npy": [4], "x.5.npy": [1, 2]}
    (tmp_path / "s.ats").write_bytes(atsfmt.stream(r))
    run("unpack", "-d", tmp_path / "e", tmp_path / "s.ats", tmp_path / "s.ats",
        check=0)
    assert sorted(os.listdir(tmp_path / "e")) == ["x.2.npy", "x.npy"]
    # a record named like a numbered one: one more suffix
    named = atsfmt.record("x.3", "u8", (1,), b"\7")
    run("unpack", "-d", tmp_path / "f", input=atsfmt.stream(r, named, r), check=0)
    assert sorted(os.listdir(tmp_path / "f")) == ["x.3.1.npy", "x.3.npy", "x.npy"]


def test_unpack_creates_dir(tmp_path):
    data = atsfmt.stream(atsfmt.record("x", "u8", (2,), b"\1\2"))
    out = tmp_path / "new"
    run("unpack", "-d", out, input=data, check=0)
    assert np.load(out / "x.npy").tolist() == [1, 2]
    run("unpack", "-d", out, input=data, check=0)  # an existing DIR is fine
    p = run("unpack", "-d", tmp_path / "no" / "such", input=data, check=1)
    one_line_error(p, "unpack")
    # without -d the current directory
    run("unpack", input=data, cwd=out, check=0)
    p = run("unpack", tmp_path / "missing.ats", cwd=out, check=1)
    one_line_error(p, "unpack")


def test_unpack_usage_errors(tmp_path):
    for args in (["-z", "1"], ["-o", "x"], ["--bogus"], ["-d"],
                 ["--threads", "x"]):
        p = run("unpack", *args, input=b"", cwd=tmp_path, check=2)
        one_line_error(p, "unpack")


@pytest.mark.parametrize("prog,args,force", [
    ("show", [], False), ("unpack", ["-d", "out"], False),
    ("qkv", [], True), ("softmax", [], True), ("tokenize", ["--decode"], True)])
def test_a_stream_is_not_read_from_a_terminal(tmp_path, prog, args, force):
    """As gzip -d refuses, a binary reader refuses a terminal on standard
    input at once, in one line; -f, where the tool has it, reads anyway."""
    import pty
    master, slave = pty.openpty()
    try:
        p = subprocess.run([tool(prog), *args], stdin=slave, capture_output=True,
                           cwd=tmp_path, timeout=20)
    finally:
        os.close(master)
        os.close(slave)
    assert p.returncode == 1
    line = one_line_error(p, prog)
    assert "refusing to read a stream from a terminal" in line
    assert ("-f reads it anyway" in line) == force


@pytest.mark.parametrize("full", ["count", "bytes"])  # 32 of them; 4096 bytes
def test_a_stage_never_drops_the_attribute_it_adds(tmp_path, full):
    """A record whose attribute block is full gets no attribute from a
    stage: the stage refuses it in one line naming the attribute, rather
    than write its result without it (later stages would read it as
    unscaled)."""
    q = np.random.default_rng(1).standard_normal((1, 1, 3, 4)).astype(np.float32)
    if full == "count":
        attrs = [f"{n}:k{i:02d}=v" for n in "qk" for i in range(32)]
    else:  # 21 lines of 192 bytes and one of 64: 4096 bytes in all
        attrs = [f"{n}:k{i:02d}{'x' * 60}={'v' * 127}"
                 for n in "qk" for i in range(21)]
        attrs += [f"{n}:z={'w' * 61}" for n in "qk"]
    stream = stagekit.pack(tmp_path, [("q", q), ("k", q)], attrs)
    head = run("show", "--full", input=stream)
    assert head.returncode == 0, head.stderr
    p = run("scores", input=stream)
    assert p.returncode == 1
    assert "its attributes could not hold 'scale'" in one_line_error(p, "scores")
    # what was written is not a whole stream: the next stage says so
    assert run("show", input=p.stdout).returncode == 1
    # one attribute fewer, and the stage has its room again
    fewer = [a for a in attrs if ":k00" not in a]
    fewer = stagekit.pack(tmp_path, [("q", q), ("k", q)], fewer)
    p = run("scores", input=fewer)
    assert p.returncode == 0, p.stderr
    assert "scale=" in run("show", "--full", input=p.stdout).stdout.decode()
