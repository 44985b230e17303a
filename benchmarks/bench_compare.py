"""Precision alignment of two 100,000-step runs: ``msnb compare`` against the script a person writes today.

    python benchmarks/bench_compare.py [--steps 100000] [--repeat 3] [--data DIR]

Writes a Megatron-LM training log (the baseline, every step, with timestamps)
and a mindformers MFLossMonitor log (the candidate, drifting away from 80 % of
the run), about 30 MB each, then times in fresh processes:

- ``msnb``: ``msnb.compare(baseline, candidate)``: both logs read, every check,
  the first divergence; the figure (``plot_compare``) is timed apart.
- ``script``: what one writes without a tool: a regular expression per format
  over each line, two pandas DataFrames merged on the step, the standard's
  means (first loss, mean absolute/relative error, grad norm) with numpy.  It
  gives no divergence step, no lr check and no trailing window.

Each variant runs ``--repeat`` times; the best and median wall times are printed
(seconds, imports excluded), the best CPU time (steadier than wall time on a shared
machine), and the verdict each reached.  On a shared machine
every number moves with the load average, which is printed too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
variant, base, cand = sys.argv[1], sys.argv[2], sys.argv[3]
if variant.startswith("msnb"):
    import msnb, msnb.analysis.compare, msnb.events.table_files, msnb.events.reader, msnb.events.logs
    from msnb.analysis.compare_sides import read_side, wanted_tags
    t, c0 = time.perf_counter(), time.process_time()
    r = msnb.compare(base, cand)
    took, cpu = time.perf_counter() - t, time.process_time() - c0
    out = {"seconds": took, "cpu": cpu, "passed": r.passed, "common": r.common_steps,
           "divergence": r.first_divergence.step if r.first_divergence else None}
    wanted = wanted_tags("loss")
    t = time.perf_counter()
    read_side(base, tags=wanted)
    out["baseline_read"] = time.perf_counter() - t
    t = time.perf_counter()
    read_side(cand, tags=wanted)
    out["candidate_read"] = time.perf_counter() - t
    import matplotlib
    matplotlib.use("Agg")
    from msnb.plot.compare import plot_compare
    from msnb.plot.render import figure_png
    t = time.perf_counter()
    figure_png(plot_compare(r))
    out["figure_seconds"] = time.perf_counter() - t
else:
    import re
    import numpy as np, pandas as pd
    t, c0 = time.perf_counter(), time.process_time()
    meg = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?learning rate: (\S+) \|.*?lm loss: (\S+) \|.*?grad norm: (\S+) \|")
    mf = re.compile(r"step:\[\s*(\d+)/\s*\d+\], loss:\[?\s*([^/\],]+).*?lr: (\S+), .*?global_norm: \[([^\]]+)\]")
    rows = []
    with open(base) as f:
        for line in f:
            m = meg.search(line)
            if m:
                rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))))
    b = pd.DataFrame(rows, columns=["step", "lr", "loss", "grad"])
    rows = []
    with open(cand) as f:
        for line in f:
            m = mf.search(line)
            if m:
                rows.append((int(m.group(1)), float(m.group(3)), float(m.group(2)), float(m.group(4))))
    c = pd.DataFrame(rows, columns=["step", "lr", "loss", "grad"])
    j = b.merge(c, on="step", suffixes=("_b", "_c"))
    d = (j.loss_c - j.loss_b).abs()
    rel = d / j.loss_b.abs()
    first_ok = d.iloc[0] < 0.005 or rel.iloc[0] < 0.005
    mean_ok = d.mean() < 0.01 or rel.mean() < 0.01
    grad_ok = ((j.grad_c - j.grad_b).abs() / j.grad_b.abs()).mean() <= 0.1
    took, cpu = time.perf_counter() - t, time.process_time() - c0
    out = {"seconds": took, "cpu": cpu, "passed": bool(first_ok and mean_ok and grad_ok), "common": len(j), "divergence": None}
print(json.dumps(out))
"""


def write_pair(directory: Path, steps: int) -> tuple[Path, Path]:
    """A Megatron-LM log and an MFLossMonitor log of *steps* steps, the candidate drifting from 80 % of the run (cached)."""
    import numpy as np

    base, cand = directory / f"megatron_{steps}.log", directory / f"mindformers_{steps}.log"
    if base.exists() and cand.exists():
        return base, cand
    rng = np.random.default_rng(0)
    s = np.arange(1, steps + 1)
    loss = (2.0 + 8.0 * np.exp(-s / (steps / 6))) * (1 + 0.002 * rng.standard_normal(steps))
    lr = 3e-4 * np.minimum(1.0, s / 2000) * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * s / steps)))
    grad = 1.5 + 0.05 * rng.standard_normal(steps)
    onset = int(steps * 0.8)
    closs = loss * (1 + 0.002 * rng.standard_normal(steps))
    closs[onset:] *= 1 + 2e-6 * np.arange(steps - onset)
    with open(base, "w") as f:
        for i in range(steps):
            f.write(
                f" [2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d}] iteration {s[i]:8d}/ {steps:8d} | consumed samples: {s[i] * 1024:12d} | "
                f"elapsed time per iteration (ms): 3121.4 | throughput per GPU (TFLOP/s/GPU): 182.3 | learning rate: {lr[i]:.6E} | "
                f"global batch size:  1024 | lm loss: {loss[i]:.6E} | loss scale: 1.0 | grad norm: {grad[i]:.3f} | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |\n"
            )
    with open(cand, "w") as f:
        for i in range(steps):
            f.write(
                f"2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d},100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - "
                f"{{ Epoch:[  1/  1], step:[{s[i]:6d}/{steps:6d}], loss:[{closs[i]:.6f}/{closs[i]:.6f}], per_step_time: 3120ms, "
                f"lr: {lr[i]:.6e}, overflow cond: False, loss_scale: 1.0, global_norm: [{grad[i]:.6f}], train_throughput_per_npu: 182.1T\n"
            )
    return base, cand


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=os.environ.get("MSNB_BENCH_CACHE") or os.path.join(tempfile.gettempdir(), "msnb-bench-compare"))
    args = parser.parse_args()
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    base, cand = write_pair(data, args.steps)
    print(
        f"baseline {base.stat().st_size / 1e6:.1f} MB, candidate {cand.stat().st_size / 1e6:.1f} MB, {args.steps:,} steps; load average {os.getloadavg()[0]:.2f}"
    )
    import json

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    results = {}
    for _ in range(args.repeat):
        for variant in ("msnb", "script"):
            proc = subprocess.run([sys.executable, "-c", CHILD, variant, str(base), str(cand)], capture_output=True, text=True, env=env, check=False)
            if proc.returncode:
                raise SystemExit(f"{variant} failed:\n{proc.stderr[-2000:]}")
            results.setdefault(variant, []).append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for variant, runs in results.items():
        secs = [r["seconds"] for r in runs]
        last = runs[-1]
        extra = ""
        if "figure_seconds" in last:
            extra = (
                f" (of which reading the baseline {statistics.median(r['baseline_read'] for r in runs):.2f} s, the candidate "
                f"{statistics.median(r['candidate_read'] for r in runs):.2f} s); figure {statistics.median(r['figure_seconds'] for r in runs):.2f} s"
            )
        print(
            f"{variant:7s} best {min(secs):.2f} s, median {statistics.median(secs):.2f} s over {len(secs)} (CPU best {min(r['cpu'] for r in runs):.2f} s){extra}; "
            f"passed={last['passed']} common={last['common']:,} first divergence={last['divergence']}"
        )


if __name__ == "__main__":
    main()
