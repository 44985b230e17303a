"""Smoke-run timings and monitoring overhead, measured on this machine.

    python benchmarks/bench_smoke.py [--repeat 3] [--steps 400]

1. Start to verdict of the default smoke run (``run_smoke()``: 200 steps of the
   built-in model on the CPU default, MindSpore's import included). Target: < 30 s.
2. Delay from the child's first step to the first point the live view shows.
   Target: < 5 s.
1b. Start to verdict of a smoke run of mindformers' shipped Qwen3 pretrain config with monitoring added
   (shrunk, through mindformers' Trainer with MFLossMonitor, SummaryMonitor, CheckpointMonitor,
   TrainingStateMonitor and TensorBoard; 40 steps), split into what mindformers itself spends (from the
   child's start to its last step: import, build, compile, train) and what msnb adds around it (plan,
   start, reading and judging every callback's output).  Target: < 60 s.
3. Step-time overhead of monitoring callbacks, each variant in its own
   process (rounds interleaved), median step time after warm-up: bare
   training; SummaryCollector every 10 steps with and without msnb's own
   callbacks (smoothed early stop, periodic flush), whose difference is msnb's
   own cost; msnb's full set from a monitor_config; SummaryCollector at
   collect_freq 1.  Target: < 2 % for msnb's own callbacks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
import numpy as np
import mindspore as ms
from mindspore.train import Model, SummaryCollector
from mindspore.train.callback import Callback
from msnb.smoke.builtin.model import build
from msnb.monitor import build_monitor_callbacks
from msnb.monitor.callbacks import PeriodicFlush, SmoothedEarlyStop
from msnb.config import EarlyStopSettings

variant, mode, steps, workdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)
ms.set_device("CPU")
net, dataset = build(steps, 32, 0.05)

class Timer:
    t = 0.0
    ms = []

timer = Timer()
callbacks = []
summary = os.path.join(workdir, "summary")
if variant in ("collector10", "collector10_msnb"):
    collector = SummaryCollector(summary, collect_freq=10, collect_specified_data={"collect_landscape": None})
    callbacks = [collector]
    if variant == "collector10_msnb":
        callbacks += [SmoothedEarlyStop(EarlyStopSettings(window=20, patience=10**9)), PeriodicFlush(collector, 1.0)]
elif variant == "msnb_full":
    callbacks = build_monitor_callbacks({"summary_dir": summary, "collect_freq": 10, "flush_interval": 1, "per_print_times": 0,
                                         "early_stop": {"window": 20, "patience": 10**9}})
elif variant == "collector_freq1":
    callbacks = [SummaryCollector(summary, collect_freq=1, collect_specified_data={"collect_landscape": None})]
# the timer's step_end runs after the others' (it is listed last), so their cost is inside the timing
class Start(Callback):
    def on_train_step_begin(self, rc):
        timer.t = time.perf_counter()

class Stop(Callback):
    def on_train_step_end(self, rc):
        timer.ms.append((time.perf_counter() - timer.t) * 1000)

# time spent inside each callback's step hooks: a direct measure, free of scheduling noise
spent = {}
def timed(cb, name):
    inner = getattr(cb, name)
    key = type(cb).__name__
    def hook(rc):
        t = time.perf_counter()
        inner(rc)
        spent[key] = spent.get(key, 0.0) + (time.perf_counter() - t) * 1000
    setattr(cb, name, hook)
for cb in callbacks:
    for name in ("on_train_step_begin", "on_train_step_end"):
        timed(cb, name)

Model(net).train(1, dataset, callbacks=[Start()] + callbacks + [Stop()], dataset_sink_mode=False)
print(json.dumps({"variant": variant, "ms": timer.ms, "in_callbacks_ms": {k: v / len(timer.ms) for k, v in spent.items()}}))
"""


def median_after_warmup(ms: list, skip: int) -> float:
    return statistics.median(ms[skip:])


QWEN3_MONITORING = """\
callbacks:
  - {type: MFLossMonitor, per_print_times: 1}
  - {type: SummaryMonitor, summary_dir: ./summary, collect_freq: 5, collect_specified_data: {collect_landscape: null}}
  - {type: CheckpointMonitor, prefix: qwen3, save_checkpoint_steps: 10, keep_checkpoint_max: 1, checkpoint_format: safetensors}
monitor_config: {monitor_on: True, dump_path: '', target: ['.*'], step_interval: 1,
                 optimizer_state_format: ['log', 'tensorboard'], weight_state_format: ['log', 'tensorboard']}
tensorboard: {tensorboard_dir: ./tensorboard, tensorboard_queue_size: 10}
"""


