"""Figures from msnb's tables: scalar panels with the judge's flags, histograms, step-time distribution,
and the live view used while a job runs."""

from .downsample import m4
from .histograms import plot_histograms, plot_step_time
from .live import LiveView, status_line
from .render import figure_png, in_notebook, show_figure
from .scalars import PlotReport, plot_scalars, resolve_tags
from .tail import tail

__all__ = [
    "plot_scalars",
    "PlotReport",
    "resolve_tags",
    "plot_histograms",
    "plot_step_time",
    "figure_png",
    "show_figure",
    "LiveView",
    "in_notebook",
    "status_line",
    "tail",
    "m4",
]
