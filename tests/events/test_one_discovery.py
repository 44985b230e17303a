"""One walk finds every format at any depth: Megatron-LM logs, trainer_state.json, tables, and msnb's own kinds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import msnb
from msnb.events import discovery
from msnb.events.discovery import LOG, TABLE_CSV, TRAINER_STATE, discover

REPO = Path(__file__).resolve().parents[2]


def megatron_log(path: Path, steps: int = 60, scale: float = 1.0) -> Path:
    """A Megatron-LM training log of *steps* iterations, a preamble of arguments first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["------------------------ arguments ------------------------", "  lr .............................. 0.0003"]
    for i in range(1, steps + 1):
        loss = (2.0 + 8.0 * np.exp(-i / 15)) * scale
        lines.append(
            f" [2024-06-01 10:00:{i % 60:02d}] iteration {i:8d}/ {steps:8d} | consumed samples: {i * 8:10d} | "
            f"learning rate: {3e-4:.6E} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {1.5:.3f} | number of skipped iterations:   0 |"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "msnb.cli", *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False)


def test_a_megatron_log_two_folders_down_is_read_by_plot_check_and_compare(tmp_path):
    base = tmp_path / "megatron_run"
    megatron_log(base / "logs" / "node0" / "train_stdout.txt")
    cand = tmp_path / "candidate"
    megatron_log(cand / "out" / "rank_0" / "train.log")
    found = discover(base)
    assert [(Path(s.path).name, s.kind) for s in found] == [("train_stdout.txt", LOG)]
    r = msnb.read(base)
    steps, loss = r.scalars.series("loss")
    assert steps.tolist() == list(range(1, 61)) and r.scalars.resolve_tag("loss") == "lm loss"

    verdict = msnb.compare(base, cand)
    assert verdict.passed and verdict.common_steps == 60
    out = tmp_path / "curves.png"
    plotted = cli("plot", base, "--out", out)
    assert plotted.returncode == 0, plotted.stderr
    assert out.stat().st_size > 1000
    checked = cli("check", base)
    assert "lm loss" in checked.stdout or "loss" in checked.stdout, checked.stdout
    assert checked.returncode in (0, 1), checked.stderr
    compared = cli("compare", base, cand)
    assert compared.returncode == 0, compared.stdout + compared.stderr


def test_tables_and_trainer_state_are_found_by_name_and_content_at_any_depth(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "metrics.csv").write_text("step,loss\n1,2.5\n2,2.25\n")
    (deep / "notes.csv").write_text("name,colour\nx,red\n")  # no step column: not a table of runs
    (deep / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.0}]}))
    (deep / "state_copy.json").write_text(json.dumps({"best_metric": None, "log_history": [{"step": 5, "loss": 1.0}]}))
    (deep / "config.json").write_text(json.dumps({"hidden_size": 8}))
    kinds = sorted((Path(s.path).name, s.kind) for s in discover(tmp_path))
    assert kinds == [("metrics.csv", TABLE_CSV), ("state_copy.json", TRAINER_STATE), ("trainer_state.json", TRAINER_STATE)]
    r = msnb.read(tmp_path)
    assert sorted(r.scalars.series("loss")[0].tolist()) == [1, 1, 2, 2, 5]
    assert {f["kind"] for f in r.files} == {TABLE_CSV, TRAINER_STATE}


def test_a_format_registers_in_one_line(tmp_path):
    import re

    fmt = discovery.Format("demo-kind", re.compile(r"\.demo$"), lambda head: head.startswith(b"DEMO"), "msnb.events.table_files:read_table")
    discovery.register(fmt)
    try:
        (tmp_path / "x.demo").write_text("DEMO\n")
        (tmp_path / "y.demo").write_text("other\n")
        assert [(Path(s.path).name, s.kind) for s in discover(tmp_path)] == [("x.demo", "demo-kind")]
    finally:
        discovery.FORMATS.remove(fmt)


def test_the_smokes_own_step_timer_is_no_metric_table(tmp_path):
    """A kept smoke folder holds the step timer's step_times.csv (step, ms, collected, wall): bookkeeping, not the run's tags."""
    import msnb

    (tmp_path / "step_times.csv").write_text("step,ms,collected,wall\n1,12.5,0,1700000000.0\n2,11.0,1,1700000001.0\n")
    (tmp_path / "metrics.csv").write_text("step,loss\n1,2.0\n2,1.5\n")
    tags = set(msnb.read(tmp_path).scalars.tags())
    assert "loss" in tags and not tags & {"ms", "collected", "wall"}
