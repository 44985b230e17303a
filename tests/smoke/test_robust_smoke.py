"""A smoke run leaves nothing behind and always delivers its verdict: signals, bad options, broken figures.

Real `msnb smoke` processes training MindSpore on CPU; each case is one named
reproduction from the reliability issue.  Processes of a run are found by the
``MSNB_SMOKE_ID`` marker every one of them carries, and by a working directory
under the test's own TMPDIR (so runs of other tests are never counted).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from msnb.smoke.run.options import SmokeOptions
from msnb.smoke.run.runner import prepare
from tests.conftest import REPO, msnb_command
from tests.smoke.test_smoke import smoke_processes

FIRST_STEP_S = 180  # generous: two msrun workers on a loaded 2-core CI machine
GONE_S = 30


def start_smoke(tmp_path: Path, *args) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.Popen(
        msnb_command() + ["smoke", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # a signal to the test's own group never reaches it
    )


def wait_for_steps(tmp_path: Path, proc: subprocess.Popen, steps: int = 2) -> None:
    deadline = time.monotonic() + FIRST_STEP_S
    while time.monotonic() < deadline:
        if any(len(p.read_text().splitlines()) > steps for p in tmp_path.glob("msnb-smoke-*/step_times*.csv")):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
    pytest.fail("no training step within the wait")


def wait_until_gone(tmp_path: Path) -> list[int]:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline and smoke_processes(tmp_path):
        time.sleep(0.3)
    return smoke_processes(tmp_path)


def scratch_dirs(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("msnb-smoke-*"))


@pytest.mark.parametrize(("sig", "workers"), [(signal.SIGTERM, 2), (signal.SIGHUP, 1)], ids=["sigterm-msrun-2-workers", "sighup-1-worker"])
def test_a_stop_signal_to_the_parent_ends_every_child_and_still_gives_the_verdict(tmp_path, sig, workers):
    proc = start_smoke(tmp_path, "--steps", 100000, "--workers", workers, "--no-live", "--out", tmp_path / "s.png")
    wait_for_steps(tmp_path, proc)
    running = smoke_processes(tmp_path)
    assert len(running) >= 1 + workers, "the guard and the worker(s) should be running"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert wait_until_gone(tmp_path) == [], f"left behind: {smoke_processes(tmp_path)}"
    assert proc.returncode == 1, err
    assert f"process: stopped by {signal.Signals(sig).name}" in out
    assert scratch_dirs(tmp_path) == []  # one rule for every stop (Ctrl-C too: tests/smoke/test_smoke.py)


@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "msrun-2-workers"])
def test_sigkill_of_the_parent_still_stops_the_training_and_removes_the_scratch_dir(tmp_path, workers):
    proc = start_smoke(tmp_path, "--steps", 100000, "--workers", workers, "--no-live", "--out", tmp_path / "k.png")
    wait_for_steps(tmp_path, proc)
    assert smoke_processes(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert wait_until_gone(tmp_path) == [], f"left behind: {smoke_processes(tmp_path)}"
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline and scratch_dirs(tmp_path):
        time.sleep(0.3)
    assert scratch_dirs(tmp_path) == []  # nobody is left to read it: the guard removed it


def broken_yaml(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("monitor_config:\n  collect_freq: [1, 2\n")
    return path


def a_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    return path


USAGE_ERRORS = {
    "steps-zero": (lambda t: ["--steps", "0"], "--steps must be a whole number of 1 or more"),
    "steps-negative": (lambda t: ["--steps", "-3"], "--steps must be a whole number of 1 or more"),
    "collect-freq-zero": (lambda t: ["--collect-freq", "0"], "--collect-freq must be a whole number of 1 or more"),
    "batch-size-zero": (lambda t: ["--batch-size", "0"], "--batch-size must be"),
    "timeout-zero": (lambda t: ["--timeout", "0"], "--timeout must be"),
    "summary-dir-is-a-file": (lambda t: ["--summary-dir", a_file(t)], "is a file, not a directory"),
    "summary-dir-under-a-file": (lambda t: ["--summary-dir", a_file(t) / "sub"], "cannot create it"),
    "summary-dir-not-empty": (lambda t: ["--summary-dir", a_file(t).parent], "already holds"),
    "steps-too-many": (lambda t: ["--steps", "1000000000"], "at most 1,000,000"),
    "module-is-a-directory": (lambda t: ["--module", t], "not a file"),
    "config-error": (lambda t: [broken_yaml(t)], "broken.yaml"),
    "module-missing": (lambda t: ["--module", "no_such_model.py"], "no such file"),
}


@pytest.mark.parametrize("case", list(USAGE_ERRORS), ids=list(USAGE_ERRORS))
def test_usage_errors_are_one_line_exit_2_before_mindspore_starts_and_leave_no_scratch_dir(tmp_path, run_msnb, case):
    make_args, message = USAGE_ERRORS[case]
    proc = run_msnb("smoke", *make_args(tmp_path), "--json", env={"TMPDIR": str(tmp_path)}, cwd=tmp_path, check=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("msnb smoke: error: ") and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    verdict = json.loads(proc.stdout)  # --json: every outcome has its JSON, a refusal too
    assert verdict["outcome"] == "refused" and verdict["exit_code"] == 2 and message in verdict["reason"]
    assert scratch_dirs(tmp_path) == [] and smoke_processes(tmp_path) == []
    assert not (tmp_path / "msnb_smoke.png").exists()


@pytest.fixture
def python_without_msrun(tmp_path):
    """This environment's interpreter and packages under a prefix whose bin/ holds no msrun (a venv layout of symlinks)."""
    prefix = Path(sys.prefix)
    if not (prefix / "pyvenv.cfg").exists():
        pytest.skip("the tests run outside a virtual environment")
    env_dir = tmp_path / "no-msrun-env"
    (env_dir / "bin").mkdir(parents=True)
    shutil.copy(prefix / "pyvenv.cfg", env_dir / "pyvenv.cfg")
    for name in ("lib", "lib64", "include"):
        if (prefix / name).exists():
            (env_dir / name).symlink_to(prefix / name)
    python = env_dir / "bin" / "python"
    python.symlink_to(Path(sys.executable).resolve())
    return python


