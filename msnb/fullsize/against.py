"""msnb's estimate per pipeline stage beside what that stage's ranks really used (``msnb memory RUN.yaml --against DIR``).

The measured side is MindSpore's memory report in the ranks' logs (:mod:`msnb.events.memory_lines`), from a real job
or a DryRun alike.  Ranks map to stages as mindformers lays them out: the pipeline is the outermost dimension of the
device grid, so with ``devices`` cards and ``pipeline_stage`` stages rank ``r`` is in stage ``r // (devices / stages)``.
A stage's measured figure is the highest used peak (without fragments: the estimate counts no fragmentation) of its
ranks; the actual peak (with fragments) is shown beside it.  The error is the estimate less the measured peak, over
the measured peak: positive, msnb counts more than the card held.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analysis.memory import RunMemory, memory_of, ranks_words
from ..errors import NothingReadable
from ..events import read
from .memory import GIB, CardMemory

MIB = 1 << 20


@dataclass
class StageMeasured:
    """One stage: msnb's estimate (bytes) and the highest peaks its ranks reported (MiB, None where none reported)."""

    stage: int
    estimate: int
    ranks: list
    used_peak_mb: float | None
    actual_peak_mb: float | None
    limit_mb: float | None

    @property
    def error(self) -> float | None:
        """(estimate - measured used peak) / measured used peak; None when the stage's ranks reported none."""
        if not self.used_peak_mb:
            return None
        return self.estimate / (self.used_peak_mb * MIB) - 1

    def as_dict(self) -> dict:
        return {
            "stage": self.stage,
            "estimate_bytes": self.estimate,
            "ranks": list(self.ranks),
            "used_peak_mb": self.used_peak_mb,
            "actual_peak_mb": self.actual_peak_mb,
            "limit_mb": self.limit_mb,
            "error": self.error,
        }


@dataclass
class MemoryAgainst:
    """The estimate (:class:`~msnb.fullsize.memory.CardMemory`) and the measured peaks of each stage."""

    estimate: CardMemory
    source: str
    stages: list
    run: str
    unmapped: list = field(default_factory=list)  # ranks outside the layout's cards (or without a rank): not put in a stage
    missing: list = field(default_factory=list)  # ranks with a log but no report

    @property
    def exit_code(self) -> int:
        return self.estimate.exit_code

    def format_text(self) -> str:
        lines = [self.estimate.format_text(), f"  measured in {self.source} (run {self.run}; used peak without fragments, the highest of each stage's ranks):"]
        head = ("stage", "ranks", "estimate GiB", "used peak GiB", "actual peak GiB", "error")
        rows = [head]
        for s in self.stages:
            used = "-" if s.used_peak_mb is None else f"{s.used_peak_mb / 1024:,.1f}"
            actual = "-" if s.actual_peak_mb is None else f"{s.actual_peak_mb / 1024:,.1f}"
            err = "not measured" if s.error is None else f"{s.error:+.1%}"
            rows.append(
                (
                    str(s.stage),
                    ranks_words(s.ranks).removeprefix("ranks ").removeprefix("rank ") if s.ranks else "-",
                    f"{s.estimate / GIB:,.1f}",
                    used,
                    actual,
                    err,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
        if self.unmapped:
            lines.append(f"  {ranks_words(self.unmapped)}: outside the layout's {self.estimate.layout.devices} cards, put in no stage")
        if self.missing:
            lines.append(f"  {ranks_words(self.missing)}: a log without a memory report (not measured, never 0)")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return self.estimate.as_dict() | {
            "against": {
                "source": self.source,
                "run": self.run,
                "stages": [s.as_dict() for s in self.stages],
                "unmapped_ranks": list(self.unmapped),
                "missing_ranks": list(self.missing),
                "measured": "used peak without fragments, the highest of each stage's ranks (MiB); error = estimate / measured - 1",
            }
        }

    def _repr_html_(self) -> str:
        import html  # deferred: only a notebook shows it

        return f"<pre>{html.escape(self.format_text())}</pre>"


def stage_of(rank: int, devices: int, stages: int) -> int | None:
    """The pipeline stage of *rank* as mindformers lays ranks out (stage-major: ``rank // (devices / stages)``), None outside."""
    if rank < 0 or rank >= devices or stages < 1:
        return None
    return rank // max(1, devices // stages)


def _one_run(found: dict, source) -> tuple[str, RunMemory]:
    if not found:
        raise NothingReadable(
            f"{source}: no rank's log holds MindSpore's memory report ('Used peak memory usage ...', printed at the end of an Ascend job "
            "or a DryRun with GLOG_v=1 or MS_MEMORY_STATISTIC=1): nothing to compare the estimate with"
        )
    if len(found) > 1:  # several jobs under the folder: the one with most ranks reported, the others named
        return max(found.items(), key=lambda kv: (len(kv[1].ranks), kv[0]))
    return next(iter(found.items()))


def against(est: CardMemory, source) -> MemoryAgainst:
    """*est*'s stages beside the peaks the ranks under *source* reported.

    Raises:
        NothingReadable: no log under *source* holds a memory report.
    """
    result = read(source, jobs=True)
    run, mem = _one_run(memory_of(result), source)
    devices, pp = est.layout.devices, est.layout.pp
    by_stage: dict = {}
    unmapped = []
    for r in mem.ranks:
        stage = stage_of(r.rank, devices, pp)
        if stage is None:
            unmapped.append(r.rank)
        else:
            by_stage.setdefault(stage, []).append(r)
    stages = []
    for s in sorted(est.stages, key=lambda s: s.stage):
        mine = by_stage.get(s.stage, [])
        used = [r.used_peak_mb for r in mine if r.used_peak_mb is not None]
        actual = [r.actual_peak_mb for r in mine if r.actual_peak_mb is not None]
        limits = [r.limit_mb for r in mine if r.limit_mb is not None]
        stages.append(StageMeasured(s.stage, s.total, [r.rank for r in mine], max(used, default=None), max(actual, default=None), max(limits, default=None)))
    return MemoryAgainst(est, str(source), stages, run, unmapped, list(mem.missing))


__all__ = ["MemoryAgainst", "StageMeasured", "against", "stage_of"]
