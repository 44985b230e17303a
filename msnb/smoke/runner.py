"""The smoke runner: a short, monitored training in a child process, watched live, then judged.

``run_smoke()`` is what ``%mfmon_smoke`` and ``msnb smoke`` call.  The child
writes into a fresh private directory; the parent follows it with msnb's
incremental reader, draws one live view, and after the child ends reads the
files from disk and judges them.  A crash, a hang or a NaN stays in the child;
interrupting the run stops the child and its workers and still judges what was
collected.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import yaml

from ..config import load_config, monitor_settings
from ..config.lint import lint
from ..errors import SmokeError
from ..events import Follower, read
from .device import choose_device
from .figures import smoke_figures
from .judging import judge_smoke
from .result import SmokeResult
from .verdict import FAIL, ProcessOutcome

DEFAULTS = {"steps": 200, "batch_size": 32, "lr": 0.05, "collect_freq": 5}
LOG_TAIL_LINES = 25


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    keep = [line for line in text.splitlines() if line.strip()]
    return "\n".join(keep[-lines:])


def _marked_processes(marker: str) -> list[int]:
    """Processes whose environment carries this run's marker (msrun starts its workers in new sessions,
    so the process group alone does not reach them; the environment is inherited by all)."""
    needle = f"MSNB_SMOKE_ID={marker}".encode()
    found = []
    if os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry))
            except OSError:
                continue
        return found
    try:  # not Linux: psutil, where installed
        import psutil
    except ImportError:
        return found
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("MSNB_SMOKE_ID") == marker:
                found.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return found


def _kill_run(proc: subprocess.Popen, marker: str, grace: float = 5.0) -> None:
    """Stop the child and everything it started, msrun's workers included."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # msrun stops its workers on SIGTERM when it can
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _marked_processes(marker)
        if proc.poll() is None:
            pids.append(proc.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _marked_processes(marker):
            time.sleep(0.1)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass


def _read_step_times(workdir: Path) -> dict:
    out = {}
    for path in sorted(workdir.glob("step_times*.csv")):
        rank = int(path.stem.split("rank")[1]) if "rank" in path.stem else 0
        try:
            rows = np.atleast_2d(np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2))
        except (ValueError, OSError):
            continue
        if rows.size == 0 or rows.shape[1] < 4:
            continue
        out[rank] = (rows[:, 0].astype(int), rows[:, 1], rows[:, 2].astype(bool), rows[:, 3])
    return out


def _effective_monitor(config, *, summary_dir: str, collect_freq: int | None) -> tuple[dict, object]:
    """The monitor_config the child uses: the user's, pointed at the smoke directory."""
    block: dict = {}
    loaded = None
    if config is not None:
        loaded = load_config(config)
        settings = monitor_settings(loaded)  # validates; raises ConfigError naming file and key
        block = {k: v for k, v in (loaded.get("monitor_config") or {}).items() if k in settings.present}
    block["summary_dir"] = summary_dir
    block["collect_freq"] = int(collect_freq or block.get("collect_freq") or DEFAULTS["collect_freq"])
    block["per_print_times"] = 1
    block["keep_default_callbacks"] = True
    block["flush_interval"] = 1
    block["per_rank_dir"] = True
    return {"monitor_config": block}, loaded


