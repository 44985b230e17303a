"""The built wheel carries every msnb module and the kernel logos.

pyproject.toml lists the packages by hand (so kernel/ can ship as
msnb.kernel_resources); an editable install would hide a forgotten one.
"""

import subprocess
import sys
import zipfile

from .conftest import REPO


def test_wheel_contains_all_modules_and_logos(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
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
