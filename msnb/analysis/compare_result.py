"""What a precision comparison answers: the verdict, each check with its measured value and limit, where it left the baseline.

Shaped like the other results of msnb (``passed``, ``as_dict()``, ``format_text()``,
``_repr_html_()``, ``exit_code``), so the CLI, the magic and a notebook show it alike.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field

from ..status import COLORS, ResultView, status_color, status_word
from ..words import count
from .rules import FAIL, PASS, WARN


@dataclass
class CompareCheck:
    """One check: ``name`` (fixed: ``lr_schedule``, ``first_loss``, ``mean_error``, ``grad_norm``, ``finite``,
    ``coverage``), ``status`` (pass/warn/fail), ``detail`` (why, with numbers), ``value`` measured, ``limit`` it was held to."""

    name: str
    status: str
    detail: str
    value: object = None
    limit: object = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Divergence:
    """Where the candidate left the baseline: ``step``, ``tag``, both values there, and the ``reason``."""

    step: int
    tag: str
    baseline: float | None
    candidate: float | None
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class CompareResult(ResultView):
    """The comparison of a candidate run with a baseline (and its reruns).

    Attributes:
        baseline: the baseline's path, then each rerun's.
        candidate: the candidate's path or paths.
        common_steps: loss steps both sides logged, in the range compared.
        tolerance: the limits used (the standard's, raised to the reruns' own spread where that is larger).
        checks: :class:`CompareCheck` s, ``lr_schedule`` first.
        first_divergence: a :class:`Divergence` or None.
        tags: meaning -> ``{"baseline": tag, "candidate": tag}`` for the series compared.
        ranks: ``{"baseline": how, "candidate": how}`` (``rank 0``, ``median of 8 ranks``...).
        notes: what a reader should know (restarts, several runs, problems met while reading).
        series: the aligned arrays the figure draws (not part of :meth:`as_dict`).
    """

    baseline: list
    candidate: list
    common_steps: int
    tolerance: dict
    checks: list
    first_divergence: Divergence | None
    tags: dict = field(default_factory=dict)
    ranks: dict = field(default_factory=dict)
    offset: int = 0
    step_range: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    series: dict = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        """No check failed (warnings allowed)."""
        return not any(c.status == FAIL for c in self.checks)

    def check(self, name: str) -> CompareCheck | None:
        """The check called *name*, or None."""
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        """The JSON document ``msnb compare --json`` prints (NaN and infinities as null: strict JSON)."""
        return _strict(
            {
                "passed": self.passed,
                "baseline": list(self.baseline),
                "candidate": list(self.candidate),
                "common_steps": self.common_steps,
                "steps": list(self.step_range),
                "offset": self.offset,
                "tags": self.tags,
                "ranks": self.ranks,
                "tolerance": self.tolerance,
                "checks": [c.as_dict() for c in self.checks],
                "first_divergence": None if self.first_divergence is None else self.first_divergence.as_dict(),
                "notes": list(self.notes),
            }
        )

    def _headline(self) -> str:
        verdict = "ALIGNED" if self.passed else "NOT ALIGNED"
        warned = sum(c.status == WARN for c in self.checks)
        tail = f", {count(warned, 'warning')}" if warned else ""
        return f"{verdict}: candidate against baseline on {count(self.common_steps, 'common step', thousands=True)}{tail}"

    def format_text(self) -> str:
        """One line per check, where it left the baseline, the notes, and the verdict."""
        loss = self.tags.get("loss", {})
        lines = [
            f"baseline:  {', '.join(self.baseline)} ({loss.get('baseline')!r}, {self.ranks.get('baseline')})",
            f"candidate: {', '.join(self.candidate)} ({loss.get('candidate')!r}, {self.ranks.get('candidate')})",
        ]
        for c in self.checks:
            lines.append(f"  {status_word(c.status)}  {c.name}: {c.detail}")
        d = self.first_divergence
        if d is not None:
            lines.append(f"  first divergence at step {d.step} ({d.tag}): baseline {_num(d.baseline)}, candidate {_num(d.candidate)}; {d.reason}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.append(self._headline())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.format_text()

    def _repr_html_(self) -> str:
        rows = []
        for c in self.checks:
            rows.append(
                f'<tr><td style="color:{status_color(c.status)};font-weight:bold">{status_word(c.status)}</td>'
                f"<td>{html.escape(c.name)}</td><td style='text-align:left'>{html.escape(c.detail)}</td></tr>"
            )
        d = self.first_divergence
        if d is not None:
            rows.append(
                f'<tr><td style="color:{COLORS[FAIL]}">LEFT</td><td>step {d.step}</td><td style="text-align:left">'
                f"{html.escape(d.tag)}: baseline {_num(d.baseline)}, candidate {_num(d.candidate)}; {html.escape(d.reason)}</td></tr>"
            )
        for note in self.notes:
            rows.append(f"<tr><td>note</td><td></td><td style='text-align:left'>{html.escape(note)}</td></tr>")
        color = COLORS[PASS if self.passed else FAIL]
        sides = f"baseline {html.escape(', '.join(self.baseline))} against candidate {html.escape(', '.join(self.candidate))}"
        return f'<div><b style="color:{color}">msnb compare: {html.escape(self._headline())}</b><br><small>{sides}</small><table>{"".join(rows)}</table></div>'


def _strict(value):
    """*value* with every NaN or infinity (a relative error over a zero baseline, say) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.6g}"
