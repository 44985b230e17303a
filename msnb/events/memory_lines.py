"""MindSpore's memory report in a rank's log: the card's size, MindSpore's limit and the two peaks.

At the end of a job on Ascend (``GLOG_v=1``, or ``MS_MEMORY_STATISTIC=1``) and at the end of a DryRun
(``MS_SIMULATION_LEVEL=1``) MindSpore prints, per rank, its Ascend memory adapter's statistics (``DevMemStatistics``,
one log call whose lines follow a glog prefix, or each under its own)::

    [INFO] DEVICE(4001,ffff9c2b1120,python):2026-12-06-10:41:22.123.456 [mindspore/ccsrc/...:210] DeInitialize]
    Device MOC memory size: 62420M                       (the card; older releases print "Device HBM memory size")
    MindSpore Used memory size: 58178M                   (what MindSpore may use of it: context.max_device_memory)
    MindSpore memory base address: 0xffffe9dc1407
    Used peak memory usage (without fragments): 55405M
    Actual peak memory usage (with fragments): 57400M

``M`` is MindSpore's megabyte, ``1 << 20`` bytes (its ``kMBToByte``); ``G`` is read as ``1 << 30``.  Figures are kept
in MiB, as printed.

Jobs: a log may hold several (``nohup.out`` appended to, a worker log of a restarted job).  A report belongs to the
job of the line before it unless the glog prefix names another process, or the job already reported a peak and
training lines came since (a peak is printed when a process ends).  Within a job the last report counts: a figure
printed again starts a new report, and the earlier one's figures go.

Lines are found by their literal names (``str.find``) and a value is read by one bounded pattern: linear in the line.
A value that is no size (negative, a word, more than :data:`MAX_MB`) is refused and said (:meth:`MemoryLines.take_problems`),
never read as 0; a figure not printed is None, never 0.
"""

from __future__ import annotations

import re

# the printed names, and the field each fills
NAMES = {
    "Device MOC memory size": "device_mb",
    "Device HBM memory size": "device_mb",
    "MindSpore Used memory size": "limit_mb",
    "Used peak memory usage (without fragments)": "used_peak_mb",
    "Actual peak memory usage (with fragments)": "actual_peak_mb",
}
FIELDS = ("device_mb", "limit_mb", "used_peak_mb", "actual_peak_mb")
PEAKS = ("used_peak_mb", "actual_peak_mb")
MARKERS = (b" memory size:", b"peak memory usage (")  # what each of the lines holds (the layout table's markers)
MAX_MB = 16 << 20  # 16 TiB in MiB: more than any card holds; a larger figure is no card's (a damaged line)
_VALUE = re.compile(r"(\d{1,12})(?:\.(\d{1,6}))?[ ]?([MG])B?")  # 62420M, 61G, 1.5G, 62420 MB
_GLOG = re.compile(r"\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|EXCEPTION)\] [A-Za-z_]{1,32}\((\d{1,10}),")
_KEPT_PROBLEMS = 16  # refused values said one by one, the rest counted


def glog_pid(line: str) -> int | None:
    """The process id of a glog prefix at the start of *line* (``[INFO] DEVICE(4001,ffff...,python):...``), or None."""
    m = _GLOG.match(line, 0, 96) if line.startswith("[") else None
    return int(m.group(1)) if m else None


def size_mb(text: str) -> float | None:
    """A printed size (``62420M``, ``61G``, ``1.5G``) in MiB, or None when it is no size msnb takes (negative, a word,
    more than :data:`MAX_MB`)."""
    text = text.strip()
    m = _VALUE.match(text)
    if m is None or text[m.end() : m.end() + 1].isalnum() or text[m.end() : m.end() + 1] in (".", "_"):
        return None
    value = float(f"{m.group(1)}.{m.group(2) or 0}")
    value *= 1024 if m.group(3) == "G" else 1
    return value if value <= MAX_MB else None


class MemoryLines:
    """The memory reports of one log file, job by job (see the module's docstring); fed one line at a time."""

    def __init__(self):
        self.jobs: list[dict] = []  # each: job (0, 1, ...), pid, line (of its last figure), and the FIELDS (None: not printed)
        self.changed: set = set()  # jobs whose figures changed since the last take_rows()
        self.training_mark = None  # the parser's training-line count at the last figure
        self.refused = 0
        self.problems: list[str] = []

    def line(self, line: str, number: int, prev: str, training_lines: int) -> bool:
        """Read one line; True when it is a memory line (a refused value too: it is said).

        Args:
            line: the text line.
            number: its line number in the file (1-based), for what is said about it.
            prev: the line before it (its glog prefix names the process of a report printed in one call).
            training_lines: lines the log parser read as training so far (a peak then training lines: a new job).
        """
        for name, fld in NAMES.items():
            at = line.find(name)
            if at < 0 or line[at + len(name) : at + len(name) + 1] != ":":
                continue
            text = line[at + len(name) + 1 : at + len(name) + 1 + 64]
            value = size_mb(text)
            if value is None:
                self._refuse(number, name, text)
                return True
            pid = glog_pid(line)
            self._figure(fld, value, number, pid if pid is not None else glog_pid(prev), training_lines)
            return True
        return False

    def _refuse(self, number: int, name: str, text: str) -> None:
        self.refused += 1
        if len(self.problems) < _KEPT_PROBLEMS:
            self.problems.append(
                f"line {number:,}: {name}: {text.strip()[:40]!r} is no size (a number of M or G, at most {MAX_MB >> 20} TiB): not read, never counted as 0"
            )

    def _figure(self, fld: str, value: float, number: int, pid: int | None, training: int) -> None:
        job = self.jobs[-1] if self.jobs else None
        new = job is None or (pid is not None and job["pid"] is not None and pid != job["pid"])
        if not new and any(job[p] is not None for p in PEAKS) and self.training_mark is not None and training > self.training_mark:
            new = True  # a peak is printed as a process ends: training after it is another job's
        if new:
            job = {"job": len(self.jobs), "pid": pid, "line": number} | dict.fromkeys(FIELDS)
            self.jobs.append(job)
        elif job[fld] is not None:  # printed again: a later report of the same job, which counts instead
            job.update(dict.fromkeys(FIELDS))
        if job["pid"] is None:
            job["pid"] = pid
        job[fld] = value
        job["line"] = number
        self.training_mark = training
        self.changed.add(job["job"])

    def take_rows(self) -> list[dict]:
        """The jobs whose figures changed since the last call, as they stand now (a later row of a job replaces its earlier one)."""
        rows = [dict(self.jobs[j]) for j in sorted(self.changed)]
        self.changed = set()
        return rows

    def take_problems(self) -> list[str]:
        """What was refused since the last call, one sentence a value (the first few) and a count of the rest."""
        out = list(self.problems)
        if self.refused > len(self.problems):
            out.append(f"{self.refused - len(self.problems):,} more memory figures that are no size: not read")
        self.problems, self.refused = [], 0
        return out


__all__ = ["FIELDS", "MARKERS", "MAX_MB", "NAMES", "PEAKS", "MemoryLines", "glog_pid", "size_mb"]
