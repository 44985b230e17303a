"""Runs for the report tests, written with tensorboardX in mindformers' layout, and a parser of the pages.

The curves are the judge scenarios' own (tests/scenarios/catalog.py), so what
the report must say about each run is the catalog's expectation, not a number
written into the test.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from tests.scenarios.catalog import SCENARIOS

HOSTILE_RUN = 'evil"&<>run'
HOSTILE_TAG = "<script>alert(1)</script>"
HOSTILE_HIST = "<img src=x onerror=alert(2)>"
HOSTILE_MATH = "$\\notacommand{$"  # TeX to matplotlib, unless drawn as written
HOSTILE_TEXT = "</pre><script>alert(3)</script><a href='https://example.com/x'>"


def write_scenario(root: Path, name: str) -> Path:
    """Write scenario *name*'s curves as ``root/name/tensorboard/rank_N`` (loss and a learning rate); returns its directory."""
    from tensorboardX import SummaryWriter

    _writer, make, _expect = SCENARIOS[name]
    for rank, segments in make().items():
        for i, (steps, values) in enumerate(segments):
            w = SummaryWriter(str(root / name / "tensorboard" / f"rank_{rank}"), filename_suffix=f".part{i}")
            for s, v in zip(steps.tolist(), values.tolist()):
                w.add_scalar("loss", v, s)
                w.add_scalar("learning-rate", 1e-4, s)
            w.close()
    return root / name


def write_hostile(root: Path) -> Path:
    """A run whose directory, tags and logged text are HTML: every one of them must reach the page as text.

    tensorboardX's ``add_scalar`` would clean the tags; a summary built by hand and given to its
    file writer keeps them, as another writer could.
    """
    from tensorboardX import SummaryWriter
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.summary import histogram

    rng = np.random.default_rng(0)
    w = SummaryWriter(str(root / HOSTILE_RUN / "rank_0"))
    raw = w._get_file_writer()
    for s in range(1, 61):
        w.add_scalar("loss", 3.0 / np.sqrt(s) * np.exp(0.05 * rng.standard_normal()), s)
        raw.add_summary(Summary(value=[Summary.Value(tag=HOSTILE_TAG, simple_value=float(s)), Summary.Value(tag=HOSTILE_MATH, simple_value=-float(s))]), s)
        if s % 20 == 0:
            hist = histogram("h", rng.standard_normal(500), bins="auto")
            hist.value[0].tag = HOSTILE_HIST
            raw.add_summary(hist, s)
    w.add_text("config", HOSTILE_TEXT, 1)
    w.close()
    return root / HOSTILE_RUN


def write_wide(root: Path, tags: int = 300, steps: int = 12) -> Path:
    """A run with many scalar tags (as mindformers' per-parameter norms are): the page must stay bounded."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(root / "wide" / "rank_0"))
    for s in range(1, steps + 1):
        w.add_scalar("loss", 2.0 / s, s)
        for t in range(tags):
            w.add_scalar(f"local_norm/layer{t:03d}.weight", 1.0 + t + 0.01 * s, s)
    w.close()
    return root / "wide"


class Page(HTMLParser):
    """What a reader of the page gets: every element with its attributes, the text of each section, the run headings."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text: dict[str, list[str]] = {}
        self.run_headings: list[str] = []
        self._section = "header"
        self._heading: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "section":
            self._section = attrs.get("id", "")
        if tag == "h3" and attrs.get("class") == "run":
            self._heading = []

    def handle_endtag(self, tag):
        if tag == "h3" and self._heading is not None:
            self.run_headings.append("".join(self._heading))
            self._heading = None

    def handle_data(self, data):
        self.text.setdefault(self._section, []).append(data)
        if self._heading is not None:
            self._heading.append(data)

    def section(self, anchor: str) -> str:
        return " ".join(self.text.get(anchor, []))

    def tags(self, name: str) -> list[dict]:
        return [attrs for tag, attrs in self.elements if tag == name]


def write_many(root: Path, runs: int, bad: int) -> Path:
    """*runs* small runs side by side (``many/run_NN/rank_0``); run number *bad*'s loss turns NaN half-way."""
    from tensorboardX import SummaryWriter

    for i in range(runs):
        w = SummaryWriter(str(root / "many" / f"run_{i:02d}" / "rank_0"))
        for s in range(1, 41):
            w.add_scalar("loss", float("nan") if i == bad and s > 20 else 2.0 / s + i * 1e-3, s)  # runs of their own (one job's copies count once)
        w.close()
    return root / "many"
