"""Runs test modules where pytest is not installed (the GPU machine).

    python3 tests/run_without_pytest.py tests/test_stages.py tests/test_filters.py

Only what these suites use is provided: a stand-in `pytest` module with
mark.parametrize (stacked, as a cartesian product), mark.skipif, fail, skip
and raises, and the tmp_path fixture.  Prints one line per failure and ends
with "N passed, N failed, N skipped"; exits 1 when a test failed.
"""
import importlib.util
import inspect
import itertools
import os
import sys
import tempfile
import traceback
import types
import pathlib


class Skipped(Exception):
    pass


class Failed(AssertionError):
    pass


def _parametrize(names, values, ids=None):
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) \
        else list(names)

    def deco(fn):
        rows = [v if len(names) > 1 else (v,) for v in values]
        fn.__dict__.setdefault("_params", []).append((names, rows))
        return fn
    return deco


def _skipif(cond, reason=""):
    def deco(fn):
        if cond:
            fn._skip = reason
        return fn
    return deco


class _Raises:
    def __init__(self, exc, match=None):
        self.exc = exc

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            raise Failed(f"DID NOT RAISE {self.exc}")
        return issubclass(et, self.exc)


def _fail(msg=""):
    raise Failed(msg)


def _skip(msg=""):
    raise Skipped(msg)


def install_fake_pytest():
    m = types.ModuleType("pytest")
    m.mark = types.SimpleNamespace(parametrize=_parametrize, skipif=_skipif)
    m.fail, m.skip, m.raises = _fail, _skip, _Raises
    sys.modules["pytest"] = m


def cases(fn):
    """(id, kwargs) for every combination of the parametrize decorators."""
    params = getattr(fn, "_params", [])
    if not params:
        yield "", {}
        return
    for combo in itertools.product(*[rows for _, rows in params]):
        kw = {}
        for (names, _), row in zip(params, combo):
            kw.update(zip(names, row))
        yield "-".join(map(str, kw.values())), kw


def main(paths):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    install_fake_pytest()
    passed = failed = skipped = 0
    for path in paths:
        name = os.path.basename(path)[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for fname, fn in inspect.getmembers(mod, inspect.isfunction):
            if not fname.startswith("test_") or fn.__module__ != name:
                continue
            for cid, kw in cases(fn):
                label = f"{name}::{fname}[{cid}]"
                if getattr(fn, "_skip", None) is not None:
                    skipped += 1
                    continue
                with tempfile.TemporaryDirectory() as tmp:
                    if "tmp_path" in inspect.signature(fn).parameters:
                        kw = dict(kw, tmp_path=pathlib.Path(tmp))
                    try:
                        fn(**kw)
                        passed += 1
                    except Skipped:
                        skipped += 1
                    except Exception:
                        failed += 1
                        err = traceback.format_exc().strip().splitlines()
                        print(f"FAILED {label}: {err[-1]}")
                        print("    " + "\n    ".join(err[-12:]))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
