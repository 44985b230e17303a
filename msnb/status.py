"""How msnb shows a judgement, written once: the status words, their colours, and the protocol every result follows.

A check's status is one of :data:`PASS`, :data:`WARN`, :data:`FAIL` and
:data:`SKIP` (not judged) (the judge's words); people read it as ``PASS``/``WARN``/``FAIL`` and a whole
verdict as ``PASSED``/``FAILED``.  The text, JSON, HTML and notebook views of
every result (``msnb check``, compare, smoke, runs, health, doctor, report,
plot) take their words and colours from here, so a verdict reads and looks the
same wherever it is shown.  Nothing here imports msnb: the judge below and the
views above both need it.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Protocol, runtime_checkable

PASS, WARN, FAIL = "pass", "warn", "fail"
SKIP = "skip"
"""A check that was not judged (too few points for the rule): neither a pass nor a warning, and it fails nothing."""
STATUSES = (PASS, WARN, FAIL, SKIP)


class Severity(StrEnum):
    """How bad a finding or a reading problem is: ``error`` blocks, ``warning`` deserves attention, ``info`` is context."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
SEVERITY_STATUS = {ERROR: FAIL, WARNING: WARN}  # a severity shown in a status's colour (info: none)

# GitHub's Primer colours, readable on white as text: green, amber, red
COLORS = {PASS: "#1a7f37", WARN: "#9a6700", FAIL: "#cf222e", SKIP: "#6e7781"}  # and grey: not judged
LIGHT_COLORS = {"green": COLORS[PASS], "amber": "#bf8700", "red": COLORS[FAIL]}  # filled dots: a brighter amber than amber text
MUTED = "#59636e"  # notes, captions
IDLE = "#6e7781"  # an idle run in the team panel
BORDER = "#d0d7de"


def status_word(status: str) -> str:
    """PASS / WARN / FAIL / SKIP (any other status in capitals)."""
    return {PASS: "PASS", WARN: "WARN", FAIL: "FAIL", SKIP: "SKIP"}.get(status, status.upper())


def status_color(status: str, default: str = "inherit") -> str:
    """The CSS colour of a check's *status* (*default* for a status that is none of pass/warn/fail)."""
    return COLORS.get(status, default)


def verdict_word(passed: bool) -> str:
    """PASSED or FAILED: a whole verdict."""
    return "PASSED" if passed else "FAILED"


def verdict_status(passed: bool | None, warnings: int = 0) -> str:
    """The status a whole verdict is shown in: FAIL when it failed (or was not judged), WARN when it passed with warnings, else PASS.

    One answer for every place a verdict is coloured (the smoke's header, its figure's title, the report's caption),
    so "PASSED with 2 warnings" is amber wherever it is written.
    """
    if not passed:
        return FAIL
    return WARN if warnings else PASS


def status_css() -> str:
    """The ``.pass``/``.warn``/``.fail`` CSS classes of the HTML report."""
    return " ".join(f".{s} {{ color: {c}; font-weight: bold; }}" for s, c in COLORS.items())


@runtime_checkable
class Result(Protocol):
    """What every result of an msnb command offers, so the CLI, the magics and a notebook treat them alike."""

    @property
    def passed(self) -> bool | None: ...

    @property
    def exit_code(self) -> int: ...

    def as_dict(self) -> dict: ...

    def format_text(self) -> str: ...


class ResultView:
    """The part of :class:`Result` derived from ``passed`` and ``as_dict()``, written once.

    A class supplies ``passed``, ``as_dict()`` and ``format_text()`` (and its
    own ``_repr_html_`` where it has a notebook view); this adds the exit code
    the CLI returns and the JSON it prints.
    """

    @property
    def exit_code(self) -> int:
        """What the command returns: 0 passed (warnings allowed), 1 failed or not judged."""
        return 0 if self.passed else 1

    def to_json(self, **extra) -> str:
        """``as_dict()`` (with *extra* keys, such as the file written) as the indented JSON the CLI prints."""
        return json.dumps({**self.as_dict(), **extra}, indent=2)
