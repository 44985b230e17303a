"""The report's precision-alignment section (``msnb report --baseline PATH``): each run judged against the baseline.

What ``msnb compare`` prints, as a table, with its figure; the comparison is
:func:`msnb.analysis.compare.compare` itself, nothing is judged anew here.
"""

from __future__ import annotations

from ..analysis.compare import compare
from ..errors import NothingReadable
from ..plot.compare import plot_compare
from ..plot.render import describe_figure, figure_png
from ..status import status_word
from ..words import count
from . import page
from .page import esc, note, table

MAX_COMPARED = 4  # paths compared with the baseline, each with its figure


def alignment(baseline, candidates, *, verify: bool = True, dpi: int = 100) -> str:
    """The section's HTML: per candidate path, the checks with value and limit, where it left the baseline, the figure.

    Args:
        baseline: the baseline's path (checked to exist by the caller).
        candidates: the report's paths, or its ``ReadResult``.
        verify: check CRCs while reading.
        dpi: resolution of the figures.

    Returns:
        The section's HTML.
    """
    items = candidates if isinstance(candidates, list) else [candidates]
    parts = []
    for candidate in items[:MAX_COMPARED]:
        name = str(candidate) if not hasattr(candidate, "scalars") else "the runs read"
        try:
            result = compare(baseline, candidate, verify=verify)
        except NothingReadable as exc:
            parts.append(f'<h3 class="run">{page.status("NOT COMPARED")} <code>{esc(name)}</code></h3><p>{esc(exc)}</p>')
            continue
        word = "PASS" if result.passed else "FAIL"
        parts.append(
            f'<h3 class="run">{page.status(word)} <code>{esc(name)}</code> against <code>{esc(str(baseline))}</code>: '
            f"{count(result.common_steps, 'common step', thousands=True)}, candidate as {esc(result.ranks.get('candidate'))}</h3>"
        )
        rows = [(page.status(status_word(c.status)), c.name, c.detail) for c in result.checks]
        parts.append(table(("status", "check", "detail"), rows, raw_columns=(0,)))
        d = result.first_divergence
        if d is not None:
            parts.append(f"<p>Left the baseline at step {d.step} ({esc(d.tag)}): baseline {esc(d.baseline)}, candidate {esc(d.candidate)}; {esc(d.reason)}</p>")
        for text in result.notes:
            parts.append(note(text))
        figure = plot_compare(result)
        parts.append(
            page.figure(figure_png(figure, dpi=dpi), describe_figure(figure), "the loss of both runs, their relative difference against the tolerance")
        )
    if len(items) > MAX_COMPARED:
        parts.append(note(f"{count(len(items) - MAX_COMPARED, 'more path', thousands=True)} not compared; msnb compare BASELINE PATH compares any one."))
    return "".join(parts)
