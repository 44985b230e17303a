"""One run judged: every rule of the analysis layer over one run's scalars, as checks and flags.

The smoke verdict, ``msnb check`` and the plot report all come here, so a run
gets the same answer whichever way it is looked at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..events.identity import is_table, judged_from, stands_for
from ..events.tables import distinct, distinct_integers
from ..events.tags import ALIASES, meaning, resolve
from ..words import count, listed
from .divergence import divergence_details
from .health import first_anomaly_check
from .nonfinite import find_nonfinite, nonfinite_flags
from .rules import DEFAULT_RULES, FAIL, PASS, WARN, Check, Rules
from .series import align, curves, stride
from .spikes import blowup, recovery_window, run_curve, spike_flag
from .steptime import step_time_stability
from .stuck import WEIGHT_NORMS, likely_cause
from .trend import loss_stall, loss_trend


@dataclass
class RunVerdict:
    """The judge's answer for one run: its ranks, one check per rule, and the flags (rank, step, reason)."""

    run: str
    ranks: list
    checks: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    tag: str | None = None
    series: list = field(default_factory=list)  # the tags the judge read: the loss, the gradient norms, the step time
    judged_from: str = ""  # which files those came from (:func:`msnb.events.identity.judged_from`)

    @property
    def passed(self) -> bool:
        """True when no check failed (warnings allowed)."""
        return not any(c.status == FAIL for c in self.checks)

    def add(self, check: Check, flags=()) -> None:
        """One rule's answer: its check, and the flags it raised (sorted by step once every rule has answered)."""
        self.checks.append(check)
        self.flags.extend(flags)

    def as_dict(self) -> dict:
        return {
            "run": self.run,
            "ranks": list(self.ranks),
            "passed": self.passed,
            "checks": [c.as_dict() for c in self.checks],
            "flags": [f.as_dict() for f in self.flags],
            "judged_from": self.judged_from,
        }

    def said_from(self, origins: dict | None) -> RunVerdict:
        """Name the files the judged series came from (``origins``: ``{tag: writer}`` of this run, as read); returns self."""
        if origins:
            self.judged_from = judged_from(origins, self.series)
        return self


def _steps_check(cs, rules: Rules, collect_freq: int | None = None) -> Check:
    """Steps covered, restarts and a fixed stride, said once per run.

    A stride equal to the config's *collect_freq* is said to come from it; an unexplained stride names both
    usual causes (the collection frequency, or sink mode's one callback per sink) rather than guessing one.
    """
    lo = min(int(c.steps[0]) for c in cs if c.steps.size)
    hi = max(int(c.steps[-1]) for c in cs if c.steps.size)
    parts = [f"steps {lo}-{hi}" + (f" on {len(cs)} ranks" if len(cs) > 1 else "")]
    restarts: dict = {}
    replaced = 0
    for c in cs:
        for s in c.restarts:
            restarts.setdefault(int(s), []).append(c.rank)
        replaced += c.replaced
    for s, ranks in sorted(restarts.items()):
        who = "" if len(cs) == 1 else (" (all ranks)" if len(ranks) == len(cs) else f" (rank {', '.join(map(str, sorted(set(ranks))))})")
        parts.append(f"restarted at step {s}{who}")
    if restarts:
        parts.append(f"{count(replaced, 'earlier record')} replaced by the later ones")
    strides = {stride(c.steps) for c in cs if c.steps.size >= 3}
    if len(strides) == 1 and (n := strides.pop()) > 1:
        why = f"collect_freq {collect_freq}" if collect_freq == n else "a collection frequency, or sink mode's one callback per sink"
        parts.append(f"steps recorded every {n} ({why})")
    return Check("steps", PASS, "; ".join(parts))


def run_loss(cs, rules: Rules = DEFAULT_RULES):
    """The run's loss as the judge sees it: the median over ranks on the steps they share.

    When the ranks share too few steps (they recorded different ones), the
    densest rank stands for the run.  Exposed so views of a run (``msnb runs``)
    show the very curve that was judged.

    Args:
        cs: the run's loss curves, one per rank (:func:`msnb.analysis.series.curves`).
        rules: ``min_points``.

    Returns:
        ``(steps, values, n_ranks)``: the steps, the loss at each (NaN where no
        rank had a finite value) and how many ranks the median is over.
    """
    if not cs:
        return np.zeros(0, np.int64), np.zeros(0), 0
    ranked = [c for c in cs if c.rank >= 0]
    steps, matrix = align(ranked if len(ranked) > 1 else cs[:1])
    if len(ranked) > 1 and steps.size < rules.min_points:
        best = max(cs, key=lambda c: c.steps.size)  # ranks recorded different steps: judge the densest
        steps, matrix = best.steps, best.values[None, :]
    values = run_curve(matrix) if matrix.shape[0] > 1 else matrix[0]
    return steps, values, matrix.shape[0]


