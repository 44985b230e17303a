"""Reading a big multi-rank job for an overview: msnb against the floor, TensorBoard's data server and tbparse, in one run.

    python benchmarks/bench_runs.py                      # 128 ranks x 10,000 steps x 8 tags, then 1,024 ranks x 2,000 steps
    python benchmarks/bench_runs.py --ranks 16 --steps 2000 --no-wide   # a first look

Builds (once, cached under $MSNB_BENCH_CACHE or ~/.cache/msnb-bench) a tree in
mindformers' layout, ``tensorboard/rank_N/events.out.tfevents.*``, one event
per scalar as tensorboardX writes them (loss, learning-rate, grad-norm and five
``local_norm/...`` tags), one rank going NaN late.  The files are written with
msnb's own tfevents encoder; the first steps of rank 0 are also written by
tensorboardX itself and must come out byte for byte the same, or the build stops.

Then, each in a fresh child process, timed from outside:

- floor: one Python process walking the frames and checking both CRCs of every
  record of every file (``readers.floor``, the floor the other benchmarks use);
- msnb overview: ``msnb.read(tree, tags=(loss, learning-rate, grad-norm), workers=cores)``
  then ``msnb.check`` on the result (what ``msnb runs`` does); and, where
  ``msnb.panel`` exists, the ``msnb runs --json`` command itself;
- msnb full read: ``msnb.read(tree, workers=1)``, every tag (the old way);
- TensorBoard's Rust data server (``--reload once``, with and without ``--checksum``),
  until it logs the end of its load cycle: with its default sampling (a random
  sample of each long series) and keeping every point as msnb does
  (``--samples-per-plugin scalars=all``);
- tbparse's SummaryReader (where tbparse is installed).

Memory is the peak of the summed resident set of the child and all its
descendants, sampled every 20 ms from /proc (psutil).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
PARAMS = (
    "model.tok_embeddings.embedding_weight",
    "model.layers.0.attention.wq.weight",
    "model.layers.0.feed_forward.w1.weight",
    "model.norm_out.weight",
    "lm_head.weight",
)
TAGS = ("loss", "learning-rate", "grad-norm") + tuple(f"local_norm/{p}" for p in PARAMS)
OVERVIEW_TAGS = ("loss", "learning-rate", "grad-norm")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    return Path(os.environ.get("MSNB_BENCH_CACHE") or Path.home() / ".cache" / "msnb-bench")


# ---------------------------------------------------------------- the tree
def rank_values(rank: int, steps: int, nan_rank: int, nan_step: int) -> np.ndarray:
    """(steps, 8) float32 values: one loss trend all ranks share with a little noise each; *nan_rank* goes NaN at *nan_step*."""
    s = np.arange(1, steps + 1, dtype=np.float64)
    rng = np.random.default_rng(1000 + rank)
    loss = 2.0 + 8.0 / np.sqrt(s) + rng.normal(0, 0.02, steps)
    lr = 1e-4 * np.minimum(1.0, s / 500) * (0.5 + 0.5 * np.cos(np.pi * s / steps))
    grad = 1.0 + 4.0 / np.sqrt(s) + np.abs(rng.normal(0, 0.05, steps))
    local = 0.1 * grad[:, None] * (1 + np.arange(len(PARAMS)))[None, :] + rng.normal(0, 0.001, (steps, len(PARAMS)))
    out = np.column_stack([loss, lr, grad, local]).astype(np.float32)
    if rank == nan_rank:
        out[nan_step - 1 :, 0] = np.nan
        out[nan_step - 1 :, 2] = np.nan
    return out


def rank_rows(rank: int, steps: int, nan_rank: int, nan_step: int, t0: float):
    """(tags, steps, walls, values) of one rank, in the order a mindformers job writes them."""
    v = rank_values(rank, steps, nan_rank, nan_step)
    n = len(TAGS)
    step_col = np.repeat(np.arange(1, steps + 1, dtype=np.int64), n)
    walls = t0 + step_col * 0.5 + np.tile(np.arange(n) * 1e-4, steps)
    return list(TAGS) * steps, step_col, walls, v.reshape(-1)


def version_record(wall: float) -> bytes:
    from msnb.bridges.tfevents import FILE_VERSION, _double, _str, frame

    return frame(_double(1, wall) + _str(3, FILE_VERSION))


def check_against_tensorboardx(tmp: Path, nan_rank: int, nan_step: int, t0: float, steps: int = 300) -> None:
    """Rank 0's first *steps* written by tensorboardX must be the bytes msnb's encoder writes."""
    from tensorboardX import SummaryWriter

    from msnb.bridges.tfevents import scalar_records

    tags, st, walls, values = rank_rows(0, steps, nan_rank, nan_step, t0)
    out = tmp / "tensorboardx"
    w = SummaryWriter(str(out), max_queue=100_000, flush_secs=3600)
    for tag, s, wall, value in zip(tags, st.tolist(), walls.tolist(), values.tolist()):
        w.add_scalar(tag, value, s, walltime=wall)
    w.close()
    (written,) = out.glob("events.out.tfevents.*")
    theirs = written.read_bytes()
    ours = scalar_records(tags, st, walls, values)
    if not theirs.endswith(ours) or len(theirs) - len(ours) != len(version_record(0.0)):
        raise SystemExit(f"msnb's encoder and tensorboardX disagree on {written}: not building the tree")


def ensure_tree(ranks: int, steps: int) -> Path:
    """The cached tree (built on first use); returns its ``tensorboard`` directory."""
    from msnb.bridges.tfevents import scalar_records

    nan_rank, nan_step = ranks * 3 // 5, max(2, steps * 9 // 10)
    root = cache_dir() / f"mindformers-{ranks}x{steps}x{len(TAGS)}"
    tree = root / "tensorboard"
    if (root / "ready.json").exists():
        return tree
    log(f"building {ranks} ranks x {steps} steps x {len(TAGS)} tags in {tree} ...")
    started = time.time()
    t0 = 1_700_000_000.0
    root.mkdir(parents=True, exist_ok=True)
    check_against_tensorboardx(root, nan_rank, nan_step, t0)
    host = socket.gethostname()
    for rank in range(ranks):
        d = tree / f"rank_{rank}"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"events.out.tfevents.{int(t0)}.{host}", "wb") as f:
            f.write(version_record(t0))
            f.write(scalar_records(*rank_rows(rank, steps, nan_rank, nan_step, t0)))
    size = sum(p.stat().st_size for p in tree.rglob("events.out.tfevents.*"))
    facts = {
        "ranks": ranks,
        "steps": steps,
        "tags": list(TAGS),
        "nan_rank": nan_rank,
        "nan_step": nan_step,
        "bytes": size,
        "records": ranks * (steps * len(TAGS) + 1),
    }
    (root / "ready.json").write_text(json.dumps(facts))
    log(f"  {size / 1e6:.0f} MB in {time.time() - started:.0f} s")
    return tree


def tree_facts(tree: Path) -> dict:
    return json.loads((tree.parent / "ready.json").read_text())


# ---------------------------------------------------------------- measuring
def watch(cmd: list[str], *, timeout: float, until: str | None = None, env=None) -> dict:
    """Run *cmd*, sampling the summed RSS of it and its descendants; stop when it exits or prints *until* (stderr)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE if until else subprocess.DEVNULL, text=True, env=env)
    root = psutil.Process(proc.pid)
    peak = 0.0
    seen_until = None
    if until:
        os.set_blocking(proc.stderr.fileno(), False)
        buffer = ""
    while True:
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, total / 2**20)
        if until:
            try:
                chunk = proc.stderr.read()
            except (BlockingIOError, TypeError):
                chunk = None
            if chunk:
                buffer += chunk
                if until in buffer:
                    seen_until = time.perf_counter() - started
                    proc.kill()
                    proc.wait()
                    return {"seconds": seen_until, "peak_mb": peak, "stdout": ""}
        if proc.poll() is not None:
            break
        if time.perf_counter() - started > timeout:
            proc.kill()
            proc.wait()
            return {"error": f"did not finish within {timeout:.0f} s", "peak_mb": peak}
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    out = proc.stdout.read()
    if proc.returncode != 0:
        return {"error": f"exit status {proc.returncode}", "seconds": seconds, "peak_mb": peak, "stdout": out}
    return {"seconds": seconds, "peak_mb": peak, "stdout": out}


