"""How often a clean smoke's step times draw a warning, with another CPU load beside it.

    python benchmarks/steptime_under_load.py [--runs 20] [--load 1] [--out times.json]

Runs notebook 01's smoke (``%mfmon_smoke --steps 200``: the built-in model,
live view drawn) and notebook 09's (mindformers' shipped Qwen3 pretrain config
with its monitoring added, 30 steps) *--runs* times each while *--load*
busy-loop processes compete for the CPU, and counts the runs whose
``step_time`` check warns under the rule msnb applies now
(:func:`msnb.analysis.step_time_stability`) and under the former rule (the
90th percentile over twice the median and 5 ms above it), on the same times.
A stall or slowdown seen while the machine
lacked CPUs is not judged (a skip that says so), counted apart.  Every run here is clean: each warning counted is a warning the user could not
act on.  The step times are written to *--out* for a second look.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

QWEN3_MONITORING = """\
callbacks:
  - {type: MFLossMonitor, per_print_times: 1}
  - {type: SummaryMonitor, summary_dir: ./summary, collect_freq: 5, collect_specified_data: {collect_landscape: null}}
  - {type: CheckpointMonitor, prefix: qwen3, save_checkpoint_steps: 10, keep_checkpoint_max: 1, checkpoint_format: safetensors}
monitor_config:
  monitor_on: True
  dump_path: ./dump
  target: ['.*']
  step_interval: 1
  local_norm_format: ['log', 'tensorboard']
  optimizer_state_format: ['log', 'tensorboard']
  weight_state_format: ['log', 'tensorboard']
tensorboard: {tensorboard_dir: ./tensorboard, tensorboard_queue_size: 10}
"""


def _spin(stop):
    """A CPU load: a busy loop until *stop* is set."""
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1_000_003


def former_rule_warns(ms, collected) -> bool:
    """The rule before: p90 over twice the median and 5 ms above it, after the first 5 % (at least 3) steps."""
    ms = np.asarray(ms, float)
    skip = max(3, int(ms.size * 0.05))
    body, ex = ms[skip:], np.asarray(collected, bool)[skip:]
    body = body[~ex] if (~ex).sum() >= 5 else body
    body = body[np.isfinite(body)]
    med, p90 = float(np.median(body)), float(np.percentile(body, 90))
    return p90 > 2 * med and p90 - med > 5


def one(name: str, config, steps: int, live: bool) -> dict:
    from msnb.smoke import run_smoke
    from msnb.smoke.run.result import SmokeResult  # noqa: F401  (the result type read below)

    t0 = time.monotonic()
    result = run_smoke(config, steps=steps, live=live) if config else run_smoke(steps=steps, live=live)
    wall = time.monotonic() - t0
    checks = {c.name: (c.status, c.detail) for c in result.checks}
    times = {int(r): (t[1].tolist(), t[2].tolist()) for r, t in result.step_times.items()}
    warned_now = [n for n, (s, _d) in checks.items() if n.startswith("step_time") and s == "warn"]
    skipped_now = [n for n, (s, _d) in checks.items() if n.startswith("step_time") and s == "skip"]
    warned_before = [r for r, (ms, col) in times.items() if len(ms) >= 5 and former_rule_warns(ms, col)]
    if result.workdir and Path(result.workdir).exists() and result.passed:
        shutil.rmtree(result.workdir, ignore_errors=True)
    return {
        "smoke": name,
        "passed": result.passed,
        "warnings": sum(s == "warn" for s, _d in checks.values()),
        "step_time_warns_now": bool(warned_now),
        "step_time_not_judged_busy": bool(skipped_now),
        "step_time_warned_before": bool(warned_before),
        "step_time_detail": "; ".join(d for n, (_s, d) in checks.items() if n.startswith("step_time")),
        "wall_s": round(wall, 1),
        "times": times,
    }


def rejudge(path) -> int:
    """The counts for step times saved by an earlier run, judged by the rule msnb applies now."""
    from msnb.smoke.shared.verdict import check_step_time

    rows = json.loads(Path(path).read_text())
    for name in sorted({r["smoke"] for r in rows}):
        mine = [r for r in rows if r["smoke"] == name]
        now = 0
        for r in mine:
            times = {int(k): (np.arange(len(ms)), np.asarray(ms, float), np.asarray(col, bool)) for k, (ms, col) in r["times"].items()}
            checks = check_step_time(times, 5)
            now += any(c.name.startswith("step_time") and c.status == "warn" for c in checks)
        before = sum(r["step_time_warned_before"] for r in mine)
        print(f"  {name}: {len(mine)} runs, step_time warns now in {now}, under the former rule in {before}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="clean smokes of each notebook")
    parser.add_argument("--load", type=int, default=1, help="busy-loop processes beside the smoke")
    parser.add_argument("--only", choices=("01", "09"), help="one notebook's smoke only")
    parser.add_argument("--out", default="steptime_under_load.json", help="where the step times go")
    parser.add_argument("--rejudge", metavar="JSON", help="judge the step times an earlier run wrote with today's rule, run nothing")
    args = parser.parse_args(argv)
    if args.rejudge:
        return rejudge(args.rejudge)

    smokes = []
    if args.only in (None, "01"):
        smokes.append(("01 built-in model, 200 steps, live view", None, 200))
    tmp = Path(tempfile.mkdtemp(prefix="msnb-steptime-"))
    spec = importlib.util.find_spec("mindformers")
    if args.only in (None, "09") and spec is not None:
        shipped = Path(spec.origin).parent.parent / "configs" / "qwen3" / "pretrain_qwen3_32b_4k.yaml"
        config = tmp / "qwen3_watch.yaml"
        config.write_text(f"base_config: {shipped}\n" + QWEN3_MONITORING)
        smokes.append(("09 mindformers Qwen3, 30 steps, live view", config, 30))

    stop = multiprocessing.Event()
    load = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in load:
        p.start()
    rows = []
    try:
        for i in range(args.runs):
            for name, config, steps in smokes:
                row = one(name, config, steps, live=True)
                rows.append(row)
                print(
                    f"{i + 1:2d} {name[:2]}: passed={row['passed']} warnings={row['warnings']} "
                    f"step_time now={'WARN' if row['step_time_warns_now'] else 'skip' if row['step_time_not_judged_busy'] else 'pass'} "
                    f"before={'WARN' if row['step_time_warned_before'] else 'pass'} ({row['wall_s']} s) {row['step_time_detail'][:160]}",
                    flush=True,
                )
                Path(args.out).write_text(json.dumps(rows))
    finally:
        stop.set()
        for p in load:
            p.join(5)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{args.load} busy-loop process(es) beside each smoke; every run clean")
    for name, _config, _steps in smokes:
        mine = [r for r in rows if r["smoke"] == name]
        now = sum(r["step_time_warns_now"] for r in mine)
        before = sum(r["step_time_warned_before"] for r in mine)
        busy = sum(r["step_time_not_judged_busy"] for r in mine)
        print(f"  {name}: {len(mine)} runs, step_time warned now in {now} (not judged, the machine busy: {busy}), under the former rule in {before}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
