"""The per-stage estimate as a picture: stacked bars of weights, gradients, optimizer state and activations a card of each
stage holds, against what MindSpore may use of the card, with the measured peaks as markers (``--against``)."""

from __future__ import annotations

from ..outputs import figure_out, write_file
from ..plot.render import figure_png, in_notebook, show_figure
from .memory import GIB

PARTS = (
    ("weights", "weights", "#4C72B0"),
    ("gradients", "gradients", "#55A868"),
    ("optimizer", "optimizer state", "#C44E52"),
    ("activations", "activations", "#8172B2"),
    ("step_extra", "step copy of the gradients", "#937860"),
)


def _estimate_and_measured(est):
    """``(CardMemory, stages measured or None)`` of a CardMemory or a MemoryAgainst."""
    measured = getattr(est, "stages", None) if hasattr(est, "estimate") else None
    return (est.estimate if hasattr(est, "estimate") else est), measured


def _limit_line(ax, card) -> None:
    if card.usable_gb is not None:
        ax.axhline(card.usable_gb, color="black", linestyle="--", linewidth=1.2, label=f"MindSpore may use {card.usable_gb:g} GiB")
    if card.card_gb is not None and card.card_gb != card.usable_gb:
        ax.axhline(card.card_gb, color="grey", linestyle=":", linewidth=1.2, label=f"card {card.card_gb:g} GiB")


def _measured_markers(ax, measured) -> None:
    xs = [s.stage for s in measured if s.used_peak_mb is not None]
    if xs:
        ax.scatter(
            xs, [s.used_peak_mb / 1024 for s in measured if s.used_peak_mb is not None], marker="D", s=60, color="black", zorder=5, label="measured used peak"
        )
    xa = [s.stage for s in measured if s.actual_peak_mb is not None]
    if xa:
        ax.scatter(
            xa,
            [s.actual_peak_mb / 1024 for s in measured if s.actual_peak_mb is not None],
            marker="_",
            s=400,
            color="#DD8452",
            linewidths=3,
            zorder=5,
            label="measured actual peak",
        )
    for s in measured:
        if s.error is not None:
            ax.annotate(f"{s.error:+.0%}", (s.stage, s.used_peak_mb / 1024), textcoords="offset points", xytext=(12, -4), fontsize=8)


def memory_figure(est):
    """A matplotlib Figure of *est* (a :class:`~msnb.fullsize.memory.CardMemory`, or a ``MemoryAgainst`` with measured peaks)."""
    from matplotlib.figure import Figure  # deferred: matplotlib, until a figure is drawn

    card, measured = _estimate_and_measured(est)
    stages = sorted(card.stages, key=lambda s: s.stage)
    fig = Figure(figsize=(max(8.0, 0.6 * len(stages) + 5), 4.8))
    ax = fig.add_subplot(1, 1, 1)
    bottom = [0.0] * len(stages)
    xs = [s.stage for s in stages]
    for attr, label, color in PARTS:
        heights = [getattr(s, attr) / GIB for s in stages]
        if attr == "step_extra" and not any(heights):  # no stage's peak is its optimizer step: no bar, no legend entry
            continue
        ax.bar(xs, heights, bottom=bottom, color=color, label=label, width=0.7)
        bottom = [b + h for b, h in zip(bottom, heights)]
    _limit_line(ax, card)
    if measured:
        _measured_markers(ax, measured)
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel("GiB a card")
    ax.set_xticks(xs)
    name = card.config.rsplit("/", 1)[-1]
    ax.set_title(f"msnb memory: {name}\n{card.layout.words()}", fontsize=9)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def save_memory_figure(est, out, dpi: int = 100) -> str:
    """Draw *est* into *out* (checked as every ``--out`` is, written whole); the path written."""
    path = figure_out(out, dpi)
    fig = memory_figure(est)
    fmt = path.rsplit(".", 1)[-1].lower()
    if fmt == "png":
        data = figure_png(fig, dpi)
        write_file(path, lambda f: f.write(data))
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # deferred: matplotlib

        FigureCanvasAgg(fig)
        write_file(path, lambda f: fig.savefig(f, format=fmt, dpi=dpi))
    return path


def show_memory_figure(est, dpi: int = 100) -> None:
    """Show *est*'s picture inline in a notebook (nothing outside one)."""
    if in_notebook():
        show_figure(memory_figure(est), dpi)


__all__ = ["memory_figure", "save_memory_figure", "show_memory_figure"]
