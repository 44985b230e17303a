"""``msnb.report``: one HTML file with everything a ticket about a training run needs.

The verdict comes from the judge (:func:`msnb.check`), the figures from
:mod:`msnb.plot`, the config findings from :mod:`msnb.config`, the versions
from the doctor's tables; this module only reads once, asks each of them and
writes the page.  The file stands alone: figures are PNG data URIs, the style
is inline, and there is no script, so it opens the same from a mail, offline,
with JavaScript off, and prints.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..analysis.check import check, read_labelled
from ..config import check_config
from ..config.loader import LoadedConfig
from ..config.monitor_schema import monitor_settings
from ..environment import installed_major
from ..errors import MsnbError, NothingReadable, UsageError
from ..events.objects import local
from ..events.problems import ProblemKind
from ..events.reader import ReadResult
from ..outputs import check_out, write_file
from ..status import BORDER, COLORS, FAIL, PASS, WARN, ResultView, verdict_word
from ..version import __version__
from ..words import count
from . import page, sections
from .compare_section import alignment

DPI = 80  # figures sharp on screen and on paper, a few tens of KB each


@dataclass
class ReportResult(ResultView):
    """What :func:`report` wrote.

    Attributes:
        path: the file written (as given).
        bytes: its size.
        runs: the runs it covers, named as in the report.
        passed: True when every judged run passed, False when one failed, None when nothing could be judged.
        html: the page itself.
        verdict: the judge's :class:`~msnb.analysis.check.CheckResult` (None when nothing could be judged).
    """

    path: str
    bytes: int
    runs: list
    passed: bool | None
    html: str = field(repr=False)
    verdict: object = field(default=None, repr=False)

    def verdict_word(self) -> str:
        """PASSED, FAILED or NOT JUDGED."""
        return "NOT JUDGED" if self.passed is None else verdict_word(self.passed)

    def as_dict(self) -> dict:
        """The JSON document ``msnb report --json`` prints: what was written, and the judge's verdicts and flags as ``msnb check --json`` gives them."""
        judged = self.verdict.as_dict() if self.verdict is not None else {"runs": [], "flags": []}
        return {"out": self.path, "bytes": self.bytes, "runs": self.runs, "passed": self.passed, "verdicts": judged["runs"], "flags": judged["flags"]}

    def _what(self) -> str:
        return f"wrote {self.path} ({self.bytes / 1024:,.0f} KB), {count(len(self.runs), 'run')}: {', '.join(self.runs)}"

    def format_text(self) -> str:
        """``msnb report: wrote r.html (40 KB), 2 runs: a, b; the runs' verdict: FAILED``: the writing succeeded, the verdict is the runs'."""
        return f"msnb report: {self._what()}; the runs' verdict: {self.verdict_word()}"

    def __repr__(self) -> str:
        return f"<ReportResult {self.verdict_word()}: {self.path}, {self.bytes:,} bytes, {count(len(self.runs), 'run')}>"

    def _repr_html_(self) -> str:
        """The report inline: a sandboxed frame holding the page (no script may run in it), under a one-line caption.

        The contents' links are the frame's own (:func:`page.for_frame`): a plain
        ``#anchor`` would load the notebook's URL into the frame.
        """
        color = COLORS[WARN if self.passed is None else PASS if self.passed else FAIL]
        what = self._what().encode("utf-8", "backslashreplace").decode("utf-8")  # run names from folders that are not UTF-8
        caption = f'<p><b>msnb report</b>: {page.esc(what)}; the runs\' verdict: <b style="color:{color}">{self.verdict_word()}</b></p>'
        frame = f'<iframe sandbox="" style="width:100%;height:640px;border:1px solid {BORDER}" srcdoc="{page.esc(page.for_frame(self.html))}"></iframe>'
        return caption + frame


def _refuse_input(out: str, target: str, files: list) -> None:
    """Refuse an *out* that is one of the files read: the report would replace the data it is about."""
    try:
        st = os.stat(target)
    except OSError:
        return  # not there yet: no input can be it
    for f in files:
        try:
            other = os.stat(f["path"])
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise UsageError(f"--out {out} is {f['path']}, one of the files read; name another file for the report")


def _write(out: str, text: str) -> int:
    """Write *text* to *out* by the one output rule (a temporary file renamed over it), so a reader never sees half a report."""
    data = text.encode("utf-8")
    write_file(out, lambda f: f.write(data))
    return len(data)


def _collect_freq(checked_config) -> int | None:
    """The config's ``monitor_config`` collection frequency, when the config has one (so a stride is not called sink mode)."""
    if checked_config is None or not isinstance(checked_config.config.get("monitor_config"), dict):
        return None

    try:
        settings = monitor_settings(LoadedConfig(data=checked_config.config, path=checked_config.path))
    except MsnbError:
        return None
    return settings.collect_freq if "collect_freq" in settings.present else None  # a default is no fact about the run


