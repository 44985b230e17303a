"""Smoke runs: real CPU trainings in child processes, judged from the files they wrote."""

import io
import json
import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from msnb import kernel
from msnb.plot.live import LiveView
from msnb.smoke import run_smoke
from tests.conftest import kernel_from_spec, msnb_command

USER_CODE = textwrap.dedent("""\
    import numpy as np
    import mindspore as ms
    from mindspore import nn

    rng = np.random.default_rng(0)
    x = rng.standard_normal((640, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-1.0], [2.0], [0.5]], dtype=np.float32)).astype(np.float32)
    dataset = ms.dataset.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(16)
    net = nn.Dense(4, 1)
    loss_fn = nn.MSELoss()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.05)
""")


# USER_CODE whose loss stops 3 s once, in the 21st step (a host sync, a lock, a slow read): a real stall
STALLING_CODE = USER_CODE.replace(
    "loss_fn = nn.MSELoss()",
    textwrap.dedent("""\
        import time

        class StallingLoss(nn.MSELoss):
            calls = 0

            def construct(self, logits, labels):
                StallingLoss.calls += 1
                if StallingLoss.calls == 21:
                    time.sleep(3.0)
                return super().construct(logits, labels)

        loss_fn = StallingLoss()"""),
)
assert STALLING_CODE != USER_CODE

# USER_CODE whose first step takes 3 s more, as compiling a large graph does: the live view has time to say so
SLOW_FIRST_STEP_CODE = STALLING_CODE.replace("StallingLoss.calls == 21", "StallingLoss.calls == 1")
assert SLOW_FIRST_STEP_CODE != STALLING_CODE


def statuses(result):
    return {c.name: c.status for c in result.checks}


class RecordingView(LiveView):
    """The CLI's text view, keeping each status line and the runs of each table it was given to draw."""

    def __init__(self):
        super().__init__(text=True, stream=io.StringIO(), min_interval=0.0, status=None, tags=["loss"])
        self.lines, self.runs = [], []

    def update(self, scalars=None, **kwargs):
        drew = super().update(scalars, **kwargs)
        if drew:
            self.lines.append(self.last_status)
            if scalars is not None and len(scalars):
                self.runs.append(sorted(set(scalars.run.tolist())))
        return drew


def test_default_smoke_passes_and_cleans_up():
    view = RecordingView()  # made without a step count, as the notebook's and the CLI's are when --steps is left out
    result = run_smoke(live=False, view=view)
    assert result.passed, result.format_text()
    got = statuses(result)
    # judged on wall time, a busy machine may make the first two warn; a loss that converged early warns loss_stalled
    timing = {"step_time", "monitor_overhead", "loss_stalled"}
    assert {k: v for k, v in got.items() if k not in timing} == {
        "device": "pass",
        "process": "pass",
        "summaries": "pass",
        "tags": "pass",
        "finite": "pass",
        "loss_falling": "pass",
        "loss_spikes": "pass",
        "disk_per_day": "skip",  # msnb's tiny model: reported, not judged
        "config_lint": "pass",
    }
    assert set(got) >= timing and all(got[k] in ("pass", "warn", "skip") for k in timing)
    assert result.device == "CPU" or os.path.exists("/dev/davinci0") or os.path.exists("/dev/nvidia0")
    assert result.steps_trained == 200
    assert {"loss/auto", "lr"} <= set(result.tables.scalars.tags())
    assert not result.kept and not Path(result.workdir).exists()  # removed after a pass
    assert result.figure is not None and [a.get_title() for a in result.figure.axes if a.get_visible()] == ["loss", "lr", "step_time_ms"]
    assert result.first_live_delay_s is not None and result.first_live_delay_s < 5
    # the live view: the default's 200 steps known, so a percentage and an ETA once the pace is steady; one loss curve
    assert view.total == 200
    assert any(re.match(r"step \d+/200 \(\d+%\), ETA \d+ (s|min)", line) for line in view.lines), view.lines[-5:]
    assert view.runs and all(len(runs) == 1 for runs in view.runs), view.runs[-1]


