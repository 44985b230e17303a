"""The team panel as a value: JSON for scripts, aligned text for a terminal, HTML for a notebook."""

from __future__ import annotations

import json

from ..plot.render import current_cell
from ..status import ResultView
from ..words import count
from .cells import COLUMNS, text_cells
from .html import render_table
from .rows import FAILED, RunRow


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
            if r.verdict.judged_from:
                lines.append(f"  {r.run}: judged from {r.verdict.judged_from}")
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
        return render_table(self)

    def mime_bundle(self) -> dict:
        """HTML for notebooks and the text table for terminals, CI logs and plain front ends."""
        bundle = {"text/plain": self.format_text(), "text/html": self._repr_html_()}
        # a folder name that is not UTF-8 holds lone surrogates, which the kernel cannot send: shown as \udcff
        return {k: v.encode("utf-8", "backslashreplace").decode("utf-8") for k, v in bundle.items()}

    def _ipython_display_(self) -> None:
        # a watch already shows this table in this cell's live display: the cell's value adds no second copy
        if self._shown_in is not None and self._shown_in == current_cell():
            return
        from IPython.display import display  # deferred: IPython, only in a notebook

        display(self.mime_bundle(), raw=True)
