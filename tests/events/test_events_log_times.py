"""A log line's wall time: parsed a minute at a time, equal to strptime on every line (the independent oracle)."""

import math
import random
import time

from msnb.events.logs import _TIMESTAMP, wall_time


def _oracle(line: str) -> float:
    m = _TIMESTAMP.search(line, 0, 64)
    if not m:
        return math.nan
    try:
        t = time.mktime(time.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return math.nan
    return t + (int(m.group(2)) / 10 ** len(m.group(2)) if m.group(2) else 0.0)


def test_wall_time_equals_strptime_on_valid_and_invalid_stamps():
    rng = random.Random(0)
    for _ in range(20_000):
        y = rng.choice([0, 1, 1900, 1970, 1999, 2000, 2024, 2026, 2100, 9999])  # year 0, leap and non-leap centuries
        stamp = f"{y:04d}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}{rng.choice(' T')}{rng.randint(0, 25):02d}:{rng.randint(0, 61):02d}:{rng.randint(0, 62):02d}"
        line = stamp + rng.choice(["", ",123", ".5", ",000001"]) + " - mindformers[x.py:1] - INFO - { Epoch:[  1/  1], step:[    1/   10], loss: 1.0"
        want, got = _oracle(line), wall_time(line)
        assert (math.isnan(want) and math.isnan(got)) or want == got, line
