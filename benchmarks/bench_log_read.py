"""Reading training logs: ``msnb.read`` against the one-regex script and pandas ``read_csv`` of the same numbers, in one run.

    python benchmarks/bench_log_read.py [--steps 100000] [--repeat 3] [--big-mb 300] [--data DIR]

Writes (once, cached) the logs of ``bench_compare.py`` (an MFLossMonitor log and a Megatron-LM log, every step),
the MFLossMonitor lines inside a mindformers ``info.log`` (two other INFO lines a step), and a CSV of the same
numbers; then reads each in a fresh child process per tool:

- ``msnb``: ``msnb.read(path)``, every scalar of every line kept (timestamps, checks, problems);
- ``script``: what one writes without a tool: one regular expression per line, the numbers into lists, a DataFrame;
- ``read_csv``: pandas reading the same numbers from a CSV (the floor a table reader sets); for msprobe's own CSV, that file.

Prints CPU seconds (``time.process_time`` in the child: steadier than wall time on a shared machine), the best and
median wall seconds, MB/s and the ratios to msnb, with the load average.  Then the peak RSS of ``msnb.read`` on a
``--big-mb`` log (every point kept, and only the loss), in a fresh child.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_compare import write_pair  # noqa: E402

CHILD = r"""
import json, resource, sys, time
tool, path, tags = sys.argv[1], sys.argv[2], sys.argv[3]
if tool == "msnb":
    import msnb, msnb.events.reader
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t, c = time.perf_counter(), time.process_time()
    r = msnb.read(path, tags=None if tags == "all" else tags.split(","))
    rows, problems = len(r.scalars), len(r.problems)
elif tool == "script":
    import re
    import pandas as pd
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t, c = time.perf_counter(), time.process_time()
    meg = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?learning rate: (\S+) \|.*?lm loss: (\S+) \|.*?grad norm: (\S+) \|")
    mf = re.compile(r"step:\[\s*(\d+)/\s*\d+\], loss:\[?\s*([^/\],]+).*?lr: (\S+), .*?global_norm: \[([^\]]+)\]")
    rows = []
    with open(path) as f:
        for line in f:
            m = mf.search(line) or meg.search(line)
            if m:
                rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))))
    df = pd.DataFrame(rows, columns=["step", "a", "b", "c"])
    rows, problems = len(df) * 3, 0
else:
    import pandas as pd
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t, c = time.perf_counter(), time.process_time()
    df = pd.read_csv(path)
    rows, problems = df.size - len(df), 0
