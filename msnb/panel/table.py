"""The team panel as a value: JSON for scripts, aligned text for a terminal, HTML for a notebook."""

from __future__ import annotations

import json

from ..status import ResultView
from ..words import count
from .rows import FAILED, RunRow


def rank_ranges(ranks) -> str:
    """``0-3,5`` for ranks 0, 1, 2, 3 and 5; ``-`` for none."""
    ranks = sorted(ranks)
    if not ranks:
        return "-"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


def human_bytes(n: int) -> str:
    """``812 B``, ``4.2 KB``, ``1.3 GB`` (powers of 1024)."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def human_age(seconds: float | None) -> str:
    """``12 s``, ``5 min``, ``3.2 h``, ``2.0 d`` ago; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def number(x) -> str:
    """A loss for a column: four significant digits, ``-`` when unknown."""
    return "-" if x is None else f"{x:.4g}"


def verdict_word(row: RunRow) -> str:
    """``FAIL``, ``WARN`` or ``PASS``: the light of the row in words."""
    return {"red": "FAIL", "amber": "WARN", "green": "PASS"}[row.light]


def flag_summary(row: RunRow) -> str:
    """The first flag in a few words (``rank 2 loss @150``), the loss's own first, with a count of the others."""
    if not row.flags:
        return "-"
    f = next((f for f in row.flags if f.tag == row.verdict.tag), row.flags[0])
    who = f"rank {f.rank}" if f.rank >= 0 else "run"
    more = f" (+{len(row.flags) - 1})" if len(row.flags) > 1 else ""
    return f"{who} {f.tag} @{f.step}{more}"


COLUMNS = ("run", "status", "ranks", "missing", "last step", "loss", "smoothed", "trend", "verdict", "flags", "size", "age")


def text_cells(row: RunRow, now: float) -> list[str]:
    """The row's cells, in the order of :data:`COLUMNS`."""
    return [
        row.run,
        row.status,
        rank_ranges(row.ranks),
        rank_ranges(row.missing_ranks) + (f",+{row.missing_more:,} more" if row.missing_more else ""),
        "-" if row.last_step is None else str(row.last_step),
        number(row.last_loss),
        number(row.smoothed_loss),
        row.trend,
        verdict_word(row),
        flag_summary(row),
        human_bytes(row.bytes),
        human_age(row.age(now)),
    ]


class RunsTable(ResultView):
    """Every run under a base, one :class:`~msnb.panel.rows.RunRow` each, as ``msnb runs`` prints them.

    Attributes:
        rows: the runs, sorted by name.
        base: the directory they were found under.
        problems: what discovery and the readers reported (symlink loops, folders that cannot be listed, damage).
        now: when activity and ages were judged (seconds since the epoch).
        active_within: the activity window in seconds.
    """

    def __init__(self, rows: list[RunRow], *, base: str, problems=None, now: float, active_within: float, note: str = ""):
        self.rows = rows
        self.base = base
        self.problems = list(problems or [])
        self.now = now
        self.active_within = active_within
        self.note = note
        self._shown_in = None  # the cell whose live display shows this very table (see watch_runs)

    @property
    def passed(self) -> bool:
        """True when no run's verdict failed (warnings allowed)."""
        return all(r.passed for r in self.rows)

    @property
    def all_problems(self) -> list:
        """The base's problems, then each run's, each said once (the base's walk and the run's reader both meet a FIFO)."""
        seen, out = set(), []
        for p in self.problems + [p for r in self.rows for p in r.problems]:
            if (p.path, p.kind, p.message) not in seen:
                seen.add((p.path, p.kind, p.message))
                out.append(p)
        return out

    def as_dict(self) -> dict:
        """The JSON document ``msnb runs --json`` prints: ``{"runs": [{"run", "status", "ranks", ...}]}``."""
        return {"runs": [r.as_dict() for r in self.rows]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def summary(self) -> str:
        """``4 runs under BASE: 1 failed, 2 active, 1 idle; 3 flags``."""
        failed = sum(r.status == FAILED for r in self.rows)
        active = sum(r.status == "active" for r in self.rows)
        idle = sum(r.status == "idle" for r in self.rows)
        flags = sum(len(r.flags) for r in self.rows)
        verdict = "FAILED" if failed else "PASSED"
        return f"{verdict}: {count(len(self.rows), 'run')} under {self.base}: {failed} failed, {active} active, {idle} idle; {count(flags, 'flag')}"

    def format_text(self) -> str:
        """Aligned columns, one line per run, then every flag, every problem and a summary line."""
        cells = [list(COLUMNS)] + [text_cells(r, self.now) for r in self.rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
        for r in self.rows:
            for f in r.flags:
                who = f" rank {f.rank}" if f.rank >= 0 else ""
                lines.append(f"  FLAG {r.run}{who} {f.tag} from step {f.step}: {f.reason}")
        for p in self.all_problems:
            lines.append(f"  note: {p.severity}: {p}")
        if self.note:
            lines.append(self.note)
        lines.append(self.summary())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.format_text()

    def _repr_html_(self) -> str:
        from .html import render_table

        return render_table(self)

    def mime_bundle(self) -> dict:
        """HTML for notebooks and the text table for terminals, CI logs and plain front ends."""
        bundle = {"text/plain": self.format_text(), "text/html": self._repr_html_()}
        # a folder name that is not UTF-8 holds lone surrogates, which the kernel cannot send: shown as \udcff
        return {k: v.encode("utf-8", "backslashreplace").decode("utf-8") for k, v in bundle.items()}

    def _ipython_display_(self) -> None:
        from ..plot.live import current_cell

        # a watch already shows this table in this cell's live display: the cell's value adds no second copy
        if self._shown_in is not None and self._shown_in == current_cell():
            return
        from IPython.display import display

        display(self.mime_bundle(), raw=True)