_OVERVIEW = """
import json, sys, time
t0 = time.perf_counter()
import msnb
from msnb.events.parallel import default_workers
workers = int(sys.argv[3]) or default_workers()  # what msnb.read(workers=None) would take now
r = msnb.read(sys.argv[1], tags=sys.argv[2].split(","), workers=workers)
t_read = time.perf_counter() - t0
c = msnb.check(r)
t_all = time.perf_counter() - t0
flags = sorted({f.rank for f in c.flags})
print(json.dumps({"workers": workers, "read_s": t_read, "inner_s": t_all, "points": len(r.scalars), "ranks": c.runs[0].ranks if c.runs else [],
                  "last_step": int(r.scalars.step.max()) if len(r.scalars) else None, "flagged": flags, "problems": len(r.problems)}))
"""

_FULL = """
import json, sys, time
t0 = time.perf_counter()
import msnb
r = msnb.read(sys.argv[1], workers=int(sys.argv[2]))
print(json.dumps({"inner_s": time.perf_counter() - t0, "points": len(r.scalars), "problems": len(r.problems)}))
"""

_TBPARSE = """
import json, sys, time
from tbparse import SummaryReader
t0 = time.perf_counter()
df = SummaryReader(sys.argv[1]).scalars
print(json.dumps({"inner_s": time.perf_counter() - t0, "points": len(df)}))
"""


