"""Drawing speed: a million points into a PNG, msnb against plain matplotlib, in one run.

    python benchmarks/bench_plot.py [--points 1000000]

msnb smooths the full series (TensorBoard's EMA), downsamples raw and smoothed
curves with M4 (first, last, min and max of each of 2,000 buckets) and draws;
the baselines hand all points to matplotlib, as a notebook user would with
``plt.plot`` (raw only, and raw plus a pandas ``ewm`` smoothed line).  Each variant runs in its own process; the report gives seconds,
peak RSS and whether the two injected spikes are still on the figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import matplotlib
matplotlib.use("Agg")
import numpy as np
from msnb.events import ScalarTable

n = int(sys.argv[1]); variant = sys.argv[2]; out = sys.argv[3]
rng = np.random.default_rng(0)
steps = np.arange(1, n + 1)
loss = 3.0 / np.sqrt(steps) + rng.normal(0, 0.02, n)
loss[n // 3] = 25.0      # a one-step spike up
loss[2 * n // 3] = -5.0  # and one down
table = ScalarTable(run=np.full(n, ".", dtype=object), rank=np.zeros(n, dtype=np.int64), tag=np.full(n, "loss", dtype=object),
                    step=steps, wall_time=np.zeros(n), value=loss)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
if variant == "msnb":
    from msnb.plot import plot_scalars
    report = plot_scalars(table, tags=["loss"], smooth=0.6)
    fig = report.figure
    ys = np.concatenate([l.get_ydata() for l in fig.axes[0].get_lines()])
elif variant == "matplotlib":
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.plot(steps, loss, linewidth=0.8)
    ys = loss
else:  # raw faint plus an exponentially smoothed line, as users build it with pandas
    import matplotlib.pyplot as plt
    import pandas as pd
    smoothed = pd.Series(loss).ewm(alpha=0.4).mean().to_numpy()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.plot(steps, loss, linewidth=0.8, alpha=0.25)
    ax.plot(steps, smoothed, linewidth=1.6)
    ys = loss
fig.savefig(out, dpi=100)
seconds = time.perf_counter() - t0
print(json.dumps({"variant": variant, "seconds": seconds, "spikes_kept": bool(ys.max() >= 25.0 and ys.min() <= -5.0),
                  "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mb": before}))
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--out-dir", default="/tmp")
    args = parser.parse_args(argv)
    rows = []
    for variant in ("msnb", "matplotlib", "matplotlib+pandas"):
        out = f"{args.out_dir}/msnb-bench-{variant}.png"
        proc = subprocess.run([sys.executable, "-c", CHILD, str(args.points), variant, out], capture_output=True, text=True, check=True)
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"\nDrawing {args.points:,} points (smoothing included for msnb) to PNG")
    print(f"  {'variant':<18} {'seconds':>8} {'peak RSS':>9} {'+RSS':>7} {'spikes kept':>12}")
    for r in rows:
        print(
            f"  {r['variant']:<18} {r['seconds']:>8.3f} {r['rss_peak_mb']:>7.0f}MB {r['rss_peak_mb'] - r['rss_before_mb']:>5.0f}MB {str(r['spikes_kept']):>12}"
        )
    ours = rows[0]["seconds"]
    for r in rows[1:]:
        print(f"  msnb time / {r['variant']} time: {ours / r['seconds']:.2f}")
    print(f"  target: about 1 s for a million points with spikes kept; msnb: {ours:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
