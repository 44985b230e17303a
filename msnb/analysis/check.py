"""``msnb.check``: judge existing runs (after the fact or while they run) with the same rules as the smoke verdict.

A path may be one file, a run directory with ``rank_N`` folders, a log, or a
base directory holding many runs; every run found is judged on its own.
"""

from __future__ import annotations

import html
import os

import numpy as np

from ..errors import NothingReadable
from ..events.msprobe import markers_of
from ..events.problems import ProblemKind
from ..events.reader import ReadResult
from ..events.runs import read_runs
from ..events.tables import distinct
from ..status import COLORS, ResultView, status_color, status_word, verdict_word
from ..words import count, listed
from .judge import RunVerdict, judge_run
from .memory import run_memory
from .rules import DEFAULT_RULES, FAIL, PASS, SKIP, WARN, Check, Rules
from .same_run import same_series


def msprobe_check(markers, run: str) -> Check | None:
    """What msprobe's own online rules (its ``anomaly.json``) flagged in *run*, as a warning; None when it wrote none.

    msprobe's rules compare each value with a running mean (a threshold of 0.5 flags half the points of a healthy
    run), so they warn; ``msnb health`` judges the same series against their own robust history.
    """
    mine = markers_of(markers)
    mine = mine.take(mine.run == run) if len(mine) else mine
    if not len(mine):
        return None
    rules = sorted({str(k).removeprefix("msprobe ") for k in mine.kind.tolist()})
    first = int(np.argmin(mine.step))
    return Check(
        "msprobe",
        WARN,
        f"msprobe's rules ({', '.join(rules)}) flagged {count(len(mine), 'point', thousands=True)} of {count(len(distinct(mine.tag)), 'series', 'series')} "
        f"at steps {int(mine.step.min()):,}-{int(mine.step.max()):,}; the first at step {int(mine.step[first]):,}: {mine.tag[first]}",
    )


def flag_note(run: RunVerdict, flag) -> str:
    """What a flag row says after where and when: the check it already stands in (``see finite``), else its reason.

    A failed check's detail is often the flags' reasons joined; a row repeating it word for word says nothing new.
    """
    for c in run.checks:
        if c.status == FAIL and flag.reason and flag.reason in c.detail.split("; "):
            return f"see {c.name}"
    return flag.reason


class CheckResult(ResultView):
    """Verdicts of every run: ``passed`` (no run failed), ``runs`` (:class:`RunVerdict`), ``flags`` (all runs')."""

    def __init__(self, runs: list[RunVerdict], problems=None, same_series: dict | None = None, memory: dict | None = None):
        self.runs = runs
        self.memory = dict(memory or {})  # run -> RunMemory (msnb.analysis.memory): the runs whose logs hold a memory report
        self.problems = list(problems or [])
        self.same_series = dict(same_series or {})  # run -> an earlier run with the same loss series (both judged)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.runs)

    @property
    def flags(self) -> list:
        return [f for r in self.runs for f in r.flags]

    def as_dict(self) -> dict:
        """The JSON document ``msnb check --json`` prints."""
        return {
            "passed": self.passed,
            "runs": [r.as_dict() for r in self.runs],
            "flags": [f.as_dict() for f in self.flags],
            "same_series": dict(self.same_series),
            "memory": {run: mem.as_dict() for run, mem in self.memory.items()},
        }

    def format_text(self) -> str:
        """One line per check per run, the flags, and the verdict."""
        lines = []
        for r in self.runs:
            ranks = f" (ranks {', '.join(map(str, r.ranks))})" if r.ranks else ""
            lines.append(f"run {r.run}{ranks}: {'passed' if r.passed else 'FAILED'}")
            if r.judged_from:
                lines.append(f"  judged from {r.judged_from}")
            for c in r.checks:
                lines.append(f"  {status_word(c.status)}  {c.name}: {c.detail}")
            if r.run in self.memory:
                lines.append(f"  memory by rank (peak, what it leaves of MindSpore's limit): {self.memory[r.run].per_rank()}")
            for f in r.flags:
                where = f" rank {f.rank}" if f.rank >= 0 else ""
                lines.append(f"  FLAG{where} {f.tag} from step {f.step}: {flag_note(r, f)}")
        for run, twin in self.same_series.items():
            lines.append(f"  note: run {run} holds the same loss series as run {twin} (a copy, or one training in two folders): each judged on its own")
        for p in self.problems:
            lines.append(f"  note: {p}")
        verdict, summary = self.summary()
        lines.append(f"{verdict}: {summary}")
        return "\n".join(lines)

    def summary(self) -> tuple[str, str]:
        """(``PASSED`` or ``FAILED``, ``3 runs, 1 failed, 2 warnings, 4 flags``): the verdict's last line, as fields.

        Checks not judged (``SKIP``) count neither as passed nor as warnings; they are counted apart when there are any.
        """
        failed = sum(not r.passed for r in self.runs)
        warned = sum(c.status == WARN for r in self.runs for c in r.checks)
        skipped = sum(c.status == SKIP for r in self.runs for c in r.checks)
        rest = f"{count(len(self.runs), 'run')}, {failed} failed, {count(warned, 'warning')}, {count(len(self.flags), 'flag')}"
        if skipped:
            rest += f", {count(skipped, 'check')} not judged"
        return verdict_word(not failed), rest

    def __repr__(self) -> str:
        return self.format_text()

    def _repr_html_(self) -> str:
        rows = []
        for r in self.runs:
            color = COLORS[PASS if r.passed else FAIL]
            ranks = f" ranks {', '.join(map(str, r.ranks))}" if r.ranks else ""
            rows.append(
                f'<tr><th colspan="3" style="text-align:left">run {html.escape(r.run)}{ranks}: '
                f'<span style="color:{color}">{"passed" if r.passed else "FAILED"}</span></th></tr>'
            )
            if r.judged_from:
                rows.append(f'<tr><td></td><td colspan="2" style="text-align:left">judged from {html.escape(r.judged_from)}</td></tr>')
            for c in r.checks:
                rows.append(
                    f'<tr><td style="color:{status_color(c.status)};font-weight:bold">{status_word(c.status)}</td>'
                    f"<td>{html.escape(c.name)}</td><td style='text-align:left'>{html.escape(c.detail)}</td></tr>"
                )
            for f in r.flags:
                where = f"rank {f.rank}" if f.rank >= 0 else "run"
                rows.append(
                    f'<tr><td style="color:{COLORS[FAIL]}">FLAG</td><td>{where}, step {f.step}</td>'
                    f'<td style="text-align:left">{html.escape(flag_note(r, f))}</td></tr>'
                )
        color = COLORS[PASS if self.passed else FAIL]  # coloured as each run's word
        head = f'<b>msnb check: <span style="color:{color}">{verdict_word(self.passed)}</span></b>'
        return f"<div>{head}<table>{''.join(rows)}</table></div>"