def judged_tags(tag: str = "loss") -> list[str]:
    """Every spelling of the tags :func:`judge_run` looks at: the loss, the gradient norms (for NaN/Inf), the step time,
    and the learning rate and weight norm (to name why a loss never fell).

    Lets a caller read or keep only what the verdict needs, before knowing which spellings a run uses.

    Args:
        tag: the loss tag or its meaning.

    Returns:
        Real tags, the loss's spellings first.
    """
    loss = meaning(tag)
    out = [tag] + [t for t in (ALIASES[loss] if loss else ()) if t != tag]
    for t in ALIASES["grad_norm"] + ALIASES["step_time"] + ALIASES["lr"] + WEIGHT_NORMS:
        if t not in out:
            out.append(t)
    return out


def judge_run(
    scalars,
    run: str,
    *,
    tag: str = "loss",
    rules: Rules = DEFAULT_RULES,
    explicit_tag: bool = False,
    seen: dict | None = None,
    context=None,
    collect_freq: int | None = None,
    origins: dict | None = None,
) -> RunVerdict:
    """Judge one run of *scalars*: every training series of its loss, the worse verdict standing.

    A run may hold its loss more than once: under several spellings (``loss``, ``lm loss``...) or as a writer's copy
    that differs from the series read (``train/loss``, :mod:`msnb.events.identity`).  Each is judged as the loss, and
    the worst verdict stands (a ``series`` check names each series, its file and its verdict); a copy equal to the
    one judged first is not judged again.  A table's series (an evaluation's ``eval_results.csv``) never stands in
    for a training writer's loss: it is judged as evaluation (``evaluation``: a NaN or Inf is a warning naming the
    file); only a run that holds no training loss at all is judged from a table's.

    Args:
        scalars: a ScalarTable (may hold other runs too).
        run: the run to judge.
        tag: the loss tag or its meaning (``loss`` finds ``loss/auto``, ``lm-loss``...; a meaning judges every
            spelling present, a real tag only that tag and its writers' copies).
        rules: the rules' parameters.
        explicit_tag: the user named the tag (its absence then fails the run instead of warning).
        seen: where given, receives the loss curves judged (``curves``) and the run's loss
            (``loss``: :func:`run_loss`'s answer) of the series whose verdict stands, so a view of the run shows
            them without building them again.
        context: more scalars of the same run written elsewhere (a ScalarTable: the summary beside a training
            log), looked at only for the likely cause of a loss that never fell (a learning rate of 0...) and,
            when the run failed, for where it started (per-parameter data).
        collect_freq: the run's collection frequency where known (its config): a stride equal to it is said to come from it.
        origins: the run's ``{tag: Origin}`` (``ReadResult.origins[run]``): which tags are tables and which are
            writers' copies; None judges every series present as the training's.

    Returns:
        The run's verdict.
    """
    mine = scalars if distinct(scalars.run) == {run} else scalars.take(scalars.run == run)  # one run: no copy of the table
    ranks = sorted(int(r) for r in distinct_integers(mine.rank) if r >= 0)
    present = set(mine.tags())
    training, evaluation = loss_series(tag, present, origins)
    if not training:  # no training writer holds the loss: a table's is all there is
        training, evaluation = evaluation, []
    if not training:
        verdict = RunVerdict(run, ranks)
        verdict.add(_missing_loss_check(tag, present, explicit_tag))
        return verdict
    grad_norms = [t for t in sorted(present) if meaning(stands_for(t, origins)) == "grad_norm" and not is_table(t, origins)]
    judged = []
    for loss_tag in _distinct_series(mine, training):
        mine_seen: dict = {}
        one = _judge_series(mine, run, ranks, loss_tag, grad_norms, rules, mine_seen, context, collect_freq, present)
        judged.append((one, mine_seen))
    verdict, kept = max(judged, key=lambda v: _severity(v[0]))  # the first of the worst: the series read, on a tie
    if len(judged) > 1:
        verdict.add(_series_check([v for v, _ in judged], verdict, origins))
    if seen is not None:
        seen.update(kept)
    tables = [t for t in sorted(present) if is_table(t, origins) and t not in training]
    if tables:
        verdict.add(_evaluation_check(mine, run, ranks, tables, origins))
    verdict.flags.sort(key=lambda f: (f.step, f.rank))
    return verdict


