"""Callbacks built from a monitor_config, in real CPU trainings (each in a child process)."""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import msnb
from tests.conftest import WRITERS


def train(tmp_path: Path, config: str, *args, name="run", timeout=300):
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(textwrap.dedent(config).replace("@OUT@", str(tmp_path / name)))
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, str(WRITERS / "monitored_training.py"), str(cfg), str(out), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((out / "result.json").read_text()), proc.stdout, out


def test_callbacks_write_what_the_config_asked_for(tmp_path):
    result, stdout, out = train(
        tmp_path,
        """\
        monitor_config:
          summary_dir: @OUT@/summary
          collect_freq: 5
          per_print_times: 10
          flush_interval: 1
          histogram_settings: {regular: weight}
    """,
        "--steps",
        40,
    )
    assert result["callbacks"] == ["LossMonitor", "TimeMonitor", "SummaryCollector", "PeriodicFlush"]
    printed = [line for line in stdout.splitlines() if "loss is" in line]
    assert [line.split("step: ")[1].split(",")[0] for line in printed] == ["10", "20", "30", "40"]
    assert "per step time" in stdout

    read = msnb.read(out / "summary")
    assert read.problems == []
    steps = set(read.scalars.series("loss/auto")[0].tolist())
    assert steps == {1, 5, 10, 15, 20, 25, 30, 35, 40}  # the first step, then every collect_freq
    assert set(read.histograms.tag.tolist()) == {"weight/auto"}  # only what histogram_settings named
    assert not (out / "summary" / "ckpt_dir").exists()  # msnb keeps the loss landscape (a checkpoint per step) off
    assert {row["kind"] for row in read.lineage.rows()} >= {"train"}


def test_early_stop_stops_a_stalled_run(tmp_path):
    result, _, _ = train(
        tmp_path,
        """\
        monitor_config:
          summary_dir: @OUT@/summary
          per_print_times: 0
          early_stop: {window: 10, patience: 30, min_delta: 0.001}
    """,
        "--steps",
        300,
        "--data",
        "stall",
    )
    assert result["stopped_step"] is not None and result["steps"] == result["stopped_step"] < 300
    assert "10-step average" in result["reason"]


def test_early_stop_ignores_noise_while_the_smoothed_loss_falls(tmp_path):
    config = """\
        monitor_config:
          summary_dir: @OUT@/summary
          per_print_times: 0
          early_stop: {{window: {window}, patience: 40}}
    """
    smooth, _, _ = train(tmp_path, config.format(window=20), "--steps", 250, "--data", "noisy", "--lr", 0.005, name="smooth")
    assert smooth["stopped_step"] is None and smooth["steps"] == 250
    losses = smooth["losses"]
    assert sum(losses[-25:]) < 0.25 * sum(losses[:25])  # it was still learning...
    assert max(abs(b - a) / a for a, b in zip(losses[100:], losses[101:])) > 0.5  # ...with a noisy raw loss

    # the same run judged on the raw loss (window 1) would have been stopped while still improving
    raw, _, _ = train(tmp_path, config.format(window=1), "--steps", 250, "--data", "noisy", "--lr", 0.005, name="raw")
    assert raw["stopped_step"] is not None and raw["stopped_step"] < 200


def test_mindformers_callbacks_are_built_by_mindformers(tmp_path):
    result, stdout, _ = train(
        tmp_path,
        """\
        monitor_config:
          summary_dir: @OUT@/summary
          keep_default_callbacks: false
        callbacks:
          - type: MFLossMonitor
            per_print_times: 5
            origin_epochs: 1
            dataset_size: 20
    """,
        "--steps",
        20,
    )
    assert result["callbacks"] == ["SummaryCollector", "MFLossMonitor"]
    log = tmp_path / "output" / "log" / "rank_0" / "info.log"  # mindformers' logger, under the working directory
    steps = msnb.read(log).scalars.series("loss")[0].tolist()
    assert steps == [5, 10, 15, 20]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_per_rank_directories_under_msrun(tmp_path):
    cfg = tmp_path / "dist.yaml"
    cfg.write_text(f"monitor_config:\n  summary_dir: {tmp_path}/summary\n  collect_freq: 5\n  per_print_times: 5\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    msrun = Path(sys.executable).parent / "msrun"
    proc = subprocess.run(
        [
            str(msrun),
            "--worker_num=2",
            "--local_worker_num=2",
            f"--master_port={free_port()}",
            f"--log_dir={tmp_path}/msrun_log",
            "--join=True",
            str(WRITERS / "monitored_training.py"),
            str(cfg),
            str(tmp_path / "out"),
            "--steps",
            "20",
            "--distributed",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(tmp_path),
    )
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in (tmp_path / "msrun_log").glob("worker_*.log"))
    assert proc.returncode == 0, logs
    for rank in (0, 1):
        result = json.loads((tmp_path / "out" / f"result_rank{rank}.json").read_text())
        assert result["world"] == 2 and result["summary_dir"] == f"{tmp_path}/summary/rank_{rank}"
    read = msnb.read(tmp_path / "summary")
    assert sorted(set(read.scalars.rank.tolist())) == [0, 1]
    worker_logs = msnb.read(tmp_path / "msrun_log")
    assert sorted(set(worker_logs.scalars.rank.tolist())) == [0, 1]  # worker_N.log names the rank
    assert worker_logs.scalars.series("loss", rank=1)[0].tolist() == [5, 10, 15, 20]


def test_early_stop_on_anything_but_the_loss_is_a_config_error():
    """A config mistake in a callback is an MsnbError naming the key (the CLI and magics show one line), not a bare ValueError."""
    code = (
        "from msnb.errors import ConfigError\n"
        "from msnb.monitor.callbacks import SmoothedEarlyStop\n"
        "try:\n"
        "    SmoothedEarlyStop(monitor='accuracy')\n"
        "except ConfigError as e:\n"
        "    print(e.key, '|', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (
        out.stdout.strip().splitlines()[-1]
        == "early_stop.monitor | key 'early_stop.monitor': SmoothedEarlyStop judges the training loss: monitor must be 'loss', got 'accuracy'"
    )