out = {"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "rows": rows, "problems": problems,
       "rss_before": before, "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
print(json.dumps(out))
"""

INFO_LINES = (
    "{t},200 - mindformers[mindformers/core/callback/callback.py:530] - INFO - Full model flops is 1.0e+15, Shard model flops is 1.0e+15.\n"
    "{t},300 - mindformers[mindformers/core/callback/callback.py:812] - INFO - ....... Saving ckpt ......\n"
)


def write_info_log(mf_log: Path, out: Path) -> Path:
    """The MFLossMonitor lines with two other INFO lines after each, as a mindformers info.log interleaves them."""
    if out.exists():
        return out
    with open(mf_log) as src, open(out, "w") as f:
        for line in src:
            f.write(line)
            f.write(INFO_LINES.format(t=line[:19]))
    return out


def write_csv(mf_log: Path, out: Path) -> Path:
    """The numbers of the MFLossMonitor log as a CSV (step and its six scalars)."""
    if out.exists():
        return out
    import re

    pattern = re.compile(r"step:\[ *(\d+)/.*?loss:\[([^/]+)/.*?per_step_time: (\d+)ms, lr: (\S+), .*?loss_scale: (\S+), global_norm: \[([^\]]+)\], \w+: (\S+)T")
    with open(mf_log) as src, open(out, "w") as f:
        f.write("step,loss,step_time_ms,lr,loss_scale,global_norm,throughput\n")
        for line in src:
            m = pattern.search(line)
            if m:
                f.write(",".join(m.groups()) + "\n")
    return out


def write_msprobe(directory: Path, steps: int) -> Path:
    """A msprobe v1 activation CSV as its training-state monitor writes it: 100 modules a step, six statistics a row."""
    folder = directory / "msprobe" / "Dec05_02-31-03-rank0-88949a87"
    path = folder / f"actv_0-{steps - 1}.csv"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with open(path, "w") as f:
        f.write("vpp_stage,name,step,micro_step,min,max,mean,norm,nans,zeros,shape,dtype\n")
        for step in range(steps):
            f.write(
                "".join(
                    f"0,layers.{m}.mlp.fc1.input,{step},0,{rng.uniform(-1, 0):.8g},{rng.uniform(0, 1):.8g},{rng.gauss(0, 1e-3):.8g},"
                    f'{rng.uniform(0, 10):.8g},0.0,0.0,"(64, 4096)",Float32\n'
                    for m in range(100)
                )
            )
    return path


def write_big(directory: Path, mb: float) -> Path:
    """An MFLossMonitor log of about *mb* MB."""
    path = directory / f"mindformers_{mb:g}MB.log"
    if path.exists():
        return path
    steps = int(mb * 1e6 / 295)
    with open(path, "w") as f:
        for lo in range(0, steps, 10000):
            f.write(
                "".join(
                    f"2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d},100 - mindformers[mindformers/core/callback/callback.py:747] - INFO - "
                    f"{{ Epoch:[  1/  1], step:[{i + 1:7d}/{steps:7d}], loss:[{2 + 1 / (i + 1):.6f}/{2 + 1 / (i + 1):.6f}], per_step_time: 3120ms, "
                    f"lr: {3e-4 / (1 + i / 1000):.6e}, overflow cond: False, loss_scale: 1.0, global_norm: [1.500000], train_throughput_per_npu: 182.1T\n"
                    for i in range(lo, min(lo + 10000, steps))
                )
            )
    return path


def child(tool: str, path: Path, tags: str = "all") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", CHILD, tool, str(path), tags], capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        raise SystemExit(f"{tool} on {path} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=float, default=300.0, help="MB of the log whose peak RSS is measured (0: skip)")
    parser.add_argument("--data", default=os.environ.get("MSNB_BENCH_CACHE") or os.path.join(tempfile.gettempdir(), "msnb-bench-compare"))
    args = parser.parse_args()
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    megatron, mindformers = write_pair(data, args.steps)
    info = write_info_log(mindformers, data / f"info_{args.steps}.log")
    csv = write_csv(mindformers, data / f"mindformers_{args.steps}.csv")
    probe = write_msprobe(data, args.steps // 20)
    cases = [
        ("MFLossMonitor log", mindformers, csv, ["msnb", "script", "read_csv"]),
        ("mindformers info.log (2 other lines a step)", info, csv, ["msnb", "script", "read_csv"]),
        ("Megatron-LM log", megatron, None, ["msnb", "script"]),
        (f"msprobe actv CSV ({args.steps // 20:,} steps x 100)", probe, probe, ["msnb", "read_csv"]),
    ]
    print(f"{args.steps:,} steps; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; CPU seconds are the child's own")
    print(f"  {'file':<46} {'MB':>6} {'tool':<9} {'rows':>9} {'CPU s':>7} {'MB/s CPU':>9} {'wall best':>10} {'median':>7} {'CPU / msnb':>10}")
    for label, path, table, tools in cases:
        runs = {tool: [] for tool in tools}
        for _ in range(args.repeat):
            for tool in tools:
                runs[tool].append(child(tool, table if tool == "read_csv" else path))
        ours = min(r["cpu"] for r in runs["msnb"])
        for tool in tools:
            cpu = min(r["cpu"] for r in runs[tool])
            walls = [r["wall"] for r in runs[tool]]
            size = (table if tool == "read_csv" else path).stat().st_size / 1e6
            print(
                f"  {label if tool == tools[0] else '':<46} {size:>6.1f} {tool:<9} {runs[tool][-1]['rows']:>9,} {cpu:>7.3f} {size / cpu:>9.0f}"
                f" {min(walls):>10.3f} {statistics.median(walls):>7.3f} {cpu / ours:>10.2f}"
            )
    if args.big_mb > 0:
        big = write_big(data, args.big_mb)
        print(f"\nPeak RSS reading a {big.stat().st_size / 1e6:.0f} MB MFLossMonitor log (fresh child; the table keeps 48 bytes a point)")
        for tags in ("all", "loss"):
            r = child("msnb", big, tags)
            table = r["rows"] * 48 / 2**20
            print(
                f"  tags={tags:<5} points {r['rows']:>10,}  CPU {r['cpu']:.2f} s  peak RSS {r['rss_peak']:.0f} MB"
                f" (+{r['rss_peak'] - r['rss_before']:.0f} MB over the imports; the table itself {table:.0f} MB)"
            )


if __name__ == "__main__":
    main()
