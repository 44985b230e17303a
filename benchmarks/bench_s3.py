"""Runs read from object storage: msnb on s3:// against the same files on local disk and plain list-and-read scripts.

    python benchmarks/bench_s3.py                      # 16 ranks x 2,000 steps x 8 tags (about a minute on 2 cores)
    python benchmarks/bench_s3.py --ranks 128 --steps 10000 --tags 8     # the issue's size
    python benchmarks/bench_s3.py --s3fs               # also fsspec/s3fs, in its own environment (benchmarks/.venvs/s3fs)

One run starts a real S3 server (SeaweedFS, tests/s3server.py), puts the run there (TensorBoard event files, one per
rank, one event of all tags per step), then times, on the same machine in the same run:

- ``disk``: ``msnb.read(folder)`` of the files on local disk;
- ``msnb s3``: ``msnb.read("s3://...")``, with its requests and bytes fetched (obstore underneath);
- ``boto3``, ``obstore``, ``s3fs``: a plain script that lists the prefix and reads every object (16 at once), no parsing:
  what fetching alone costs with each client, the floor under any reader;
- ``follow``: a job followed while it writes: every rank's file put at half its length, followed, then put whole and
  followed again; the bytes fetched by the second poll against the bytes the files gained.

s3fs is measured in its own environment because it pins botocore (against boto3) and fsspec (against mindformers'
``datasets``), which is one reason msnb uses obstore.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from msnb.bridges.tfevents import event, frame, scalar_value  # noqa: E402
from tests.s3server import BUCKET, serve  # noqa: E402

LIST_AND_READ = r"""
import sys, time, json, os
from concurrent.futures import ThreadPoolExecutor
client, endpoint, bucket, prefix = sys.argv[1:5]
key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
if client == "boto3":
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    listing = lambda: [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix) for o in page.get("Contents", [])]
    get = lambda k: len(s3.get_object(Bucket=bucket, Key=k)["Body"].read())
elif client == "obstore":
    import obstore
    from obstore.store import S3Store
    store = S3Store(bucket, endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
    listing = lambda: [m["path"] for batch in obstore.list(store, prefix=prefix) for m in batch]
    get = lambda k: len(obstore.get(store, k).bytes())
else:
    import s3fs
    fs = s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=endpoint)
t = time.perf_counter()  # the client made, its imports done: what is timed is the listing and the fetches
if client == "s3fs":
    keys = fs.find(f"{bucket}/{prefix}")
    n = sum(map(len, fs.cat(keys).values()))  # fsspec's own concurrent fetch
else:
    keys = listing()
    with ThreadPoolExecutor(16) as pool:
        n = sum(pool.map(get, keys))
