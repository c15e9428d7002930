"""andrea-pack's .npy input (NumPy's format, versions 1 to 3): a corpus of
bad files refused in one line each, NumPy's default types cast only on
request, and the usage errors.
"""
import os
import struct

import numpy as np
import pytest

from conftest import one_line_error, run
from test_stream import GiB, run_limited, save, unpack


# ------------------------------------------------------- .npy input corpus

def npy_raw(header, data=b"", version=1):
    """A .npy file from a header dict string."""
    pad = b" " * ((64 - (12 + len(header) + 1) % 64) % 64)
    h = header.encode() + pad + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return (b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h))
            + h + data)


def npy_cases(tmp):
    good = tmp / "good.npy"
    save(good, np.arange(10, dtype=np.float32))
    raw = good.read_bytes()
    cases = {
        "pickle": (np.array([{"a": 1}, None], dtype=object),
                   "object arrays (pickles) are refused"),
        "big-endian": (np.arange(4, dtype=">f4"), "big-endian data ('>f4')"),
        "float64": (np.arange(4, dtype=np.float64), "float64 data: andrea's "
                    "streams hold float32 (give --cast"),
        "int64": (np.arange(4, dtype=np.int64), "int64 data"),
        "bool": (np.zeros(4, bool), "'|b1' is not supported"),
        "structured": (np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]),
                       "structured dtypes are not supported"),
        "truncated": (raw[:-3], "data is 37 bytes, the header says 40"),
        "too long": (raw + b"\0", "data is 41 bytes, the header says 40"),
        "bad magic": (b"\x93NUMPX" + raw[6:], "not a .npy file"),
        "empty file": (b"", "not a .npy file"),
        "short header": (raw[:40], "truncated header"),
        "version 4": (raw[:6] + b"\x04" + raw[7:], "unsupported .npy version 4.0"),
        "version 1.1": (raw[:7] + b"\x01" + raw[8:],
                        "unsupported .npy version 1.1"),
        "newline in key": (npy_raw("{'descr': '<f4', 'fortran\norder': False, "
                                   "'shape': (1,), }", b"\0" * 4),
                           "malformed header dictionary"),
        "newline in descr": (npy_raw("{'descr': '<f\n4', 'fortran_order': "
                                     "False, 'shape': (1,), }", b"\0" * 4),
                             "malformed header dictionary"),
        "huge shape": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (1099511627776, 1099511627776), }"),
                       "array exceeds the cap of 8589934592 bytes"),
        "rank 9": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", b"\0" * 4),
                   "rank exceeds the maximum of 8"),
        "bad dict": (npy_raw("{'descr': '<f4', 'fortran_order': Maybe, "
                             "'shape': (1,), }", b"\0" * 4),
                     "malformed header dictionary"),
        "extra key": (npy_raw("{'descr': '<f4', 'fortran_order': False, "
                              "'shape': (1,), 'x': 1, }", b"\0" * 4),
                      "unexpected header key 'x'"),
        "no shape": (npy_raw("{'descr': '<f4', 'fortran_order': False, }"),
                     "header lacks descr, fortran_order or shape"),
        "huge header": (b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 30),
                        "header of 1073741824 bytes exceeds 65536"),
    }
    out = []
    for name, (content, expect) in cases.items():
        path = tmp / (name.replace(" ", "_") + ".npy")
        if isinstance(content, np.ndarray):
            save(path, content)
        else:
            path.write_bytes(content)
        out.append((name, path, expect))
    out.append(("missing", tmp / "missing.npy", "No such file or directory"))
    return out


def test_pack_refuses_bad_npy(tmp_path):
    for name, path, expect in npy_cases(tmp_path):
        p = run_limited("pack", f"x={path}", aspace=2 * GiB)
        assert p.returncode == 1, name
        assert p.stdout == b"", name
        line = one_line_error(p, "pack")
        assert line.startswith(f"andrea-pack: {path}: "), line
        assert expect in line, (name, line)


def test_pack_casts_numpys_defaults_on_request(tmp_path):
    """float64 and int64 (np.array's defaults) are refused with a hint,
    taken with --cast as float32 (rounded to nearest, Fortran order too)
    and int32, and a value that does not fit is an error naming its index."""
    f = np.asfortranarray(np.random.default_rng(3).standard_normal((3, 5)))
    i = np.array([[0, -7, 2**31 - 1], [-2**31, 5, 9]])
    np.save(tmp_path / "f.npy", f)
    np.save(tmp_path / "i.npy", i)
    for name, kind in (("f", "float64"), ("i", "int64")):
        p = run("pack", f"x={tmp_path / name}.npy", check=1)
        assert f"{kind} data" in one_line_error(p, "pack") and "--cast" in p.stderr.decode()
    out = unpack(tmp_path, run("pack", "--cast", f"f={tmp_path / 'f.npy'}",
                               f"i={tmp_path / 'i.npy'}", check=0).stdout)
    assert out["f"].dtype == np.float32 and np.array_equal(out["f"], f.astype(np.float32))
    assert out["i"].dtype == np.int32 and np.array_equal(out["i"], i)
    np.save(tmp_path / "big.npy", np.array([1, 2**31]))
    np.save(tmp_path / "huge.npy", np.array([0.0, 1e300]))
    for name, says in (("big", "2147483648 at index 1 to int32"),
                       ("huge", "1e+300 at index 1 to float32")):
        p = run("pack", "--cast", f"x={tmp_path / name}.npy", check=1)
        assert says in one_line_error(p, "pack")


@pytest.mark.parametrize("args,env", [
    ([], None),
    (["x y=a.npy"], None),
    (["=a.npy"], None),
    (["noequals"], None),
    (["-z", "10", "x=a.npy"], None),
    (["-z", "", "x=a.npy"], None),
    (["--threads", "0", "x=a.npy"], None),
    (["--bogus", "x=a.npy"], None),
    (["-q", "x=a.npy"], None),
    (["x=a.npy"], {"ANDREA_ZLEVEL": "fast"}),
    (["x=a.npy"], {"ANDREA_THREADS": "0"}),
])
def test_pack_usage_errors(tmp_path, args, env):
    save(tmp_path / "a.npy", np.zeros(3, np.float32))
    p = run("pack", "-o", tmp_path / "o.ats", *args, env=env, cwd=tmp_path,
            check=2)
    one_line_error(p, "pack")
    assert os.listdir(tmp_path) == ["a.npy"]
