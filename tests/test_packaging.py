"""The built wheel carries every msnb module and the kernel logos.

pyproject.toml lists the packages by hand (so kernel/ can ship as
msnb.kernel_resources); an editable install would hide a forgotten one.  The
wheel is built from a copy of the tracked files, so setuptools' ``build/`` and
``*.egg-info`` land in the test's temporary directory, not in the checkout.
The checkout is checked for those names only: a second test process runs
beside this one, and what it does there is not the wheel build's.
"""

import shutil
import subprocess
import sys
import zipfile

from tests.conftest import REPO


def tracked_copy(dest):
    """The checkout's files that git tracks or would (what a clone has, plus new files not yet added), copied to *dest*."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True)
    names = listing.stdout.decode().split("\0")
    for name in filter(None, names):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copy2(source, dest / name)
            except FileNotFoundError:  # a file the other test process wrote and removed since the listing
                pass
    return dest


def test_wheel_contains_all_modules_and_logos(tmp_path):
    before = {p.name for p in REPO.iterdir()}
    source = tracked_copy(tmp_path / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("msnb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {p.relative_to(REPO).as_posix() for p in (REPO / "msnb").rglob("*.py")}
    assert expected - names == set(), "add the missing subpackages to [tool.setuptools] packages"
    assert {"msnb/kernel_resources/logo-32x32.png", "msnb/kernel_resources/logo-64x64.png"} <= names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "msnb = msnb.cli:main" in entry_points
    left = {p.name for p in REPO.iterdir()} - before
    assert {n for n in left if n in ("build", "dist") or n.endswith(".egg-info")} == set()  # no build/ or egg-info left in the checkout
