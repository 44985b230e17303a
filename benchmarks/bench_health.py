"""First-anomaly answer and heatmap for 64 ranks x 500 parameters x 5,000 steps, against today's ways, in one run.

    python benchmarks/bench_health.py [--ranks 64] [--params 500] [--steps 5000] [--baseline-ranks 1]

The data is one float32 array (ranks x parameters x steps, 640 MB at full size),
with one parameter on one rank growing from 60% of the run, NaN from 68%,
spreading to that rank and then to every rank.  Each variant runs in its own
process and reports seconds, peak RSS and whether it found the fault:

- ``msnb``: :func:`msnb.analysis.health.scan_cube` (the answer), then the
  parameters x steps heatmap (max over ranks) written to a PNG.
- ``pandas``: what one writes today, a rolling median / MAD per series with
  pandas (``Series.rolling(64).median()``), run on ``--baseline-ranks`` ranks and
  scaled to all of them (it is linear in the series).
- ``pcolormesh``: the same heatmap handed to matplotlib cell by cell
  (``pcolormesh`` of the parameters x steps plane, one quad per cell).

The machine's load average is printed: on a shared machine every number moves with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, time
import matplotlib
matplotlib.use("Agg")
import numpy as np

ranks, params, steps, variant, out, base_ranks = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
R, P, T = ranks, params, steps
rng = np.random.default_rng(0)
cube = np.empty((R, P, T), dtype=np.float32)
trend = (1 + 2 * np.exp(-np.arange(T) / 600)).astype(np.float32)
base = np.exp(rng.normal(-3, 0.8, P)).astype(np.float32)
for r in range(R):
    cube[r] = rng.standard_normal((P, T), dtype=np.float32)
    cube[r] *= 0.05
    cube[r] += 1
    cube[r] *= base[:, None] * trend[None, :]
fr, fp, g0, nan_at = R * 37 // 64, P * 123 // 500, int(T * 0.6), int(T * 0.68)
cube[fr, fp, g0:] *= np.exp(0.03 * np.arange(T - g0, dtype=np.float32))
cube[fr, fp, nan_at:] = np.nan
cube[fr, :, nan_at + 10:] = np.nan
cube[:, :, nan_at + 20:] = np.nan
names = [f"model.layers.{i // 9}.{['attention.wq', 'attention.wk', 'attention.wv', 'attention.wo', 'feed_forward.w1', 'feed_forward.w2', 'feed_forward.w3', 'attention_norm', 'ffn_norm'][i % 9]}.weight" for i in range(P)]
tags = ["local_norm/" + n for n in names]
step_no = np.arange(1, T + 1)
ready = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
res = {"variant": variant, "data_mb": cube.nbytes / 2**20, "rss_after_data_mb": ready}
import matplotlib.figure, matplotlib.backends.backend_agg  # imports are not what is measured
if variant == "msnb":
    import msnb.analysis.health, msnb.plot.heatmaps
else:
    import matplotlib.pyplot, pandas
t0, c0 = time.perf_counter(), time.process_time()
if variant == "msnb":
    from msnb.analysis.health import scan_cube
    rep = scan_cube(cube, step_no, tags=tags)
    res["answer_s"] = time.perf_counter() - t0
    res["answer_cpu_s"] = time.process_time() - c0
    res["rss_after_answer_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    f = rep.first
    res["found"] = f is not None and (f.rank, f.tag) == (fr, tags[fp]) and g0 < f.step <= nan_at
    res["first"] = f.as_dict() if f else None
    res["cascade_total"] = rep.cascade_total
    from msnb.plot.heatmaps import parameter_heatmap_from_cube
    t1, c1 = time.perf_counter(), time.process_time()
    h = parameter_heatmap_from_cube(cube, step_no, names, anomaly=f, prefix="local_norm/")
    h.figure.savefig(out, dpi=80)
    res["heatmap_s"] = time.perf_counter() - t1
    res["heatmap_cpu_s"] = time.process_time() - c1
    res["cells_drawn"] = list(h.cells.shape)
elif variant == "pandas":
    import pandas as pd
    first = None
    for r in range(base_ranks):
        frame = pd.DataFrame(cube[r].T.astype(np.float64))
        med = frame.rolling(64).median().shift(1)
        mad = (frame - med).abs().rolling(64).median().shift(1)
        z = (frame - med) / (1.4826 * mad).clip(lower=0.05 * med.abs())
        bad = (z.abs() > 10) | ~np.isfinite(frame)
        hit = bad.to_numpy().argmax(axis=0)
        any_ = bad.to_numpy().any(axis=0)
        for p in np.flatnonzero(any_):
            if first is None or hit[p] < first[0]:
                first = (int(hit[p]) + 1, r, tags[p])
    elapsed = time.perf_counter() - t0
    res["measured_ranks"] = base_ranks
    res["answer_s"] = elapsed * R / base_ranks
    res["answer_cpu_s"] = (time.process_time() - c0) * R / base_ranks
    res["measured_s"] = elapsed
elif variant == "pcolormesh":
    import matplotlib.pyplot as plt
    plane = cube.max(axis=0)
    with np.errstate(all="ignore"):
        rel = np.log10(plane / np.nanmedian(plane, axis=1, keepdims=True))
    fig, ax = plt.subplots(figsize=(11, 10))
    ax.pcolormesh(step_no, np.arange(P), rel, cmap="RdBu_r", vmin=-1, vmax=1)
    fig.savefig(out, dpi=80)
    res["heatmap_s"] = time.perf_counter() - t0
    res["heatmap_cpu_s"] = time.process_time() - c0
res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(res))
"""


