"""Watching the team panel while the jobs write: one display, updated in place, until the time is up or the cell is stopped.

In a notebook the first poll displays the table with a ``display_id`` and
later polls replace it through that handle (no clear-and-redraw, which
flashes in VS Code); elsewhere the table is printed again whenever a run
changed.  The board underneath keeps one reader per run, so a poll reads only
the bytes added since the last one.
"""

from __future__ import annotations

import os
import sys

from ..analysis.rules import DEFAULT_RULES, Rules
from ..plot.live import check_polling, poll_for
from ..plot.render import current_cell, in_notebook
from ..words import count
from .board import DEFAULT_ACTIVE_WITHIN, RunsBoard
from .table import RunsTable


class _NotebookDisplay:
    """One output area, replaced at every poll."""

    def __init__(self):
        self.handle = None

    def show(self, table: RunsTable, changed: bool) -> None:
        from IPython.display import display  # deferred: IPython, only in a notebook

        if self.handle is None:
            self.handle = display(table.mime_bundle(), raw=True, display_id=True)
        else:
            self.handle.update(table.mime_bundle(), raw=True)
        table._shown_in = current_cell()


class _TextDisplay:
    """The table printed again when a run changed (a terminal cannot redraw in place portably)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.shown = False

    def show(self, table: RunsTable, changed: bool) -> None:
        if changed or not self.shown:
            print(table.format_text(), file=self.stream, flush=True)
            self.shown = True


def _default_display():
    return _NotebookDisplay() if in_notebook() else _TextDisplay()


def watch_runs(
    base: str | os.PathLike,
    *,
    every: float = 5.0,
    duration: float = 600.0,
    tag: str = "loss",
    rules: Rules | None = None,
    active_within: float = DEFAULT_ACTIVE_WITHIN,
    verify: bool = True,
    display=None,
) -> RunsTable:
    """Keep the panel of every run under *base* up to date for *duration* seconds, polling every *every* seconds.

    Runs that appear are picked up; a run deleted leaves the table.  Stops when
    the time is up or on KeyboardInterrupt (the notebook's stop button) and
    returns the last table.

    Args:
        base: the directory holding the runs (it may hold none yet).
        every: seconds between polls (> 0).
        duration: seconds to watch (> 0).
        tag: the loss tag or its meaning.
        rules: the judge's parameters (default: the judge's defaults).
        active_within: seconds since a run's last write that still count as active.
        verify: check CRCs while reading.
        display: an object with ``show(table, changed)`` (default: the notebook's output area, or stdout).

    Returns:
        The last :class:`~msnb.panel.table.RunsTable`, noting why the watch stopped.

    Raises:
        UsageError: *every* or *duration* is not positive, or *base* is not a directory.
    """
    check_polling(every, duration)
    board = RunsBoard(base, tag=tag, rules=rules or DEFAULT_RULES, active_within=active_within, verify=verify)
    display = display or _default_display()
    table = None

    def poll():
        nonlocal table
        table = board.poll()
        table.note = f"waiting for runs under {base}" if not table.rows else f"watching: poll {board.polls}, every {every:g} s"
        display.show(table, bool(board.changed) or board.polls == 1)

    reason = poll_for(poll, every=every, duration=duration)
    if table is None:
        table = board.poll()
    table.note = f"{reason} ({count(board.polls, 'poll')})"
    display.show(table, True)
    return table