def read_labelled(paths, verify: bool = True):
    """Read one or several paths, runs keyed apart (the data layer's rule) and named for people.

    ``msnb check`` and ``msnb report`` read this way, so a report names runs as the verdict does.

    A run is named by the shortest trailing part of its path that tells it from
    the others, folders every run has left out (``healthy``, ``bad_shard``, not ``healthy/summary``); the path that *is*
    the run is named after its directory, never ".".
    """
    return read_runs(paths, verify=verify, labelled=True)


def check(source, *, tag: str = "loss", rules: Rules = DEFAULT_RULES, verify: bool = True, collect_freq: int | None = None) -> CheckResult:
    """Judge every run in *source* with the analysis layer's rules.

    Args:
        source: a path, a list of paths, or a :class:`~msnb.events.ReadResult`.
        tag: the loss tag, or its meaning (``loss`` finds ``loss/auto``, ``lm-loss``...); naming a tag
            that a run lacks fails that run.
        rules: the rules' parameters (:class:`msnb.analysis.Rules`).
        verify: check CRCs while reading.
        collect_freq: the runs' collection frequency where known (``msnb report --config``): the steps check then
            says a stride equal to it comes from it.

    Returns:
        A :class:`CheckResult`: ``passed``, ``runs``, ``flags``, ``as_dict()``, ``format_text()``.

    Raises:
        NothingReadable: no scalars were found, or no run has the tag.
    """
    if isinstance(source, ReadResult):
        result, where = source, "the data given"
    else:
        paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
        result, where = read_labelled(paths, verify), ", ".join(map(str, paths))
    scalars = result.scalars
    if not len(scalars):
        problems = f" ({result.problems[0]})" if result.problems else ""
        raise NothingReadable(f"no scalars under {where}{problems}")
    explicit = tag != "loss"
    names = sorted(distinct(scalars.run))
    runs = [
        judge_run(scalars, run, tag=tag, rules=rules, explicit_tag=explicit, collect_freq=collect_freq, origins=result.origins.get(run)).said_from(
            result.origins.get(run)
        )
        for run in names
    ]
    memory = {}
    for verdict in runs:
        said = msprobe_check(result.markers, verdict.run)
        if said is not None:
            verdict.checks.append(said)
        mem = run_memory(result, verdict.run)
        if mem is not None:
            memory[verdict.run] = mem
            verdict.checks.extend(mem.checks(rules))
    judged = [r for r in runs if r.tag is not None]
    if not judged:
        raise NothingReadable(f"no {tag!r} tag in any run under {where} (tags: {listed(scalars.tags())})")
    if not explicit:
        runs = judged  # runs without a loss (a metrics-only run beside the training) are not what was asked about
    problems = [p for p in result.problems if getattr(p, "severity", "") != "info" or p.kind == ProblemKind.COPY]  # a writer's copies, said
    return CheckResult(runs, problems, same_series(scalars, runs), {r.run: memory[r.run] for r in runs if r.run in memory})
