"""Figures from msnb's tables: scalar panels, histograms, step-time distribution,
rank divergence flags, and the live view used while a job runs."""

from .divergence import RankFlag, rank_divergence
from .downsample import m4
from .histograms import plot_histograms, plot_step_time
from .live import LiveView, in_notebook, status_line
from .render import figure_png, show_figure
from .scalars import PlotReport, plot_scalars, read_for_plot, resolve_tags
from .smoothing import ema
from .tail import tail

__all__ = [
    "plot_scalars",
    "PlotReport",
    "read_for_plot",
    "resolve_tags",
    "plot_histograms",
    "plot_step_time",
    "rank_divergence",
    "RankFlag",
    "figure_png",
    "show_figure",
    "LiveView",
    "in_notebook",
    "status_line",
    "tail",
    "ema",
    "m4",
]
