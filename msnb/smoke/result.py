"""What a smoke run returns: the verdict, the tables it was judged on, and where the files are."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field

_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}
_COLOR = {"pass": "#1a7f37", "warn": "#9a6700", "fail": "#cf222e"}


@dataclass
class SmokeResult:
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

    def check(self, name: str):
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        return {
            "passed": self.passed,
            "checks": [c.as_dict() for c in self.checks],
            "summary_dir": self.summary_dir if self.kept else None,  # a removed directory is no path to follow
            "summary_dir_note": None if self.kept else f"{self.summary_dir} was removed after the run (--keep keeps it)",
            "kept": self.kept,
            "device": self.device,
            "device_reason": self.device_reason,
            "steps": self.steps,
            "steps_trained": self.steps_trained,
            "elapsed_s": round(self.elapsed_s, 3),
            "ranks": self.ranks,
            "first_live_delay_s": None if self.first_live_delay_s is None else round(self.first_live_delay_s, 3),
            "findings": [f.as_dict() for f in self.findings],
            "log_tail": self.log_tail,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def format_text(self) -> str:
        head = "PASSED" if self.passed else "FAILED"
        lines = [f"msnb smoke {head}: {self.steps_trained}/{self.steps} steps on {self.device} in {self.elapsed_s:.1f} s"]
        for c in self.checks:
            lines.append(f"  [{_MARK[c.status]}] {c.name}: {c.detail}")
        where = f"summaries kept in {self.summary_dir}" if self.kept else f"summary directory {self.summary_dir} removed (pass --keep to keep it)"
        lines.append(f"  {where}")
        if self.log_tail and not self.passed:
            lines.append("  last lines of the training log:")
            lines.extend("    " + line for line in self.log_tail.splitlines())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<SmokeResult: {'PASSED' if self.passed else 'FAILED'}, {sum(c.status == 'fail' for c in self.checks)} failed / {len(self.checks)} checks, {self.device}>"

    def _repr_html_(self) -> str:
        return self.to_html(figures=False)

    def to_html(self, figures: bool = True) -> str:
        head = "PASSED" if self.passed else "FAILED"
        color = _COLOR["pass" if self.passed else "fail"]
        rows = "".join(
            f"<tr><td style='color:{_COLOR[c.status]};font-weight:bold'>{_MARK[c.status]}</td><td><code>{html.escape(c.name)}</code></td>"
            f"<td style='text-align:left'>{html.escape(c.detail)}</td></tr>"
            for c in self.checks
        )
        where = html.escape(self.summary_dir) + ("" if self.kept else " (removed; --keep keeps it)")
        parts = [
            f"<div class='msnb-smoke'><b style='color:{color}'>msnb smoke {head}</b>: {self.steps_trained}/{self.steps} steps on "
            f"{html.escape(self.device)} in {self.elapsed_s:.1f} s<br><small>{where}</small>",
            f"<table>{rows}</table>",
        ]
        if self.log_tail and not self.passed:
            parts.append(f"<details open><summary>last lines of the training log</summary><pre>{html.escape(self.log_tail)}</pre></details>")
        if figures:
            from ..plot.render import figure_png

            for fig in (self.figure, self.histogram_figure):
                if fig is not None:
                    parts.append(f'<img src="data:image/png;base64,{base64.b64encode(figure_png(fig)).decode()}"/>')
        parts.append("</div>")
        return "".join(parts)

    def show(self) -> None:
        """Display the verdict with its plots (what the smoke magic shows at the end)."""
        from IPython.display import HTML, display

        display(HTML(self.to_html(figures=True)))