def test_workers_2_without_msrun_is_a_usage_error(tmp_path, python_without_msrun):
    env = dict(os.environ, PATH=f"{python_without_msrun.parent}{os.pathsep}/usr/bin{os.pathsep}/bin", TMPDIR=str(tmp_path))
    assert shutil.which("msrun", path=env["PATH"]) is None
    proc = subprocess.run(
        [str(python_without_msrun), "-m", "msnb.cli", "smoke", "--workers", "2", "--steps", "10"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "msrun" in lines[0] and "--workers 1" in lines[0] and "FileNotFoundError" not in proc.stderr, proc.stderr
    assert scratch_dirs(tmp_path) == []


def test_lr_nan_still_delivers_the_verdict_and_the_json(tmp_path, run_msnb):
    proc = run_msnb("smoke", "--lr", "nan", "--steps", "20", "--json", "--out", tmp_path / "n.png", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, check=1)
    verdict = json.loads(proc.stdout)
    checks = {c["name"]: c for c in verdict["checks"]}
    assert verdict["passed"] is False
    assert checks["finite"]["status"] == "fail" and "nan" in checks["finite"]["detail"].lower()
    assert all(c["status"] != "fail" for name, c in checks.items() if name.startswith("figure"))  # drawing problems only warn
    assert "Traceback" not in proc.stderr
    assert verdict["kept"] and Path(verdict["summary_dir"]).exists()  # kept for a post-mortem, inside the test's TMPDIR


def test_out_in_a_missing_directory_is_refused_before_the_run(tmp_path, run_msnb):
    """The one output rule: a figure that could not be written is refused before anything trains, as plot and compare do."""
    out = tmp_path / "no" / "such" / "dir" / "fig.png"
    proc = run_msnb("smoke", "--steps", "12", "--json", "--out", out, cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, check=2)
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []  # nothing started: no scratch folder


def test_a_timeout_fails_the_process_only_and_says_the_run_was_stopped(tmp_path, run_msnb):
    proc = run_msnb(
        "smoke", "--steps", "100000", "--timeout", "60", "--json", "--out", tmp_path / "t.png", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, check=1
    )
    verdict = json.loads(proc.stdout)
    assert verdict["steps_trained"] > 0, "no step in 60 s: this machine was too busy to test a timeout mid-training"
    checks = {c["name"]: c for c in verdict["checks"]}
    assert checks["process"]["status"] == "fail" and "stopped by --timeout" in checks["process"]["detail"]
    assert checks["summaries"]["status"] == "pass", checks["summaries"]
    assert smoke_processes(tmp_path) == []

    # the writer cut off mid-record, as a stop can leave it: expected after a stop, damage after a normal end
    from msnb.events import read
    from msnb.smoke.builtin.judging import judge_smoke
    from msnb.smoke.shared.verdict import ProcessOutcome

    summary = Path(verdict["summary_dir"])
    (event_file,) = summary.rglob("*_MS")
    event_file.chmod(0o600)
    with open(event_file, "ab") as f:
        f.write((1000).to_bytes(8, "little") + b"\0\0")  # a length, no CRC, no payload
    damaged = read(summary)
    assert [p.kind for p in damaged.problems if p.severity != "info"] == ["truncated"]

    def summaries(timed_out):
        outcome = ProcessOutcome(None if timed_out else 0, False, timed_out, 10.0, "")
        checks = judge_smoke(outcome, damaged, damaged, {}, {"collect_freq": 5}, "CPU", "CPU", [], summary, 1)
        return next(c for c in checks if c.name == "summaries")

    after_stop, after_end = summaries(True), summaries(False)
    assert after_stop.status == "pass" and "the run was stopped" in after_stop.detail and "cut short" in after_stop.detail
    assert after_end.status == "fail" and "truncated" in after_end.detail


def test_device_ascend_without_ascend_fails_the_device_check(tmp_path, run_msnb):
    if os.path.exists("/dev/davinci0"):
        pytest.skip("this machine has an Ascend device")
    proc = run_msnb("smoke", "--device", "ascend", "--steps", "5", "--json", "--out", tmp_path / "a.png", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, check=1)
    device = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "device")
    assert device["status"] == "fail" and "not usable here" in device["detail"] and "/dev/davinci" in device["detail"]


def test_module_relative_path_resolves_against_the_callers_directory(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.py").write_text("net = None\n")
    monkeypatch.chdir(tmp_path)
    prepared = prepare(SmokeOptions(module="models/m.py", steps=5))
    assert prepared.module == str(tmp_path / "models" / "m.py") and prepared.module_path is None
    by_name = prepare(SmokeOptions(module="models.m", steps=5))
    assert by_name.module == "models.m" and by_name.module_path == str(tmp_path)  # imported from the caller's directory


def readme_module_command() -> list[str]:
    line = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("msnb smoke --module"))
    return line.split("#")[0].split()


def test_the_readme_module_command_runs_literally_from_the_repo_root():
    command = readme_module_command()
    assert command == ["msnb", "smoke", "--module", "examples/my_model.py", "--json"]
    figure = REPO / "msnb_smoke.png"
    existed = figure.exists()
    try:
        proc = subprocess.run(msnb_command() + command[1:], capture_output=True, text=True, cwd=REPO, timeout=600)
        verdict = json.loads(proc.stdout)
        assert proc.returncode == 0 and verdict["passed"], proc.stdout
        assert verdict["steps_trained"] == 200 and verdict["plot"] == str(figure)
        assert {c["name"]: c["status"] for c in verdict["checks"]}["loss_falling"] == "pass"
        assert {c["name"] for c in verdict["checks"]} >= {"process", "summaries", "loss_falling"}  # a module's run is judged as msnb's own
        assert verdict["summary_dir"] is None and "removed" in verdict["summary_dir_note"]
    finally:
        if not existed:
            figure.unlink(missing_ok=True)  # the README's command writes it in the current directory, as it says


# the live view says what it waits for from the start: tests/test_display_texts.py, on its smoke run with a text view


def test_sink_size_on_cpu_says_sink_mode_was_not_rehearsed():
    from msnb.smoke import run_smoke

    result = run_smoke(steps=20, sink_size=5, live=False, device="CPU")
    sink = result.check("sink_mode")
    assert sink.status == "warn" and "CPU without sink mode" in sink.detail and "sink_size=5" in sink.detail
    assert result.check("process").status == "pass" and result.steps_trained == 20
    shutil.rmtree(result.workdir, ignore_errors=True)


def test_one_option_list_feeds_the_cli_and_the_magic():
    from msnb.cli import build_parser
    from msnb.magics import MsnbMagics
    from msnb.smoke.run.options import SMOKE_OPTIONS

    cli_help = build_parser().parse_known_args(["smoke"])[0]
    magic_parser = MsnbMagics.mfmon_smoke.parser
    magic_flags = {s for a in magic_parser._actions for s in a.option_strings}
    for opt in SMOKE_OPTIONS:
        if opt.where == "both" and opt.flags[0].startswith("--"):
            assert opt.flags[0] in magic_flags
            assert hasattr(cli_help, opt.flags[0][2:].replace("-", "_"))
    for action in magic_parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help, action.dest
            if action.default not in (None, False):
                assert "default" in action.help, action.dest


def test_every_smoke_option_lands_in_a_field_and_one_that_would_not_is_refused():
    """A parsed option whose name matches no SmokeOptions field (a renamed field's old flag) was silently dropped."""
    import argparse

    from msnb.errors import SmokeError
    from msnb.options import Option, add_arguments
    from msnb.smoke.run.options import SMOKE_OPTIONS

    def parsed(options, argv):
        return SmokeOptions.from_namespace(add_arguments(argparse.ArgumentParser(), options).parse_args(argv), options=options)

    got = parsed(SMOKE_OPTIONS, ["run.yaml", "--steps", "7", "--batch-size", "3", "--no-live", "--shrink", "never", "--keep", "--json"])
    assert (got.config, got.steps, got.batch_size, got.live, got.shrink, got.keep) == ("run.yaml", 7, 3, False, "never", True)
    assert parsed((Option(("-n",), "steps under another flag", type=int, dest="steps"),), ["-n", "9"]).steps == 9
    stale = SMOKE_OPTIONS + (Option(("--step-count",), "a renamed field's old flag", type=int),)
    with pytest.raises(SmokeError, match="--step-count would be ignored: 'step_count' is no field"):
        parsed(stale, ["--step-count", "9"])


def test_a_kernel_restart_during_a_smoke_run_leaves_no_training_behind(jupyter_dirs, tmp_path):
    """In a real kernel from the kernelspec: a bad option fails the cell with one line; a restart mid-run (SIGKILL) stops the training."""
    from jupyter_client.manager import start_new_kernel

    from msnb import kernel

    kernel.install("msnb-test-robust-smoke", prefix=jupyter_dirs["prefix"])
    km, kc = start_new_kernel(kernel_name="msnb-test-robust-smoke", startup_timeout=120, env=dict(os.environ, TMPDIR=str(tmp_path)), cwd=str(tmp_path))
    try:
        reply = kc.execute_interactive("%mfmon_smoke --steps 0", timeout=60)
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "UsageError"
        assert "--steps must be a whole number of 1 or more" in reply["content"]["evalue"]
        assert scratch_dirs(tmp_path) == []

        kc.execute("%mfmon_smoke --steps 100000 --no-live")
        deadline = time.monotonic() + FIRST_STEP_S
        while time.monotonic() < deadline and not any(len(p.read_text().splitlines()) > 2 for p in tmp_path.glob("msnb-smoke-*/step_times*.csv")):
            time.sleep(0.3)
        assert smoke_processes(tmp_path), "the smoke run should be training"
        km.restart_kernel(now=True)  # what Jupyter's "Restart kernel" does to a busy kernel: SIGKILL
        assert wait_until_gone(tmp_path) == [], f"left behind: {smoke_processes(tmp_path)}"
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline and scratch_dirs(tmp_path):
            time.sleep(0.3)
        assert scratch_dirs(tmp_path) == []
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_python_api_refuses_what_the_cli_refuses_and_accepts_numpy_integers():
    import numpy as np

    from msnb.errors import SmokeError
    from msnb.smoke import run_smoke

    SmokeOptions(steps=np.int64(5), timeout=np.float32(3.0)).validate()
    for bad in ({"steps": True}, {"steps": 5.0}, {"collect_freq": 0}, {"timeout": float("inf")}, {"mode": "eager"}, {"workers": 0}):
        with pytest.raises(SmokeError):
            SmokeOptions(**bad).validate()
    with pytest.raises(SmokeError, match="--steps"):
        run_smoke(steps=0)
