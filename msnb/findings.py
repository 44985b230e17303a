"""Findings: a fact worth telling, how bad it is, and its fix.

One type shared by the doctor (environment and kernels), the config linter and
the judge's reports.  ``error`` blocks (commands exit 1), ``warning`` deserves
attention, ``info`` is context.
"""

from __future__ import annotations

from dataclasses import dataclass

from .status import ERROR, INFO, WARNING, Severity  # noqa: F401  (spelled in msnb.status; imported from here by the finders)


@dataclass
class Finding:
    """One finding: ``rule`` is a stable id (``protobuf-too-new``), ``key`` the config key or object it is about."""

    rule: str
    severity: Severity
    message: str
    fix: str = ""
    key: str = ""

    def as_dict(self) -> dict:
        return {"rule": self.rule, "severity": str(self.severity), "message": self.message, "fix": self.fix, "key": self.key}

    def __str__(self) -> str:
        where = f"{self.key}: " if self.key else ""
        return f"{self.severity}: {where}{self.message} [{self.rule}]"