def run(variant: str, args, out: str) -> dict:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(args.ranks), str(args.params), str(args.steps), variant, out, str(args.baseline_ranks)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if proc.returncode != 0:
        return {"variant": variant, "error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--params", type=int, default=500)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--baseline-ranks", type=int, default=1, help="ranks the pandas baseline really runs on (scaled to all)")
    ap.add_argument("--out", default="bench_health.png", help="where msnb's heatmap goes")
    ap.add_argument("--skip", action="append", default=[], choices=["pandas", "pcolormesh"])
    args = ap.parse_args()
    print(f"{args.ranks} ranks x {args.params} parameters x {args.steps} steps; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    results = [run("msnb", args, args.out)]
    for variant in ("pandas", "pcolormesh"):
        if variant not in args.skip:
            results.append(run(variant, args, os.path.splitext(args.out)[0] + f"_{variant}.png"))
    mine = results[0]
    for r in results:
        print(json.dumps(r))
    if "error" in mine:
        sys.exit(1)
    print(
        f"msnb: answer {mine['answer_s']:.2f} s wall / {mine['answer_cpu_s']:.2f} s CPU (found the fault: {mine['found']}), "
        f"heatmap {mine['heatmap_s']:.2f} s wall / {mine['heatmap_cpu_s']:.2f} s CPU, peak RSS {mine['peak_rss_mb']:.0f} MB (the data alone {mine['data_mb']:.0f} MB)"
    )
    for r in results[1:]:
        if "error" in r:
            print(f"{r['variant']}: failed")
        elif "answer_s" in r:
            ratio = r["answer_cpu_s"] / mine["answer_cpu_s"]
            print(f"{r['variant']}: answer {r['answer_cpu_s']:.1f} s CPU (measured on {r['measured_ranks']} rank(s), scaled): msnb is {ratio:.0f}x faster")
        else:
            ratio = r["heatmap_cpu_s"] / mine["heatmap_cpu_s"]
            print(f"{r['variant']}: heatmap {r['heatmap_cpu_s']:.2f} s CPU, peak RSS {r['peak_rss_mb']:.0f} MB: msnb is {ratio:.1f}x faster")


if __name__ == "__main__":
    main()
