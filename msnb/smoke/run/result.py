"""What a smoke run returns: the verdict, the tables it was judged on, and where the files are.

The verdict is shown once per cell: :meth:`SmokeResult.show` (what the magic
calls) displays it with its figures, and the same object returned as the
cell's value displays nothing more in that cell; shown in a later cell it
displays again.  Every rendering carries ``text/plain`` (the verdict as text)
for terminals, CI logs and front ends without HTML.
"""

from __future__ import annotations

import base64
import html
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ...plot.render import current_cell, figure_png
from ...status import COLORS, FAIL, WARN, ResultView, status_color, status_word, verdict_status, verdict_word
from .kept import kept_outputs

_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;white-space:pre;overflow-x:auto"
TRACEBACK_HEAD = "Traceback (most recent call last)"
TRACEBACK_MAX_LINES = 400


def last_traceback(text: str) -> str:
    """The last Python traceback in *text*, from its ``Traceback`` line to the end (empty when there is none)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(TRACEBACK_HEAD)]
    if not starts:
        return ""
    # a chained exception ("During handling of the above exception ...") belongs to the same report: start at its first part
    first = starts[-1]
    for i in reversed(starts[:-1]):
        between = "\n".join(lines[i:first])
        if "During handling of the above exception" in between or "The above exception was the direct cause" in between:
            first = i
        else:
            break
    return "\n".join(lines[first : first + TRACEBACK_MAX_LINES]).rstrip()


def _detail_html(detail: str) -> str:
    """A check's detail as HTML: one line as it is; several (the config's changes) as their first line, the rest folded."""
    if "\n" not in detail:
        return html.escape(detail)
    first, rest = detail.split("\n", 1)
    return f"<details><summary>{html.escape(first)}</summary><div style='white-space:pre-wrap'>{html.escape(rest)}</div></details>"


DETAIL_WIDTH = 120  # a multi-line detail's lines are wrapped here, each under its own indent


def _check_lines(head: str, detail: str) -> list[str]:
    """A check as text: one line; a detail of several lines (the config's changes, one a line) starts on the next line,
    indented, each line wrapped under its own indent."""
    if "\n" not in detail:
        return [head + detail]
    out = [head.rstrip()]
    for line in detail.splitlines():
        body = line.lstrip()
        indent = " " * (6 + len(line) - len(body))
        hang = indent + ("  " if body.startswith("- ") else "")
        out.extend(textwrap.wrap(body, DETAIL_WIDTH, initial_indent=indent, subsequent_indent=hang, break_on_hyphens=False) or [indent])
    return out


@dataclass
class SmokeResult(ResultView):
    passed: bool
    checks: list
    summary_dir: str
    kept: bool
    device: str
    device_reason: str
    steps: int
    steps_trained: int
    elapsed_s: float
    workdir: str
    tables: object = None  # msnb.events.ReadResult of the summary directory and logs
    step_times: dict = field(default_factory=dict)  # rank -> (steps, ms, collected)
    log_tail: str = ""
    findings: list = field(default_factory=list)
    figure: object = None
    histogram_figure: object = None
    first_live_delay_s: float | None = None
    ranks: list = field(default_factory=list)
    flags: list = field(default_factory=list)  # the judge's flags on the loss (rank, tag, step, reason): msnb check's on the same files
    not_rehearsed: str | None = None  # why msnb could not rehearse this run here (its limit, never the config's fault); then passed is False
    traceback: str = field(default="", init=False)  # the whole last traceback of the training's logs, when it failed
    inputs: list = field(default_factory=list, init=False, repr=False)  # the files the run read, which its figure may never replace
    figure_file: str = field(default="", init=False)  # where the figure was saved (msnb.smoke.run.runner.save_figure), said last
    figure_note: str = field(default="", init=False)  # e.g. "in the current directory; --out FILE to write elsewhere"
    _shown_in: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        self.kept = bool(self.kept)  # a --keep DIR is kept too
        if not self.passed:
            self.traceback = self._find_traceback()
        if self.figure is not None:
            # the verdict goes on the figure itself, so a saved PNG says what it shows
            self.figure.suptitle(self.headline(), color=COLORS[self.verdict_status], fontweight="bold")

    def _find_traceback(self) -> str:
        """From the training logs on disk (the whole traceback, not the tail's last lines), else from the tail."""
        logs = []
        if self.workdir:
            root = Path(self.workdir)
            logs = [root / "train.log", *sorted((root / "logs").glob("worker_*.log"))]
        for path in logs:
            try:
                found = last_traceback(path.read_text(errors="replace"))
            except OSError:
                continue
            if found:
                return found
        return last_traceback(self.log_tail)

    @property
    def outcome(self) -> str:
        """``passed`` (exit 0), ``failed`` (exit 1: the config or the training is at fault) or ``not_rehearsed`` (exit 3: msnb's limit)."""
        if self.not_rehearsed is not None:
            return "not_rehearsed"
        return "passed" if self.passed else "failed"

    @property
    def exit_code(self) -> int:
        return {"passed": 0, "failed": 1, "not_rehearsed": 3}[self.outcome]

    @property
    def warnings(self) -> int:
        """How many checks warned."""
        return sum(1 for c in self.checks if c.status == WARN)

    @property
    def verdict_status(self) -> str:
        """The status the verdict is coloured in (:func:`msnb.status.verdict_status`): the header and the figure's title alike."""
        if self.not_rehearsed is not None:
            return WARN  # not the user's failure, and no pass either
        return verdict_status(self.passed, self.warnings)

    @property
    def verdict_word(self) -> str:
        """``PASSED``, ``PASSED with 2 warnings``, ``FAILED`` or ``NOT REHEARSED``: a pass with warnings never reads as a clean pass."""
        if self.not_rehearsed is not None:
            return "NOT REHEARSED"
        if not self.passed:
            return verdict_word(False)
        warns = self.warnings
        return verdict_word(True) if not warns else f"PASSED with {warns} warning{'s' if warns > 1 else ''}"

    def headline(self) -> str:
        """``msnb smoke PASSED: 200/200 steps on CPU in 16.2 s`` (or ``PASSED with 1 warning: ...``)"""
        return f"msnb smoke {self.verdict_word}: {self.steps_trained}/{self.steps} steps on {self.device} in {self.elapsed_s:.1f} s"

    def check(self, name: str):
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "passed": self.passed,
            "not_rehearsed": self.not_rehearsed,
            "checks": [c.as_dict() for c in self.checks],
            "summary_dir": self.summary_dir if self.kept else None,  # a removed directory is no path to follow
            "summary_dir_note": None if self.kept else f"{self.summary_dir} was removed after the run (--keep keeps it)",
            "kept": self.kept,
            "kept_files": [{"path": path, "what": what} for path, what in self.kept_outputs()],  # each writer's folder in workdir
            "workdir": self.workdir if self.workdir and Path(self.workdir).is_dir() else None,  # the training's logs, while kept
            "device": self.device,
            "device_reason": self.device_reason,
            "steps": self.steps,
            "steps_trained": self.steps_trained,
            "elapsed_s": round(self.elapsed_s, 3),
            "ranks": self.ranks,
            "flags": [f.as_dict() for f in self.flags],
            "first_live_delay_s": None if self.first_live_delay_s is None else round(self.first_live_delay_s, 3),
            "findings": [f.as_dict() for f in self.findings],
            "log_tail": self.log_tail,
            "traceback": self.traceback,
        }

    def format_text(self) -> str:
        lines = [self.headline()]
        for c in self.checks:
            lines.extend(_check_lines(f"  [{status_word(c.status)}] {c.name}: ", c.detail))
        if self.kept:  # a removed scratch directory is no path to follow: said only in as_dict()
            lines.extend(f"  {line}" for line in self.kept_lines())
        if self.traceback:
            lines.append("  the training's last traceback:")
            lines.extend("    " + line for line in self.traceback.splitlines())
        elif self.log_tail and not self.passed:
            lines.append("  last lines of the training log:")
            lines.extend("    " + line for line in self.log_tail.splitlines())
        if self.figure_file:
            lines.append(f"  {self.figure_line()}")
        return "\n".join(lines)

    def kept_outputs(self) -> list[tuple[str, str]]:
        """Each writer's folder in the kept run directory, as (path, what wrote it); empty once it was removed."""
        if not self.kept or not self.workdir:
            return []
        return kept_outputs(self.workdir, self.summary_dir)

    def kept_lines(self) -> list[str]:
        """Where the kept files are: the run directory (msnb check, plot and report read it whole), then each writer's folder in it."""
        outputs = self.kept_outputs()
        if not outputs:  # the run directory is gone (a --summary-dir outlives it) or nothing was written
            return [f"summaries kept in {self.summary_dir}"] if Path(self.summary_dir).is_dir() else []
        width = max(len(path) for path, _ in outputs)
        lines = [f"files kept in {self.workdir} (msnb check, plot and report read the folder whole):"]
        lines += [f"  {path.ljust(width)}  {what}" for path, what in outputs]
        return lines

    def figure_line(self) -> str:
        """``figure: wrote /abs/msnb_smoke.png (in the current directory; ...)``: the verdict's last line when the figure was saved."""
        return f"figure: wrote {self.figure_file}" + (f" ({self.figure_note})" if self.figure_note else "")

    def __str__(self) -> str:
        return self.format_text()

    def __repr__(self) -> str:
        return f"<SmokeResult: {verdict_word(self.passed)}, {sum(c.status == FAIL for c in self.checks)} failed / {len(self.checks)} checks, {self.device}>"

    def to_html(self, figures: bool = True) -> str:
        """The verdict as HTML: the headline, one row per check, the traceback of a failure, and (with *figures*) the plots."""
        head = self.verdict_word
        color = COLORS[self.verdict_status]
        rows = "".join(
            f"<tr><td style='color:{status_color(c.status)};font-weight:bold'>{status_word(c.status)}</td><td><code>{html.escape(c.name)}</code></td>"
            f"<td style='text-align:left'>{_detail_html(c.detail)}</td></tr>"
            for c in self.checks
        )
        where = "".join(f"<br><small>{html.escape(line)}</small>" for line in self.kept_lines()) if self.kept else ""
        parts = [
            f"<div class='msnb-smoke'><b class='msnb-verdict' style='color:{color}'>msnb smoke {head}</b>: {self.steps_trained}/{self.steps} steps on "
            f"{html.escape(self.device)} in {self.elapsed_s:.1f} s{where}",
            f"<table>{rows}</table>",
        ]
        if self.traceback:
            n = len(self.traceback.splitlines())
            parts.append(
                f"<details open class='msnb-traceback'><summary>last lines of the training log, from its last traceback ({n} lines)</summary>"
                f'<pre style="{_MONO}">{html.escape(self.traceback)}</pre></details>'
            )
        elif self.log_tail and not self.passed:
            parts.append(f'<details open><summary>last lines of the training log</summary><pre style="{_MONO}">{html.escape(self.log_tail)}</pre></details>')
        if figures:
            for fig in (self.figure, self.histogram_figure):
                if fig is not None:
                    parts.append(f'<img class="msnb-figure" src="data:image/png;base64,{base64.b64encode(figure_png(fig)).decode()}"/>')
        if self.figure_file:
            parts.append(f"<p class='msnb-figure-file'><small>{html.escape(self.figure_line())}</small></p>")
        parts.append("</div>")
        return "".join(parts)

    def mime_bundle(self, figures: bool = True) -> dict:
        """What a front end is sent: HTML with the figures, and the verdict as plain text."""
        return {"text/html": self.to_html(figures=figures), "text/plain": self.format_text()}

    def show(self) -> None:
        """Display the verdict with its plots (what the smoke magic shows at the end), once for this cell."""
        from IPython.display import display  # deferred: IPython, only in a notebook

        display(self.mime_bundle(figures=True), raw=True)
        self._shown_in = current_cell()

    def _ipython_display_(self) -> None:
        # the magic already showed it in this cell: the cell's value adds nothing (no second verdict as Out[n])
        if self._shown_in is not None and self._shown_in == current_cell():
            return
        self.show()