def _reading(found) -> str:
    """What reading met, for the header: ``2 problems while reading``; a writer's copy read once (``train.log`` beside
    ``info.log``: :attr:`ProblemKind.COPY`) is a note, not a problem."""
    copies = sum(1 for p in found if p.kind == ProblemKind.COPY)
    said = f"{count(len(found) - copies, 'problem')} while reading"
    return said + (f"; {count(copies, 'note')}: a series two writers of one job keep, read once (see Problems while reading)" if copies else "")


def _header(title: str, where: str, result, checked, why_not) -> str:
    written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    counts = ", ".join(f"{len(getattr(result, t)):,} {t}" for t in result.TABLES if len(getattr(result, t)))
    if checked is None:
        line = f"{page.status('NOT JUDGED')}: {page.esc(why_not)}"
    else:
        word, rest = checked.summary()  # the result's fields, never its text parsed back
        line = f"{page.status(word)}: {page.esc(rest)}"
    return (
        f"<h1>{page.esc(title)}</h1>"
        f'<p class="meta">Written {written} by msnb {page.esc(__version__)} from {page.esc(where)}: {count(len(result.files), "file")}, {page.esc(counts)}; '
        f"{_reading(result.problems)}.</p>"
        f'<p class="verdict" id="overall">{line}</p>'
    )


def report(source, *, out, config=None, title: str | None = None, tag: str = "loss", verify: bool = True, dpi: int = DPI, baseline=None) -> ReportResult:
    """Write one self-contained HTML report on the runs under *source*.

    Args:
        source: a path, a list of paths, or a :class:`~msnb.events.ReadResult`.
        out: the HTML file to write (replaced if it exists).
        config: the run's YAML file, resolved and linted in the report (optional).
        title: the page's title (default: ``msnb report: <paths>``).
        tag: the loss tag the judge uses, or its meaning.
        verify: check CRCs while reading.
        dpi: resolution of the embedded figures.
        baseline: a baseline run (see ``msnb compare``): adds a precision-alignment section judging each path against it.

    Returns:
        A :class:`ReportResult` (``path``, ``bytes``, ``runs``, ``passed``).

    Raises:
        UsageError: *out* cannot be written as a file.
        ConfigError: *config* cannot be loaded.
        NothingReadable: nothing could be read from *source*, or no run has the *tag* named (other than the default).
    """
    read_paths = [] if isinstance(source, ReadResult) else ([source] if isinstance(source, (str, os.PathLike)) else list(source))
    target = check_out(out, what="the HTML file", hint="out='report.html' (--out FILE)", inputs=[*read_paths, config, baseline])
    checked_config = None
    if config is not None:
        checked_config = check_config(config, protobuf_major=installed_major("protobuf"))
    if isinstance(source, ReadResult):
        result, where = source, "the data given"
    else:
        paths = [source] if isinstance(source, (str, os.PathLike)) else list(source)
        if not paths:
            raise UsageError("give at least one path to report on")
        result, where = read_labelled(paths, verify), ", ".join(map(str, paths))
    if result.empty:
        first = f" ({result.problems[0]})" if result.problems else ""
        raise NothingReadable(f"nothing readable under {where}{first}")
    _refuse_input(out, target, result.files)
    try:
        checked, why_not = check(result, tag=tag, collect_freq=_collect_freq(checked_config)), None
    except NothingReadable as exc:
        if tag != "loss":
            raise  # a tag the user named that no run has is a mistake, as in msnb check
        checked, why_not = None, str(exc)  # no scalars or no loss: the rest of the report still says what was read

    failed = [r.run for r in checked.runs if not r.passed] if checked is not None else []
    body = [
        ("verdict", "Verdict per run", sections.verdict(checked, why_not)),
        ("scalars", "Scalars", sections.scalars(result, dpi=dpi, first=failed)),
        ("step-time", "Step time", sections.step_time(result, dpi=dpi, first=failed)),
        ("memory", "Memory per rank (MindSpore's report)", sections.memory(checked)),
        ("histograms", "Histograms", sections.histograms(result, dpi=dpi, first=failed)),
        ("config", "Monitoring config", sections.config(checked_config)),
        ("lineage", "Lineage and hyper-parameters", sections.lineage(result, first=failed)),
        ("problems", "Problems while reading", sections.problems(result)),
        ("files", "Files read", sections.files(result)),
        ("environment", "Versions", sections.environment()),
    ]
    if baseline is not None:  # precision alignment (msnb compare): one added section
        if not os.path.exists(local(baseline)) or os.path.realpath(baseline) == target:  # a bucket's prefix: its mirror
            raise UsageError(
                f"--baseline {baseline}: no such file or directory" if not os.path.exists(baseline) else f"--baseline {baseline} is the report's --out"
            )
        body.insert(
            1,
            (
                "alignment",
                "Precision alignment against the baseline",
                alignment(baseline, source if isinstance(source, ReadResult) else paths, verify=verify, dpi=dpi),
            ),
        )
    names = result.runs
    title = title or "msnb report: " + ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    text = page.document(title, _header(title, where, result, checked, why_not), body)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a folder name that is not UTF-8: its bytes shown as \udcff
    size = _write(target, text)
    passed = None if checked is None else checked.passed
    return ReportResult(path=out, bytes=size, runs=result.runs, passed=passed, html=text, verdict=checked)