def bench_mindformers(repeat: int) -> int:
    """Time to verdict of the shipped Qwen3 config's smoke, and how much of it is mindformers' own work."""
    import importlib.util
    from pathlib import Path

    from msnb.smoke import run_smoke

    spec = importlib.util.find_spec("mindformers")
    if spec is None:
        print("\nmindformers smoke: skipped (mindformers is not installed)")
        return 0
    shipped = Path(spec.origin).parent.parent / "configs" / "qwen3" / "pretrain_qwen3_32b_4k.yaml"
    totals, children, firsts = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "qwen3_watch.yaml"
        config.write_text(f"base_config: {shipped}\n" + QWEN3_MONITORING)
        for _ in range(repeat):
            t0, wall0 = time.monotonic(), time.time()
            result = run_smoke(config, live=False, keep=True)
            totals.append(time.monotonic() - t0)
            if not result.passed:
                print(result.format_text())
                return 1
            rows = [line.split(",") for line in (Path(result.workdir) / "step_times.csv").read_text().splitlines()[1:]]
            last_wall = float(rows[-1][3])
            children.append(last_wall - wall0)  # from the start of run_smoke to the last step: mindformers' import, build, compile and training
            firsts.append(float(rows[0][1]) / 1000)
            import shutil

            shutil.rmtree(result.workdir, ignore_errors=True)
    med, child = statistics.median(totals), statistics.median(children)
    print(f"\nmindformers smoke: shipped Qwen3 pretrain config, shrunk, 40 steps, all callbacks, CPU ({repeat} runs)")
    print(f"  start to verdict: median {med:.1f} s (min {min(totals):.1f}, max {max(totals):.1f}); target < 60 s")
    print(f"  of which up to the last training step: median {child:.1f} s (first step, compiling: {statistics.median(firsts):.1f} s)")
    print(f"  msnb's share (planning, start, reading and judging the callbacks' files, figures): {med - child:.1f} s = {(med - child) / med:.0%}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="default smoke runs to time")
    parser.add_argument("--steps", type=int, default=400, help="steps per overhead measurement")
    parser.add_argument(
        "--mode", choices=["pynative", "graph"], default="pynative", help="the smoke run's default; graph mode's 1 ms toy steps are the worst case"
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of each overhead variant")
    parser.add_argument("--mindformers-repeat", type=int, default=2, help="mindformers Qwen3 smoke runs to time")
    parser.add_argument("--no-mindformers", dest="mindformers", action="store_false", help="skip the mindformers smoke timing")
    args = parser.parse_args(argv)

    from msnb.smoke import run_smoke

    totals, delays = [], []
    for _ in range(args.repeat):
        t0 = time.monotonic()
        result = run_smoke(live=False)
        totals.append(time.monotonic() - t0)
        delays.append(result.first_live_delay_s)
        if not result.passed:
            print(result.format_text())
            return 1
    print(f"\nDefault smoke run (200 steps, built-in model, CPU), {args.repeat} runs")
    print(f"  start to verdict: median {statistics.median(totals):.1f} s (min {min(totals):.1f}, max {max(totals):.1f}); target < 30 s")
    good = [d for d in delays if d is not None]
    if good:
        print(f"  first step to first live point: median {statistics.median(good):.2f} s (max {max(good):.2f}); target < 5 s")

    if args.mindformers:
        if bench_mindformers(args.mindformers_repeat):
            return 1

    variants = ("bare", "collector10", "collector10_msnb", "msnb_full", "collector_freq1")
    runs: dict = {v: [] for v in variants}
    inside: dict = {}
    for _ in range(args.rounds):  # rounds interleave the variants, so drift on the machine hits them all
        for variant in variants:
            with tempfile.TemporaryDirectory() as work:
                proc = subprocess.run([sys.executable, "-c", CHILD, variant, args.mode, str(args.steps), work], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"  {variant}: failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            answer = json.loads(proc.stdout.strip().splitlines()[-1])
            ms = answer["ms"]
            runs[variant].append(median_after_warmup(ms, max(10, len(ms) // 10)))
            for name, per_step in answer["in_callbacks_ms"].items():
                inside.setdefault((variant, name), []).append(per_step)
    rows = {v: statistics.median(r) for v, r in runs.items() if r}
    print(f"\nStep time with monitoring callbacks ({args.mode} mode, {args.steps} steps, median of {args.rounds} runs of the median after warm-up)")
    labels = {
        "bare": "bare training",
        "collector10": "SummaryCollector, collect_freq 10",
        "collector10_msnb": "  + msnb's own (smoothed early stop, flush)",
        "msnb_full": "msnb's full set from a monitor_config",
        "collector_freq1": "SummaryCollector, collect_freq 1",
    }
    base = rows.get("bare")
    for variant in variants:
        if variant in rows:
            over = f"{(rows[variant] / base - 1):+.1%} vs bare" if base else ""
            print(f"  {labels[variant]:<44} {rows[variant]:8.3f} ms  {over}")
    print("  (end-to-end medians on 2 shared cores are noisy: the collector's writer processes compete with training)")
    if base:
        print(f"\nTime inside each callback's step hooks, per step, against the bare step time ({base:.3f} ms)")
        for (variant, name), values in sorted(inside.items()):
            per = statistics.median(values)
            print(f"  {labels[variant].strip():<44} {name:<20} {per:7.4f} ms  {per / base:6.2%}")
        own = sum(
            statistics.median(v) for (variant, name), v in inside.items() if variant == "collector10_msnb" and name in ("SmoothedEarlyStop", "PeriodicFlush")
        )
        print(f"  msnb's own callbacks: {own:.4f} ms a step = {own / base:.2%} of a bare step (target: under 2 %)")
    if "msnb_full" in rows and "collector_freq1" in rows:
        print(f"  msnb's full set vs SummaryCollector at collect_freq 1: {rows['msnb_full'] / rows['collector_freq1'] - 1:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
