"""One run's row in words: a cell per column, shared by the text table and the HTML one."""

from __future__ import annotations

from .rows import RunRow


def rank_ranges(ranks) -> str:
    """``0-3,5`` for ranks 0, 1, 2, 3 and 5; ``-`` for none."""
    ranks = sorted(ranks)
    if not ranks:
        return "-"
    parts, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(parts)


def human_bytes(n: int) -> str:
    """``812 B``, ``4.2 KB``, ``1.3 GB`` (powers of 1024)."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def human_age(seconds: float | None) -> str:
    """``12 s``, ``5 min``, ``3.2 h``, ``2.0 d`` ago; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def number(x) -> str:
    """A loss for a column: four significant digits, ``-`` when unknown."""
    return "-" if x is None else f"{x:.4g}"


def verdict_word(row: RunRow) -> str:
    """``FAIL``, ``WARN`` or ``PASS``: the light of the row in words."""
    return {"red": "FAIL", "amber": "WARN", "green": "PASS"}[row.light]


def flag_summary(row: RunRow) -> str:
    """The first flag in a few words (``rank 2 loss @150``), the loss's own first, with a count of the others."""
    if not row.flags:
        return "-"
    f = next((f for f in row.flags if f.tag == row.verdict.tag), row.flags[0])
    who = f"rank {f.rank}" if f.rank >= 0 else "run"
    more = f" (+{len(row.flags) - 1})" if len(row.flags) > 1 else ""
    return f"{who} {f.tag} @{f.step}{more}"


def memory_cell(row: RunRow) -> str:
    """The highest peak a rank's log reports and what it leaves of MindSpore's limit (``56.1 GiB, 1.3% left``); ``-`` for none."""
    top = None if row.memory is None else row.memory.highest
    if top is None:
        return "-" if row.memory is None else "no peak"
    left = "" if top.headroom is None else f", {top.headroom:.1%} left"
    return f"{top.peak_mb / 1024:.1f} GiB{left}"


COLUMNS = ("run", "status", "ranks", "missing", "last step", "loss", "smoothed", "trend", "verdict", "flags", "peak memory", "size", "age")


def text_cells(row: RunRow, now: float) -> list[str]:
    """The row's cells, in the order of :data:`COLUMNS`."""
    return [
        row.run,
        row.status,
        rank_ranges(row.ranks),
        rank_ranges(row.missing_ranks) + (f",+{row.missing_more:,} more" if row.missing_more else ""),
        "-" if row.last_step is None else str(row.last_step),
        number(row.last_loss),
        number(row.smoothed_loss),
        row.trend,
        verdict_word(row),
        flag_summary(row),
        memory_cell(row),
        human_bytes(row.bytes),
        human_age(row.age(now)),
    ]
