"""Logs of every mindformers generation read exactly: fixtures written by each release's own formatting code.

The fixtures come from ``scripts/make_log_fixtures.py`` (which calls 1.9.0's, 2.0.0's and 2.1.0's
``_print_log`` on the values kept beside each fixture); nothing here types a log line by hand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import msnb

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def expected(release: str) -> dict:
    """tag -> [(step, value)] that the release's values should read as."""
    out: dict = {}
    for info in json.loads((FIXTURES / f"mindformers_{release}_pynative.json").read_text()):
        step = info["cur_step"]

        def add(tag, value, step=step):
            out.setdefault(tag, []).append((step, value))

        add("step_time_ms", float(info["step_time"]))
        if "consumed_samples" in info and release == "2.1.0":
            add("consumed_samples", float(info["consumed_samples"]))
            add("global_batch_size", float(info["global_batch_size"]))
        if info["loss"] is None:
            continue
        add("loss", info["loss"])
        add("lr", info["learning_rate"])
        add("grad_norm", info["grad_norm"])
        add("model-flops-throughput-per-npu", round(info["throughput"], 2))  # as printed, whatever the release's unit
        if release != "1.9.0":
            add("load_balancing_loss", info["load_balancing_loss"])
            add("indexer_loss", info["indexer_loss"])
            add("mtp-1-loss", 0.5 * step)
            add("mtp-2-loss", 0.25 * step)
    return out


@pytest.mark.parametrize("release", ["1.9.0", "2.0.0", "2.1.0"])
def test_dynamic_graph_lines_of_each_release_read_exactly(release):
    path = FIXTURES / f"mindformers_{release}_pynative.log"
    r = msnb.read(path)
    got: dict = {}
    for tag, step, value in zip(r.scalars.tag.tolist(), r.scalars.step.tolist(), r.scalars.value.tolist()):
        got.setdefault(tag, []).append((step, value))
    want = expected(release)
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        assert all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) for (_, a), (_, b) in zip(got[tag], points)), tag
    units = [p for p in r.problems if p.kind == "unit"]
    if release == "1.9.0":  # its lines could be 1.9's, whose throughput is 1000x too small: named, not rescaled
        assert len(units) == 1 and "mindformers 1.9" in units[0].message and "1000 times" in units[0].message
    else:  # a line only 2.x writes proves the release: its TFLOPS are right, nothing to say
        assert units == []
    if release != "1.9.0":  # the non-last stage's line: counted and said, never a loss (nor its printed grad_norm NaN)
        assert 3 not in [s for s, _ in got["loss"]]
        assert any("non-last pipeline stage" in p.message and "1 line" in p.message for p in r.problems)
