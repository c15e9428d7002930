"""The layering of lib/ and kernels/ (docs/ARCHITECTURE.md): each folder
includes only the folders below it, and only the command-line layer
(lib/cli) and the programs themselves may end the process."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> the folders its files may include (itself included)
BELOW = {
    "lib/core": {"core"},
    "lib/stream": {"core", "stream"},
    "lib/text": {"core", "stream", "text"},
    "lib/model": {"core", "stream", "text", "model"},
    "lib/ops": {"core", "stream", "text", "model", "ops"},
    "lib/train": {"core", "stream", "text", "model", "ops", "train"},
    "lib/view": {"core", "stream", "text", "view"},
    "lib/cli": {"core", "stream", "text", "model", "ops", "train", "view",
                "cli"},
    # kernels: their own common layer and the lib headers they implement
    "kernels/common": {"common", "ops"},
    "kernels/ops": {"common", "model", "ops"},
    "kernels/forward": {"common", "model", "ops", "forward"},
    "kernels/train": {"common", "model", "ops", "forward", "train"},
}
SOURCE = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# what ends the process: exit(), _exit(), abort() and the cli layer's dying
# calls; comments and strings are cut out before looking
ENDS = re.compile(r"\b(exit|_exit|_Exit|abort|quick_exit|cli_die|cli_fail|"
                  r"cli_usage_error|cli_bad_option|at_filter_die)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)


def sources(folder):
    top = os.path.join(ROOT, folder)
    for name in sorted(os.listdir(top)):
        if name.endswith(SOURCE):
            yield os.path.join(folder, name), open(os.path.join(top, name)).read()


def test_every_library_folder_is_a_known_layer():
    for top in ("lib", "kernels"):
        for name in os.listdir(os.path.join(ROOT, top)):
            path = f"{top}/{name}"
            if os.path.isdir(os.path.join(ROOT, path)) and path != "kernels/check":
                assert path in BELOW, f"{path}: a folder no layer rule names"
        loose = [n for n in os.listdir(os.path.join(ROOT, top)) if n.endswith(SOURCE)]
        assert not loose, f"{top}/ holds sources outside a layer folder: {loose}"


@pytest.mark.parametrize("folder", sorted(BELOW))
def test_includes_go_only_downward(folder):
    for path, text in sources(folder):
        for inc in INCLUDE.findall(text):
            layer = inc.split("/")[0] if "/" in inc else None
            assert layer in BELOW[folder], (
                f'{path}: #include "{inc}" reaches outside the layers below '
                f"{folder} ({', '.join(sorted(BELOW[folder]))})")


@pytest.mark.parametrize("folder", sorted(f for f in BELOW if f != "lib/cli"))
def test_only_the_cli_layer_ends_the_process(folder):
    for path, text in sources(folder):
        code = COMMENT.sub("", text)
        for n, line in enumerate(code.split("\n"), 1):
            m = ENDS.search(line)
            assert not m, f"{path}:{n}: {m[1]}() outside lib/cli and cmd/"


def test_the_rule_sees_an_exit():
    # the check itself must be able to fail
    assert ENDS.search(COMMENT.sub("", "int f(void) { exit(1); }"))
    assert not ENDS.search(COMMENT.sub("", "/* exit(1) */ int f; // cli_die(\n"))
    assert not ENDS.search(COMMENT.sub("", 'puts("exit(2)");'))


def test_commands_make_no_device_decisions():
    # one dispatch point per stage: the device is resolved and passed on,
    # never tested, in cmd/
    for path, text in sources("cmd"):
        code = COMMENT.sub("", text)
        assert "AT_DEV_CUDA" not in code and "AT_DEV_CPU" not in code, (
            f"{path}: a device branch in a command (the library dispatches)")
        assert not re.search(r"\bat_cuda_\w+\s*\(", code), (
            f"{path}: calls a CUDA entry directly (the library dispatches)")


def unnamed_in_the_map(doc, folders):
    """The source files of `folders` the map does not name: as stem.c,
    .h, .cu or .cuh (a header named covers its .c, and the reverse), or,
    for a stem with an underscore (cublas_lazy, sdpa_check), bare."""
    missing = []
    for folder in folders:
        for path, _ in sources(folder):
            stem = re.escape(os.path.splitext(os.path.basename(path))[0])
            named = rf"\b{stem}\.(c|h|cu|cuh)\b" + (
                rf"|\b{stem}\b" if "_" in stem else "")
            if not re.search(named, doc):
                missing.append(path)
    return missing


def test_the_map_names_every_source_file():
    # docs/ARCHITECTURE.md is the map of the code: a file it never names
    # is a part of the house nobody can find from it
    doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    missing = unnamed_in_the_map(doc, sorted(BELOW) + ["kernels/check"])
    assert not missing, f"docs/ARCHITECTURE.md names none of {missing}"
    # and the check can fail: a map without kernels/train/norm.cu's name
    assert unnamed_in_the_map(doc.replace("norm.cu", "?"),
                              ["kernels/train"]) == ["kernels/train/norm.cu"]