def test_diverging_run_fails_with_the_nan(tmp_path, run_msnb):
    proc = run_msnb("smoke", "--lr", "1e6", "--steps", "40", "--json", "--out", tmp_path / "d.png", check=1, cwd=tmp_path)
    verdict = json.loads(proc.stdout)
    assert verdict["passed"] is False
    failed = {c["name"]: c["detail"] for c in verdict["checks"] if c["status"] == "fail"}
    assert "finite" in failed and "nan" in failed["finite"].lower()
    assert "NAN or INF" in failed["process"]
    assert Path(verdict["summary_dir"]).exists() and verdict["kept"]  # kept for a post-mortem


def test_two_worker_msrun_smoke_has_a_verdict_per_rank():
    result = run_smoke(live=False, workers=2, steps=60, keep=True)
    try:
        names = statuses(result)
        assert result.passed, result.format_text()
        for rank in (0, 1):
            assert f"step_time[rank {rank}]" in names
            assert (Path(result.summary_dir) / f"rank_{rank}").is_dir()
        assert {"finite", "loss_falling", "loss_spikes", "rank_divergence"} <= set(names)  # the judge's checks, over both ranks
        assert result.ranks == [0, 1]
        assert sorted(set(result.tables.scalars.where(tag="loss/auto").rank.tolist())) == [0, 1]
    finally:
        import shutil

        shutil.rmtree(result.workdir, ignore_errors=True)


