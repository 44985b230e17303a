"""``msnb.compare``: does a migrated run train the same curve as its baseline? MindSpore's migration standard as a verdict.

The standard (mindformers' accuracy-tuning guide, "Large Model Migration
Accuracy Standard"; every limit a field of :class:`CompareRules`): align the
learning-rate schedules first, then the first loss within 0.005 absolute or
0.5 % relative, the loss over the run within 0.01 mean absolute or 1 % mean
relative error, the global norm within 10 % mean relative error, observed over
at least 1,000 steps; where two baseline runs differ more than that from each
other (determinism off), the baseline's own spread is the tolerance.

How the two sides meet: each side's loss, learning rate and grad norm are found
by meaning (``lm loss`` / ``loss`` / ``loss/auto`` ...; see
:mod:`msnb.analysis.compare_sides`), and compared on the steps both logged
(different log intervals are fine: the common steps are counted and said).
The mean error is judged over the whole run and over a trailing window, so a
late divergence cannot hide in a long good start; ``first_divergence`` names the
step where the difference began to drift beyond the tolerance (a change point,
as the judge finds a rank's departure), or the first NaN/Inf, or the first
learning-rate mismatch, whichever came first.
"""

from __future__ import annotations

import math
import os
import reprlib

import numpy as np

from ..errors import NothingReadable, UsageError
from ..words import count, plural
from .compare_result import CompareCheck, CompareResult, Divergence
from .compare_rules import DEFAULT_COMPARE_RULES, CompareRules
from .compare_sides import MEANINGS, Series, Side, build_side, describe_steps, finite_or_none, read_side, wanted_tags
from .divergence import change_point
from .rules import FAIL, PASS, WARN

_BIG = np.iinfo(np.int64).max


def parse_steps(steps) -> tuple[int, int]:
    """``"A:B"``, ``"A:"``, ``":B"``, ``(A, B)`` or None as an inclusive ``(lo, hi)`` range of baseline steps.

    Raises:
        UsageError: anything else, or ``A > B``.
    """
    if steps is None:
        return -_BIG, _BIG
    if isinstance(steps, str):
        lo_text, colon, hi_text = steps.partition(":")
        if not colon:
            raise UsageError(f"--steps takes A:B, A: or :B (got {steps!r})")
        lo, hi = (lo_text.strip() or None), (hi_text.strip() or None)
    else:
        try:
            lo, hi = steps
        except (TypeError, ValueError):
            raise UsageError(f"steps must be 'A:B' or a pair (A, B), got {steps!r}") from None
    lo, hi = _step_bound(lo, -_BIG, steps), _step_bound(hi, _BIG, steps)
    if lo > hi:
        raise UsageError(f"--steps {steps}: the first step is after the last")
    return lo, hi


def _step_bound(value, open_end: int, steps) -> int:
    """One end of a step range: None or an infinity is open; a whole number is clamped to int64 (a 30-digit step is past every step)."""
    if value is None:
        return open_end
    if isinstance(value, float) and math.isinf(value):
        return -_BIG if value < 0 else _BIG
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value) if isinstance(value, str) else value
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        number = int(number) if isinstance(number, (int, np.integer)) else None
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None:
        raise UsageError(f"--steps takes whole numbers, A:B (got {reprlib.repr(steps)})")
    return max(-_BIG, min(_BIG, number))


def parse_tag(tag) -> tuple[tuple, tuple]:
    """The loss tag asked for, per side: None (the loss, by meaning), ``NAME`` (both sides), ``BASELINE=CANDIDATE``."""
    if tag is None or tag == "":
        return ("loss", False), ("loss", False)
    if not isinstance(tag, str):
        raise UsageError(f"--tag takes a tag name or BASELINE_TAG=CANDIDATE_TAG, got {tag!r}")
    base, eq, cand = tag.partition("=")
    if eq and (not base.strip() or not cand.strip()):
        raise UsageError(f"--tag {tag!r}: give both tags, BASELINE_TAG=CANDIDATE_TAG")
    base, cand = base.strip(), (cand.strip() if eq else base.strip())
    return (base, base != "loss"), (cand, cand != "loss")


