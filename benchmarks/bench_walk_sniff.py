"""What a walk costs when a folder holds many large text files that may be logs (``*.txt``, ``*.out``).

    python benchmarks/bench_walk_sniff.py                 # 500 files of 8 MiB (docs/PERFORMANCE.md has the numbers)
    python benchmarks/bench_walk_sniff.py --files 100 --mib 4

Every walk (``msnb.read``, ``check``, ``runs``, the board's polls) sniffs each file whose name could be a log's.
The tree holds *files* names of one *mib* MiB text file (hard links: one copy on disk and in the page cache, so
the time is the sniff's reading and searching, not the disk's), lines of a program's chatter with no training line,
and one real log beside them.  Timed: :func:`msnb.events.discovery.discover` of the tree (the walk every command
makes), best of three after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msnb.events.discovery import discover  # noqa: E402

CHATTER = b"2026-12-05 08:00:00 dataset shard 000123 loaded from /data/corpus/part-000123.bin in 0.52 s, 4096 samples\n"
LOG_LINE = "{{ step:[{i:5d}/  100], loss: {loss:10.6f}, per_step_time:    710ms, lr: 1.000000e-05, grad_norm:   1.500000 }}\n"


def build(root: Path, files: int, mib: int) -> None:
    big = root / "big.bin"
    with open(big, "wb") as f:
        line_count = (mib << 20) // len(CHATTER) + 1
        f.write(CHATTER * line_count)
    for i in range(files):
        folder = root / f"job_{i // 50:03d}"
        folder.mkdir(exist_ok=True)
        os.link(big, folder / (f"notes_{i}.txt" if i % 2 else f"slurm-{i}.out"))
    big.unlink()
    (root / "job_000" / "train.out").write_text("".join(LOG_LINE.format(i=i, loss=2.0 / i) for i in range(1, 101)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--mib", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="msnb-bench-sniff-") as tmp:
        root = Path(tmp)
        build(root, args.files, args.mib)
        found = discover(root)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            found = discover(root)
            times.append(time.perf_counter() - t0)
        logs = [s for s in found if s.kind == "log"]
        print(
            f"{args.files} files of {args.mib} MiB: discover {min(times):.2f} s (best of 3), {len(logs)} log(s) found: {[Path(s.path).name for s in logs][:3]}"
        )


if __name__ == "__main__":
    main()
