"""Shared fixtures: every test runs with its own Jupyter folders.

Kernelspecs a test installs land in a temporary JUPYTER_DATA_DIR (the --user
location) or a temporary prefix put on JUPYTER_PATH, never in the developer's
real Jupyter folders.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def msnb_command() -> list[str]:
    """The installed console script, as a user runs it."""
    script = BIN / "msnb"
    if script.exists():
        return [str(script)]
    found = shutil.which("msnb")
    assert found, "the msnb console script is not installed (pip install -e .)"
    return [found]


@pytest.fixture(autouse=True)
def jupyter_dirs(tmp_path, monkeypatch):
    """Private Jupyter data dir (the --user target) and a prefix searched first."""
    data = tmp_path / "jupyter-data"
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    return {"data": data, "prefix": prefix}


@pytest.fixture
def run_msnb():
    """Run the msnb console script in a child process; returns CompletedProcess."""

    def run(*args, env=None, check=None, timeout=300, cwd=None):
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.run(
            msnb_command() + [str(a) for a in args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            cwd=cwd,
        )
        if check is not None:
            assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        return proc

    return run
