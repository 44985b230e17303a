"""Hostile inputs, round three: where msnb writes, which folders it walks, what the smoke's child leaves in /tmp.

One test per reproduction.  Each command runs in a child process as a user
runs it; the file system is checked after it (nothing replaced, nothing new),
its exit code too, and where memory was the failure, the child's own peak RSS
(``wait4``'s rusage of that one process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from msnb.errors import UsageError
from msnb.outputs import check_out, figure_out, save_figure, write_file
from tests.conftest import REPO, msnb_command
from tests.smoke.test_robust_smoke import GONE_S, wait_for_steps, wait_until_gone
from tests.smoke.test_smoke import USER_CODE
from tests.test_robust_commands import msnb, one_line_error, tbx_run

CSV = "step,loss\n1,2.0\n2,1.9\n3,1.8\n4,1.7\n"


PEAK_WRAPPER = """
import atexit, sys
def _peak():
    with open("/proc/self/status") as f:
        peak = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as out:
        out.write(peak)
atexit.register(_peak)
from msnb.cli import main
sys.exit(main(sys.argv[2:]))
"""


def measured(*args, timeout=240, cwd=None, env=None) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``msnb ARGS`` and return its result and its own peak RSS in MB.

    VmHWM, read by the command itself as it exits: ru_maxrss is not its own (Linux keeps it across exec,
    so a child of a large pytest process would start at the parent's size).
    """
    peak_file = tempfile.NamedTemporaryFile(delete=False)
    peak_file.close()
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    cmd = [sys.executable, "-c", PEAK_WRAPPER, peak_file.name, *map(str, args)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=cwd, timeout=timeout)
        peak_kb = int(Path(peak_file.name).read_text() or 0)
    finally:
        os.unlink(peak_file.name)
    return done, peak_kb // 1024


def snapshot(root: Path) -> dict:
    """Every entry under *root* (links as their target text, files by size and mtime): what a command may not change."""
    found = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(d) / name
            found[str(p)] = f"-> {os.readlink(p)}" if p.is_symlink() else (None if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns))
    return found


# ------------------------------------------------------------------ one rule for every written file


