"""The figures a smoke run ends with, drawn from the files on disk.

Each panel uses the richest source of its series (the training log usually
has every step where the summary has every fifth: the same curve the live
view showed), says in the legend which source it is, and still marks a NaN or
Inf that only another source saw.
"""

from __future__ import annotations

import numpy as np

from ...events.tables import ScalarTable
from ...events.tags import resolve
from ...plot import plot_histograms, plot_scalars

PANELS = ("loss", "lr", "step_time")
NAME = "smoke"


def _named(table: ScalarTable, tag: str, run: str) -> ScalarTable:
    """*table*'s rows relabelled as one run and one tag (sources spell the same series differently)."""
    n = len(table)
    return ScalarTable(
        run=np.full(n, run, dtype=object), rank=table.rank, tag=np.full(n, tag, dtype=object), step=table.step, wall_time=table.wall_time, value=table.value
    )


def _sources(summary_read, live_read, times: dict) -> list[tuple[str, ScalarTable]]:
    """(source name, table) for every source of scalars a smoke run leaves."""
    out = [("summary", summary_read.scalars)]
    if live_read is not None and len(live_read.scalars):
        log_runs = {f.get("run") for f in getattr(live_read, "files", []) if f.get("kind") == "log"}
        if log_runs:
            out.append(("training log", live_read.scalars.take(np.flatnonzero(np.isin(live_read.scalars.run, list(log_runs))))))
    steps_tables = []
    for rank, (steps, ms, _collected, walls) in times.items():
        n = steps.size
        steps_tables.append(
            ScalarTable(
                run=np.full(n, ".", dtype=object), rank=np.full(n, rank), tag=np.full(n, "step_time_ms", dtype=object), step=steps, wall_time=walls, value=ms
            )
        )
    if steps_tables:
        out.append(("step timer", ScalarTable.concat(steps_tables)))
    return out


def richest_series(sources, meaning: str):
    """The series for *meaning* from the source with the most points, plus non-finite points only other sources saw.

    Args:
        sources: (source name, ScalarTable) pairs.
        meaning: a tag meaning (``loss``, ``lr``, ``step_time``) or a real tag.

    Returns:
        (table, tag, source name), or None when no source has it.  The table's
        run column reads ``smoke (<source>)`` for the legend.
    """
    found = []
    for name, table in sources:
        tag = resolve(meaning, table.tags()) if len(table) else None
        if tag is not None:
            found.append((name, tag, table.where(tag=tag)))
    if not found:
        return None
    name, tag, best = max(found, key=lambda item: len(item[2]))  # max keeps the first of equals: the summary
    run = f"{NAME} ({name})"
    parts = [_named(best, tag, run)]
    have = set(best.step[~np.isfinite(best.value)].tolist())
    for _name, _tag, other in found:
        if other is best:
            continue
        bad = ~np.isfinite(other.value) & ~np.isin(other.step, list(have))
        if bad.any():
            extra = other.take(np.flatnonzero(bad))
            parts.append(_named(extra, tag, run))
            have |= set(extra.step.tolist())
    return ScalarTable.concat(parts), tag, name


def smoke_figures(summary_read, times: dict, live_read=None):
    """Loss, learning rate and step time (and histograms when collected).

    Args:
        summary_read: the ReadResult of the summary directory.
        times: rank -> (steps, ms, collected, wall times) from the step timer.
        live_read: what the live view followed (the training log and the
            summaries, a ReadResult); its log gives the loss at every step.

    Returns:
        (scalar figure or None, histogram figure or None).
    """
    sources = _sources(summary_read, live_read, times)
    picked = [found for found in (richest_series(sources, m) for m in PANELS) if found is not None]
    figure = hist_figure = None
    if picked:
        scalars = ScalarTable.concat([table for table, _tag, _name in picked])
        several = len(set(scalars.rank.tolist()) - {-1}) > 1
        # each source is a run of its own panel: the others are not "missing" from it
        report = plot_scalars(scalars, tags=[tag for _table, tag, _name in picked], ranks=several, note_missing=False)
        figure = report.figure
    if len(summary_read.histograms):
        hist_figure = plot_histograms(summary_read.histograms)
    return figure, hist_figure