def loss_series(tag: str, present, origins: dict | None = None) -> tuple[list, list]:
    """Every tag of *present* that holds the loss *tag*: ``(training, evaluation)``, the series read first.

    *tag* a meaning (``loss``) counts every spelling of it (``lm loss``, ``train/loss``...); a real tag counts itself.
    A writer's differing copy (``train/loss``, its :class:`~msnb.events.identity.Origin` ``copy_of``) counts as the tag
    it copies; a table's series is evaluation (*origins* says which).  Training series are ordered as the judge reads
    them: the tag *tag* resolves to first, then the other spellings, then the writers' copies.
    """
    bases = {t: stands_for(t, origins) for t in present}
    want = tag if meaning(tag) == tag else None  # a meaning: every spelling of it
    exact = None if want else (tag if tag in bases.values() else resolve(tag, set(bases.values())))

    def holds(t: str) -> bool:
        return bases[t] == exact if want is None else meaning(bases[t], compared=True) == want

    found = [t for t in present if holds(t)]
    first = resolve(tag, {t for t in found if bases[t] == t})
    order = sorted(found, key=lambda t: (t != first, bases[t] != t, t))
    training = [t for t in order if not is_table(t, origins)]
    return training, [t for t in order if is_table(t, origins)]


def _distinct_series(mine, tags: list) -> list:
    """*tags* less those whose rows (rank, step, value) equal an earlier one's: one series under two names is judged once."""
    if len(tags) == 1:
        return tags
    kept, rows = [], []
    for t in tags:
        m = mine.tag == t
        key = (mine.rank[m], mine.step[m], mine.value[m])
        if any(all(np.array_equal(a, b, equal_nan=True) for a, b in zip(key, other)) for other in rows):
            continue
        kept.append(t)
        rows.append(key)
    return kept


def _severity(verdict: RunVerdict) -> tuple:
    """How bad a verdict is: failed before passed, then more failing checks, then more warnings."""
    statuses = [c.status for c in verdict.checks]
    return (not verdict.passed, statuses.count(FAIL), statuses.count(WARN))


def _judge_series(mine, run: str, ranks: list, loss_tag: str, grad_norms: list, rules: Rules, seen: dict, context, collect_freq, present: set) -> RunVerdict:
    """One loss series of a run judged by every rule (:func:`judge_run` judges each and keeps the worst)."""
    verdict = RunVerdict(run, ranks)
    verdict.tag = loss_tag
    watched = [loss_tag] + grad_norms  # non-finite values first, on every record
    verdict.series = list(watched)
    finite = _finite_check(mine, run, ranks, watched)
    verdict.add(*finite)
    cs = curves(mine, loss_tag)
    verdict.add(_steps_check(cs, rules, collect_freq))
    ranked = [c for c in cs if c.rank >= 0]
    steps, values, n_judged = run_loss(cs, rules)
    seen.update(curves=cs, loss=(steps, values, n_judged))
    verdict.checks.extend(_trend_checks(mine, context, steps, values, n_judged, rules))
    verdict.add(*_spikes_check(run, loss_tag, steps, values, rules))
    if len(ranked) > 1:
        verdict.add(*_divergence_check(mine, loss_tag, cs, finite[1], steps.size, rules))
    if (st_tag := resolve("step_time", present)) is not None:
        verdict.series.append(st_tag)
        for c in curves(mine, st_tag):
            verdict.add(step_time_stability(c.values, f"[rank {c.rank}]" if len(ranked) > 1 else "", rules))
    if not verdict.passed and (started := _where_it_started(mine, context)) is not None:
        verdict.add(started)
    return verdict


def _series_check(verdicts: list, stands: RunVerdict, origins: dict | None) -> Check:
    """``series``: each loss series judged, its file and its verdict; a warning where their verdicts differ."""

    def said(v: RunVerdict) -> str:
        where = (origins or {}).get(v.tag)
        failed = [c.name for c in v.checks if c.status == FAIL]
        word = f"failed ({', '.join(failed)})" if failed else "passed"
        return f"{v.tag}" + (f" from {where}" if where else "") + f": {word}"

    differ = len({v.passed for v in verdicts}) > 1
    detail = f"{count(len(verdicts), 'loss series', 'loss series')} judged: " + "; ".join(said(v) for v in verdicts)
    detail += f"; the worse verdict stands ({stands.tag})" if differ else ""
    return Check("series", WARN if differ else PASS, detail)


