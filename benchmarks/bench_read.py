"""Reading speed and memory: msnb against the tools people use today, in one run.

    python benchmarks/bench_read.py            # full size: 200,000 steps x 4 scalars (~18 MB)
    python benchmarks/bench_read.py --quick    # 20,000 steps, for a first look

Builds (once, cached in benchmarks/.data) a MindSpore summary written by
SummaryRecord, the same values as a tensorboardX file, and a histogram-heavy
summary; then reads each file in a fresh child process per tool:

- msnb.read (CRC checks on, every point kept)
- floor: a Python loop that only walks the frames and checks both CRCs (crc32c)
- summary_pb2: a plain loop over MindSpore's own generated classes
- mindinsight: MindInsight 2.3.1's MSDataLoader (keeps 1,000 points a tag); its
  own virtual environment, since it needs protobuf <= 3.20.1
- event_accumulator: TensorBoard's EventAccumulator keeping all scalars
- tbparse: tbparse's SummaryReader

The tool environments are created under benchmarks/.venvs on first use (pip).
Prints points kept, seconds, records/s, MB/s, peak RSS and ratios against msnb.

Then memory under damage (``--damaged-gb``, ``--log-mb``; 0 skips): peak RSS of
``msnb.read`` on a MindSpore summary followed by 1 GB of zeros (a preallocated
or wiped tail: no intact record for a gigabyte) and on a 300 MB training log,
each in a fresh child process (target: under 300 MB both).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV_PACKAGES = {
    "mindinsight": ["mindinsight==2.3.1"],
    "tensorboard": ["tensorboard", "tbparse"],
}
TOOL_ENV = {"mindinsight": "mindinsight", "event_accumulator": "tensorboard", "tbparse": "tensorboard"}
PLAN = {
    "ms_scalars": ["msnb", "floor", "summary_pb2", "mindinsight"],
    "tb_scalars": ["msnb", "floor", "event_accumulator", "tbparse"],
    "ms_hist": ["msnb", "floor", "summary_pb2", "mindinsight"],
}
TITLES = {
    "ms_scalars": "MindSpore summary, scalars (SummaryRecord)",
    "tb_scalars": "TensorBoard events, same scalars (tensorboardX)",
    "ms_hist": "MindSpore summary, histogram-heavy (SummaryRecord)",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_data(data_dir: Path, kind: str, steps: int) -> Path:
    out = data_dir / f"{kind}-{steps}"
    files = [p for p in out.glob("*") if p.is_file()] if out.exists() else []
    if files:
        return files[0]
    out.mkdir(parents=True, exist_ok=True)
    log(f"building {kind} ({steps} steps) in {out} ...")
    t0 = time.time()
    subprocess.run([sys.executable, str(HERE / "make_data.py"), kind, str(out), str(steps)], check=True, capture_output=True, cwd=str(out))
    log(f"  done in {time.time() - t0:.0f} s")
    (file,) = [p for p in out.glob("*") if p.is_file()]
    return file


def ensure_venv(venvs: Path, name: str) -> Path:
    python = venvs / name / "bin" / "python"
    marker = venvs / name / ".ready"
    if marker.exists():
        return python
    log(f"creating the {name} environment in {venvs / name} (first run only) ...")
    subprocess.run([sys.executable, "-m", "venv", str(venvs / name)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *VENV_PACKAGES[name]], check=True)
    marker.write_text("ok\n")
    return python


def measure(python: Path, tool: str, path: Path, timeout: float) -> dict:
    try:
        proc = subprocess.run([str(python), str(HERE / "readers.py"), tool, str(path)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "error": f"did not finish within {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"tool": tool, "error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200_000, help="steps in the scalar files (4 scalars a step)")
    parser.add_argument("--hist-steps", type=int, default=2_000, help="steps in the histogram file (8 histograms a step)")
    parser.add_argument("--quick", action="store_true", help="20,000 scalar steps and 500 histogram steps")
    parser.add_argument("--data", type=Path, default=HERE / ".data")
    parser.add_argument("--venvs", type=Path, default=HERE / ".venvs")
    parser.add_argument("--skip", nargs="*", default=[], choices=sorted({t for ts in PLAN.values() for t in ts}))
    parser.add_argument("--timeout", type=float, default=900, help="seconds one tool may take on one file")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--damaged-gb", type=float, default=1.0, help="GB of zeros after the records in the damaged-file memory check (0: skip)")
    parser.add_argument("--log-mb", type=float, default=300.0, help="MB of training log in the log memory check (0: skip)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.hist_steps = 20_000, 500

    files = {
        "ms_scalars": ensure_data(args.data, "ms_scalars", args.steps),
        "tb_scalars": ensure_data(args.data, "tb_scalars", args.steps),
        "ms_hist": ensure_data(args.data, "ms_hist", args.hist_steps),
    }
    results = {}
    for kind, tools in PLAN.items():
        path = files[kind]
        size_mb = path.stat().st_size / 1e6
        rows = []
        for tool in tools:
            if tool in args.skip:
                continue
            python = ensure_venv(args.venvs, TOOL_ENV[tool]) if tool in TOOL_ENV else Path(sys.executable)
            log(f"{kind}: {tool} ...")
            rows.append(measure(python, tool, path, args.timeout))
        records = next((r["points"] for r in rows if r["tool"] == "floor" and "error" not in r), None)
        results[kind] = {"path": str(path), "size_mb": size_mb, "records": records, "rows": rows}

    print(f"\nmsnb reading benchmark ({os.cpu_count()} cores, Python {sys.version.split()[0]})")
    for kind, res in results.items():
        rows = res["rows"]
        base = next((r["seconds"] for r in rows if r["tool"] == "msnb" and "error" not in r), None)
        print(f"\n{TITLES[kind]}: {res['size_mb']:.1f} MB, {res['records'] or '?'} records")
        print(f"  {'tool':<18} {'points kept':>12} {'seconds':>9} {'records/s':>11} {'MB/s':>8} {'peak RSS':>9} {'+RSS':>7} {'x msnb time':>11}")
        for r in rows:
            if "error" in r:
                print(f"  {r['tool']:<18} {r['error']}")
                continue
            rec_s = f"{res['records'] / r['seconds']:,.0f}" if res["records"] else "?"
            ratio = f"{r['seconds'] / base:.1f}x" if base else "-"
            print(
                f"  {r['tool']:<18} {r['points']:>12,} {r['seconds']:>9.3f} {rec_s:>11} {res['size_mb'] / r['seconds']:>8.1f}"
                f" {r['rss_peak_mb']:>7.0f}MB {r['rss_peak_mb'] - r['rss_before_mb']:>5.0f}MB {ratio:>11}"
            )

    def secs(kind, tool):
        return next((r["seconds"] for r in results[kind]["rows"] if r["tool"] == tool and "error" not in r), None)

    print("\nTargets")
    checks = [
        ("msnb vs MindInsight's loader, MindSpore scalars", secs("ms_scalars", "mindinsight"), secs("ms_scalars", "msnb"), ">= 100x faster"),
        ("msnb vs EventAccumulator, tensorboardX scalars", secs("tb_scalars", "event_accumulator"), secs("tb_scalars", "msnb"), ">= 10x faster"),
        ("msnb vs tbparse, tensorboardX scalars", secs("tb_scalars", "tbparse"), secs("tb_scalars", "msnb"), "(no target)"),
        ("msnb vs summary_pb2 loop, MindSpore scalars", secs("ms_scalars", "summary_pb2"), secs("ms_scalars", "msnb"), "(no target)"),
    ]
    for label, other, ours, target in checks:
        if other and ours:
            print(f"  {label}: {other / ours:.1f}x faster  (target {target})")
    floor, ours = secs("ms_scalars", "floor"), secs("ms_scalars", "msnb")
    if floor and ours:
        print(f"  msnb time / floor time, MindSpore scalars: {ours / floor:.2f}  (target <= 4; the floor decodes nothing)")
    floor, ours = secs("ms_hist", "floor"), secs("ms_hist", "msnb")
    if floor and ours:
        print(f"  msnb time / floor time, histogram-heavy summary: {ours / floor:.2f}  (target <= 4; every bucket decoded, against frames and CRCs only)")
    results["memory"] = memory_under_damage(args, files["ms_scalars"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


_CHILD = """
import resource, sys, time
import msnb
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
r = msnb.read(sys.argv[1])
seconds = time.perf_counter() - t0
table_mb = sum(getattr(r.scalars, c).nbytes for c in r.scalars.COLUMNS) / 2**20  # what keeping every point costs
print(len(r.scalars), len(r.problems), seconds, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, table_mb)
"""


def _child_read(path: Path) -> tuple:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True)
    points, problems, seconds, before, peak, table_mb = proc.stdout.split()
    return int(points), int(problems), float(seconds), float(before), float(peak), float(table_mb)


def memory_under_damage(args, summary: Path) -> dict:
    """Peak RSS reading a summary with a gigabyte of zeros after it, and a large log (each in a fresh child)."""
    out = {}
    rows = []
    if args.damaged_gb > 0:
        damaged = args.data / f"damaged-{args.damaged_gb:g}GB" / summary.name
        damaged.parent.mkdir(parents=True, exist_ok=True)
        if not damaged.exists():
            damaged.write_bytes(summary.read_bytes())
            with open(damaged, "r+b") as f:
                f.truncate(summary.stat().st_size + int(args.damaged_gb * (1 << 30)))  # sparse zeros: no disk used
        rows.append((f"summary + {args.damaged_gb:g} GB of zeros", damaged))
    if args.log_mb > 0:
        log_path = args.data / f"train-{args.log_mb:g}MB.log"
        if not log_path.exists():
            log(f"writing a {args.log_mb:g} MB log ...")
            with open(log_path, "w") as f:
                step, size, limit = 0, 0, int(args.log_mb * 1e6)
                while size < limit:
                    lines = "".join(
                        f"epoch: {1 + step // 1000} step: {step % 1000 + 1}, loss is {1.0 / (step + 1):.6f}\n" for step in range(step, step + 10000)
                    )
                    step += 10000
                    size += f.write(lines)
        rows.append((f"training log, {args.log_mb:g} MB", log_path))
    if not rows:
        return out
    print("\nMemory under damage (fresh child process each; target: peak RSS under 300 MB)")
    print("  'table' is the scalar table itself (48 bytes a point, every point kept): memory no reader that keeps the points can avoid")
    print(f"  {'input':<34} {'file MB':>9} {'points':>10} {'problems':>9} {'seconds':>8} {'peak RSS':>9} {'+RSS':>7} {'table':>7} {'+RSS-table':>10}")
    for label, path in rows:
        log(f"memory: {label} ...")
        points, problems, seconds, before, peak, table_mb = _child_read(path)
        size = path.stat().st_size / 1e6
        print(
            f"  {label:<34} {size:>9.0f} {points:>10,} {problems:>9} {seconds:>8.2f} {peak:>7.0f}MB {peak - before:>5.0f}MB"
            f" {table_mb:>5.0f}MB {peak - before - table_mb:>8.0f}MB"
        )
        out[label] = {
            "file_mb": size,
            "points": points,
            "problems": problems,
            "seconds": seconds,
            "rss_peak_mb": peak,
            "rss_before_mb": before,
            "table_mb": table_mb,
        }
    return out


if __name__ == "__main__":
    sys.exit(main())
