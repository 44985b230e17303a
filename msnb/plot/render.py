"""Turning a matplotlib Figure into bytes, without pyplot or an inline backend.

msnb builds ``matplotlib.figure.Figure`` objects directly (no global pyplot
state), which IPython cannot show until a backend registers a formatter; so
msnb renders them itself and displays the PNG.
"""

from __future__ import annotations

import io


def figure_png(figure, dpi: int = 100) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if figure.canvas is None or type(figure.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(figure)  # attach an Agg canvas to a Figure built without pyplot
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def show_figure(figure, dpi: int = 100) -> None:
    """Display *figure* as a PNG in the notebook (works in any kernel, VS Code included)."""
    from IPython.display import Image, display

    display(Image(data=figure_png(figure, dpi=dpi), format="png"))
