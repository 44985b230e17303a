"""What each rank of a run really used: MindSpore's memory report judged (headroom to its limit, imbalance between ranks).

The figures come from the logs (:mod:`msnb.events.memory_lines`, ``ReadResult.memory``): per rank the card's size,
what MindSpore may use of it (its limit, ``MindSpore Used memory size``, set by ``context.max_device_memory``), the
peak without fragments and the actual peak with them.  A rank's peak is the actual peak where printed, else the used
peak; its headroom is its limit less that peak.

Judged as warnings (the job ran): a rank within :attr:`~msnb.analysis.rules.Rules.memory_headroom` of its limit (the
next larger batch or sequence runs out of memory there), and ranks whose peaks differ by more than
:attr:`~msnb.analysis.rules.Rules.memory_imbalance` (ranks of one pipeline stage hold alike; a gap is a stage-to-stage
imbalance, ``offset`` or ``recompute`` per stage evens it).  A rank with a log but no report is named: its headroom is
unknown, never taken as 0 or as fine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events.reader import ReadResult, memory_rows
from ..words import count
from .rules import DEFAULT_RULES, PASS, WARN, Check, Rules

FIGURES = ("device_mb", "limit_mb", "used_peak_mb", "actual_peak_mb")


def _gib(mb: float) -> str:
    return f"{mb / 1024:,.1f} GiB"


def ranks_words(ranks) -> str:
    """``rank 3`` / ``ranks 0-3, 7`` (consecutive ranks as spans; -1 is "the log without a rank")."""
    ranks = sorted(set(ranks))
    if ranks == [-1]:
        return "the log without a rank"
    spans, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            spans.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(spans)


@dataclass
class RankMemory:
    """One rank's report (its log's last job): the figures in MiB as printed, None where not printed."""

    rank: int
    path: str
    job: int
    device_mb: float | None
    limit_mb: float | None
    used_peak_mb: float | None
    actual_peak_mb: float | None
    jobs: int = 1  # jobs with a report in its log (the last is judged)

    @property
    def peak_mb(self) -> float | None:
        """The actual peak (with fragments) where printed, else the used peak: what the card held at most."""
        return self.actual_peak_mb if self.actual_peak_mb is not None else self.used_peak_mb

    @property
    def headroom_mb(self) -> float | None:
        """MindSpore's limit less the peak; None when either is not printed."""
        if self.limit_mb is None or self.peak_mb is None:
            return None
        return self.limit_mb - self.peak_mb

    @property
    def headroom(self) -> float | None:
        """The headroom as a fraction of the limit."""
        h = self.headroom_mb
        return None if h is None or not self.limit_mb else h / self.limit_mb

    def as_dict(self) -> dict:
        out = {"rank": self.rank, "path": self.path, "job": self.job, "jobs": self.jobs}
        out |= {k: getattr(self, k) for k in FIGURES}
        return out | {"peak_mb": self.peak_mb, "headroom_mb": self.headroom_mb, "headroom": self.headroom, "unit": "MiB"}