def run_smoke(
    config=None,
    *,
    steps: int = DEFAULTS["steps"],
    batch_size: int = DEFAULTS["batch_size"],
    lr: float | None = None,
    collect_freq: int | None = None,
    device: str | None = None,
    workers: int = 1,
    summary_dir: str | os.PathLike | None = None,
    keep: bool = False,
    live: bool = True,
    code: str | None = None,
    module: str | None = None,
    mode: str = "pynative",
    timeout: float | None = None,
    view=None,
    poll_interval: float = 0.25,
) -> SmokeResult:
    """Train *steps* small-batch steps under monitoring and judge what was written.

    *config*: a YAML whose ``monitor_config`` to test (its collection settings
    are used; the summary goes to the smoke directory).  *code*: Python source
    defining ``net``, ``loss_fn``, ``optimizer``, ``dataset`` (or ``build()``);
    *module*: a file or module that does the same; neither: msnb's built-in
    network.  *workers* > 1 starts that many data-parallel CPU workers with
    msrun.  *mode*: MindSpore's "pynative" (its default, and where the
    built-in model's ``lr`` summary op is collected) or "graph".  The directory
    is removed after a pass unless *keep* (or *summary_dir* was given); it is
    always kept after a failure.
    """
    started = time.monotonic()
    if workers < 1:
        raise SmokeError("workers must be 1 or more")
    device_name, device_reason = choose_device(device)
    workdir = Path(tempfile.mkdtemp(prefix="msnb-smoke-"))  # private: 0700
    summary = Path(summary_dir).expanduser().resolve() if summary_dir else workdir / "summary"
    summary.mkdir(parents=True, exist_ok=True, mode=0o700)
    monitor, loaded = _effective_monitor(config, summary_dir=str(summary), collect_freq=collect_freq)
    (workdir / "monitor.yaml").write_text(yaml.safe_dump(monitor, sort_keys=False))
    findings = lint(loaded, steps=steps, distributed=workers > 1) if loaded is not None else []
    findings += [
        f
        for f in lint(monitor, steps=steps, distributed=workers > 1)  # what the child will actually use
        if f.rule not in {x.rule for x in findings} and f.severity != "info"
    ]

    code_path = None
    if code is not None:
        code_path = workdir / "user_code.py"
        code_path.write_text(code)
    mf_model = None
    if loaded is not None and isinstance(loaded.get("model"), dict) and ("trainer" in loaded.data or "run_mode" in loaded.data):
        arch = (loaded.get("model.arch") or {}).get("type") if isinstance(loaded.get("model.arch"), dict) else None
        mf_model = arch or "a mindformers model"
    spec = {
        "mindformers_model": mf_model,
        "steps": int(steps),
        "batch_size": int(batch_size),
        "lr": float(lr if lr is not None else DEFAULTS["lr"]),
        "device": device_name,
        "mode": mode,
        "config": str(workdir / "monitor.yaml"),
        "workdir": str(workdir),
        "collect_freq": monitor["monitor_config"]["collect_freq"],
        "code": str(code_path) if code_path else None,
        "module": str(module) if module else None,
        "distributed": workers > 1,
        "seed": 0,
    }
    (workdir / "spec.json").write_text(json.dumps(spec))

    env = dict(os.environ)
    marker = uuid.uuid4().hex
    env["MSNB_SMOKE_ID"] = marker  # marks every process of this run, whatever session it is in
    env["PYTHONUNBUFFERED"] = "1"
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")  # msrun starts `python` from PATH
    if workers == 1:
        cmd = [sys.executable, "-m", "msnb.smoke.worker", str(workdir / "spec.json")]
    else:
        entry = Path(__file__).with_name("msrun_entry.py")
        cmd = [
            os.path.join(bin_dir, "msrun"),
            f"--worker_num={workers}",
            f"--local_worker_num={workers}",
            f"--master_port={_free_port()}",
            f"--log_dir={workdir / 'logs'}",
            "--join=True",
            str(entry),
            str(workdir / "spec.json"),
        ]
    log_path = workdir / "train.log"

    from ..plot.live import LiveView

    if live and view is None:
        view = LiveView(title=f"msnb smoke on {device_name}", total=steps, tags=["loss"], min_interval=0.3)
    follower = Follower(workdir)
    first_live_wall = None
    interrupted = timed_out = False
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir), env=env, start_new_session=True)
        try:
            while proc.poll() is None:
                new = follower.poll()
                if len(new.scalars) and first_live_wall is None:
                    first_live_wall = time.time()
                if view is not None and len(new.scalars):
                    view.update(follower.result.scalars, step=int(np.max(follower.result.scalars.step)))
                if timeout is not None and time.monotonic() - started > timeout:
                    timed_out = True
                    break
                time.sleep(poll_interval)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            _kill_run(proc, marker)
    returncode = proc.returncode
    follower.close()
    everything = follower.result
    summary_read = read(summary)
    times = _read_step_times(workdir)
    log_tail = _tail(log_path) or "\n".join(_tail(p) for p in sorted((workdir / "logs").glob("worker_*.log")))
    if workers > 1 and returncode not in (0, None):
        worker_tails = [f"--- {p.name}\n{_tail(p, 12)}" for p in sorted((workdir / "logs").glob("worker_*.log"))]
        log_tail = "\n".join([log_tail] + worker_tails).strip()
    outcome = ProcessOutcome(returncode, interrupted, timed_out, time.monotonic() - started, log_tail)

    checks = judge_smoke(outcome, summary_read, everything, times, spec, device_name, device_reason, findings, summary, workers)
    passed = not any(c.status == FAIL for c in checks)
    trained = max((int(t[0].max()) for t in times.values() if t[0].size), default=0)
    first_step_wall = min((float(t[3][0]) for t in times.values() if t[3].size), default=None)
    delay = (first_live_wall - first_step_wall) if first_live_wall and first_step_wall else None

    figure, hist_figure = smoke_figures(summary_read, times)
    kept = keep or summary_dir is not None or not passed
    result = SmokeResult(
        passed=passed,
        checks=checks,
        summary_dir=str(summary),
        kept=kept,
        device=device_name,
        device_reason=device_reason,
        steps=int(steps),
        steps_trained=trained,
        elapsed_s=outcome.elapsed_s,
        workdir=str(workdir),
        tables=everything,
        step_times={r: t[:3] for r, t in times.items()},
        log_tail=log_tail,
        findings=findings,
        figure=figure,
        histogram_figure=hist_figure,
        first_live_delay_s=delay,
        ranks=sorted(times) if times else [],
    )
    if view is not None:
        view.close(everything.scalars, status=("PASSED" if passed else "FAILED") + f" after {trained} steps; verdict below")
    if passed and not keep:
        shutil.rmtree(workdir, ignore_errors=True)  # logs and spec; the summaries too unless --summary-dir put them elsewhere
    return result
