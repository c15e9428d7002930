"""andrea-show --png and --grid: the picture's pixels against the formula
the man page documents (ramp colours, the map's box, the colour bar's
ticks), the padding of a batch drawn apart in text and picture, and the
picture's options.  The text modes are test_show.py's."""
import math
import os
import struct
import zlib

import numpy as np
import pytest

from conftest import one_line_error, run
from test_show import RAMP, ascii_map, pack, show, text


def test_padding_of_a_batch_is_drawn_apart(tmp_path):
    """A batch padded to a common T (the lengths attribute of andrea-embed
    --lines): the selected row's queries past its length, and the keys of
    scores and weights too, are padding, blank in the text map and pale in the
    PNG, and out of the scale; the full-length row is all drawn."""
    rng = np.random.default_rng(6)
    a = rng.uniform(0.2, 1.0, (2, 1, 5, 5)).astype(np.float32)
    a[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] = 0.0
    a[0, 0, 3:, :] = 9.0  # padding: large, so a scale that counted it shows
    a[0, 0, :, 3:] = 9.0
    path = tmp_path / "a.npy"
    np.save(path, a)
    stream = run("pack", "-a", "attn:mask=causal", "-a", "attn:lengths=3,5",
                 f"attn={path}", check=0).stdout
    head, rows = ascii_map(text(show("--ascii", "--shade", "linear",
                                     input=stream)))
    kv = dict(x.split("=", 1) for x in head.split(" ")[3:])
    valid = a[0, 0, :3, :3][np.tril_indices(3)]
    assert np.float32(float(kv["max"])) == valid.max()
    lo, hi = float(valid.min()), float(valid.max())
    for i in range(5):
        for j in range(5):
            if i >= 3 or j >= 3:
                assert rows[i][j] == " ", (i, j)
            elif j > i:
                assert rows[i][j] == "_", (i, j)
            else:
                k = min(int((float(a[0, 0, i, j]) - lo) / (hi - lo) * 9), 8)
                assert rows[i][j] == RAMP[k], (i, j)
    _, rows1 = ascii_map(text(show("--ascii", "--select", "1,0", input=stream)))
    assert " " not in "".join(r[:i + 1] for i, r in enumerate(rows1))
    # x [B,T,C] with C = T: its columns are features, never padding
    x = rng.uniform(0.2, 1.0, (2, 5, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    xs = run("pack", "-a", "x:lengths=3,5", f"x={tmp_path / 'x.npy'}",
             check=0).stdout
    _, xrows = ascii_map(text(show("--ascii", input=xs)))
    assert [" " in r for r in xrows] == [False] * 3 + [True] * 2
    assert xrows[3] == xrows[4] == " " * 5
    # nor those of an out after the mask (it carries mask=causal too)
    o = rng.uniform(0.2, 1.0, (2, 1, 5, 7)).astype(np.float32)
    np.save(tmp_path / "o.npy", o)
    os_ = run("pack", "-a", "out:lengths=3,5", "-a", "out:mask=causal",
              f"out={tmp_path / 'o.npy'}", check=0).stdout
    _, orows = ascii_map(text(show("--ascii", input=os_)))
    assert [" " in r for r in orows] == [False] * 3 + [True] * 2
    assert "_" not in "".join(orows)
    if not png_built(tmp_path):
        return
    out = tmp_path / "p.png"
    show("--png", out, "--shade", "linear", input=stream)
    _, _, px = read_png(out)
    k = math.ceil(256 / 5)
    x0, y0, _, _ = map_box(px)
    at = lambda i, j: px[y0 + i * k + k // 2][x0 + j * k + k // 2]
    assert at(4, 0) == at(1, 4) == (228, 228, 244)
    assert at(0, 0) == ramp_rgb((float(a[0, 0, 0, 0]) - lo) / (hi - lo))


# ---- --png ----

def read_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack_from(">I4s", data, pos)
        body = data[pos + 8:pos + 8 + n]
        assert struct.unpack_from(">I", data, pos + 8 + n)[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    assert (depth, ctype, interlace) == (8, 2, 0)
    raw = zlib.decompress(idat)
    stride = w * 3
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b = prev[x]
            c = prev[x - 3] if x >= 3 else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
            else:
                assert ft == 0
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, 3)])
        prev = line
    return w, h, rows


def png_built(tmp_path):
    """True when andrea-show has libpng; without it, checks that --png is
    the documented one-line error (exit 1) and writes nothing."""
    out = tmp_path / "probe.png"
    p = show("--png", out, input=pack(tmp_path, a=np.ones((2, 2), np.float32)),
             check=None)
    if p.returncode == 1 and b"without libgd" in p.stderr:
        one_line_error(p, "show")
        assert not out.exists()
        return False
    assert p.returncode == 0, p.stderr
    return True


def ramp_rgb(t):
    stops = [(20, 30, 90), (30, 160, 140), (250, 230, 60)]
    seg, u = (0, t * 2) if t < 0.5 else (1, (t - 0.5) * 2)
    return tuple(int(math.floor(a + u * (b - a) + 0.5))
                 for a, b in zip(stops[seg], stops[seg + 1]))


FRAME = (64, 64, 64)


def map_box(rows):
    """(x, y, width, height) of the first map of a figure: inside the grey
    frame whose top-left corner is the first frame pixel."""
    y, x = next((y, x) for y, row in enumerate(rows)
                for x, px in enumerate(row) if px == FRAME)
    w = next(i for i in range(x, len(rows[y])) if rows[y][i] != FRAME) - x
    h = next(i for i in range(y, len(rows)) if rows[i][x] != FRAME) - y
    return x + 1, y + 1, w - 2, h - 2


def test_png_masked_heatmap(tmp_path):
    if not png_built(tmp_path):
        pytest.skip("built without libpng (its --png error was checked)")
    rng = np.random.default_rng(2)
    s = rng.standard_normal((1, 2, 10, 10)).astype(np.float32)
    iu = np.triu_indices(10, 1)
    s[0, 1][iu] = -np.inf
    s[0, 1, 9, 0] = np.nan
    out = tmp_path / "m.png"
    p = show("--png", out, "--select", "0,1", "--name", "scores",
             input=pack(tmp_path, x=np.ones(3, np.float32), scores=s))
    assert p.stdout == b"" and p.stderr == b""
    w, h, rows = read_png(out)
    k = math.ceil(256 / 10)
    x0, y0, mw, mh = map_box(rows)
    assert (mw, mh) == (10 * k, 10 * k) and w > mw + 60 and h > mh + 40
    sl = s[0, 1]
    fin = sl[np.isfinite(sl)]
    lo, hi = float(fin.min()), float(fin.max())
    for i in range(10):
        for j in range(10):
            px = rows[y0 + i * k + k // 2][x0 + j * k + k // 2]
            assert rows[y0 + i * k][x0 + j * k] == px  # whole k x k square
            if j > i:
                assert px == (200, 200, 200), (i, j)
            elif (i, j) == (9, 0):
                assert px == (255, 0, 255)
            else:
                assert px != (200, 200, 200)
                assert px == ramp_rgb((float(sl[i, j]) - lo) / (hi - lo)), (i, j)


def test_png_shows_weight_a_finite_fill_leaked(tmp_path):
    """Above the diagonal of a causally masked record, only what a mask
    leaves there (0 in weights, -inf or the fill in scores) is drawn as
    masked; weight that a finite fill let leak onto the future is drawn
    in its colour and counts in the colour bar's range."""
    if not png_built(tmp_path):
        pytest.skip("built without libpng (its --png error was checked)")
    rng = np.random.default_rng(4)
    a = rng.uniform(0.1, 1.0, (6, 6)).astype(np.float32)
    a[np.triu_indices(6, 1)] = 0.0
    a[0, 5], a[2, 3] = 2.0, 0.05  # leaked, the largest and the smallest
    stream = run("pack", "-a", "attn:mask=causal", "-a", "attn:fill=-1",
                 f"attn={np.save(tmp_path / 'a.npy', a) or tmp_path / 'a.npy'}",
                 check=0).stdout
    out = tmp_path / "a.png"
    show("--png", out, "--shade", "linear", input=stream)
    w, h, rows = read_png(out)
    k = math.ceil(256 / 6)
    x0, y0, _, _ = map_box(rows)
    for i in range(6):
        for j in range(6):
            px = rows[y0 + i * k + k // 2][x0 + j * k + k // 2]
            if j > i and a[i, j] == 0:
                assert px == (200, 200, 200), (i, j)
            else:
                assert px == ramp_rgb((float(a[i, j]) - 0.05) / (2.0 - 0.05)), (i, j)


def test_signed_shade_centres_zero(tmp_path):
    """An effect (andrea-patch) or attribution (andrea-lens) record is drawn
    on the signed scale by default: linear over -m..m, m the largest
    magnitude, 0 the middle character and the middle colour, blue below
    and red above; --shade linear puts it back on the ramp."""
    e = np.array([[-0.5, 0.0, 0.25], [0.5, -0.25, 0.125]], np.float32)
    stream = pack(tmp_path, effect=e)
    head, rows = ascii_map(text(show("--ascii", input=stream)))
    assert " shade=signed" in head
    assert rows[0][1] == "+" and rows[0][0] == "." and rows[1][0] == "@"
    head, rows = ascii_map(text(show("--ascii", "--shade", "linear",
                                     input=stream)))
    assert "shade=" not in head and rows[0][1] == "+"
    if not png_built(tmp_path):
        return
    out = tmp_path / "e.png"
    show("--png", out, input=stream)
    _, _, px = read_png(out)
    x0, y0, mw, mh = map_box(px)
    cw, ch = mw // 3, mh // 2
    at = lambda i, j: px[y0 + i * ch + ch // 2][x0 + j * cw + cw // 2]
    assert at(0, 1) == (247, 247, 247)
    assert at(0, 0) == (33, 102, 172) and at(1, 0) == (178, 24, 43)
    r, g, b = at(0, 2)  # a quarter of the way up from 0: a pale red
    assert r > b and r > 200


def test_png_one_record_only(tmp_path):
    if not png_built(tmp_path):
        pytest.skip("built without libpng (its --png error was checked)")
    s = pack(tmp_path, a=np.ones((2, 2), np.float32), b=np.ones((2, 2), np.float32))
    out = tmp_path / "x.png"
    p = show("--png", out, input=s, check=1)
    assert "--name" in one_line_error(p, "show")
    assert not out.exists()
    p = show("--png", out, "--name", "b", input=s)
    _, _, rows = read_png(out)
    assert map_box(rows)[2:] == (256, 256)
    p = show("--png", out, "-p", input=s, check=2)
    one_line_error(p, "show")


def test_png_replaces_a_file_whole_or_not_at_all(tmp_path):
    """--png writes as -o does (core/atomic_file.h): a failed write leaves
    the earlier picture and no temporary file; a link stays a link, its
    target replaced with its permissions kept."""
    if not png_built(tmp_path):
        pytest.skip("built without libpng (its --png error was checked)")
    from test_stream import run_limited
    s = tmp_path / "s.ats"
    s.write_bytes(pack(tmp_path, a=np.arange(4096, dtype=np.float32)
                       .reshape(64, 64)))
    target, link = tmp_path / "t.png", tmp_path / "l.png"
    show("--png", target, s)
    good = target.read_bytes()
    os.chmod(target, 0o600)
    os.symlink("t.png", link)
    before = sorted(os.listdir(tmp_path))
    p = run_limited("show", "--png", link, s, fsize=len(good) // 2)
    assert p.returncode == 1
    assert "write error" in one_line_error(p, "show")
    assert os.path.islink(link) and target.read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == before
    s.write_bytes(pack(tmp_path, a=np.ones((3, 5), np.float32)))
    show("--png", link, s)
    assert os.path.islink(link) and target.read_bytes() != good
    assert read_png(target)[0] > 0
    assert os.stat(target).st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == before


def test_grid_draws_every_head_on_one_scale(tmp_path):
    if not png_built(tmp_path):
        pytest.skip("built without libgd (its --png error was checked)")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    out = tmp_path / "g.png"
    show("--png", out, "--grid", "--select", "1", "--shade", "linear",
         input=pack(tmp_path, x=x))
    _, _, rows = read_png(out)
    frames = sum(1 for y, row in enumerate(rows) for xx, px in enumerate(row)
                 if px == FRAME and (xx == 0 or row[xx - 1] != FRAME) and
                 (y == 0 or rows[y - 1][xx] != FRAME) and
                 xx + 1 < len(row) and row[xx + 1] == FRAME)
    assert frames >= 3  # three maps (and the colour bar)
    x0, y0, mw, mh = map_box(rows)
    k = mw // 5
    lo, hi = float(x[1].min()), float(x[1].max())  # one scale for all three
    for i in range(5):
        for j in range(5):
            px = rows[y0 + i * k + k // 2][x0 + j * k + k // 2]
            assert px == ramp_rgb((float(x[1, 0, i, j]) - lo) / (hi - lo))


def bar_right(rows):
    """The rows of the colour bar's frame and, of each, the pixels right of
    it (its ticks and their labels)."""
    # the bar: the frame whose top edge is 18 pixels long (16 inside)
    y, x0 = next((y, i) for y, row in enumerate(rows)
                 for i in range(1, len(row) - 18)
                 if row[i - 1] != FRAME and row[i + 18] != FRAME and
                 all(px == FRAME for px in row[i:i + 18]))
    h = next(i for i in range(y, len(rows)) if rows[i][x0] != FRAME) - y
    return [row[x0 + 18:] for row in rows[y:y + h]]


def test_a_map_without_a_finite_value_has_no_ticks_on_its_bar(tmp_path):
    """An all-NaN map's colour bar is ticked with no value (it used to
    say 0, a value no entry holds); a range given still ticks it."""
    if not png_built(tmp_path):
        pytest.skip("built without libgd (its --png error was checked)")
    def marks_right_of_bar(*args):
        out = tmp_path / "b.png"
        show("--png", out, *args, input=pack(tmp_path, x=x))
        return sum(px == (0, 0, 0) for row in bar_right(read_png(out)[2])
                   for px in row)
    x = np.full((4, 4), np.nan, np.float32)
    assert marks_right_of_bar() == 0
    assert marks_right_of_bar("--range", "0,1") > 0
    x = np.ones((4, 4), np.float32)
    assert marks_right_of_bar() > 0  # its one value


def test_log_ticks_over_many_decades_reach_the_top_and_stay_apart(tmp_path):
    """--shade log --range 1e-30,1: every k-th decade is ticked, up to the
    top one, two lines (26 pixels) apart at least; the first sixteen
    decades used to be ticked 7 pixels apart over the bar's lower half."""
    if not png_built(tmp_path):
        pytest.skip("built without libgd (its --png error was checked)")
    out = tmp_path / "l.png"
    x = np.full((4, 4), 0.5, np.float32)
    show("--png", out, "--shade", "log", "--range", "1e-30,1",
         input=pack(tmp_path, x=x))
    right = bar_right(read_png(out)[2])
    ticks = [y for y, row in enumerate(right) if row[0] == (0, 0, 0)]
    assert len(ticks) >= 4 and ticks[0] <= 1  # the top decade, 1
    assert min(b - a for a, b in zip(ticks, ticks[1:])) >= 26


def test_a_one_axis_record_names_no_rows_axis(tmp_path):
    """A 1-D record is one row: the figure names its one axis below the
    map, and nothing up the left side (it said "axis 0" there too)."""
    if not png_built(tmp_path):
        pytest.skip("built without libgd (its --png error was checked)")
    def left_side_ink(x):
        out = tmp_path / "v.png"
        show("--png", out, input=pack(tmp_path, x=x))
        rows = read_png(out)[2]
        _, y0, _, mh = map_box(rows)
        return sum(px == (0, 0, 0) for row in rows[y0:y0 + mh]
                   for px in row[10:10 + 13])  # the rows' axis name
    assert left_side_ink(np.arange(10, dtype=np.float32)) == 0
    assert left_side_ink(np.ones((2, 5), np.float32)) > 0  # "axis 0"


def test_a_narrow_tensor_is_drawn_tall_enough(tmp_path):
    if not png_built(tmp_path):
        pytest.skip("built without libgd (its --png error was checked)")
    out = tmp_path / "n.png"
    x = np.random.default_rng(1).standard_normal((2, 3000)).astype(np.float32)
    show("--png", out, input=pack(tmp_path, x=x))
    _, _, rows = read_png(out)
    assert map_box(rows)[2:] == (1000, 256)  # blocks of 3 columns, rows 128 px


def test_scale_options_are_checked(tmp_path):
    s = pack(tmp_path, x=np.arange(-2, 4, dtype=np.float32).reshape(2, 3))
    for args in (["--grid"], ["--ascii", "--shade", "cubic"],
                 ["--ascii", "--range", "1"], ["--ascii", "--range", "2,1"],
                 ["--shade", "log"], ["--ascii", "--grid"]):
        one_line_error(show(*args, input=s, check=2), "show")
    p = show("--ascii", "--shade", "log", "--range", "-1,1", input=s, check=2)
    assert "--shade log --range -1,1: a log scale needs a range above 0" in \
        one_line_error(p, "show")
    # a record's own log scale (attn) over values none of which is positive
    # names the input and the record
    z = pack(tmp_path, attn=np.zeros((2, 2), np.float32))
    p = show("--ascii", "--name", "attn", input=z, check=1)
    assert one_line_error(p, "show").startswith(
        "andrea-show: <stdin>: record 1 'attn': a log scale needs positive")
    e = pack(tmp_path, x=np.zeros((0, 3), np.float32))
    if png_built(tmp_path):
        p = show("--png", tmp_path / "e.png", input=e, check=1)
        assert one_line_error(p, "show") == ("andrea-show: <stdin>: record 1 "
                                             "'x': an empty slice, nothing to "
                                             "draw")
    if png_built(tmp_path):
        p = show("--png", tmp_path / "x.png", "--grid", input=s, check=1)
        assert "--grid needs a record of 3 axes" in one_line_error(p, "show")
        g = pack(tmp_path, attn=np.zeros((3, 1, 4, 4), np.float32))
        p = show("--png", tmp_path / "x.png", "--grid", "--select", "0,0",
                 input=g, check=1)
        assert one_line_error(p, "show").endswith(
            "--select with --grid takes 1 index for shape [3,1,4,4], one "
            "fewer than its 2 leading axes (the grid runs along the next), "
            "not 2")