def _json(res: dict) -> dict:
    if "error" in res:
        return res
    try:
        res.update(json.loads(res.pop("stdout").strip().splitlines()[-1]))
    except (ValueError, IndexError):
        res["error"] = "no result printed"
    return res


def measure_floor(tree: Path, timeout: float) -> dict:
    return _json(watch([sys.executable, str(HERE / "readers.py"), "floor_tree", str(tree)], timeout=timeout))


def measure_overview(tree: Path, workers: int, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return _json(watch([sys.executable, "-c", _OVERVIEW, str(tree), ",".join(OVERVIEW_TAGS), str(workers)], timeout=timeout, env=env))


def measure_full(tree: Path, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return _json(watch([sys.executable, "-c", _FULL, str(tree), "1"], timeout=timeout, env=env))


def measure_runs_cli(tree: Path, timeout: float) -> dict | None:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    probe = subprocess.run([sys.executable, "-c", "import msnb.panel"], env=env, capture_output=True)
    if probe.returncode != 0:
        return None
    res = watch([sys.executable, "-m", "msnb.cli", "runs", str(tree), "--json"], timeout=timeout, env=env)
    if "error" in res and res["error"].startswith("exit status 1"):
        res = {k: v for k, v in res.items() if k != "error"}  # a failed verdict (the NaN rank) exits 1: that is the answer
    out = res.pop("stdout", "")
    try:
        run = json.loads(out)["runs"][0]
        res.update(ranks=run["ranks"], last_step=run["last_step"], flagged=sorted({f["rank"] for f in run["flags"]}))
    except (ValueError, KeyError, IndexError):
        res.setdefault("error", "no JSON table printed")
    return res


def measure_data_server(tree: Path, checksum: bool, timeout: float, keep_all: bool = False) -> dict:
    """The Rust data server's one load of *tree*; *keep_all*: every point kept (``--samples-per-plugin scalars=all``), as msnb keeps them."""
    import tensorboard_data_server

    cmd = [tensorboard_data_server.server_binary(), "--logdir", str(tree), "--reload", "once", "--port", "0", "-v"]
    cmd.append("--checksum" if checksum else "--no-checksum")
    if keep_all:
        cmd.append("--samples-per-plugin=scalars=all")
    return watch(cmd, timeout=timeout, until="Finished load cycle")


def subset_tree(tree: Path, ranks: int) -> Path:
    """The first *ranks* rank directories of *tree*, as hard links (no copy), for a reader too slow for the whole tree."""
    out = tree.parent.parent / f"{tree.parent.name}-first{ranks}" / "tensorboard"
    for rank in range(ranks):
        src_dir = tree / f"rank_{rank}"
        dst_dir = out / f"rank_{rank}"
        dst_dir.mkdir(parents=True, exist_ok=True)
        for f in src_dir.iterdir():
            if not (dst_dir / f.name).exists():
                os.link(f, dst_dir / f.name)
    return out


def measure_tbparse(tree: Path, timeout: float, ranks: int) -> dict | None:
    if subprocess.run([sys.executable, "-c", "import tbparse"], capture_output=True).returncode != 0:
        return None
    total = tree_facts(tree)["ranks"]
    sub = tree if ranks >= total else subset_tree(tree, ranks)
    res = _json(watch([sys.executable, "-c", _TBPARSE, str(sub)], timeout=timeout))
    if "seconds" in res and ranks < total:
        res["measured_s"] = res["seconds"]
        res["seconds"] *= total / ranks  # scaled to the whole tree: tbparse reads file after file
        res["note"] = f"measured on {ranks} of {total} ranks ({res['measured_s']:.1f} s, peak {res['peak_mb']:.0f} MB), time scaled x{total / ranks:g}"
    return res


def bench_tree(ranks: int, steps: int, workers: int, timeout: float, full: bool, others: bool, tbparse_ranks: int = 8) -> dict:
    tree = ensure_tree(ranks, steps)
    facts = tree_facts(tree)
    rows = {}
    log(f"{ranks}x{steps}: floor ...")
    rows["floor"] = measure_floor(tree, timeout)
    log(f"{ranks}x{steps}: msnb overview ...")
    rows["msnb overview"] = measure_overview(tree, workers, timeout)
    if workers != 1:
        log(f"{ranks}x{steps}: msnb overview, one process ...")
        rows["msnb overview, 1 process"] = measure_overview(tree, 1, timeout)
    cli = measure_runs_cli(tree, timeout)
    if cli is not None:
        rows["msnb runs --json"] = cli
    if full:
        log(f"{ranks}x{steps}: msnb full read, one process ...")
        rows["msnb.read, all tags, 1 process"] = measure_full(tree, timeout)
    if others:
        for keep_all in (False, True):
            for checksum in (False, True):
                log(f"{ranks}x{steps}: data server (checksum {checksum}, every point {keep_all}) ...")
                name = f"TensorBoard data server{', every point' if keep_all else ''}{' --checksum' if checksum else ''}"
                rows[name] = measure_data_server(tree, checksum, timeout, keep_all)
        log(f"{ranks}x{steps}: tbparse ...")
        tb = measure_tbparse(tree, timeout, tbparse_ranks)
        rows["tbparse"] = tb if tb is not None else {"error": "tbparse is not installed (pip install tbparse)"}
    return {"facts": facts, "rows": rows, "workers": workers}


def report(res: dict) -> list[str]:
    f, rows = res["facts"], res["rows"]
    floor = rows["floor"].get("seconds")
    lines = [
        f"\n{f['ranks']} ranks x {f['steps']:,} steps x {len(f['tags'])} tags: {f['bytes'] / 1e6:.0f} MB, {f['records']:,} records"
        f" (NaN on rank {f['nan_rank']} from step {f['nan_step']}); overview workers={res['workers'] or 'default'}",
        f"  {'reader':<38} {'seconds':>8} {'x floor':>8} {'peak RSS (tree)':>16}  notes",
    ]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"  {name:<38} {r['error']}")
            continue
        ratio = f"{r['seconds'] / floor:.2f}x" if floor else "-"
        notes = ""
        if name == "msnb runs --json":
            healthy = [k for k in r["flagged"] if k != f["nan_rank"]]
            notes = (
                f"{len(r['ranks'])} ranks, last step {r['last_step']}, NaN rank flagged: {f['nan_rank'] in r['flagged']}, healthy ranks flagged: {len(healthy)}"
            )
        elif name.startswith("msnb overview"):
            healthy = [k for k in r["flagged"] if k != f["nan_rank"]]
            notes = (
                f"{r['workers']} worker(s); read {r['read_s']:.2f} s, {r['points']:,} points; {len(r['ranks'])} ranks, last step {r['last_step']},"
                f" NaN rank flagged: {f['nan_rank'] in r['flagged']}, healthy ranks flagged: {len(healthy)}"
            )
        elif "points" in r:
            notes = f"{r['points']:,} points" + (f"; {r['note']}" if "note" in r else "")
        lines.append(f"  {name:<38} {r['seconds']:>8.2f} {ratio:>8} {r['peak_mb']:>13.0f} MB  {notes}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--wide-ranks", type=int, default=1024)
    parser.add_argument("--wide-steps", type=int, default=2_000)
    parser.add_argument("--no-wide", action="store_true", help="skip the 1,024-rank tree")
    parser.add_argument("--no-full", action="store_true", help="skip msnb's one-process read of every tag")
    parser.add_argument("--no-others", action="store_true", help="skip the data server and tbparse")
    parser.add_argument("--workers", type=int, default=0, help="overview workers (default 0: msnb's default, the idle cores, capped)")
    parser.add_argument("--tbparse-ranks", type=int, default=8, help="ranks tbparse reads (its time is scaled to the whole tree)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))
    from msnb.events.parallel import default_workers

    workers = args.workers
    results = {"main": bench_tree(args.ranks, args.steps, workers, args.timeout, not args.no_full, not args.no_others, args.tbparse_ranks)}
    if not args.no_wide:
        results["wide"] = bench_tree(args.wide_ranks, args.wide_steps, workers, args.timeout, False, False)
    print(f"\nmsnb multi-rank benchmark ({os.cpu_count()} cores, {default_workers()} idle now, Python {sys.version.split()[0]})")
    for res in results.values():
        print("\n".join(report(res)))
    main_rows = results["main"]["rows"]
    floor, ov = main_rows["floor"].get("seconds"), main_rows["msnb overview"].get("seconds")
    if floor and ov:
        print("\nTargets")
        print(f"  msnb overview time / floor time: {ov / floor:.2f}  (target <= 0.35)")
        print(f"  msnb overview peak RSS, all processes: {main_rows['msnb overview']['peak_mb']:.0f} MB  (target < 500 MB)")
        cli, ds = main_rows.get("msnb runs --json", {}), main_rows.get("TensorBoard data server, every point --checksum", {})
        if cli.get("seconds") and ds.get("seconds"):
            print(
                f"  msnb runs --json against the data server keeping every point, both checking CRCs: {cli['seconds'] / ds['seconds']:.2f}x its time,"
                f" {cli['peak_mb'] / ds['peak_mb']:.2f}x its memory  (hoped for: < 1 and <= 0.5)"
            )
    if "wide" in results:
        w = results["wide"]["rows"]
        if w["msnb overview"].get("seconds") and ov:
            per_main = ov / results["main"]["facts"]["records"]
            per_wide = w["msnb overview"]["seconds"] / results["wide"]["facts"]["records"]
            print(f"  seconds per million records: {per_main * 1e6:.2f} ({args.ranks} ranks) vs {per_wide * 1e6:.2f} ({args.wide_ranks} ranks)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
