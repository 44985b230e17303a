"""Hostile inputs, round four: a file link out of a run folder, large text files in a walk, outputs on /dev,
a signal during a save, torn rows of msprobe's files.  One test per reproduction."""

from __future__ import annotations

import os
from pathlib import Path

import msnb
from msnb.events.discovery import HEAD_BYTES, discover, walk

LOSS_LINES = "".join(f"epoch: 1 step: {i}, loss is {2.0 / i}\n" for i in range(1, 6))


def test_a_file_symlink_leading_out_of_a_run_folder_is_named_and_never_read(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.log").write_text(LOSS_LINES)
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "train.log").write_text(LOSS_LINES)
    (run / "other.log").symlink_to(outside / "secret.log")
    (run / "inside.log").symlink_to(run / "train.log")  # a link that stays inside is read as any file
    problems: list = []
    found = discover(tmp_path / "runs", problems=problems)
    assert sorted(Path(s.path).name for s in found) == ["inside.log", "train.log"]
    assert [(Path(p.path).name, "outside" in p.message and "not read" in p.message) for p in problems] == [("other.log", True)]
    r = msnb.read(tmp_path / "runs")
    assert not any("secret" in f["path"] or f["path"].endswith("other.log") for f in r.files)
    assert any(p.path.endswith("other.log") and str(outside / "secret.log") in p.message for p in r.problems)
    left: list = []
    names = [n for _, ns in walk(tmp_path / "runs", left) for n in ns]
    assert "other.log" not in names and "train.log" in names and [Path(p.path).name for p in left] == ["other.log"]


def test_a_walk_sniffs_only_a_small_head_of_a_large_text_file(tmp_path):
    """A training line beyond the sniffed head of a file whose head holds no trainer's output: not a log (bounded cost)."""
    chatter = b"dataset shard 000123 loaded in 0.52 s\n"
    late = tmp_path / "late.txt"
    late.write_bytes(chatter * (2 * HEAD_BYTES // len(chatter)) + LOSS_LINES.encode())
    megatron = tmp_path / "stdout.txt"  # Megatron's arguments run to megabytes: their lines mark a log from its head
    megatron.write_text("".join(f"  argument_{i} ........................................ {i}\n" for i in range(100_000)) + LOSS_LINES)
    assert os.path.getsize(megatron) > 4 << 20
    assert [(Path(s.path).name, s.kind) for s in discover(tmp_path)] == [("stdout.txt", "log")]
    assert msnb.read(late).scalars.series("loss")[0].tolist() == [1, 2, 3, 4, 5]  # named explicitly: read whole
