"""The long run of the differential fuzz test: msnb's scanner against maximal recovery.

    python benchmarks/fuzz_readers.py                 # 10,000 damaged files
    python benchmarks/fuzz_readers.py --examples 500  # a first look

Builds (once, cached in benchmarks/.data) a small MindSpore summary and a
tensorboardX file with the real writers, then damages them at random the way
crashed or broken writers do (truncations, torn records, deleted ranges, zero
runs, inserted zeros, bit flips; one to five at a time) and checks that
msnb's FrameReader, at a random chunk size, keeps exactly the records the
oracle in ``tests/events/test_robust_readers.py`` keeps (take a record where both
checksums hold, else slide one byte).  Prints the count, the time and the
first disagreement, if any (with its seed, to replay it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_read import ensure_data  # noqa: E402
from tests.events.test_robust_readers import msnb_records, mutate, oracle, spans  # noqa: E402

KINDS = ("delete", "flip", "insert_zeros", "torn", "truncate", "zeros")
CHUNKS = (64, 257, 4096, 1 << 20)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=150, help="steps in each base file (4 scalars a step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=HERE / ".data")
    args = parser.parse_args(argv)

    bases = []
    for kind in ("ms_scalars", "tb_scalars"):
        data = ensure_data(args.data, kind, args.steps).read_bytes()
        bases.append((kind, data, spans(data)))
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    kept = 0
    for i in range(args.examples):
        kind, data, records = bases[i % len(bases)]
        ops = [(rng.choice(KINDS), rng.randrange(10**9), rng.randrange(10**9)) for _ in range(rng.randint(1, 5))]
        chunk = rng.choice(CHUNKS)
        damaged = mutate(data, records, ops)
        got, want = msnb_records(damaged, chunk), oracle(damaged)
        if got != want:
            print(f"DISAGREEMENT at example {i} (seed {args.seed}): {kind}, chunk {chunk}, ops {ops}")
            print(
                f"  msnb kept {len(got)} records, the oracle {len(want)}; first difference: {next((a, b) for a, b in zip(got + [None], want + [None]) if a != b)}"
            )
            return 1
        kept += len(want)
    seconds = time.perf_counter() - t0
    print(f"{args.examples:,} damaged files ({', '.join(k for k, _, _ in bases)}; {args.steps} steps each): msnb kept exactly the oracle's records in all")
    print(f"  {kept:,} records kept in total; {seconds:.1f} s ({seconds / args.examples * 1000:.1f} ms a file, oracle included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