def _rank(rank):
    if rank is None or rank == "median":
        return "median"
    if isinstance(rank, str):
        try:
            rank = int(rank)
        except ValueError:
            raise UsageError(f"--rank takes a rank number or 'median' (got {rank!r})") from None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < -1:
        raise UsageError(f"--rank takes a rank number or 'median' (got {rank!r})")
    return rank


def _pairs(base: Series, other: Series, lo: int, hi: int):
    """Steps both logged within [lo, hi], with each side's value there."""
    steps = base.steps[np.searchsorted(base.steps, lo) : np.searchsorted(base.steps, hi, side="right")]
    at = np.searchsorted(other.steps, steps)  # both sides' steps are ascending and unique: a search each, no sort
    found = at < other.steps.size
    found[found] = other.steps[at[found]] == steps[found]
    common = steps[found]
    return common, base.values[np.searchsorted(base.steps, common)], other.values[at[found]]


def _abs_rel(b: np.ndarray, o: np.ndarray):
    """Per-step absolute and relative errors of *o* against *b* (relative: inf where the baseline is 0 and they differ)."""
    d = np.abs(o - b)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(b != 0, d / np.abs(b), np.where(d == 0, 0.0, np.inf))
    return d, rel


def _means(b: np.ndarray, o: np.ndarray, tail: int) -> dict:
    """Mean absolute and relative errors over the finite pairs, whole and over the last *tail* of them."""
    ok = np.isfinite(b) & np.isfinite(o)
    d, rel = _abs_rel(b[ok], o[ok])
    if not d.size:
        return {"abs": math.nan, "rel": math.nan, "tail_abs": math.nan, "tail_rel": math.nan, "points": 0, "tail_points": 0}
    k = max(1, min(tail, d.size))
    return {
        "abs": float(d.mean()),
        "rel": float(rel.mean()),
        "tail_abs": float(d[-k:].mean()),
        "tail_rel": float(rel[-k:].mean()),
        "points": int(d.size),
        "tail_points": int(k),
    }