def smoke_processes(root: Path) -> list[int]:
    """Live processes started by a smoke run under *root* (found by the run's marker and working directory)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if b"MSNB_SMOKE_ID=" in environ and cwd.startswith(str(root)):
            found.append(int(pid))
    return found


def test_interrupt_stops_the_child_and_its_workers(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        msnb_command() + ["smoke", "--steps", "100000", "--workers", "2", "--no-live", "--out", str(tmp_path / "i.png")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not any(p.stat().st_size > 200 for p in tmp_path.glob("msnb-smoke-*/step_times*.csv")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    assert smoke_processes(tmp_path), "the workers should be running"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "interrupted by the user" in out
    deadline = time.monotonic() + 30  # a killed worker can take a moment to be reaped on a busy machine
    while smoke_processes(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert smoke_processes(tmp_path) == []
    assert list(tmp_path.glob("msnb-smoke-*")) == []  # one rule for every stop: Ctrl-C removes the scratch directory, as SIGTERM and SIGHUP do


def test_a_child_that_raises_shows_its_log_tail():
    result = run_smoke(live=False, code="raise RuntimeError('boom in the user code')", steps=20)
    assert not result.passed
    process = result.check("process")
    assert process.status == "fail" and "RuntimeError: boom in the user code" in process.detail
    assert "boom in the user code" in result.log_tail and "Traceback" in result.log_tail
    assert "boom in the user code" in result.format_text()
    import shutil

    shutil.rmtree(result.workdir, ignore_errors=True)


def test_user_code_and_a_config(tmp_path):
    config = tmp_path / "monitor.yaml"
    config.write_text("monitor_config:\n  collect_freq: 2\n  histogram_settings: {regular: weight}\n")
    result = run_smoke(config, live=False, code=STALLING_CODE, steps=40)
    assert result.passed, result.format_text()
    # the data's 3 s stall is named (a machine crowded by other programs makes it a skip that says so, never a pass)
    stall = result.check("step_time")
    assert stall.status in ("warn", "skip"), stall
    # the 3 s step is the longest named (a busy machine may slow one more step past the ratio)
    longest = re.search(r"stalled: \d+ steps? over .*\(the longest (\d+) ms\)", stall.detail)
    assert longest and int(longest.group(1)) >= 2900, stall
    assert set(result.tables.histograms.tag.tolist()) == {"weight/auto"}  # the config's settings were used
    assert "lr" not in statuses(result)  # the user's model reports no lr, and is not asked to
    assert result.check("tags").status == "pass"
    assert "collect_freq 2" in result.check("config_lint").detail or result.check("config_lint").status == "pass"


def test_a_slow_first_step_says_compiling_between_the_start_and_the_first_step():
    """The sign of life a notebook shows while the first step compiles (tens of seconds for a mindformers model)."""
    view = RecordingView()
    result = run_smoke(live=False, view=view, code=SLOW_FIRST_STEP_CODE, steps=10)
    assert result.passed, result.format_text()
    lines = [line for line in view.lines if line]
    assert lines[0].endswith(f"starting MindSpore on {result.device}...")
    compiling = [i for i, line in enumerate(lines) if "waiting for the first step (compiling)... " in line]
    first_step = next(i for i, line in enumerate(lines) if "step " in line and "waiting" not in line)
    assert compiling and 0 < compiling[0] and compiling[-1] < first_step, lines
    assert re.search(r"compiling\)\.\.\. \d+ s since start", lines[compiling[0]]), lines[compiling[0]]


def test_kernel_survives_a_crashing_child(jupyter_dirs):
    """In a real kernel from the kernelspec: the cell shows the failure and the kernel keeps working."""
    kernel.install("msnb-test-smoke", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-smoke") as kc:
        outputs = []
        reply = kc.execute_interactive(
            "%%mfmon_smoke --steps 20 --no-live\nraise RuntimeError('the model is broken')\n", timeout=180, output_hook=outputs.append
        )
        assert reply["content"]["status"] == "ok"
        html = "".join(m["content"].get("data", {}).get("text/html", "") for m in outputs if m["msg_type"] == "display_data")
        assert "FAILED" in html and "the model is broken" in html and "last lines of the training log" in html
        reply = kc.execute_interactive("print(6 * 7)", timeout=30, output_hook=outputs.append)
        assert reply["content"]["status"] == "ok"
        assert any(m["msg_type"] == "stream" and "42" in m["content"]["text"] for m in outputs)


def test_a_mindformers_yaml_is_planned_as_its_own_model_with_its_lint_findings(tmp_path):
    """Nothing is trained here (tests/smoke/test_smoke_mindformers.py trains): the plan and the real config's lint."""
    from msnb.smoke.run.options import SmokeOptions
    from msnb.smoke.run.runner import prepare
    from tests.config.test_config import MINDFORMERS_YAML

    config = tmp_path / "llama2_7b.yaml"
    config.write_text(MINDFORMERS_YAML)
    prepared = prepare(SmokeOptions(config=config, device="CPU", live=False))
    assert prepared.plan is not None and prepared.plan.family == "LlamaForCausalLM" and prepared.plan.legacy
    assert prepared.options.steps == 40 and prepared.options.mode == "graph"  # the config's context.mode 0
    # the real config's settings are linted: 8 data-parallel devices, but no msnb summary_dir in it, so no note about one
    assert not {f.rule for f in prepared.findings} & {"summary-dir-per-rank", "summary-dir-no-rank"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llama2_7b.yaml"]  # prepare creates nothing
    # the changes as the verdict lists them: a kind, then its changes one a line, wrapped in the text verdict
    lines = prepared.plan.change_lines()
    assert lines[0] == "shrink:" and all(line.endswith(":") and " " not in line or line.startswith("  - ") for line in lines), lines
    from msnb.smoke.run.result import SmokeResult
    from msnb.smoke.shared.verdict import Check

    text = SmokeResult(True, [Check("config_changes", "pass", "\n".join(lines))], "", False, "CPU", "", 40, 40, 1.0, "").format_text()
    body = text.splitlines()[2:]
    assert text.splitlines()[1] == "  [PASS] config_changes:" and body[0] == "      shrink:" and max(map(len, body)) <= 120, text
    assert all(line.startswith("        ") for line in body if not line.endswith(":")), text


# a module file from the CLI: the README's own `msnb smoke --module examples/my_model.py --json` (test_robust_smoke.py)


def test_summary_dir_is_kept_and_the_scratch_directory_is_not(tmp_path):
    target = tmp_path / "smoke-summary"
    result = run_smoke(live=False, steps=30, summary_dir=target)
    assert result.passed and result.kept and result.summary_dir == str(target)
    assert any(target.glob("*_MS")) and not Path(result.workdir).exists()


def test_a_learning_rate_of_zero_fails_loss_falling_and_names_it():
    result = run_smoke(live=False, steps=60, lr=0.0)
    falling = result.check("loss_falling")
    assert not result.passed and falling.status == "fail", result.format_text()
    assert "learning rate (lr) is 0 on all" in falling.detail, falling.detail
    import shutil

    shutil.rmtree(result.workdir, ignore_errors=True)
