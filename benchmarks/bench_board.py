"""The board's cost: opening ``msnb.board`` on the team base, and one redraw after a control change on a million points.

    python benchmarks/bench_board.py                       # 16 runs x 8 ranks x 1,000 steps x 3 tags; 1 M points for redraws
    python benchmarks/bench_board.py --runs 4 --ranks 2    # a first look

Builds the bases once (cached in benchmarks/.data) with tensorboardX in
mindformers' layout (``tests/writers/team_runs.py big``), then, each in a fresh
child process (after the imports, which are shown apart):

- open: ``msnb.board(BASE)``, i.e. discovery, reading with CRC checks, the judge on every run, the first figure and its PNG;
- redraw: on a base of about a million points, each control set in turn (the PNG included, as the widget
  shows it), the median of ``--repeat`` changes of each, in wall time and in this process's CPU time (on a
  shared machine the wall time also holds the waits for a core).  Targets: open under 1 s, a redraw under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

OPEN = """
import json, resource, sys, time
t0 = time.perf_counter()
import msnb, msnb.dashboard, msnb.analysis.judge, matplotlib.figure, ipywidgets
t = time.perf_counter()
b = msnb.board(sys.argv[1])
wall = time.perf_counter() - t
print(json.dumps({"seconds": wall, "import": t - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "runs": len(b.data.runs), "points": b.data.points()}))
"""

REDRAW = """
import json, statistics, sys, time
import msnb
b = msnb.board(sys.argv[1])
c = b.controls
repeat = int(sys.argv[2])
changes = [
    ("smoothing", [0.3, 0.7, 0.9, 0.5, 0.8]),
    ("x", ["relative", "wall", "step"]),
    ("log", [True, False]),
    ("steps", [(c["steps"].min + 100, c["steps"].max - 100), (c["steps"].min, c["steps"].max)]),
    ("outliers", [True, False]),
    ("ranks", ["all", "mean"]),
    ("ranks", ["bands", "mean"]),
    ("runs", [tuple(c["runs"].value[1:]), tuple(c["runs"].value)]),
]
out = {}
for name, values in changes:
    times, cpu = [], []
    for i in range(repeat):
        v = values[i % len(values)]
        t, p = time.perf_counter(), time.process_time()
        c[name].value = v  # outside an event loop: drawn (and turned into the PNG) before this returns
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - p)
    out[f"{name} -> {values[0]!r}" if name == "ranks" else name] = (statistics.median(times), statistics.median(cpu))
print(json.dumps({"points": b.data.points(), "runs": len(b.data.runs), "redraws": out}))
"""


def child(code: str, *args) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=str(REPO), timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def base_of(runs: int, ranks: int, steps: int) -> Path:
    base = HERE / ".data" / f"panel-{runs}x{ranks}x{steps}"
    if not (base / ".complete").exists():
        t = time.perf_counter()
        writer = REPO / "tests" / "writers" / "team_runs.py"
        subprocess.run([sys.executable, str(writer), str(base), "big", str(runs), str(ranks), str(steps)], check=True, timeout=3600)
        (base / ".complete").write_text("ok")
        print(f"wrote {base} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--points", type=int, default=1_000_000, help="points of the base the redraws are timed on")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    base = base_of(args.runs, args.ranks, args.steps)
    size = sum(p.stat().st_size for p in base.rglob("*tfevents*"))
    opened = child(OPEN, base)
    print(
        f"open: {args.runs} runs x {args.ranks} ranks x {args.steps} steps x 3 tags = {opened['points']:,} points ({size / 1e6:.1f} MB): "
        f"{opened['seconds']:.3f} s (imports {opened['import']:.2f} s apart), peak RSS {opened['rss_mb']:.0f} MB  [target < 1 s]"
    )

    big_runs = 4
    big_steps = max(1, args.points // (big_runs * args.ranks * 3))
    big = base_of(big_runs, args.ranks, big_steps)
    redraw = child(REDRAW, big, args.repeat)
    print(f"redraw after a control change: {big_runs} runs x {args.ranks} ranks x {big_steps} steps x 3 tags = {redraw['points']:,} points  [target < 300 ms]")
    for name, (seconds, cpu) in redraw["redraws"].items():
        print(f"  {name:<28} {seconds * 1000:8.0f} ms wall, {cpu * 1000:6.0f} ms CPU (medians of {args.repeat})")


if __name__ == "__main__":
    main()
