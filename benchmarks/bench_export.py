"""Export speed and size: msnb convert (TensorBoard) and the Parquet dataset, against the source and CSV, in one run.

    python benchmarks/bench_export.py            # 200,000 steps x 4 scalars (~18 MB) and 8 ranks x 25,000 steps
    python benchmarks/bench_export.py --quick    # 20,000 steps and 8 ranks x 2,500 steps, for a first look

Inputs are written by MindSpore's SummaryRecord (``make_data.py``, cached in
benchmarks/.data).  The multi-rank tree is ``rank_0 .. rank_7``, each holding
its own copy of one summary (same values, separate files: what matters here is
files and bytes).  Each measurement runs in a fresh child process:

- tfevents writer: the same scalar rows written by msnb's encoder and by tensorboardX's
  ``add_scalar`` (the writer msnb could have used; protobuf backend printed)
- convert: ``msnb convert --to tensorboard`` of the file / the tree, then again (idempotent: nothing new)
- parquet: ``msnb export --format parquet`` (every kind) and ``msnb export`` to CSV (scalars)
- query: the mean of each tag with DuckDB over the Parquet dataset and over the CSV

Prints seconds, output size, and ratios against the source and against CSV.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_read import ensure_data  # noqa: E402

CHILD = r"""
import json, sys, time
job, args = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
out = {}
if job == "msnb_encoder":
    import msnb
    from msnb.bridges.tfevents import EventFileWriter, scalar_records
    s = msnb.read(args["src"]).scalars
    t0 = time.perf_counter()
    w = EventFileWriter(args["dst"])
    w.write_raw(scalar_records(s.tag.tolist(), s.step, s.wall_time, s.value))
    w.close()
elif job == "tensorboardx":
    import msnb
    from google.protobuf.internal import api_implementation
    from tensorboardX import SummaryWriter
    s = msnb.read(args["src"]).scalars
    out["protobuf"] = api_implementation.Type()
    t0 = time.perf_counter()
    w = SummaryWriter(args["dst"], max_queue=10000, flush_secs=600)
    for tag, step, wall, value in zip(s.tag.tolist(), s.step.tolist(), s.wall_time.tolist(), s.value.tolist()):
        w.add_scalar(tag, value, step, walltime=wall)
    w.close()
elif job == "convert":
    from msnb.bridges.tensorboard import convert
    r = convert(args["src"], args["dst"])
    out["rows"] = r.total
elif job == "parquet":
    from msnb.bridges.parquet import export
    r = export(args["src"], args["dst"])
    out["rows"] = r.total
elif job == "csv":
    import msnb
    from msnb.events.export import write
    r = msnb.read(args["src"])
    with open(args["dst"], "w") as f:
        out["rows"] = write(r, "scalars", "csv", f)
elif job == "duckdb":
    import duckdb
    out["rows"] = len(duckdb.sql(args["sql"]).fetchall())
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def child(job: str, timeout: float = 1800, **args) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD, job, json.dumps(args)], capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{job} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def mb(n: int) -> str:
    return f"{n / 1e6:7.2f} MB"


def tree(data_dir: Path, steps: int, ranks: int) -> Path:
    src = ensure_data(data_dir, "ms_scalars", steps)
    root = data_dir / f"tree-{ranks}x{steps}"
    if not root.exists():
        for r in range(ranks):
            d = root / "job" / f"rank_{r}"
            d.mkdir(parents=True)
            shutil.copy(src, d / src.name)
    return root


def bench(title: str, src: Path, work: Path, with_writers: bool) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = size(src)
    print(f"\n{title}: {src} ({mb(source)})")
    if with_writers:
        mine = child("msnb_encoder", src=str(src), dst=str(work / "enc_msnb"))
        tbx = child("tensorboardx", src=str(src), dst=str(work / "enc_tbx"))
        print(f"  tfevents writer   msnb encoder {mine['seconds']:7.2f} s {mb(size(work / 'enc_msnb'))}")
        print(
            f"                    tensorboardX {tbx['seconds']:7.2f} s {mb(size(work / 'enc_tbx'))}  "
            f"(protobuf {tbx['protobuf']})  msnb is {tbx['seconds'] / mine['seconds']:.1f}x faster"
        )
    conv = child("convert", src=str(src), dst=str(work / "tb"))
    again = child("convert", src=str(src), dst=str(work / "tb"))
    tb_size = size(work / "tb")
    print(f"  convert           {conv['seconds']:7.2f} s {mb(tb_size)}  ({tb_size / source:.2f}x the source; {conv['rows']:,} rows)")
    print(f"  convert again     {again['seconds']:7.2f} s  ({again['rows']} rows: nothing new)")
    pq = child("parquet", src=str(src), dst=str(work / "pq"))
    csv = child("csv", src=str(src), dst=str(work / "scalars.csv"))
    pq_size, csv_size = size(work / "pq"), size(work / "scalars.csv")
    print(f"  parquet export    {pq['seconds']:7.2f} s {mb(pq_size)}  ({pq_size / source:.2f}x the source, {pq_size / csv_size:.2f}x the CSV)")
    ratio = pq["seconds"] / csv["seconds"]
    print(f"  CSV export        {csv['seconds']:7.2f} s {mb(csv_size)}  ({csv_size / source:.2f}x the source)  parquet/CSV time {ratio:.2f}x")
    q_pq = child("duckdb", sql=f"select tag, avg(value) from read_parquet('{work / 'pq'}/*/*/kind=scalars/*.parquet', hive_partitioning=true) group by tag")
    q_csv = child("duckdb", sql=f"select tag, avg(value) from read_csv('{work / 'scalars.csv'}') group by tag")
    print(f"  DuckDB mean/tag   parquet {q_pq['seconds']:6.3f} s   CSV {q_csv['seconds']:6.3f} s  ({q_csv['seconds'] / q_pq['seconds']:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data", default=str(HERE / ".data"))
    args = parser.parse_args()
    steps, rank_steps = (20_000, 2_500) if args.quick else (200_000, 25_000)
    data = Path(args.data)
    big = ensure_data(data, "ms_scalars", steps)
    work = data / "export-work"
    bench(f"big scalar file, {steps:,} steps x 4 tags", big, work / "big", with_writers=True)
    bench(f"multi-rank tree, 8 ranks x {rank_steps:,} steps x 4 tags", tree(data, rank_steps, 8), work / "tree", with_writers=False)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
