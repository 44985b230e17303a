"""The team panel's state: one reader per run, one row per run, refreshed by polls.

:func:`runs` is one poll of a fresh board; a watch keeps the board and polls
it again, so each poll reads only the bytes added since the last one, judges
again only the runs that changed, and picks up runs that appeared.
"""

from __future__ import annotations

import os
import time

from ..analysis.judge import judged_tags
from ..analysis.rules import DEFAULT_RULES, Rules
from ..errors import NothingReadable, UsageError
from ..events.problems import SaidOnce
from ..events.s3 import shown
from .collect import check_base, find_runs, read_run
from .rows import refresh, summarize
from .table import RunsTable

DEFAULT_ACTIVE_WITHIN = 300.0


class RunsBoard:
    """Every run under a base, kept up to date by :meth:`poll`.

    Args:
        base: the directory holding the runs (nested experiment folders allowed).
        tag: the loss tag or its meaning (default ``loss``: ``loss/auto``, ``lm-loss``...).
        rules: the judge's parameters.
        active_within: seconds since a run's last write that still count as active (>= 0).
        verify: check CRCs while reading.

    Raises:
        UsageError: *base* is not a directory, or *active_within* is negative.
    """

    def __init__(self, base, *, tag: str = "loss", rules: Rules = DEFAULT_RULES, active_within: float = DEFAULT_ACTIVE_WITHIN, verify: bool = True):
        if not (active_within >= 0):
            raise UsageError(f"--active-within must be a number of seconds >= 0, not {active_within}")
        self.base = check_base(base)
        self.tag = tag
        self.rules = rules
        self.active_within = float(active_within)
        self.verify = verify
        self._tags = judged_tags(tag)
        self._dir_cache: dict = {}
        self._readers: dict = {}
        self._rows: dict = {}
        self._walk = SaidOnce()
        self.polls = 0
        self.changed: list = []  # the runs the last poll read something new from (and judged again)

    def poll(self, *, final: bool = False, now: float | None = None, last: bool = False) -> RunsTable:
        """Look for new runs, read what each run added, and return the table as it stands.

        Args:
            final: a one-shot read: report a partial last record as truncated instead of waiting for the rest.
            now: the time activity is judged at (default: now).
            last: no poll follows (:func:`runs`): the readers hand their rows over instead of keeping a copy;
                a later poll would read every run again from the start.

        Returns:
            A :class:`~msnb.panel.table.RunsTable`.
        """
        self.polls += 1
        self.changed = []
        found: list = []
        present = find_runs(self.base, dir_cache=self._dir_cache, problems=found)
        for gone in set(self._rows) - {r.name for r in present}:  # a run deleted since the last poll leaves the table
            self._rows.pop(gone, None)
            self._readers.pop(gone, None)
        for run in present:
            reader, result = read_run(run, self._readers.get(run.name), tags=self._tags, verify=self.verify, final=final, last=last)
            if reader is None:
                self._readers.pop(run.name, None)
            else:
                self._readers[run.name] = reader
            if result is not None:
                self._rows[run.name] = summarize(run.name, result, tag=self.tag, rules=self.rules)
                self.changed.append(run.name)
        self._walk.add(found)  # a loop or a locked folder is said once, not at every poll
        now = time.time() if now is None else now
        rows = [refresh(self._rows[name], active_within=self.active_within, now=now) for name in sorted(self._rows)]
        return RunsTable(rows, base=str(shown(self.base)), problems=list(self._walk.problems), now=now, active_within=self.active_within)


def runs(
    base: str | os.PathLike, *, tag: str = "loss", rules: Rules | None = None, active_within: float = DEFAULT_ACTIVE_WITHIN, verify: bool = True
) -> RunsTable:
    """One row per run under *base*: status, ranks, last loss, trend, the judge's verdict and flags, size, last write.

    Args:
        base: the directory holding the runs (a run is a directory of event files or of ``rank_N`` folders).
        tag: the loss tag or its meaning; naming a tag a run lacks fails that run (as ``msnb check --tag``).
        rules: the judge's parameters (default: the judge's defaults).
        active_within: seconds since a run's last write that still count as active.
        verify: check CRCs while reading.

    Returns:
        A :class:`~msnb.panel.table.RunsTable` (``passed``, ``rows``, ``as_dict()``, ``format_text()``, HTML in a notebook).

    Raises:
        UsageError: *base* is not a directory.
        NothingReadable: no run under *base*.
    """
    table = RunsBoard(base, tag=tag, rules=rules or DEFAULT_RULES, active_within=active_within, verify=verify).poll(final=True, last=True)
    if not table.rows:
        notes = f" ({table.problems[0]})" if table.problems else ""
        raise NothingReadable(f"no runs under {base}: no event files, MindSpore summaries or training logs found{notes}")
    return table
