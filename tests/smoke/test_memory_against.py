"""msnb memory --against: each stage's estimate beside the peak its ranks reported (ranks mapped stage-major), the
error per stage, the picture written and looked at by its size; a folder without a report is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from msnb.config.shipped import shipped_configs_dir
from msnb.errors import NothingReadable
from msnb.fullsize.against import against, stage_of
from msnb.fullsize.memory import estimate_card_memory

pytestmark = pytest.mark.skipif(shipped_configs_dir() is None, reason="mindformers' shipped configs are not installed")
CONFIG = "configs/qwen3/pretrain_qwen3_32b_4k.yaml"  # tp 4, pp 4: 16 cards, 4 a stage


def dry_run(root, used, skip=()):
    """Worker logs of 16 ranks; rank r's used peak is used(stage of r)."""
    for r in range(16):
        path = root / "msrun_log" / f"worker_{r}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["a launcher line"]
        if r not in skip:
            peak = used(r // 4)
            lines += ["Device MOC memory size: 62420M", "MindSpore Used memory size: 59392M",
                      f"Used peak memory usage (without fragments): {peak}M", f"Actual peak memory usage (with fragments): {peak + 900}M"]  # fmt: skip
        path.write_text("\n".join(lines) + "\n")


def test_ranks_map_to_stages_as_mindformers_lays_them_out():
    assert [stage_of(r, 16, 4) for r in (0, 3, 4, 15, 16, -1)] == [0, 0, 1, 3, None, None]


def test_each_stage_beside_its_ranks_peak(tmp_path):
    dry_run(tmp_path, lambda stage: 30000 + 2000 * stage, skip=(5,))
    est = estimate_card_memory(CONFIG, devices=16, card="800T-A2")
    got = against(est, tmp_path)
    assert [s.ranks for s in got.stages] == [[0, 1, 2, 3], [4, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert [s.used_peak_mb for s in got.stages] == [30000, 32000, 34000, 36000]
    for s, row in zip(got.stages, sorted(est.stages, key=lambda s: s.stage)):
        assert s.error == pytest.approx(row.total / (s.used_peak_mb * (1 << 20)) - 1)
    assert got.missing == [5] and "rank 5: a log without a memory report (not measured, never 0)" in got.format_text()
    doc = got.as_dict()["against"]
    assert doc["stages"][3]["actual_peak_mb"] == 36900 and doc["missing_ranks"] == [5]


def test_no_report_is_said_never_a_comparison_with_nothing(tmp_path):
    (tmp_path / "worker_0.log").write_text("nothing here\n")
    with pytest.raises(NothingReadable, match="no rank's log holds MindSpore's memory report"):
        against(estimate_card_memory(CONFIG, devices=16), tmp_path)


def test_the_command_line_json_and_picture(tmp_path):
    dry_run(tmp_path / "job", lambda stage: 30000)
    png = tmp_path / "m.png"
    cmd = [sys.executable, "-m", "msnb.cli", "memory", CONFIG, "--devices", "16", "--card", "800T-A2", "--against", str(tmp_path / "job")]
    out = subprocess.run(cmd + ["--json", "--out", str(png)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [s["used_peak_mb"] for s in doc["against"]["stages"]] == [30000] * 4
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
