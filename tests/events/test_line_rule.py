"""One line rule for every reader, and a followed file rewritten at the same size read again.

The line reader (a chunk the bulk reader hands over, split into lines for :class:`msnb.events.logs.LogParser`) cuts
lines where the line iterator (:mod:`msnb.events.line_chunks`) does: at ``\\n``, ``\\r\\n`` and a lone ``\\r`` only.
``str.splitlines`` also cuts at a form feed, ``\\x1c``-``\\x1e``, U+0085 and U+2028, which a log line may carry; the
log here is mindformers 2.0's pynative loss callback's own lines (tests/events/fixtures).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import msnb
from msnb.events import reader
from msnb.events.line_chunks import lines_at, split_lines
from msnb.events.problems import ProblemKind
from msnb.events.reader import Follower

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mindformers_2.0.0_pynative.log"
ODD = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@given(st.text(alphabet=st.sampled_from(["a", " ", "\n", "\r", *ODD]), max_size=60))
def test_the_line_reader_cuts_where_the_line_iterator_cuts(text):
    body = text.encode()
    assert [line.encode() for line in split_lines(text)] == [line for _, line in lines_at(body, cr_ends=True)]


@pytest.mark.parametrize("char", ODD)
def test_a_log_with_an_odd_character_in_every_line_reads_as_without_it_and_its_nan_fails(char, tmp_path):
    text = FIXTURE.read_text()
    clean = msnb.read(FIXTURE).scalars
    odd = tmp_path / "train.log"
    odd.write_text("".join(line.replace(" - INFO - ", f" - INFO{char} - ", 1) for line in text.splitlines(keepends=True)), encoding="utf-8")
    got = msnb.read(odd).scalars
    for tag in ("loss", "lr", "grad_norm"):
        assert np.array_equal(got.series(tag)[1], clean.series(tag)[1]), tag
        assert np.array_equal(got.wall_time[got.tag == tag], clean.wall_time[clean.tag == tag]), tag  # the time at the line's start is its
    nan = odd.read_text(encoding="utf-8").replace("loss:   2.750000", "loss:   nan", 1)
    odd.write_text(nan, encoding="utf-8")
    checked = msnb.check(odd)
    assert not checked.passed and "loss is nan" in checked.format_text()


def _mindformers(path: Path, day: int, loss: float) -> None:
    path.write_text(FIXTURE.read_text().replace("2026-10-01", f"2026-10-{day:02d}").replace("loss:   2.875000", f"loss:   {loss:.6f}"))


def test_a_followed_log_rewritten_at_the_same_size_and_mtime_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "RACY_NS", 3600 * 10**9)  # a tick no stall of this machine outlasts between write and poll
    path = tmp_path / "train.log"
    _mindformers(path, 1, 2.875)
    before = os.stat(path)
    follower = Follower(path)
    follower.poll()
    _mindformers(path, 2, 9.125)  # a new run's log over the old one: same size, another head
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # within the clock's tick: the same mtime
    assert os.stat(path).st_size == before.st_size

    new = follower.poll()

    assert ProblemKind.REPLACED in [p.kind for p in new.problems]
    assert follower.result.scalars.series("loss")[1][0] == 9.125


def test_a_followed_table_rewritten_at_the_same_size_and_mtime_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "RACY_NS", 3600 * 10**9)  # a tick no stall of this machine outlasts between write and poll
    path = tmp_path / "eval_results.csv"
    path.write_text("step,loss\n1,2.5\n2,2.4\n")
    before = os.stat(path)
    follower = Follower(path)
    follower.poll()
    path.write_text("step,loss\n1,7.5\n2,2.4\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    follower.poll()
    assert follower.result.scalars.series("loss")[1].tolist() == [7.5, 2.4]


def test_an_old_unchanged_file_is_never_opened_again(tmp_path):
    path = tmp_path / "train.log"
    _mindformers(path, 1, 2.875)
    os.utime(path, (1.0e9, 1.0e9))  # written long ago: its stat is proof enough
    follower = Follower(path)
    follower.poll()
    (state,) = follower._states.values()
    reads, peeks = state.reads, state.peeks
    for _ in range(3):
        assert follower.poll().empty
    assert (state.reads, state.peeks) == (reads, peeks)
