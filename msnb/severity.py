"""Severities and findings, shared by the doctor, the config linter and the judge.

A finding is a fact worth telling with its fix; ``error`` blocks (exit 1),
``warning`` deserves attention, ``info`` is context.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
