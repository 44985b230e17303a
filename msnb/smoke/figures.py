"""The figures a smoke run ends with, drawn from the files on disk."""

from __future__ import annotations

import numpy as np

from ..events.tables import ScalarTable


def smoke_figures(summary_read, times: dict):
    """Loss, learning rate and step time (and histograms when collected), from the files on disk."""
    from ..plot import plot_histograms, plot_scalars

    tables = [summary_read.scalars]
    for rank, (steps, ms, _collected, walls) in times.items():
        n = steps.size
        tables.append(
            ScalarTable(
                run=np.full(n, ".", dtype=object), rank=np.full(n, rank), tag=np.full(n, "step_time_ms", dtype=object), step=steps, wall_time=walls, value=ms
            )
        )
    scalars = ScalarTable.concat(tables)
    figure = hist_figure = None
    if len(scalars):
        tags = [t for t in ("loss/auto", "lr", "step_time_ms") if t in set(scalars.tags())] or None
        several = len(set(scalars.rank.tolist()) - {-1}) > 1
        report = plot_scalars(scalars, tags=tags, ranks=several, label_for_run=lambda run: "smoke" if run == "." else run)
        figure = report.figure
    if len(summary_read.histograms):
        hist_figure = plot_histograms(summary_read.histograms)
    return figure, hist_figure
