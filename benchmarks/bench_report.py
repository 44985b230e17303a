"""The one-file report against what one writes today to attach curves to a ticket, in one run.

    python benchmarks/bench_report.py              # 8 ranks x 20,000 steps x 4 scalars (640,000 points) + histograms
    python benchmarks/bench_report.py --steps 2000 # a first look

The run is written in mindformers' layout (``tensorboard/rank_N/events.out.tfevents.*``:
``loss``, ``learning-rate``, ``grad-norm``, ``iteration-time``, and one weight
histogram every 1,000 steps) by msnb's TensorBoard encoder, into a temporary
directory.  Each variant runs in a fresh process and reports seconds, peak RSS
and the size of what it wrote:

- ``msnb report``: :func:`msnb.report`: reading, the judge, every figure, the HTML page.
- ``today``: TensorBoard's ``EventAccumulator`` on each rank (every point kept), a
  pandas frame, the mean over ranks with a raw line and an ``ewm`` line per tag
  drawn with pyplot and saved as one PNG: curves only, no verdict, no
  histograms, no lineage.

The machine's load average is printed: on a shared machine every number moves with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TAGS = ("loss", "learning-rate", "grad-norm", "iteration-time")

CHILD = r"""
import json, os, resource, sys, time
import matplotlib
matplotlib.use("Agg")
variant, root, out = sys.argv[1], sys.argv[2], sys.argv[3]
if variant == "msnb":
    import msnb, msnb.html_report, msnb.plot.scalars  # imports are not what is measured
    t0 = time.perf_counter()
    result = msnb.report(root, out=out)
    extra = {"passed": result.passed, "runs": result.runs}
else:
    import glob
    import matplotlib.pyplot as plt
    import pandas as pd
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    t0 = time.perf_counter()
    frames = []
    for rank_dir in sorted(glob.glob(os.path.join(root, "tensorboard", "rank_*"))):
        acc = EventAccumulator(rank_dir, size_guidance={"scalars": 0, "histograms": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            events = acc.Scalars(tag)
            frames.append(pd.DataFrame({"rank": rank_dir, "tag": tag, "step": [e.step for e in events], "value": [e.value for e in events]}))
    df = pd.concat(frames)
    tags = sorted(df.tag.unique())
    fig, axes = plt.subplots(2, 2, figsize=(12.8, 6.8))
    for ax, tag in zip(axes.ravel(), tags):
        mean = df[df.tag == tag].groupby("step").value.mean()
        ax.plot(mean.index, mean.values, alpha=0.25)
        ax.plot(mean.index, mean.ewm(alpha=0.4).mean().values)
        ax.set_title(tag)
    fig.savefig(out, dpi=80)
    extra = {"points": int(len(df))}
seconds = time.perf_counter() - t0
print(json.dumps({"variant": variant, "seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "out_bytes": os.path.getsize(out), **extra}))
"""


def write_run(root: Path, ranks: int, steps: int) -> int:
    """The run, as mindformers lays it out; returns the number of scalar points."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from msnb.bridges.tfevents import EventFileWriter, histogram_value, scalar_records

    rng = np.random.default_rng(0)
    s = np.arange(1, steps + 1)
    for rank in range(ranks):
        loss = (0.5 + 2.5 / np.sqrt(s)) * np.exp(0.1 * rng.standard_normal(steps))
        lr = 1e-4 * np.minimum(1.0, s / 500)
        grad = 1.0 + 0.2 * rng.standard_normal(steps) ** 2
        step_time = 120.0 * np.exp(0.05 * rng.standard_normal(steps))
        step_time[0] = 9000.0  # compilation
        columns = np.stack([loss, lr, grad, step_time], axis=1).ravel()
        writer = EventFileWriter(root / "tensorboard" / f"rank_{rank}")
        walls = 1.7e9 + np.repeat(s * 0.12, len(TAGS))
        writer.write_raw(scalar_records(list(TAGS) * steps, np.repeat(s, len(TAGS)), walls, columns))
        for step in range(1000, steps + 1, 1000):
            weights = rng.standard_normal(4096) * (1 + step / steps)
            counts, edges = np.histogram(weights, bins=30)
            value = histogram_value("layers.0.weight", weights.min(), weights.max(), weights.size, weights.sum(), edges[:-1], edges[1:], counts)
            writer.write_event(step, 1.7e9 + step * 0.12, [value])
        writer.close()
    return ranks * steps * len(TAGS)


def measure(variant: str, root: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", CHILD, variant, str(root), str(out)], capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="msnb-bench-report-") as tmp:
        root = Path(tmp) / "run"
        points = write_run(root, args.ranks, args.steps)
        print(f"{args.ranks} ranks x {args.steps:,} steps x {len(TAGS)} scalars = {points:,} points; load average {os.getloadavg()[0]:.2f}")
        ours = measure("msnb", root, Path(tmp) / "report.html")
        today = measure("today", root, Path(tmp) / "today.png")
    print(f"{'variant':<44} {'seconds':>8} {'peak RSS MB':>12} {'wrote KB':>9}")
    for name, r in (("msnb report (verdict, figures, page)", ours), ("EventAccumulator + pandas + pyplot (curves)", today)):
        print(f"{name:<44} {r['seconds']:>8.2f} {r['peak_rss_mb']:>12.0f} {r['out_bytes'] / 1024:>9.0f}")
    print(f"msnb report takes {ours['seconds'] / today['seconds']:.2f}x the time of today's curves-only PNG; verdict passed={ours['passed']}")
    assert today["points"] == points, f"EventAccumulator kept {today['points']:,} of {points:,} points"


if __name__ == "__main__":
    main()