print(json.dumps({"seconds": time.perf_counter() - t, "objects": len(keys), "bytes": n}))
"""


def make_run(root: Path, ranks: int, steps: int, tags: int) -> Path:
    """One run of *ranks* TensorBoard event files (kept under benchmarks/.data for the next time)."""
    run = root / f"run_{ranks}x{steps}x{tags}"
    done = run / ".complete"
    if done.exists():
        return run
    names = ["loss", "lr", "grad_norm", *[f"metric_{i}" for i in range(max(0, tags - 3))]][:tags]
    for rank in range(ranks):
        folder = run / f"rank_{rank}"
        folder.mkdir(parents=True, exist_ok=True)
        parts = []
        for step in range(1, steps + 1):
            value = 3.0 / step**0.5 * (1 + 0.001 * rank)
            parts.append(frame(event(step, 1.7e9 + step, [scalar_value(n, value * (i + 1)) for i, n in enumerate(names)])))
        (folder / "events.out.tfevents.1700000000.host").write_bytes(b"".join(parts))
    done.write_text("")
    return run


def put_all(client, run: Path, prefix: str, cut: float = 1.0) -> int:
    """Every file of *run* put under *prefix* (the first *cut* of each); the bytes put."""

    def put(path: Path) -> int:
        body = path.read_bytes()
        body = body[: int(len(body) * cut)]
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(run).as_posix()}", Body=body)
        return len(body)

    with ThreadPoolExecutor(16) as pool:
        return sum(pool.map(put, [p for p in sorted(run.rglob("*")) if p.is_file() and not p.name.startswith(".")]))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def list_and_read(python: str, client: str, server, prefix: str) -> dict:
    env = dict(os.environ, **server.env())
    proc = subprocess.run([python, "-c", LIST_AND_READ, client, server.endpoint, BUCKET, prefix], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def s3fs_python() -> str:
    """An environment with s3fs (created on first use): it cannot share msnb's (see the module's docstring)."""
    venv = HERE / ".venvs" / "s3fs"
    python = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "s3fs"], check=True)
        (venv / ".ready").write_text("")
    return str(python)


def follow(server, run: Path, workers: int) -> dict:
    """A job followed while it writes: half of every file, then all of it; bytes fetched by the second poll."""
    from msnb.events import Follower, objects, s3

    objects.RELIST_SECONDS = 0.0
    client = server.client()
    half = put_all(client, run, "follow", cut=0.5)
    counters = s3.Counters()
    objects.local(f"s3://{BUCKET}/follow", counters)
    follower = Follower(f"s3://{BUCKET}/follow", workers=workers)
    follower.poll()
    whole = put_all(client, run, "follow")
    before = counters.as_dict()
    seconds, _ = timed(lambda: follower.poll(final=True))
    after = counters.as_dict()
    return {
        "appended_bytes": whole - half,
        "fetched_bytes": after["bytes_fetched"] - before["bytes_fetched"],
        "requests": after["requests"] - before["requests"],
        "seconds": seconds,
        "rows": len(follower.result.scalars),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--tags", type=int, default=8)
    ap.add_argument("--workers", type=int, default=None, help="reading processes for msnb.read, disk and bucket alike (default: msnb's)")
    ap.add_argument("--s3fs", action="store_true", help="also time fsspec/s3fs (in benchmarks/.venvs/s3fs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import msnb
    from msnb.events import objects, s3

    run = make_run(HERE / ".data" / "s3", args.ranks, args.steps, args.tags)
    size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    rows: dict = {"size": {"ranks": args.ranks, "steps": args.steps, "tags": args.tags, "bytes": size}}
    with tempfile.TemporaryDirectory(prefix="msnb-bench-s3-") as tmp, serve(Path(tmp)) as server:
        os.environ.update(server.env())
        put_all(server.client(), run, "bench")
        seconds, result = timed(lambda: msnb.read(run, workers=args.workers))
        rows["disk"] = {"seconds": seconds, "rows": len(result.scalars)}
        counters = s3.Counters()
        seconds, result = timed(lambda: msnb.read(objects.local(f"s3://{BUCKET}/bench", counters), workers=args.workers))
        rows["msnb s3"] = {"seconds": seconds, "rows": len(result.scalars), **counters.as_dict()}
        objects.forget()
        for client in ("boto3", "obstore"):
            rows[client] = list_and_read(sys.executable, client, server, "bench/")
        if args.s3fs:
            rows["s3fs"] = list_and_read(s3fs_python(), "s3fs", server, "bench/")
        rows["follow"] = follow(server, run, args.workers or 1)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    disk = rows["disk"]["seconds"]
    print(f"{args.ranks} ranks x {args.steps:,} steps x {args.tags} tags: {size / 1e6:.1f} MB in {args.ranks} objects")
    for name in ("disk", "msnb s3", "boto3", "obstore", "s3fs"):
        if name in rows:
            r = rows[name]
            if "error" in r:
                print(f"  {name:<8} failed: {r['error']}")
                continue
            extra = f"  {r['requests']} requests ({r['lists']} list, {r['gets']} get), {r['bytes_fetched'] / 1e6:.1f} MB fetched" if "requests" in r else ""
            what = "read into tables" if "rows" in r else "list and fetch only"
            print(f"  {name:<8} {r['seconds']:7.2f} s  ({r['seconds'] / disk:4.2f}x disk)  {what}{extra}")
    f = rows["follow"]
    print(
        f"  follow: the files gained {f['appended_bytes'] / 1e6:.2f} MB; the poll fetched {f['fetched_bytes'] / 1e6:.2f} MB "
        f"in {f['requests']} requests ({f['seconds']:.2f} s)"
    )


if __name__ == "__main__":
    main()
