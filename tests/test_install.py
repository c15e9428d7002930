"""make install puts every executable and man page under DESTDIR/PREFIX."""
import glob
import os
import subprocess

from conftest import ROOT, build_settings


def test_make_install_into_a_staging_directory(tmp_path):
    p = subprocess.run(["make", "-s", "install", f"DESTDIR={tmp_path}",
                        "PREFIX=/opt/andrea", *build_settings()], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    root = tmp_path / "opt" / "andrea"
    for src in glob.glob(os.path.join(ROOT, "cmd", "andrea-*.c")):
        exe = root / "bin" / os.path.basename(src)[:-2]
        assert exe.is_file() and os.access(exe, os.X_OK), exe
    for page in glob.glob(os.path.join(ROOT, "man", "man[157]", "*")):
        sec = os.path.basename(os.path.dirname(page))
        assert (root / "share" / "man" / sec / os.path.basename(page)).is_file()
    version = subprocess.run([str(root / "bin" / "andrea-show"), "--version"],
                             capture_output=True, text=True)
    assert version.returncode == 0 and "andrea" in version.stdout
