"""Counted nouns for what a person reads: ``1 file``, ``3 files``, never ``1 file(s)`` or ``1 files``.

One helper so every message of msnb counts the same way.
"""

from __future__ import annotations

_IRREGULAR = {"process": "processes", "entry": "entries", "directory": "directories", "match": "matches", "mean": "means"}


def plural(n, word: str, many: str | None = None) -> str:
    """*word* as it reads after the number *n*: singular for exactly 1, else *many* (default: the regular plural)."""
    if n == 1:
        return word
    return many or _IRREGULAR.get(word) or word + "s"


def count(n, word: str, many: str | None = None, *, thousands: bool = False) -> str:
    """``1 file``, ``0 files``, ``12,345 points`` (with *thousands*): the number and the noun agreeing with it.

    Args:
        n: how many.
        word: the singular noun (``file``, ``NPU``, ``process``).
        many: its plural when it is not the regular one.
        thousands: group the digits (``12,345``).
    """
    number = f"{n:,}" if thousands else str(n)
    return f"{number} {plural(n, word, many)}"


def listed(items, limit: int = 20) -> str:
    """``a, b, c`` for a message, at most *limit* items and how many more (a msprobe folder has thousands of tags)."""
    items = list(items)
    more = len(items) - limit
    return ", ".join(map(str, items[:limit])) + (f" ... ({more:,} more)" if more > 0 else "")
