"""Drawing speed: a million points into a PNG, msnb against plain matplotlib, in one run.

    python benchmarks/bench_plot.py [--points 1000000] [--ranks 1024 --rank-steps 2000]

msnb smooths the full series (TensorBoard's EMA), downsamples raw and smoothed
curves with M4 (first, last, min and max of each of 2,000 buckets) and draws;
the baselines hand all points to matplotlib, as a notebook user would with
``plt.plot`` (raw only, and raw plus a pandas ``ewm`` smoothed line).  Each variant runs in its own process; the report gives seconds,
peak RSS and whether the two injected spikes are still on the figure.

Then many ranks on one panel (``--ranks``, 1,024 x 2,000 steps by default): msnb's cross-rank bands
(judge included) against msnb drawing one line per rank and plain matplotlib drawing one line per
rank; the report says whether the departing rank and the noisy-but-healthy one got a line of their own.
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


RANKS_CHILD = r"""
import json, resource, sys, time
import matplotlib
matplotlib.use("Agg")
import numpy as np
from msnb.events import ScalarTable

ranks, steps_n, variant, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = np.random.default_rng(1)
steps = np.arange(1, steps_n + 1)
trend = 3.0 / np.sqrt(steps) + 0.5
loss = trend[None, :] * np.exp(rng.normal(0, 0.05, (ranks, steps_n)))
noisy, bad, nan = 7 % ranks, ranks // 2 + 5, 3
loss[noisy] = trend * np.exp(rng.normal(0, 0.15, steps_n))  # healthy, three times noisier
onset = int(0.6 * steps_n)
loss[bad, onset:] *= np.exp(0.003 * np.arange(steps_n - onset))  # departs
loss[nan, steps_n // 4] = np.nan
n = ranks * steps_n
table = ScalarTable(run=np.full(n, "run", dtype=object), rank=np.repeat(np.arange(ranks), steps_n), tag=np.full(n, "loss", dtype=object),
                    step=np.tile(steps, ranks), wall_time=np.tile(steps.astype(float), ranks), value=loss.ravel())
import matplotlib.figure, matplotlib.pyplot  # imports outside the timed region, for every variant alike
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
if variant.startswith("msnb"):
    from msnb.plot import plot_scalars
    report = plot_scalars(table, tags=["loss"], bands=variant == "msnb-bands", ranks=True)
    fig = report.figure
    labels = fig.axes[0].get_legend_handles_labels()[1]
    named = lambda r: any(l.startswith((f"rank {r} (", f"rank {r} diverges")) for l in labels)  # a line or a flag of its own
    bad_alone, noisy_alone = named(bad), named(noisy)
    lines = len(fig.axes[0].get_lines())
else:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.plot(steps, loss.T, linewidth=0.5)
    bad_alone = noisy_alone = None
    lines = len(ax.get_lines())
fig.savefig(out, dpi=100)
seconds = time.perf_counter() - t0
print(json.dumps({"variant": variant, "seconds": seconds, "lines": lines, "bad_alone": bad_alone, "noisy_alone": noisy_alone,
                  "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mb": before}))
"""


def ranks_case(ranks: int, steps: int, out_dir: str) -> None:
    """Many ranks on one panel: msnb's bands against one line per rank (msnb's and plain matplotlib's)."""
    rows = []
    for variant in ("msnb-bands", "msnb-lines", "matplotlib-lines"):
        out = f"{out_dir}/msnb-bench-{ranks}ranks-{variant}.png"
        proc = subprocess.run([sys.executable, "-c", RANKS_CHILD, str(ranks), str(steps), variant, out], capture_output=True, text=True, check=True)
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"\n{ranks:,} ranks x {steps:,} steps of loss on one panel (one rank departs, one is noisy but healthy, one logs a NaN)")
    print(f"  {'variant':<18} {'seconds':>8} {'peak RSS':>9} {'+RSS':>7} {'lines':>6} {'bad rank named':>15} {'noisy rank named':>17}")
    for r in rows:
        print(
            f"  {r['variant']:<18} {r['seconds']:>8.3f} {r['rss_peak_mb']:>7.0f}MB {r['rss_peak_mb'] - r['rss_before_mb']:>5.0f}MB {r['lines']:>6}"
            f" {str(r['bad_alone']):>15} {str(r['noisy_alone']):>17}"
        )
    ours = rows[0]["seconds"]
    for r in rows[1:]:
        print(f"  msnb-bands time / {r['variant']} time: {ours / r['seconds']:.2f}")
    print(f"  figures: {out_dir}/msnb-bench-{ranks}ranks-*.png (msnb-bands includes the judge's divergence and NaN checks over every rank)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--out-dir", default="/tmp")
    parser.add_argument("--ranks", type=int, default=1024, help="ranks in the bands case (0: skip it)")
    parser.add_argument("--rank-steps", type=int, default=2000, help="steps per rank in the bands case")
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
    if args.ranks:
        ranks_case(args.ranks, args.rank_steps, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