def _evaluation_check(mine, run: str, ranks: list, tables: list, origins: dict | None) -> Check:
    """``evaluation``: a table's series (an evaluation, metrics) judged as evaluation: a NaN or Inf is a warning naming
    the file, never the training's failure and never its pass."""
    found = find_nonfinite(mine, tables)
    flags = nonfinite_flags(found, {run: ranks})
    files = listed(sorted({str(origins[t]) for t in tables if origins and t in origins}), 4)
    if flags:  # said, not flagged: a flag is a training series' failure
        return Check("evaluation", WARN, f"{files}: " + "; ".join(f.reason for f in flags) + " (a table's series, judged as evaluation)")
    return Check("evaluation", PASS, f"{files}: no NaN or Inf in {listed(tables, 8)} (a table's series, judged as evaluation)")


def _missing_loss_check(tag: str, present: set, explicit_tag: bool) -> Check:
    """``tags``, the one check of a run without the loss tag: nothing else can be judged. A tag the user named fails
    the run; the default one, looked for unasked, only warns."""
    listed = ", ".join(sorted(present)) or "none"
    return Check("tags", FAIL if explicit_tag else WARN, f"no {tag!r} tag in this run (tags: {listed}): nothing judged")


def _finite_check(mine, run: str, ranks: list, watched: list) -> tuple[Check, list]:
    """``finite``: NaN or Inf in the loss or the gradient norms, on every record of every rank (a retried step's NaN
    counts even where a later record replaced it): the check and one flag per rank where it began."""
    found = find_nonfinite(mine, watched)
    flags = nonfinite_flags(found, {run: ranks})
    if found:
        return Check("finite", FAIL, "; ".join(f.reason for f in flags)), flags
    return Check("finite", PASS, f"no NaN or Inf in {', '.join(watched)} on any record"), flags


def _trend_checks(mine, context, steps, values, n_judged: int, rules: Rules) -> list[Check]:
    """``loss_falling`` and ``loss_stalled`` on the run's finite loss.

    A smoke's one-step blow-up is left out of both (it is ``loss_spikes``' to name, not a trend); a loss that never
    fell is given its likely cause (a learning rate of 0, frozen weights) from the run, else from its *context*.
    """
    ok = np.isfinite(values)
    cause = likely_cause(mine) or (likely_cause(context) if context is not None else None)
    blown = blowup(steps, values, rules)
    judged = ok & (steps != blown[0]) if blown is not None else ok
    trend = loss_trend(steps[judged], values[judged], rules=rules, cause=cause, ranks=n_judged)
    if blown is not None:
        trend.detail += f" (step {blown[0]}'s one-step blow-up left out: see loss_spikes)"
    return [trend, loss_stall(steps[judged], values[judged], rules=rules)]


def _spikes_check(run: str, loss_tag: str, steps, values, rules: Rules) -> tuple[Check, list]:
    """``loss_spikes``: a jump of the run's loss that did not recover (or a smoke's blow-up), with its flag; a pass
    says what was looked for, so a reader knows how big a jump would have been caught."""
    spike = spike_flag(run, loss_tag, steps, values, rules)
    if spike is not None:
        return Check("loss_spikes", FAIL, spike.reason), [spike]
    points = int(np.isfinite(values).sum())
    blowups = f", nor a one-step jump of {rules.spike_blowup:g}x" if points <= rules.spike_short_points else ""
    window = recovery_window(points, rules)
    return Check("loss_spikes", PASS, f"no jump above {rules.spike_factor:g}x that lasted {window} points{blowups}"), []


def _divergence_check(mine, loss_tag: str, cs, nonfinite: list, common: int, rules: Rules) -> tuple[Check, list]:
    """``rank_divergence`` of a run of several ranks, with its flags; a rank already flagged for NaN/Inf is not flagged
    again for drifting away (its loss is not comparable any more)."""
    gone = {f.rank for f in nonfinite}
    div = [f for f, _visible in divergence_details(mine, loss_tag, rules=rules, curve_list=cs) if f.rank not in gone]
    if div:
        return Check("rank_divergence", FAIL, "; ".join(f.reason for f in div)), div
    ranked = sum(1 for c in cs if c.rank >= 0)
    return Check("rank_divergence", PASS, f"{ranked} ranks follow one trend within their noise over {count(common, 'common step')}"), div


def _where_it_started(mine, context) -> Check | None:
    """For a failed run: which rank and parameter left its own history first (health's detector), from the run's
    per-parameter data, else from its *context*'s; None where neither has any."""
    return first_anomaly_check(mine) or (first_anomaly_check(context) if context is not None else None)
