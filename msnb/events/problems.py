"""What a reader reports instead of raising: one list of problem kinds, each with its usual severity.

Damage in data is news, not an error: a crashed job leaves torn records and
half-written lines, and the reader's job is to keep every intact record and
say exactly what it skipped and where.  So problems are values
(``ReadResult.problems``), their kinds a closed vocabulary a caller can match
on, and their severities the same :class:`msnb.findings.Severity` doctor and
lint use.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..findings import Severity
from .s3 import shown


class ProblemKind(StrEnum):
    """Every kind of problem a reader reports.

    (A rank or device id too large for int64 in a file or directory name is
    not a problem: that name simply names no rank.)

    Damage where bytes were skipped (see ``ReadResult.skipped``):

    - ``truncated``: the file ends inside a record (a job still writing, or killed mid-record).
    - ``crc``: a record whose header checks but whose payload checksum fails; skipped.
    - ``torn``: a record whose header checks but whose payload was cut short by the next record (a writer
      died mid-record and another write followed); the span up to the next intact record is skipped.
    - ``header``: bytes that are not a record header (wiped, preallocated or overwritten space) up to the next intact record.
    - ``decode``: a record whose checksums hold but whose payload is not the message it should be.

    About files and paths:

    - ``empty``: a zero-length file.
    - ``foreign``: a file that holds no intact record or no recognised log line.
    - ``unreadable``: the operating system refused to open or read it.
    - ``missing``: the path given does not exist.
    - ``replaced``: a followed file was rewritten, recreated or truncated; its earlier rows were dropped and it was read again.
    - ``loop``: a directory symlink leads back to a directory already walked; it was not followed again.
    - ``line``: a log line longer than the parser reads; only its start was parsed.
    - ``repaired``: rows a writer is known to write wrongly, read as it meant them (msprobe 26.2.0's optimizer-state
      rows one column short); said once per file, nothing skipped.
    - ``copy``: a series another writer of the same job keeps too (``train.log`` beside ``info.log``): read once,
      from the writer that keeps it most fully; a copy that differs is kept apart under its writer's name
      (:mod:`msnb.events.identity`).

    About values:

    - ``unit``: values read as printed by a release known to print them in a wrong unit (mindformers 1.9's
      dynamic-graph throughput, 1000 times too small); said once per file and read, naming the release, never rescaled.
    - ``not_read``: a value msnb recognised and did not read: one it has no table for (audio, a
      ``custom_scalars`` layout), or a logged field that is not one number (``global_norm: [1 31049]``).
      Reported once per tag (or field) and file, with the first place it was seen; never guessed at.
    """

    TRUNCATED = "truncated"
    CRC = "crc"
    TORN = "torn"
    HEADER = "header"
    DECODE = "decode"
    EMPTY = "empty"
    FOREIGN = "foreign"
    UNREADABLE = "unreadable"
    MISSING = "missing"
    REPLACED = "replaced"
    LOOP = "loop"
    LINE = "line"
    REPAIRED = "repaired"
    COPY = "copy"
    NOT_READ = "not_read"
    UNIT = "unit"


SKIPPED_KINDS = frozenset({ProblemKind.TRUNCATED, ProblemKind.CRC, ProblemKind.TORN, ProblemKind.HEADER, ProblemKind.DECODE})
"""Kinds that mean records (or bytes that may have held records) were skipped."""


@dataclass
class Problem:
    """Something skipped or suspicious, with enough detail to find it on disk.

    Attributes:
        path: the file (or directory) concerned.
        offset: byte offset in the file where the skipped span or the damage starts; None when not about bytes.
        kind: a :class:`ProblemKind` (a ``str``, so ``kind == "crc"`` also works).
        message: one sentence for a person.
        severity: a :class:`msnb.findings.Severity`.
    """

    path: str
    offset: int | None
    kind: ProblemKind
    message: str
    severity: Severity = Severity.WARNING

    def __post_init__(self):
        self.path = shown(self.path)  # a file of a mirrored bucket is named by its URL
        self.kind = ProblemKind(self.kind)
        self.severity = Severity(self.severity)

    def __str__(self) -> str:
        where = f"{self.path}" + (f" at byte {self.offset}" if self.offset is not None else "")
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        """Plain JSON-ready fields (kind and severity as their string values)."""
        return {"path": self.path, "offset": self.offset, "kind": str(self.kind), "message": self.message, "severity": str(self.severity)}


class SaidOnce:
    """The problems of repeated walks, each kept once: a symlink loop or a locked folder is news at the first poll only.

    A watch walks its tree at every poll and finds the same loop each time; whoever polls (the Follower, the team
    panel's base walk) keeps one of these instead of its own bookkeeping.
    """

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set = set()

    def add(self, found) -> bool:
        """Keep the problems of *found* not said before (by path and kind); True when there was any."""
        new = False
        for p in found:
            if (p.path, p.kind) not in self._seen:
                self._seen.add((p.path, p.kind))
                self.problems.append(p)
                new = True
        return new


def grouped(problems) -> list[str]:
    """Problems as lines for a person: one line per kind and message, the files that share it counted, not listed.

    A folder of msprobe files repaired alike says so once with "(and the same in 59 more files)", not 60 times.

    Args:
        problems: :class:`Problem` s, in reading order.

    Returns:
        ``"<severity>: <problem>"`` lines, in the order each first appears.
    """
    first: dict = {}
    for p in problems:
        key = (str(p.severity), str(p.kind), p.message)
        if key in first:
            first[key][1] += 1
        else:
            first[key] = [p, 0]
    out = []
    for p, more in first.values():
        tail = f" (and the same in {more:,} more)" if more else ""
        out.append(f"{p.severity}: {p}{tail}")
    return out