def test_the_smoke_default_figure_never_follows_a_planted_symlink(tmp_path):
    """``ln -s VICTIM msnb_smoke.png; msnb smoke`` replaced the victim with a PNG."""
    victim = tmp_path / "VICTIM"
    victim.write_text("precious\n")
    (tmp_path / "msnb_smoke.png").symlink_to("VICTIM")
    before = snapshot(tmp_path)
    proc = msnb("smoke", "--steps", 3, "--no-live", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    one_line_error(proc, "msnb_smoke.png", "symbolic link")
    assert victim.read_text() == "precious\n" and snapshot(tmp_path) == before


def test_the_smoke_never_writes_its_figure_over_the_config_it_trains(tmp_path):
    """``msnb smoke cfg.svg --out cfg.svg`` overwrote the config being trained."""
    cfg = tmp_path / "cfg.svg"
    cfg.write_text("monitor_config:\n  collect_freq: 2\n")
    before = snapshot(tmp_path)
    proc = msnb("smoke", cfg, "--out", cfg, "--steps", 3, "--no-live", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    one_line_error(proc, "cfg.svg", "which this command reads")
    assert snapshot(tmp_path) == before


def test_compare_never_writes_its_figure_over_the_baseline(tmp_path):
    """``msnb compare keep.png cand.csv --out keep.png`` overwrote the baseline."""
    keep, cand = tmp_path / "keep.png", tmp_path / "cand.csv"
    keep.write_text(CSV)
    cand.write_text(CSV)
    before = snapshot(tmp_path)
    for out in ("keep.png", "cand.csv", str(keep)):
        one_line_error(msnb("compare", "keep.png", "cand.csv", "--out", out, cwd=tmp_path), "which this command reads")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["smoke", "compare", "plot"])
def test_out_on_dev_full_is_refused_and_nothing_is_created_in_dev(tmp_path, command):
    """``--out /dev/full`` as root created /dev/full.png and said "wrote /dev/full"."""
    run = tbx_run(tmp_path / "run", 20)
    (tmp_path / "c.csv").write_text(CSV)
    args = {"smoke": ["smoke", "--steps", 3, "--no-live"], "compare": ["compare", "c.csv", "c.csv"], "plot": ["plot", run]}[command]
    for out in ("/dev/full", "/dev/msnb-new-figure", "/proc/self/fd/1"):
        proc = msnb(*args, "--out", out, cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
        one_line_error(proc, out)
        assert "wrote" not in proc.stdout
    assert not os.path.lexists("/dev/full.png") and not os.path.lexists("/dev/msnb-new-figure.png")


@pytest.mark.parametrize("command", ["smoke", "compare", "plot", "report"])
def test_out_naming_an_existing_folder_is_refused(tmp_path, command):
    """``--out EXISTING_DIR`` wrote EXISTING_DIR.png and said it wrote the folder."""
    run = tbx_run(tmp_path / "run", 20)
    (tmp_path / "c.csv").write_text(CSV)
    (tmp_path / "figs").mkdir()
    args = {"smoke": ["smoke", "--steps", 3, "--no-live"], "compare": ["compare", "c.csv", "c.csv"], "plot": ["plot", run], "report": ["report", run]}[command]
    proc = msnb(*args, "--out", "figs", cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    one_line_error(proc, "figs", "is a directory")
    assert not (tmp_path / "figs.png").exists() and list((tmp_path / "figs").iterdir()) == []


@pytest.mark.parametrize("command", ["smoke", "compare", "plot", "report"])
def test_every_command_that_writes_refuses_a_symlink_out(tmp_path, command):
    """The one rule for every written file: a link named as --out is refused, its target untouched."""
    run = tbx_run(tmp_path / "run", 20)
    (tmp_path / "c.csv").write_text(CSV)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    name = "link.html" if command == "report" else "link.png"
    (tmp_path / name).symlink_to(victim)
    args = {"smoke": ["smoke", "--steps", 3, "--no-live"], "compare": ["compare", "c.csv", "c.csv"], "plot": ["plot", run], "report": ["report", run]}[command]
    before = snapshot(tmp_path)
    one_line_error(msnb(*args, "--out", name, cwd=tmp_path, env={"TMPDIR": str(tmp_path)}), name, "symbolic link")
    assert snapshot(tmp_path) == before


def test_the_path_said_is_the_path_written_through_a_temporary_name(tmp_path):
    """A name with no format gets .png: that file is what is checked, written and reported; no temporary file is left."""
    (tmp_path / "c.csv").write_text(CSV)
    proc = msnb("compare", "c.csv", "c.csv", "--out", "fig", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"figure: wrote {tmp_path / 'fig.png'}" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "fig.png"]
    assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a link planted *after* the check: the rename replaces it, never writes through it
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    path = check_out(tmp_path / "late.png", what="the figure file", hint="--out F")
    os.symlink(victim, path)
    write_file(path, lambda f: f.write(b"new"))
    assert victim.read_text() == "precious\n" and not os.path.islink(path) and Path(path).read_bytes() == b"new"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    old = tmp_path / "f.png"
    old.write_bytes(b"old figure")
    path = figure_out(old)

    class Broken:
        def savefig(self, f, **kw):
            f.write(b"half")
            raise OSError(28, "No space left on device")

    with pytest.raises(UsageError, match="No space left on device"):
        save_figure(Broken(), path)
    assert old.read_bytes() == b"old figure" and sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]


def test_convert_refuses_a_destination_inside_its_source(tmp_path):
    """A destination the source walk would read back: its output would be converted again at every pass."""
    src = tbx_run(tmp_path / "runs" / "a", 20)
    before = snapshot(tmp_path)
    one_line_error(msnb("convert", tmp_path / "runs", "--to", "tensorboard", src / "tb"), "inside the source")
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------ one bounded walk for every command that reads a folder


def test_compare_refuses_proc_in_one_line(tmp_path):
    """``msnb compare /proc cand.csv`` walked the machine through /proc/N/root (and reading /proc/kmsg blocks)."""
    (tmp_path / "cand.csv").write_text(CSV)
    proc, peak_mb = measured("compare", "/proc", "cand.csv", cwd=tmp_path, timeout=120)
    one_line_error(proc, "/proc", "proc filesystem")
    assert peak_mb < 400, peak_mb


def test_a_baseline_folder_linking_to_root_is_judged_on_its_own_files(tmp_path):
    """A baseline folder holding ``ln -s / x`` compared against a run found elsewhere on the machine."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "base.csv").write_text(CSV)
    (base / "x").symlink_to("/")
    (tmp_path / "cand.csv").write_text(CSV)
    proc, peak_mb = measured("compare", base, "cand.csv", "--json", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["common_steps"] == 4
    assert "outside" in proc.stdout + proc.stderr and "not followed" in proc.stdout + proc.stderr
    assert peak_mb < 600, peak_mb


def test_check_of_a_folder_linking_to_root_ends_at_once(tmp_path):
    """``msnb check DIR`` with a link to / inside did not finish in 240 s (1.8 GB)."""
    run = tbx_run(tmp_path / "dir" / "run", 50)
    (run.parent / "root").symlink_to("/")
    proc, peak_mb = measured("check", tmp_path / "dir", timeout=200)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "root: a symlink to /, outside" in proc.stdout + proc.stderr
    assert peak_mb < 600, peak_mb


def test_smoke_summary_dir_root_is_refused_in_one_line(tmp_path):
    """``msnb smoke --summary-dir /`` walked the whole filesystem and ended in a PermissionError traceback."""
    proc, peak_mb = measured("smoke", "--summary-dir", "/", "--steps", 3, "--no-live", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, timeout=120)
    one_line_error(proc, "--summary-dir /", "already holds")
    assert peak_mb < 600, peak_mb
    assert list(tmp_path.iterdir()) == []


def test_the_walk_stops_at_its_entry_bound_and_says_so(tmp_path, monkeypatch):
    from msnb.events import discovery

    for i in range(30):
        tbx_run(tmp_path / f"r{i:02d}", 3)
    monkeypatch.setattr(discovery, "MAX_WALK_ENTRIES", 10)
    found: list = []
    sources = discovery.discover(tmp_path, problems=found)
    assert len({s.run for s in sources}) < 30
    assert any("the walk stopped there" in p.message for p in found)


# ------------------------------------------------------------------ the smoke's child keeps its temporary files in its scratch folder

LEAKY_MODEL = (
    textwrap.dedent("""\
    import os
    import tempfile

    fd, _ = tempfile.mkstemp(prefix="parallel_speed_up_", suffix=".json")  # as mindformers' context setup does, and never removes
    os.close(fd)
    if os.environ.get("LEAKY_FAIL"):
        raise RuntimeError("the model is broken")
""")
    + USER_CODE  # the smoke tests' own small model
)


@pytest.mark.parametrize("outcome", ["pass", "fail", "SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_the_smoke_child_leaves_no_temporary_file_behind(tmp_path, outcome):
    """mindformers leaves /tmp/parallel_speed_up_*.json on pass, fail and after every signal: the child's TMPDIR is in its scratch folder."""
    tmp = tmp_path / "tmp"  # the test's own /tmp: other processes on the machine write to the real one
    tmp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "leaky.py").write_text(LEAKY_MODEL)
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO), **({"LEAKY_FAIL": "1"} if outcome == "fail" else {}))
    steps = 20 if outcome in ("pass", "fail") else 100000
    proc = subprocess.Popen(
        msnb_command() + ["smoke", "--module", "leaky.py", "--steps", str(steps), "--no-live", "--out", str(work / "s.png")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=work,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a pytest started in the background ignores SIGINT, and so would the child
    )
    try:
        if outcome in ("pass", "fail"):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == (0 if outcome == "pass" else 1), out + err
        else:
            wait_for_steps(tmp, proc)
            proc.send_signal(getattr(signal, outcome))
            proc.communicate(timeout=300)  # the verdict after a stop reads and judges what was written: slow on a loaded machine
            assert wait_until_gone(tmp) == []
    finally:  # a failed wait or assert must not leave a 100,000-step training running: the guard ends the child with it
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline and outcome != "fail" and list(tmp.iterdir()):
        time.sleep(0.3)  # after SIGKILL the guard removes the scratch folder
    left = sorted(str(p.relative_to(tmp)) for p in tmp.iterdir())
    if outcome == "fail":  # the scratch folder is kept for the post-mortem: the temporary file is inside it, nowhere else
        assert len(left) == 1 and left[0].startswith("msnb-smoke-"), left
        assert [p.parent.name for p in tmp.rglob("parallel_speed_up_*")] == ["tmp"]
    else:
        assert left == []


# ------------------------------------------------------------------ memory before starting


def shipped_config(name: str) -> Path:
    """A run config shipped with mindformers 1.9 (its wheel installs them as site-packages/configs)."""
    import importlib.util

    spec = importlib.util.find_spec("mindformers")  # not imported: importing it makes ./output/log in the current folder
    if spec is None or spec.origin is None:
        pytest.skip("mindformers is not installed")
    path = Path(spec.origin).resolve().parents[1] / "configs" / name
    if not path.is_file():
        pytest.skip(f"mindformers ships no {name} here (looked at {path})")
    return path


@pytest.mark.parametrize("name", ["qwen3/pretrain_qwen3_32b_4k.yaml", "deepseek3/pretrain_deepseek3_671b.yaml"])
def test_a_model_that_cannot_fit_is_refused_before_it_starts(tmp_path, name):
    """``msnb smoke pretrain_qwen3_32b_4k.yaml --shrink never`` grew past 6.9 GB on a 24 GB machine before an outside cap stopped it."""
    from msnb.environment import available_memory_bytes

    config = shipped_config(name)
    proc, peak_mb = measured("smoke", config, "--shrink", "never", "--no-live", cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, timeout=200)
    line = one_line_error(proc, str(config), "not rehearsed", "needs at least", "of memory is available here", code=3)
    need_gb = float(line.split("needs at least ")[1].split(" GB")[0].replace(",", ""))
    assert need_gb * 1e9 > available_memory_bytes()
    assert peak_mb < 1500, peak_mb  # MindSpore and mindformers imported, nothing built (it grew past 6.9 GB)
    assert list(tmp_path.iterdir()) == []  # nothing was started: no scratch folder


def test_the_parameter_count_matches_the_published_sizes():
    """Qwen3-32B has 32.8 B parameters and DeepSeek-V3 685 B (their model cards: 671 B of the main model and 14 B of its
    multi-token-prediction module, which the shipped config trains): the estimate's count, from the shipped configs."""
    import yaml

    from msnb.fullsize.sizes import parameter_count

    qwen = yaml.safe_load(shipped_config("qwen3/pretrain_qwen3_32b_4k.yaml").read_text())["model"]["model_config"]
    deepseek = yaml.safe_load(shipped_config("deepseek3/pretrain_deepseek3_671b.yaml").read_text())["model"]["model_config"]
    assert parameter_count(qwen) / 1e9 == pytest.approx(32.8, rel=0.01)
    assert parameter_count(deepseek) / 1e9 == pytest.approx(685, rel=0.01)


# ------------------------------------------------------------------ odd values


def test_compare_steps_accept_infinite_bounds_and_refuse_what_is_no_step(tmp_path):
    """``msnb.compare(..., steps=(-inf, inf))`` raised OverflowError."""
    import msnb

    (tmp_path / "c.csv").write_text(CSV)
    base = str(tmp_path / "c.csv")
    assert msnb.compare(base, base, steps=(float("-inf"), float("inf"))).as_dict()["common_steps"] == 4
    assert msnb.compare(base, base, steps=(2, 10**40)).as_dict()["common_steps"] == 3
    for bad in [(float("nan"), 3), (1.5, 3), ("x", 3), "1" * 5000 + ":"]:
        with pytest.raises(UsageError, match="whole numbers"):
            msnb.compare(base, base, steps=bad)


@pytest.mark.parametrize("command", ["config", "smoke"])
def test_a_yaml_integer_of_five_thousand_digits_is_one_line(tmp_path, command):
    """A YAML integer over 4,300 digits raised ValueError from PyYAML (``msnb config`` too)."""
    cfg = tmp_path / "big.yaml"
    cfg.write_text("monitor_config:\n  collect_freq: " + "9" * 5000 + "\n")
    args = ["smoke", cfg, "--steps", 3, "--no-live"] if command == "smoke" else ["config", cfg]
    one_line_error(msnb(*args, cwd=tmp_path, env={"TMPDIR": str(tmp_path)}), f"{cfg}:2", "4,000 digits")


def test_a_loss_of_plus_minus_1e308_prints_the_verdict_before_the_figure_that_cannot_be_drawn(tmp_path):
    """``lm loss`` alternating +-1e308 with ``--out f.png`` died inside matplotlib with no verdict printed."""
    rows = "".join(f"{i},{1e308 if i % 2 else -1e308}\n" for i in range(1, 51))
    (tmp_path / "huge.csv").write_text("step,lm loss\n" + rows)
    proc = msnb("compare", "huge.csv", "huge.csv", "--out", "f.png", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ALIGNED" in proc.stdout and "Traceback" not in proc.stderr
    assert "warning: the figure could not be drawn" in proc.stderr and not (tmp_path / "f.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.csv"]  # no temporary file left


WRONG_TYPES = {
    "runner_config: 5": ("runner_config", 5, "runner_config", "expected a mapping"),
    'runner_config: "abc"': ("runner_config", "abc", "runner_config", "expected a mapping"),
    "callbacks: 5": ("callbacks", 5, "callbacks", "expected a list"),
    "parallel_config: [1,2]": ("parallel_config", [1, 2], "parallel_config", "expected a mapping"),
    "parallel: 1": ("parallel", 1, "parallel", "expected a mapping"),
    'context: "graph"': ("context", "graph", "context", "expected a mapping"),
    'runner_wrapper: "x"': ("runner_wrapper", "x", "runner_wrapper", "expected a mapping"),
    'save_checkpoint_steps: "often"': (None, "often", "save_checkpoint_steps (CheckpointMonitor)", "expected an integer"),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
@pytest.mark.parametrize("command", ["smoke", "config"])
def test_a_wrong_type_in_a_mindformers_config_is_one_line_naming_key_file_and_line(tmp_path, case, command):
    """Eight wrong types gave tracebacks (exit 1) before anything started."""
    import yaml

    key, value, named, words = WRONG_TYPES[case]
    config = yaml.safe_load(shipped_config("qwen3/pretrain_qwen3_32b_4k.yaml").read_text())
    if key is None:
        next(c for c in config["callbacks"] if c.get("type") == "CheckpointMonitor")["save_checkpoint_steps"] = value
    else:
        config[key] = value
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    line_no = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith(f"{key or 'callbacks'}:"))
    args = ["smoke", path, "--no-live"] if command == "smoke" else ["config", path]
    line = one_line_error(msnb(*args, cwd=tmp_path, env={"TMPDIR": str(tmp_path)}), f"{path}:{line_no}", named, words)
    assert f"msnb {command}: error:" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]
