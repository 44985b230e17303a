"""The team panel's cost: ``msnb runs`` on a base of many runs, against TensorBoard loading the same base, in one run.

    python benchmarks/bench_panel.py                      # 16 runs x 8 ranks x 1,000 steps x 3 tags
    python benchmarks/bench_panel.py --runs 4 --ranks 2   # a first look

Builds the base once (cached in benchmarks/.data) with tensorboardX in
mindformers' layout (``expN/runM/rank_K/events.out.tfevents.*``), then, each in
a fresh child process:

- ``msnb runs BASE --json``: discovery, reading with CRC checks, the judge on every run, the table;
- a watch poll: the same board polled again with nothing new written (what every ``--every`` tick costs);
- TensorBoard's EventMultiplexer over BASE keeping every scalar (``Reload``): reading only, no verdict.

Prints wall seconds (after the imports, which are shown apart), peak RSS of each child, and the ratio to msnb.
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

MSNB = """
import resource, sys, time
t0 = time.perf_counter()
from msnb.cli import main
import msnb.panel, msnb.analysis.judge
import contextlib, io
t = time.perf_counter()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["runs", sys.argv[1], "--json"])
wall = time.perf_counter() - t
import json
doc = json.loads(out.getvalue())
print(json.dumps({"seconds": wall, "import": t - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "runs": len(doc["runs"]), "exit": code}))
"""

POLL = """
import json, resource, sys, time
from msnb.panel import RunsBoard
board = RunsBoard(sys.argv[1])
board.poll()
t = time.perf_counter()
table = board.poll()
wall = time.perf_counter() - t
print(json.dumps({"seconds": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "runs": len(table.rows), "changed": len(board.changed)}))
"""

TENSORBOARD = """
import json, resource, sys, time
t0 = time.perf_counter()
from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
t = time.perf_counter()
m = EventMultiplexer(size_guidance={"scalars": 0, "tensors": 0})
m.AddRunsFromDirectory(sys.argv[1])
m.Reload()
points = sum(len(m.Tensors(run, tag)) for run, tags in m.Runs().items() for tag in tags.get("tensors", []))
points += sum(len(m.Scalars(run, tag)) for run, tags in m.Runs().items() for tag in tags.get("scalars", []))
wall = time.perf_counter() - t
print(json.dumps({"seconds": wall, "import": t - t0, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "runs": len(m.Runs()), "points": points}))
"""


def child(code: str, base: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, str(base)], capture_output=True, text=True, cwd=str(REPO), timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    base = HERE / ".data" / f"panel-{args.runs}x{args.ranks}x{args.steps}"
    if not (base / ".complete").exists():
        t = time.perf_counter()
        writer = REPO / "tests" / "writers" / "team_runs.py"
        subprocess.run([sys.executable, str(writer), str(base), "big", str(args.runs), str(args.ranks), str(args.steps)], check=True, timeout=3600)
        (base / ".complete").write_text("ok")
        print(f"wrote {base} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    size = sum(p.stat().st_size for p in base.rglob("*tfevents*"))
    print(
        f"base: {args.runs} runs x {args.ranks} ranks x {args.steps} steps x 3 tags = {args.runs * args.ranks * args.steps * 3:,} points, {size / 1e6:.1f} MB"
    )
    rows = [
        ("msnb runs --json (read + judge)", child(MSNB, base)),
        ("watch poll, nothing new", child(POLL, base)),
        ("TensorBoard EventMultiplexer.Reload", child(TENSORBOARD, base)),
    ]
    ref = rows[0][1]["seconds"]
    print(f"{'what':<40} {'seconds':>9} {'import s':>9} {'peak RSS MB':>12} {'vs msnb runs':>13}  found")
    for name, r in rows:
        found = f"{r['runs']} run(s)" + (f", {r['points']:,} points" if "points" in r else "")
        imported = f"{r['import']:>9.2f}" if "import" in r else f"{'-':>9}"
        print(f"{name:<40} {r['seconds']:>9.3f} {imported} {r['rss_mb']:>12.0f} {r['seconds'] / ref:>12.2f}x  {found}")


if __name__ == "__main__":
    main()