@dataclass
class RunMemory:
    """A run's memory as its ranks reported it: a :class:`RankMemory` a rank, and the ranks whose logs hold no report."""

    run: str
    ranks: list
    missing: list = field(default_factory=list)  # ranks with a log and no report
    earlier: list = field(default_factory=list)  # earlier jobs' reports in the same logs (kept, not judged)

    @property
    def highest(self) -> RankMemory | None:
        known = [r for r in self.ranks if r.peak_mb is not None]
        return max(known, key=lambda r: (r.peak_mb, -r.rank)) if known else None

    def checks(self, rules: Rules = DEFAULT_RULES) -> list[Check]:
        """The ``memory`` check: headroom to MindSpore's limit, imbalance between ranks, ranks without a report."""
        warnings = self._close_to_limit(rules) + self._imbalance(rules) + self._unknown()
        top = self.highest
        if top is None:
            return [Check("memory", WARN, "; ".join(warnings) or "no rank's report printed a peak", outcome="unknown")]
        of = f" of MindSpore's {_gib(top.limit_mb)} ({top.headroom:.1%} left)" if top.headroom is not None else " (MindSpore's limit not printed)"
        head = f"highest peak {_gib(top.peak_mb)} on {ranks_words([top.rank])}{of}; {count(len(self.ranks), 'rank')} reported"
        if warnings:
            return [Check("memory", WARN, "; ".join(warnings) + f" ({head})", outcome="warn")]
        return [Check("memory", PASS, head, outcome="ok")]

    def _close_to_limit(self, rules: Rules) -> list[str]:
        near = [r for r in self.ranks if r.headroom is not None and r.headroom < rules.memory_headroom]
        if not near:
            return []
        worst = min(near, key=lambda r: r.headroom)
        return [
            f"{ranks_words([r.rank for r in near])} within {rules.memory_headroom:.0%} of MindSpore's limit "
            f"({ranks_words([worst.rank])}: peak {worst.peak_mb:,.0f} MiB of {worst.limit_mb:,.0f} MiB, {worst.headroom:.1%} left)"
        ]

    def _imbalance(self, rules: Rules) -> list[str]:
        known = [r for r in self.ranks if r.peak_mb]
        if len(known) < 2:
            return []
        lo = min(r.peak_mb for r in known)
        hi = max(r.peak_mb for r in known)
        if hi <= lo * (1 + rules.memory_imbalance):
            return []
        high = [r.rank for r in known if r.peak_mb > lo * (1 + rules.memory_imbalance)]
        low = [r.rank for r in known if r.peak_mb <= lo * (1 + rules.memory_imbalance)]
        return [
            f"peaks differ by {hi / lo - 1:.0%} (over {rules.memory_imbalance:.0%}): {ranks_words(high)} up to {_gib(hi)}, "
            f"{ranks_words(low)} from {_gib(lo)} (a stage-to-stage imbalance where ranks are pipeline stages)"
        ]

    def _unknown(self) -> list[str]:
        out = []
        if self.missing:
            out.append(f"{ranks_words(self.missing)}: no memory report in the log (headroom unknown, not counted as 0)")
        nopeak = [r.rank for r in self.ranks if r.peak_mb is None]
        if nopeak:
            out.append(f"{ranks_words(nopeak)}: the report prints no peak (cut short?)")
        return out

    def per_rank(self, limit: int = 16) -> str:
        """Each rank's peak and headroom in words (``rank 0 56.1 GiB (1.3% left), ...``), the first *limit* ranks by peak."""
        shown = sorted(self.ranks, key=lambda r: (-(r.peak_mb or 0), r.rank))
        words = []
        for r in shown[:limit]:
            peak = "no peak" if r.peak_mb is None else _gib(r.peak_mb)
            left = "" if r.headroom is None else f" ({r.headroom:.1%} left)"
            words.append(f"rank {r.rank} {peak}{left}")
        more = f", +{len(shown) - limit:,} more (JSON has each)" if len(shown) > limit else ""
        return ", ".join(words) + more

    def as_dict(self) -> dict:
        top = self.highest
        return {
            "run": self.run,
            "ranks": [r.as_dict() for r in sorted(self.ranks, key=lambda r: r.rank)],
            "missing_ranks": list(self.missing),
            "highest_rank": top.rank if top else None,
            "earlier_jobs": [r.as_dict() for r in self.earlier],
            "unit": "MiB",
        }


def _rank_of(rows: list[dict]) -> tuple[RankMemory, list[RankMemory]]:
    """One rank's report from its logs' rows: the last job of the file whose last job printed most; the others earlier."""

    def mem(row: dict, jobs: int) -> RankMemory:
        return RankMemory(row["rank"], row["path"], row["job"], *(row.get(k) for k in FIGURES), jobs=jobs)

    by_path: dict = {}
    for row in rows:
        by_path.setdefault(row["path"], []).append(row)
    lasts = []
    earlier = []
    for mine in by_path.values():
        mine.sort(key=lambda r: r["job"])
        lasts.append(mem(mine[-1], len(mine)))
        earlier += [mem(r, len(mine)) for r in mine[:-1]]
    lasts.sort(key=lambda m: -sum(getattr(m, k) is not None for k in FIGURES))
    return lasts[0], earlier


def run_memory(result: ReadResult, run: str) -> RunMemory | None:
    """*run*'s memory as its ranks' logs report it; None when no log of the run holds a report."""
    rows = memory_rows(result, run)
    if not rows:
        return None
    by_rank: dict = {}
    for row in rows:
        by_rank.setdefault(row["rank"], []).append(row)
    ranks, earlier = [], []
    for rank in sorted(by_rank):
        mine, before = _rank_of(by_rank[rank])
        ranks.append(mine)
        earlier += before
    logs = {f["rank"] for f in result.files if f.get("run") == run and f.get("kind") == "log" and f.get("rank", -1) >= 0}
    return RunMemory(run, ranks, sorted(logs - set(by_rank)), earlier)


def memory_of(result: ReadResult) -> dict:
    """``run -> RunMemory`` for every run of *result* whose logs hold a memory report."""
    runs = sorted({row["run"] for row in result.memory})
    return {run: mem for run in runs if (mem := run_memory(result, run)) is not None}


def memory_check(result: ReadResult, run: str, rules: Rules = DEFAULT_RULES) -> list[Check]:
    """The ``memory`` check of *run* (none when its logs hold no memory report)."""
    mem = run_memory(result, run)
    return [] if mem is None else mem.checks(rules)


__all__ = ["RankMemory", "RunMemory", "memory_check", "memory_of", "ranks_words", "run_memory"]