def _moving_mean(x: np.ndarray, w: int) -> np.ndarray:
    """Trailing mean over *w* points ending at each index (fewer at the start)."""
    c = np.concatenate(([0.0], np.cumsum(x)))
    idx = np.arange(1, x.size + 1)
    lo = np.maximum(idx - w, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def _first_persistent(hit: np.ndarray, patience: int) -> int:
    """Index where *hit* first holds for *patience* consecutive points, or -1."""
    if patience <= 1:
        return int(np.argmax(hit)) if hit.any() else -1
    c = np.cumsum(hit)
    reset = np.maximum.accumulate(np.where(~hit, c, 0))
    done = (c - reset) >= patience
    return int(np.argmax(done)) - patience + 1 if done.any() else -1


def _ok_either(abs_err: float, rel_err: float, abs_lim: float, rel_lim: float) -> bool:
    return (math.isfinite(abs_err) and abs_err <= abs_lim) or (math.isfinite(rel_err) and rel_err <= rel_lim)


def _pct(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3%}"


def _g(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.6g}"


class _Reruns:
    """The baseline's own run-to-run errors, from each rerun compared with the baseline as the candidate is."""

    def __init__(self, base: Side, reruns: list, lo: int, hi: int, rules: CompareRules, tail: int):
        self.count = len(reruns)
        self.first_abs = self.first_rel = 0.0
        self.mean = {"abs": 0.0, "rel": 0.0, "tail_abs": 0.0, "tail_rel": 0.0}
        self.grad_rel = 0.0
        self.curves = []  # (steps, |rerun - baseline| moving mean) per rerun
        bl = base.get("loss")
        for side in reruns:
            rl = side.get("loss")
            if rl is None:
                continue
            steps, b, o = _pairs(bl, rl, lo, hi)
            ok = np.isfinite(b) & np.isfinite(o)
            if not ok.any():
                continue
            d, rel = _abs_rel(b[ok][:1], o[ok][:1])
            self.first_abs, self.first_rel = max(self.first_abs, float(d[0])), max(self.first_rel, float(rel[0]))
            m = _means(b, o, tail)
            for key in self.mean:
                self.mean[key] = max(self.mean[key], m[key])
            w = max(1, min(rules.divergence_window, int(ok.sum()) // 10))
            self.curves.append((steps[ok], _moving_mean(np.abs(o[ok] - b[ok]), w)))
            bg, rg = base.get("grad_norm"), side.get("grad_norm")
            if bg is not None and rg is not None:
                _s, gb, go = _pairs(bg, rg, lo, hi)
                g = _means(gb, go, tail)
                if g["points"]:
                    self.grad_rel = max(self.grad_rel, g["rel"])

    def envelope(self, steps: np.ndarray) -> np.ndarray | None:
        """The reruns' own |difference| (moving mean, the largest of them) at *steps*, or None without reruns."""
        if not self.curves:
            return None
        return np.max([np.interp(steps, s, e) for s, e in self.curves], axis=0)

    def as_dict(self) -> dict | None:
        if not self.curves:
            return None
        return {"first_abs": self.first_abs, "first_rel": self.first_rel, **{f"mean_{k}": v for k, v in self.mean.items()}, "grad_norm_rel": self.grad_rel}


def _lr_check(base: Side, cand: Side, lo: int, hi: int, rules: CompareRules):
    """``(check, mismatch)``: the learning-rate schedules compared step by step; mismatch is ``(step, b, c)`` or None."""
    bl, cl = base.get("lr"), cand.get("lr")
    if bl is None or cl is None:
        missing = " and ".join(n for n, s in (("baseline", bl), ("candidate", cl)) if s is None)
        return CompareCheck("lr_schedule", WARN, f"not compared: no learning rate on the {missing}; align the schedules first", None, rules.lr_rel), None
    steps, b, o = _pairs(bl, cl, lo, hi)
    ok = np.isfinite(b) & np.isfinite(o)
    steps, b, o = steps[ok], b[ok], o[ok]
    if not steps.size:
        return CompareCheck("lr_schedule", WARN, "not compared: no common step with a learning rate on both sides", None, rules.lr_rel), None
    d = np.abs(o - b)
    scale = np.maximum(np.abs(b), np.abs(o))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(scale > 0, d / scale, 0.0)
    bad = d > rules.lr_rel * scale + rules.lr_abs
    worst = float(rel.max())
    if not bad.any():
        return CompareCheck(
            "lr_schedule",
            PASS,
            f"learning rates agree on {count(steps.size, 'common step', thousands=True)} (largest relative difference {_pct(worst)})",
            worst,
            rules.lr_rel,
        ), None
    i = int(np.argmax(bad))
    detail = (
        f"learning rates differ from step {int(steps[i])}: baseline {_g(b[i])}, candidate {_g(o[i])} ({_pct(rel[i])}); "
        f"{int(bad.sum()):,} of {count(steps.size, 'common step', thousands=True)} differ by more than {_pct(rules.lr_rel)}: align the schedule (warmup, decay, base lr) first"
        + _skipped_hint(base, cand, int(steps[i]))
    )
    return CompareCheck("lr_schedule", FAIL, detail, worst, rules.lr_rel), (int(steps[i]), float(b[i]), float(o[i]))


def _skipped_hint(base: Side, cand: Side, step: int) -> str:
    """Why schedules that agree can part: Megatron's scheduler does not advance on an iteration the fp16 loss scaler skipped."""
    counts = []
    for side in (base, cand):
        s = side.get("skipped")
        counts.append(None if s is None else int(np.nansum(s.values[s.steps <= step])))
    known = [c for c in counts if c is not None]
    if not (len(known) == 2 and known[0] != known[1]) and not (len(known) == 1 and known[0] > 0):
        return ""  # no count, equal counts, or none skipped on the one side that counts
    shown = ", ".join(f"the {label}'s {c:,}" for label, c in zip(("baseline", "candidate"), counts) if c is not None)
    return (
        f"; skipped iterations (fp16 loss-scale overflows) logged by step {step}: {shown}: "
        "Megatron's scheduler does not advance on a skipped iteration, so the rates part where the skips differ"
    )


def _finite_check(base: Side, cand: Side, lo: int, hi: int):
    """``(check, first)``: NaN/Inf in the loss or grad norm of either side within the range; first is ``(step, meaning, side)``."""
    found = []
    for label, side in (("baseline", base), ("candidate", cand)):
        for meaning in ("loss", "grad_norm"):
            s = side.get(meaning)
            if s is not None and s.nonfinite is not None and lo <= s.nonfinite[0] <= hi:
                found.append((s.nonfinite[0], meaning, label, s.tag, s.nonfinite[1]))
    if not found:
        return CompareCheck("finite", PASS, "no NaN/Inf in the loss or grad norm on either side", None, None), None
    found.sort(key=lambda f: (f[0], f[1] != "loss"))
    parts = [f"{label} {tag!r} is {value} at step {step}" for step, _m, label, tag, value in found]
    first = found[0]
    return CompareCheck("finite", FAIL, "; ".join(parts), first[0], None), first


def _value_at(s: Series | None, step: int) -> float | None:
    if s is None:
        return None
    i = int(np.searchsorted(s.steps, step))
    return finite_or_none(s.values[i]) if i < s.steps.size and s.steps[i] == step else None


def compare(
    baseline,
    candidate,
    *,
    reruns=(),
    tag=None,
    steps=None,
    offset: int = 0,
    rank="median",
    rules: CompareRules = DEFAULT_COMPARE_RULES,
    verify: bool = True,
) -> CompareResult:
    """Compare a candidate run with a baseline run by MindSpore's migration accuracy standard.

    Args:
        baseline: the reference run: a Megatron-LM log, a ``trainer_state.json``, a CSV/JSONL of
            step,tag,value, or anything :func:`msnb.read` reads (a ``ReadResult`` too).
        candidate: the run being judged (a path msnb reads, a rank directory, a ``ReadResult``).
        reruns: other runs of the baseline (same settings, determinism off): their own spread
            relaxes the tolerance.
        tag: the loss tag: None for the loss by meaning, a tag name for both sides, or
            ``"BASELINE_TAG=CANDIDATE_TAG"``.
        steps: the baseline steps to compare, ``"A:B"`` (inclusive) or ``(A, B)``.
        offset: added to the candidate's steps (mindformers counting from 0 against a baseline from 1: 1).
        rank: the candidate's ranks as their median per step (``"median"``) or one rank's curve.
        rules: the limits (:class:`CompareRules`; defaults: the standard's).
        verify: check CRCs of event files while reading.

    Returns:
        A :class:`CompareResult` (``passed``, ``checks``, ``first_divergence``, ``as_dict()``, ``format_text()``).

    Raises:
        NothingReadable: a side holds no loss, or the sides have no common step.
        UsageError: a bad option (steps, tag, rank, offset).
    """
    lo, hi = parse_steps(steps)
    base_tag, cand_tag = parse_tag(tag)
    rank, offset, reruns = _checked_options(rank, offset, rules, reruns)
    base, cand, rerun_sides = _read_sides(baseline, candidate, reruns, base_tag, cand_tag, rank, offset, verify)
    spread_sides = [s for s in rerun_sides if len(s.losses) <= 1]  # a rerun whose own writers disagree measures no spread
    results, unmatched = [], []
    for b in base.variants():
        for c in cand.variants():
            try:
                results.append((b, c, _compare_pair(b, c, rerun_sides, spread_sides, lo, hi, offset, steps, rules)))
            except NothingReadable as e:  # this pair shares no step; another may
                unmatched.append((b, c, e))
    if not results:
        raise unmatched[0][2]
    b, c, result = max(results, key=lambda r: _severity(r[2]))  # the worst stands; on a tie the series read
    if len(results) + len(unmatched) > 1:
        result.checks.append(_series_check(results, unmatched, (b, c), several_baselines=len(base.losses) > 1))
    return result


def _severity(result: CompareResult) -> tuple:
    """How bad a comparison is: not aligned before aligned, then more failing checks, then more warnings."""
    statuses = [c.status for c in result.checks]
    return (not result.passed, statuses.count(FAIL), statuses.count(WARN))


def _series_check(results: list, unmatched: list, stands: tuple, *, several_baselines: bool) -> CompareCheck:
    """``series``: each training series of the loss compared (a side may hold several: another spelling, a writer's
    differing copy), its file and its result; a warning where the results differ or a series shares no step."""

    def who(b: Series, c: Series) -> str:
        return f"candidate {c.named()}" + (f" against baseline {b.named()}" if several_baselines else "")

    parts = []
    for b, c, r in results:
        failed = [k.name for k in r.checks if k.status == FAIL]
        parts.append(f"{who(b.get('loss'), c.get('loss'))}: " + (f"not aligned ({', '.join(failed)})" if failed else "aligned"))
    parts += [f"{who(b.get('loss'), c.get('loss'))}: not compared ({e})" for b, c, e in unmatched]
    differ = len({r.passed for _b, _c, r in results}) > 1 or bool(unmatched)
    n = len(results) + len(unmatched)
    detail = f"{n} pairs of loss series compared: " if several_baselines else f"{count(n, 'loss series', 'loss series')} of the candidate compared: "
    detail += "; ".join(parts)
    if differ:
        detail += f"; the worse result stands ({who(stands[0].get('loss'), stands[1].get('loss'))})"
    return CompareCheck("series", WARN if differ else PASS, detail, n, None)


def _compare_pair(base: Side, cand: Side, rerun_sides: list, spread_sides: list, lo: int, hi: int, offset: int, steps, rules: CompareRules) -> CompareResult:
    """One baseline loss series against one candidate loss series, every check of the standard."""
    bl, cl = base.get("loss"), cand.get("loss")
    common, b, o = _common_loss(bl, cl, lo, hi, offset, steps)
    n = int(common.size)
    tail = max(rules.tail_min_points, math.ceil(rules.tail_fraction * n))
    spread = _Reruns(base, spread_sides, lo, hi, rules, tail)
    relaxed = spread.count > 0 and spread.curves

    lr_check, lr_mismatch = _lr_check(base, cand, lo, hi, rules)
    first_check, first_limits = _first_loss_check(common, b, o, rules, spread)
    mean_check, m, mean_limits = _mean_error_check(b, o, tail, rules, spread, relaxed)
    grad_check, g_lim = _grad_norm_check(base, cand, lo, hi, tail, rules, spread)
    finite, nonfinite = _finite_check(base, cand, lo, hi)
    checks = [lr_check, first_check, mean_check, grad_check, finite, _coverage_check(n, bl, cl, rules)]

    drift, (fs, tol, envelope) = _loss_drift(common, b, o, rules, spread, cl.tag)
    first = _first_divergence(drift, nonfinite, lr_mismatch, base, cand)
    tolerance = {
        "first_loss_abs": first_limits[0],
        "first_loss_rel": first_limits[1],
        "mean_abs": mean_limits[0],
        "mean_rel": mean_limits[1],
        "tail_abs": mean_limits[2],
        "tail_rel": mean_limits[3],
        "tail_points": m["tail_points"],
        "grad_norm_rel": g_lim,
        "lr_rel": rules.lr_rel,
        "min_steps": rules.min_steps,
        "reruns": spread.count,
        "rerun_spread": spread.as_dict(),
    }
    series = {
        "common": common,
        "baseline_at": b,
        "candidate_at": o,
        "tolerance": (fs, tol),
        "envelope": None if envelope is None else (fs, envelope),
        **_curves(base, cand, lo, hi),
    }
    return CompareResult(
        baseline=[base.path, *(s.path for s in rerun_sides)],
        candidate=[cand.path],
        common_steps=n,
        tolerance=tolerance,
        checks=checks,
        first_divergence=first,
        tags={
            meaning: {"baseline": base.get(meaning).tag if base.get(meaning) else None, "candidate": cand.get(meaning).tag if cand.get(meaning) else None}
            for meaning in MEANINGS
        },
        ranks={"baseline": base.how, "candidate": cand.how},
        offset=offset,
        step_range=[int(common[0]), int(common[-1])],
        notes=_notes(base, cand, rerun_sides, relaxed),
        series=series,
    )


def _checked_options(rank, offset, rules, reruns) -> tuple:
    """``(rank, offset, reruns)`` as :func:`compare` uses them; a bad one is a :class:`UsageError` in one line."""
    rank = _rank(rank)
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or abs(int(offset)) > 1 << 40:
        raise UsageError(f"--offset takes a whole number of steps (got {offset!r})")
    if not isinstance(rules, CompareRules):
        raise UsageError(f"rules must be a CompareRules, got {type(rules).__name__}")
    reruns = [reruns] if isinstance(reruns, (str, os.PathLike)) else list(reruns or ())
    return rank, int(offset), reruns


def _read_sides(baseline, candidate, reruns, base_tag, cand_tag, rank, offset: int, verify: bool) -> tuple:
    """The baseline, the candidate and the baseline's reruns, each one curve per meaning (:func:`build_side`)."""

    def tags_for(loss):
        return {"loss": loss, "lr": ("lr", False), "grad_norm": ("grad_norm", False), "skipped": ("skipped", False)}

    wanted = wanted_tags(base_tag[0], cand_tag[0])
    base = build_side(*read_side(baseline, verify=verify, tags=wanted), tags=tags_for(base_tag), rank="median")
    cand = build_side(*read_side(candidate, verify=verify, tags=wanted), tags=tags_for(cand_tag), rank=rank, offset=offset)
    rerun_sides = [build_side(*read_side(r, verify=verify, tags=wanted), tags=tags_for(base_tag), rank="median") for r in reruns]
    return base, cand, rerun_sides


def _common_loss(bl, cl, lo: int, hi: int, offset: int, steps) -> tuple:
    """``(common steps, baseline loss, candidate loss)`` at the steps both sides hold; none in common is refused."""
    common, b, o = _pairs(bl, cl, lo, hi)
    if not common.size:
        shift = f" (candidate shifted by --offset {offset})" if offset else ""
        raise NothingReadable(
            f"no common step: the baseline's {bl.tag!r} has {describe_steps(bl.steps)}, the candidate's {cl.tag!r} has "
            f"{describe_steps(cl.steps)}{shift}" + ("" if steps is None else f", compared within --steps {steps}")
        )
    return common, b, o


def _first_loss_check(common, b, o, rules: CompareRules, spread) -> tuple:
    """The first common step's loss within the absolute or the relative limit: ``(check, (abs limit, rel limit))``."""
    fa_lim, fr_lim = max(rules.first_loss_abs, spread.first_abs), max(rules.first_loss_rel, spread.first_rel)
    d0, r0 = _abs_rel(b[:1], o[:1])
    d0, r0 = float(d0[0]), float(r0[0])
    good = _ok_either(d0, r0, fa_lim, fr_lim)
    check = CompareCheck(
        "first_loss",
        PASS if good else FAIL,
        f"step {int(common[0])}: baseline {_g(b[0])}, candidate {_g(o[0])}: absolute error {_g(d0)} (limit {_g(fa_lim)}), "
        f"relative {_pct(r0)} (limit {_pct(fr_lim)}); " + ("within" if good else "beyond") + " either limit",
        {"abs": finite_or_none(d0), "rel": finite_or_none(r0)},
        {"abs": fa_lim, "rel": fr_lim},
    )
    return check, (fa_lim, fr_lim)


def _mean_error_check(b, o, tail: int, rules: CompareRules, spread, relaxed: bool) -> tuple:
    """The mean loss error over the whole run and over its last steps: ``(check, means, limits)``."""
    m = _means(b, o, tail)
    ma_lim, mr_lim = max(rules.mean_abs, spread.mean["abs"]), max(rules.mean_rel, spread.mean["rel"])
    ta_lim, tr_lim = max(rules.mean_abs, spread.mean["tail_abs"]), max(rules.mean_rel, spread.mean["tail_rel"])
    whole = _ok_either(m["abs"], m["rel"], ma_lim, mr_lim)
    late = _ok_either(m["tail_abs"], m["tail_rel"], ta_lim, tr_lim)
    why = "" if whole and late else (" (the last steps)" if whole else " (the whole run)" if late else " (whole run and last steps)")
    check = CompareCheck(
        "mean_error",
        PASS if whole and late else FAIL,
        f"mean absolute error {_g(m['abs'])}, relative {_pct(m['rel'])} over {count(m['points'], 'step', thousands=True)}; last {m['tail_points']:,}: "
        f"{_g(m['tail_abs'])}, {_pct(m['tail_rel'])}; limits {_g(ma_lim)} or {_pct(mr_lim)}"
        + (f" (last steps: {_g(ta_lim)} or {_pct(tr_lim)})" if (ta_lim, tr_lim) != (ma_lim, mr_lim) else "")
        + (f", raised to the spread of {count(spread.count, 'baseline rerun')}" if relaxed else "")
        + ("" if whole and late else f"; beyond both{why}"),
        {k: finite_or_none(m[k]) for k in ("abs", "rel", "tail_abs", "tail_rel")},
        {"abs": ma_lim, "rel": mr_lim, "tail_abs": ta_lim, "tail_rel": tr_lim},
    )
    return check, m, (ma_lim, mr_lim, ta_lim, tr_lim)


def _grad_norm_check(base, cand, lo: int, hi: int, tail: int, rules: CompareRules, spread) -> tuple:
    """The global norm's mean relative error, a warning where a side has none: ``(check, limit)``."""
    bg, cg = base.get("grad_norm"), cand.get("grad_norm")
    g_lim = max(rules.grad_norm_rel, spread.grad_rel)
    if bg is None or cg is None:
        missing = " and ".join(n_ for n_, s in (("baseline", bg), ("candidate", cg)) if s is None)
        return CompareCheck("grad_norm", WARN, f"not compared: no global norm on the {missing}", None, g_lim), g_lim
    _g_steps, gb, go = _pairs(bg, cg, lo, hi)
    g = _means(gb, go, tail)
    if not g["points"]:
        return CompareCheck("grad_norm", WARN, "not compared: no common step with a finite global norm on both sides", None, g_lim), g_lim
    good = g["rel"] <= g_lim
    check = CompareCheck(
        "grad_norm",
        PASS if good else FAIL,
        f"mean relative error of the global norm {_pct(g['rel'])} over {count(g['points'], 'step', thousands=True)} (limit {_pct(g_lim)})",
        finite_or_none(g["rel"]),
        g_lim,
    )
    return check, g_lim


def _coverage_check(n: int, bl, cl, rules: CompareRules) -> CompareCheck:
    """Enough common steps for the standard's observation window (a warning, never a failure)."""
    if n >= rules.min_steps:
        return CompareCheck(
            "coverage",
            PASS,
            f"{count(n, 'common step', thousands=True)} (at least {rules.min_steps:,}; {rules.recommended_steps:,} or 12 h recommended)",
            n,
            rules.min_steps,
        )
    return CompareCheck(
        "coverage",
        WARN,
        f"only {count(n, 'common step', thousands=True)} (baseline {describe_steps(bl.steps)}, candidate {describe_steps(cl.steps)}); "
        f"the standard observes at least {rules.min_steps:,} ({rules.recommended_steps:,} or 12 h recommended)",
        n,
        rules.min_steps,
    )


def _loss_drift(common, b, o, rules: CompareRules, spread, loss_tag: str) -> tuple:
    """Where the loss left the baseline: the per-step difference in tolerance units, drifting persistently beyond 1.

    Returns:
        ``(events, (finite steps, tolerance, rerun envelope))``: at most one ``(step, 1, Divergence)``.
    """
    ok = np.isfinite(b) & np.isfinite(o)
    fs, fb, fo = common[ok], b[ok], o[ok]
    tol = np.maximum(rules.mean_abs, rules.mean_rel * np.abs(fb))
    envelope = spread.envelope(fs)
    if envelope is not None:
        tol = np.maximum(tol, envelope)
    if not fs.size:
        return [], (fs, tol, envelope)
    r = (fo - fb) / tol
    w = max(1, min(rules.divergence_window, fs.size // 10))
    p = max(1, min(rules.divergence_patience, fs.size // 10))
    mm = _moving_mean(r, w)
    crossing = _first_persistent(np.abs(mm) > 1.0, p)
    if crossing < 0:
        return [], (fs, tol, envelope)
    end = min(crossing + p - 1, fs.size - 1)
    sign = 1.0 if mm[end] >= 0 else -1.0
    onset = change_point(np.clip(r[: end + 1] * sign, -50, 50))
    rel_end = abs(fo[end] - fb[end]) / abs(fb[end]) if fb[end] != 0 else math.inf
    found = Divergence(
        int(fs[onset]),
        loss_tag,
        finite_or_none(fb[onset]),
        finite_or_none(fo[onset]),
        f"the loss difference drifts beyond the tolerance from step {int(fs[onset])}: candidate {'above' if sign > 0 else 'below'} the "
        f"baseline by {_pct(rel_end)} at step {int(fs[end])} (tolerance there {_pct(tol[end] / abs(fb[end]) if fb[end] else math.inf)})",
    )
    return [(int(fs[onset]), 1, found)], (fs, tol, envelope)


def _first_divergence(events: list, nonfinite, lr_mismatch, base, cand) -> Divergence | None:
    """The earliest of the loss drift, a non-finite value and a learning-rate mismatch (at one step: lr, then value, then drift)."""
    events = list(events)
    if nonfinite is not None:
        step, meaning, label, real, value = nonfinite
        events.append(
            (
                step,
                0,
                Divergence(
                    step, real, _value_at(base.get(meaning), step), _value_at(cand.get(meaning), step), f"the {label}'s {real!r} is {value} at step {step}"
                ),
            )
        )
    if lr_mismatch is not None:
        step, lb, lc = lr_mismatch
        said = f"the learning rates differ from step {step}: the schedules are not aligned (warmup, decay or base lr)"
        events.append((step, -1, Divergence(step, cand.get("lr").tag, lb, lc, said)))
    return min(events, key=lambda e: (e[0], e[1]))[2] if events else None


def _notes(base, cand, rerun_sides, relaxed: bool) -> list:
    """What the reader should know beside the checks: the loss's file, restarts, reading problems, reruns that shared no
    step or hold differing copies of their loss."""
    notes = list(base.notes) + list(cand.notes)
    for side in (base, cand):
        s = side.get("loss")
        if s is not None and s.origin and side.files > 1:
            notes.append(f"{side.path}: {s.tag} read from {s.origin}")
    for i, side in enumerate(rerun_sides):
        if len(side.losses) > 1:
            copies = ", ".join(s.named() for s in side.losses)
            notes.append(f"rerun {i + 1} holds {len(side.losses)} differing loss series ({copies}): its spread does not relax the tolerance")
    for label, side in (("baseline", base), ("candidate", cand), *((f"rerun {i + 1}", s) for i, s in enumerate(rerun_sides))):
        s = side.get("loss")
        if s is not None and s.restarts:
            notes.append(
                f"{label} restarted at {plural(len(s.restarts), 'step')} {', '.join(map(str, s.restarts[:5]))}: the later records replace the earlier ones"
            )
        if side.problems:
            notes.append(f"{label}: {count(len(side.problems), 'problem')} while reading, first: {side.problems[0]}")
    if any(len(side.losses) <= 1 for side in rerun_sides) and not relaxed:
        notes.append("no baseline rerun shares a step with the baseline: the standard's tolerance is used as it is")
    return notes


def _curves(base, cand, lo: int, hi: int) -> dict:
    """Each side's curve of each meaning within the compared steps, for the figure: ``{"baseline_loss": (tag, steps, values)}``."""
    series = {}
    for meaning in MEANINGS:
        for label, side in (("baseline", base), ("candidate", cand)):
            s = side.get(meaning)
            if s is not None:
                keep = (s.steps >= lo) & (s.steps <= hi)
                series[f"{label}_{meaning}"] = (s.tag, s.steps[keep], s.values[keep])
    return series
