"""Faults around a pipeline: a stage killed mid-stream, a reader that goes
away, a full disk, inputs larger than the caps or than memory, a device out
of memory, and a whole pipeline under valgrind.

What andrea promises (andrea(7), BAD INPUT AND FAILURES): a dead upstream
stage is never taken for an empty result, a closed downstream pipe ends a
stage quietly, a failed write leaves an earlier file in place, and a size
that cannot be met is refused before anything is allocated, each failure
with exit 1 and one line on stderr.
"""
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import termios
import time

import numpy as np
import pytest

import atsfmt
from conftest import ROOT, one_line_error, run, tool

GiB = 1 << 30
TEXT = (b"It was the best of times, it was the worst of times, it was the "
        b"age of wisdom, it was the age of foolishness. ") * 9  # 999 bytes


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def asan(name):
    with open(tool(name), "rb") as f:
        return b"__asan_init" in f.read()


def queued(fd):
    """Bytes waiting in the pipe whose read end is fd."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return struct.unpack("i", buf)[0]


def fill_pipe(argv, stdin_data=None, want=None, timeout=60):
    """Starts argv writing into a fresh pipe nobody reads; returns (proc,
    read end) once the pipe holds want bytes or stops growing with the
    writer still alive (it is then blocked inside its output)."""
    r, w = os.pipe()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=w,
                         stderr=subprocess.PIPE, env=clean_env())
    os.close(w)
    if stdin_data is not None:
        p.stdin.write(stdin_data)
    p.stdin.close()
    last, still, t0 = -1, 0, time.monotonic()
    while time.monotonic() - t0 < timeout:
        n = queued(r)
        if want is not None and n >= want:
            break
        still = still + 1 if n == last and n > 0 else 0
        if still >= 10:
            break
        last = n
        time.sleep(0.05)
    assert p.poll() is None, "the upstream stage finished: nothing to kill"
    return p, r


def kill(p):
    p.kill()
    p.wait()
    assert p.returncode == -signal.SIGKILL


def downstream(name, r, *args):
    p = subprocess.run([tool(name), *args], stdin=r, capture_output=True,
                       env=clean_env(), timeout=120)
    os.close(r)
    return p


def test_upstream_killed_inside_a_record():
    # 999 positions of the default model: x is 3 MB, more than the 1 MiB
    # pipe, so andrea-embed blocks in the middle of x, its second record
    up, r = fill_pipe([tool("embed"), "--text"], TEXT)
    assert queued(r) < len(TEXT) * 768 * 4
    kill(up)
    p = downstream("qkv", r)
    assert p.returncode == 1
    assert one_line_error(p, "qkv") == (
        "andrea-qkv: <stdin>: record 2 'x': input ended inside the record")
    # tokens went through; no end record follows it, so the next stage
    # fails too
    assert atsfmt.end_record() not in p.stdout


def test_upstream_killed_between_records(tmp_path):
    data = run("embed", "--tokens", "1,2,3", "--keep", check=0).stdout
    assert data.endswith(atsfmt.end_record())
    path = tmp_path / "x.ats"
    path.write_bytes(data[:-len(atsfmt.end_record())])
    # the shell becomes sleep: killing it is killing the writer
    up, r = fill_pipe(["sh", "-c", f"cat '{path}'; exec sleep 120"],
                      want=len(data) - 20)
    kill(up)
    p = downstream("qkv", r)
    assert p.returncode == 1
    assert one_line_error(p, "qkv") == (
        "andrea-qkv: <stdin>: stream has no end record after record 2: "
        "did an earlier stage fail?")


def test_pipefail_pipeline_fails(tmp_path):
    x = tmp_path / "x.ats"
    x.write_bytes(run("embed", "--text", input=TEXT, check=0).stdout)
    b = os.path.join(ROOT, "bin")
    script = (f"set -o pipefail; "
              f"sh -c 'head -c 100000 \"{x}\"; kill -9 $$' | "
              f"{b}/andrea-qkv | {b}/andrea-scores >/dev/null")
    p = subprocess.run(["bash", "-c", script], capture_output=True,
                       env=clean_env(), timeout=120)
    assert p.returncode == 1
    err = p.stderr.decode().splitlines()
    assert err == [
        "andrea-qkv: <stdin>: record 2 'x': input ended inside the record",
        "andrea-scores: <stdin>: stream has no end record after record 1: "
        "did an earlier stage fail?"]


@pytest.mark.parametrize("tail", ["head -c 100", "head -c 0", "true"])
def test_closed_downstream_is_quiet(tmp_path, tail):
    b = os.path.join(ROOT, "bin")
    errs = [tmp_path / f"{i}.err" for i in range(5)]
    text = tmp_path / "text"
    text.write_bytes(TEXT)
    script = (f"{b}/andrea-embed --text <'{text}' 2>'{errs[0]}' | "
              f"{b}/andrea-qkv 2>'{errs[1]}' | "
              f"{b}/andrea-scores 2>'{errs[2]}' | "
              f"{b}/andrea-show -p --full 2>'{errs[3]}' | "
              f"{tail} >/dev/null 2>'{errs[4]}'")
    p = subprocess.run(["bash", "-c", script], capture_output=True,
                       env=clean_env(), timeout=300)
    assert p.returncode == 0
    for e in errs:
        assert e.read_text() == "", f"{e.name}: {e.read_text()!r}"


def small_tmpfs(path, size):
    """Mounts a tmpfs of size bytes on path; False where that is not
    allowed (not root, no mount namespace rights)."""
    path.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", str(path)], capture_output=True)
    return p.returncode == 0


def test_full_disk_keeps_the_previous_model(tmp_path):
    disk = tmp_path / "disk"
    if not small_tmpfs(disk, 128 << 10):
        pytest.skip("cannot mount a tmpfs here (the RLIMIT_FSIZE test "
                    "covers the same path)")
    try:
        model = disk / "m.ats"
        run("train", "--steps", 0, "--layers", 1, "--heads", 1,
            "--d-model", 4, "--ctx", 2, "--vocab", 3, "-o", model, check=0)
        before = model.read_bytes()
        p = run("train", "--steps", 0, "--config", "tiny", "-o", model,
                check=1)
        line = one_line_error(p, "train")
        assert "No space left on device" in line, line
        assert model.read_bytes() == before
        assert os.listdir(disk) == ["m.ats"]  # no temporary left behind
        # a stage writing a stream file fails the same way
        p = run("embed", "--text", "-o", disk / "x.ats", input=TEXT, check=1)
        assert "No space left on device" in one_line_error(p, "embed")
        assert os.listdir(disk) == ["m.ats"]
    finally:
        subprocess.run(["umount", str(disk)])


@pytest.mark.parametrize("ignored", [False, True])
def test_file_size_limit_keeps_the_previous_model(tmp_path, ignored):
    """As under a shell's ulimit -f (SIGXFSZ at its default, which would
    kill the tool mid-write) and with SIGXFSZ ignored by the caller."""
    model = tmp_path / "m.ats"
    run("train", "--steps", 0, "--layers", 1, "--heads", 1, "--d-model", 4,
        "--ctx", 2, "--vocab", 3, "-o", model, check=0)
    before = model.read_bytes()

    def limit():
        import resource
        signal.signal(signal.SIGXFSZ,
                      signal.SIG_IGN if ignored else signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100 << 10, 100 << 10))
    p = subprocess.run([tool("train"), "--steps", "0", "--config", "tiny",
                        "-o", str(model)], capture_output=True,
                       env=clean_env(), preexec_fn=limit, timeout=120)
    assert p.returncode == 1
    assert "File too large" in one_line_error(p, "train")
    assert model.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.ats"]


def catchable():
    """In the child: the signals the test sends at their default, as a
    shell's foreground job has them.  A suite run as a background job
    (`bash .ci/run &`) inherits SIGINT ignored, which the tools rightly
    keep (cli.c's catch_signals), and the stage would not end."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


# mkstemp that sleeps once the file exists: a signal sent as soon as the
# temporary shows lands while the tool, its own signals blocked, has yet
# to remember the name, and reaches another of its threads (the pump).
SLOW_MKSTEMP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>
static int slowly(const char *name, char *tmpl)
{
	int (*real)(char *) = (int (*)(char *))dlsym(RTLD_NEXT, name);
	int fd = real(tmpl);
	usleep(300000);
	return fd;
}
int mkstemp(char *tmpl) { return slowly("mkstemp", tmpl); }
int mkstemp64(char *tmpl) { return slowly("mkstemp64", tmpl); }
"""


@pytest.fixture(scope="module")
def slow_mkstemp(tmp_path_factory):
    d = tmp_path_factory.mktemp("shim")
    (d / "slow.c").write_text(SLOW_MKSTEMP)
    cc = os.environ.get("CC") or "cc"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "slow.so"),
                    str(d / "slow.c"), "-ldl"], check=True)
    return str(d / "slow.so")


@pytest.mark.parametrize("slow", [False, True], ids=["", "slow-mkstemp"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT,
                                 signal.SIGHUP, signal.SIGPIPE])
def test_a_signal_mid_write_leaves_no_temporary(tmp_path, sig, slow,
                                                request):
    """A stage killed while it writes -o FILE ends as the signal would end
    it, with the earlier FILE whole and its temporary file removed: also
    when the signal comes as the temporary is being made."""
    rng = np.random.default_rng(3)
    rec = atsfmt.record("scores", "f32", (1, 1, 64, 64),
                        rng.standard_normal(64 * 64).astype("<f4").tobytes())
    out = tmp_path / "s.ats"
    out.write_bytes(b"earlier")
    env = clean_env()
    if slow:
        env["LD_PRELOAD"] = request.getfixturevalue("slow_mkstemp")
        # the sanitizers' runtime would refuse to come second
        env["ASAN_OPTIONS"] = ":".join(filter(None, [
            env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    p = subprocess.Popen([tool("mask"), "-o", str(out)],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, start_new_session=True,
                         restore_signals=True, preexec_fn=catchable)
    p.stdin.write(rec)  # one record and no end: the stage waits for more
    p.stdin.flush()
    t0 = time.monotonic()
    while len(os.listdir(tmp_path)) < 2 and time.monotonic() - t0 < 60:
        time.sleep(0.02)
    assert len(os.listdir(tmp_path)) == 2, "the temporary never appeared"
    p.send_signal(sig)
    p.wait(timeout=60)
    p.stdin.close()
    assert p.returncode == -sig
    assert p.stderr.read() == b""
    assert os.listdir(tmp_path) == ["s.ats"]
    assert out.read_bytes() == b"earlier"


def test_dev_full_stdout():
    with open("/dev/full", "wb") as full:
        p = subprocess.run([tool("embed"), "--text"], input=TEXT,
                           stdout=full, stderr=subprocess.PIPE,
                           env=clean_env(), timeout=120)
    assert p.returncode == 1
    assert one_line_error(p, "embed") == (
        "andrea-embed: <stdout>: write error: No space left on device")


def run_capped(name, data, aspace, **env):
    """Runs a stage on data under an address-space limit (lifted for ASan
    builds, which reserve terabytes of shadow memory)."""
    def limit():
        import resource
        if aspace and not asan(name):
            resource.setrlimit(resource.RLIMIT_AS, (aspace, aspace))
    return subprocess.run([tool(name)], input=data, capture_output=True,
                          env=clean_env(**env), preexec_fn=limit, timeout=120)


def test_cap_refuses_before_allocating():
    # x claims 16 GiB, over the default 8 GiB cap; the process may not map
    # even 1 GiB, so any attempt to allocate it would fail differently
    data = atsfmt.header("x", "f32", (1, 1 << 20, 4096))
    p = run_capped("qkv", data, 1 * GiB)
    assert p.returncode == 1
    assert one_line_error(p, "qkv") == (
        "andrea-qkv: <stdin>: record 1 'x': tensor of 17179869184 bytes "
        "exceeds the cap of 8589934592 bytes (ANDREA_MAX_BYTES)")
    # ANDREA_MAX_BYTES lowers the cap
    data = atsfmt.stream(atsfmt.record("x", "f32", (1, 4, 8), bytes(128)))
    p = run_capped("qkv", data, 1 * GiB, ANDREA_MAX_BYTES="127")
    assert "exceeds the cap of 127 bytes" in one_line_error(p, "qkv")


def test_the_cap_is_on_what_a_stage_holds_not_on_what_flows():
    """A record copied through, or one a stage reads as it arrives (mask
    and softmax on the CPU), is never held whole, so the cap does not
    apply to it; the same record is refused where it would be held."""
    rng = np.random.default_rng(3)
    note = rng.standard_normal(64).astype(np.float32)
    s = np.tril(rng.standard_normal((1, 1, 8, 8))).astype(np.float32)
    s[0, 0][np.triu_indices(8, 1)] = -np.inf
    data = atsfmt.stream(atsfmt.record("note", "f32", note.shape, note.tobytes()),
                         atsfmt.record("scores", "f32", s.shape, s.tobytes()))
    p = subprocess.run([tool("softmax"), "--device", "cpu"], input=data,
                       capture_output=True, timeout=60,
                       env=clean_env(ANDREA_MAX_BYTES="127"))
    assert p.returncode == 0, p.stderr
    recs = atsfmt.read(p.stdout)
    assert [r.name for r in recs] == ["note", "attn"]
    assert recs[0].payload == note.tobytes()
    got = np.frombuffer(recs[1].payload, np.float32).reshape(s.shape)
    e = np.exp(s.astype(np.float64) - s.max(-1, keepdims=True))
    assert np.abs(got - e / e.sum(-1, keepdims=True)).max() <= 1e-6
    p = subprocess.run([tool("unpack"), "-d", os.devnull], input=data,
                       capture_output=True, timeout=60,
                       env=clean_env(ANDREA_MAX_BYTES="127"))
    assert "record 1 'note': tensor of 256 bytes exceeds the cap of 127 " \
        "bytes" in one_line_error(p, "unpack")


def meminfo():
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":")
            fields[key] = int(value.split()[0]) * 1024
    return fields


def test_a_config_claiming_more_than_its_file_holds(tmp_path):
    """A model file whose config claims 4096 layers over no parameters (or
    more than 4096), or a width, vocabulary or layer its parameters do not
    have, is refused in one line naming the file, under an address-space
    limit that any attempt to allocate for the claim would break."""
    def config(**over):
        fields = {"n_layer": 4096, "n_head": 1, "d_model": 8, "ctx": 16,
                  "vocab": 300, **over}
        return atsfmt.record("config", "i32", (0,), b"", attrs=b"".join(
            f"{k}={v}\n".encode() for k, v in fields.items()))

    def model(name, *records, **over):
        path = tmp_path / name
        path.write_bytes(atsfmt.stream(config(**over), *records))
        return path
    wte = atsfmt.record("wte", "f32", (300, 8), bytes(300 * 8 * 4))
    layers = model("layers.ats")
    absurd = model("absurd.ats", n_layer=16777216)
    tall = model("tall.ats", wte, n_layer=1, vocab=16777216)
    wide = model("wide.ats", wte, n_layer=1, d_model=16777216)
    deep = tmp_path / "deep.ats"  # no config: a record's layer says it
    deep.write_bytes(atsfmt.stream(wte, atsfmt.record(
        "layers.16777214.ln1.weight", "f32", (8,), bytes(32))))
    for path, says in [(layers, "config: n_layer=4096 but the file holds "
                        "0 layers"),
                       (absurd, "config: n_layer missing or not in "
                        "1..4096"),
                       (wide, "config: d_model=16777216 but the parameters "
                        "have 8"),
                       (tall, "config: vocab=16777216 but the parameters "
                        "have 300"),
                       (deep, "a record of layer 16777214: a model has at "
                        "most 4096 layers")]:
        for args in (["generate", "-m", path, "-n", 1],
                     ["export", "-m", path, tmp_path / "hf"],
                     ["train", "-m", path, "--steps", 0, "-o",
                      tmp_path / "o.ats"],
                     ["block", "-m", path, "-l", 0]):
            def limit():
                import resource
                if not asan(args[0]):
                    resource.setrlimit(resource.RLIMIT_AS, (GiB, GiB))
            p = subprocess.run([tool(args[0]), *map(str, args[1:])],
                               input=b"", capture_output=True,
                               env=clean_env(), preexec_fn=limit, timeout=120)
            assert p.returncode == 1, (args, p.stderr)
            line = one_line_error(p, args[0])
            assert line.startswith(f"andrea-{args[0]}: {path}: ") and \
                says in line, line
    assert sorted(os.listdir(tmp_path)) == ["absurd.ats", "deep.ats",
                                            "layers.ats", "tall.ats",
                                            "wide.ats"]
    # a checkpoint's config is read by the same rule
    data = tmp_path / "d.txt"
    data.write_bytes(TEXT * 4)
    run("train", "--config", "tiny", "--data", data, "--steps", 1, "--seq",
        16, "-o", tmp_path / "m.ats", check=0)
    recs = atsfmt.read((tmp_path / "m.ats.ckpt").read_bytes())
    state = next(r for r in recs if r.name == "train_state")
    evil = tmp_path / "evil.ckpt"
    evil.write_bytes(atsfmt.stream(
        atsfmt.record("train_state", state.dtype, state.dims, state.payload,
                      attrs=b"".join(k.encode() + b"=" + v.encode() + b"\n"
                                     for k, v in state.attrs)),
        config(n_layer=16777216)))
    p = run("train", "--resume", "--data", data, "--checkpoint", evil,
            "-o", tmp_path / "m.ats", check=1)
    assert f"{evil}: record 2: config: n_layer missing or not in 1..4096" \
        in one_line_error(p, "train")


def test_more_than_memory_is_refused_up_front():
    info = meminfo()
    if "MemAvailable" not in info:
        pytest.skip("no MemAvailable in /proc/meminfo")
    avail = info["MemAvailable"] + info.get("SwapFree", 0)
    rows = avail // (4 * 4096) * 2 + 1  # twice what there is
    # attend holds attn whole (softmax and mask stream it a chunk at a time)
    data = atsfmt.header("attn", "f32", (1, 1, rows, 4096))
    p = run_capped("attend", data, 1 * GiB, ANDREA_MAX_BYTES=str(1 << 60))
    assert p.returncode == 1
    line = one_line_error(p, "attend")
    assert line.startswith(
        f"andrea-attend: <stdin>: record 1 'attn': tensor of "
        f"{rows * 4096 * 4} bytes exceeds the memory available ("), line
    assert line.endswith(" bytes of RAM and swap)")


def test_more_than_memory_still_passes_through_unread(tmp_path):
    # the check is made where a tensor is decoded: a record a stage only
    # copies is never held in memory, so it is not refused
    info = meminfo()
    avail = info.get("MemAvailable", 1 << 40) + info.get("SwapFree", 0)
    big = atsfmt.header("big", "u8", (avail // 2048 + 1, 4096))
    p = run("softmax", input=big, env={"ANDREA_MAX_BYTES": str(1 << 60)},
            check=1)
    # refused only because the (absent) chunks never arrive
    assert one_line_error(p, "softmax") == (
        "andrea-softmax: <stdin>: record 1 'big': input ended inside the "
        "record")


def have_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    p = subprocess.run(["nvidia-smi", "-L"], capture_output=True)
    return p.returncode == 0 and b"GPU" in p.stdout


@pytest.mark.skipif(not have_gpu(), reason="no GPU")
def test_device_out_of_memory_is_one_clear_line():
    small = atsfmt.stream(
        atsfmt.record("q", "f32", (1, 1, 4, 4), bytes(64)),
        atsfmt.record("k", "f32", (1, 1, 4, 4), bytes(64)))
    p = run("scores", input=small, env={"ANDREA_DEVICE": "cuda"})
    if p.returncode != 0:
        pytest.skip("andrea-scores has no CUDA path in this build: "
                    + p.stderr.decode().strip())
    # scores [1,1,T,T] for T = 300000 is 360 GB: more than any device
    T, D = 300_000, 64
    zeros = bytes(T * D * 4)
    data = atsfmt.stream(atsfmt.record("q", "f32", (1, 1, T, D), zeros),
                         atsfmt.record("k", "f32", (1, 1, T, D), zeros))
    p = run("scores", input=data, timeout=600,
            env={"ANDREA_DEVICE": "cuda", "ANDREA_MAX_BYTES": str(1 << 40)})
    assert p.returncode == 1
    line = one_line_error(p, "scores")
    assert "memory" in line, line


@pytest.mark.skipif(not shutil.which("valgrind"), reason="no valgrind")
def test_pipeline_under_valgrind(tmp_path):
    if asan("embed"):
        pytest.skip("bin/ is an AddressSanitizer build (make SAN=1)")
    model = tmp_path / "m.ats"
    run("train", "--steps", 0, "--config", "tiny", "-o", model, check=0)
    b = os.path.join(ROOT, "bin")
    supp = os.path.join(ROOT, "tests", "valgrind.supp")
    vg = f"valgrind -q --error-exitcode=99 --leak-check=full --suppressions={supp}"
    stages = ["embed --text", "qkv", "scores", "mask", "softmax",
              "attend --proj"]
    script = "set -o pipefail; printf 'Hello, world.' | " + " | ".join(
        f"{vg} {b}/andrea-{s}" for s in stages) + f" >'{tmp_path}/y.ats'"
    # one OpenMP thread: libgomp never joins its pool, so valgrind would
    # count the pool threads' TLS as "possibly lost" at exit
    # and the CPU path: valgrind does not know the GPU driver's ioctls
    env = clean_env(ANDREA_MODEL=str(model), ANDREA_THREADS="1",
                    OMP_NUM_THREADS="1", ANDREA_DEVICE="cpu")
    p = subprocess.run(["bash", "-c", script], capture_output=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""
    recs = atsfmt.read((tmp_path / "y.ats").read_bytes())
    assert [r.name for r in recs] == ["tokens", "y"]
