"""Reading the small files msnb opens (ledgers, state files, kernel.json, configs) and checking the paths they name.

Each of these files may have been written by someone else, or replaced by a
symlink to ``/dev/zero``, a FIFO or 100,000 nested brackets.  The event
readers already follow three rules for data: regular files only, bounded
size, damage reported rather than raised as a traceback.  This module is the
one place those rules are kept for small files, so every caller gets them:

- the file is opened without blocking and checked with ``fstat`` before a
  byte is read (a FIFO never hangs, a device is never read);
- at most *limit* bytes are read, however large the file claims or grows to;
- JSON nesting is measured before parsing (Python's parser recurses, so a
  deep document would end in a ``RecursionError``);
- a path taken from such a file is resolved and must stay inside the folder
  it belongs to (:func:`inside`), and a destination on a pseudo-filesystem
  (``/proc``, ``/sys``, ``/dev``) is recognised (:func:`pseudo_filesystem`).

Every refusal is an :class:`~msnb.errors.UnsafeFile` (a ``UsageError``, so a
``ValueError`` too) naming the file and the reason in one line; callers turn it
into their own error or a reported problem.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from .errors import UnsafeFile

MAX_SMALL_BYTES = 16 * 1024 * 1024
"""Default bound of a small file: a ledger of many thousand sources is a few MB."""

MAX_JSON_DEPTH = 64
"""Deepest JSON nesting accepted; msnb's own files nest 4 deep at most."""

PSEUDO_FILESYSTEMS = frozenset(
    "proc sysfs devtmpfs devpts cgroup cgroup2 debugfs tracefs securityfs pstore bpf configfs fusectl mqueue binfmt_misc autofs efivarfs rpc_pipefs nsfs".split()
)
"""Kernel filesystems whose files are not data: walking or writing there is refused."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """``"file"`` for a regular file, else what it is (``"a FIFO"``, ``"a character device"``...), for messages."""
    if stat.S_ISREG(mode):
        return "file"
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _reason(exc: BaseException) -> str:
    return " ".join(str(getattr(exc, "strerror", None) or exc).split())


def read_small(path, *, limit: int = MAX_SMALL_BYTES, missing_ok: bool = False) -> bytes | None:
    """The bytes of a regular file of at most *limit* bytes.

    Args:
        path: the file (a symlink is followed, and what it points to must be a regular file).
        limit: the most bytes accepted; one more byte is a refusal, so a file growing while read is still bounded.
        missing_ok: return None for a file that does not exist instead of refusing it.

    Returns:
        The bytes (None only for a missing file with *missing_ok*).

    Raises:
        UnsafeFile: missing, unreadable, not a regular file, or larger than *limit*.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise UnsafeFile(path, "no such file") from None
    except (OSError, ValueError) as exc:
        raise UnsafeFile(path, f"cannot be read: {_reason(exc)}") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind != "file":
            raise UnsafeFile(path, f"is {kind}, not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UnsafeFile(path, f"cannot be read: {_reason(exc)}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise UnsafeFile(path, f"is larger than {_size(limit)}, too large for what it should hold")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n} bytes"


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(raw: bytes) -> int:
    """The deepest bracket nesting of a JSON text, strings left out; linear time, no recursion."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    # runs of one bracket kind at a time: a 100,000-deep document is two runs, not 200,000 steps
    for run in re.finditer(rb"[\[{]+|[\]}]+", brackets):
        n = run.end() - run.start()
        if brackets[run.start()] in b"[{":
            depth += n
            deepest = max(deepest, depth)
        else:
            depth -= n
    return deepest


def loads_json(raw: bytes | str, *, where, max_depth: int = MAX_JSON_DEPTH):
    """Parse JSON text with its nesting checked first.

    Args:
        raw: the text (bytes in UTF-8, -16 or -32, or str).
        where: the file it came from, for the message.
        max_depth: the deepest nesting accepted.

    Returns:
        The parsed value.

    Raises:
        UnsafeFile: nested deeper than *max_depth*, or not valid JSON.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    depth = json_depth(data)
    if depth > max_depth:
        raise UnsafeFile(where, f"is JSON nested {depth} deep, more than the {max_depth} accepted")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise UnsafeFile(where, f"is not valid JSON: {_reason(exc)}") from None


def load_json(path, *, limit: int = MAX_SMALL_BYTES, max_depth: int = MAX_JSON_DEPTH, missing_ok: bool = False):
    """A small JSON file, read by :func:`read_small` and parsed by :func:`loads_json`.

    Returns:
        The parsed value, or None for a missing file with *missing_ok*.

    Raises:
        UnsafeFile: see :func:`read_small` and :func:`loads_json`.
    """
    raw = read_small(path, limit=limit, missing_ok=missing_ok)
    return None if raw is None else loads_json(raw, where=path, max_depth=max_depth)


def inside(path, root) -> bool:
    """Whether *path*, every symlink resolved, is *root* or below it (*root* resolved too).

    A path read from a ledger (``../../victim``, an absolute path, a symlink
    planted in the destination) is only used when this holds.
    """
    try:
        real = Path(os.path.realpath(path))
        base = Path(os.path.realpath(root))
    except (OSError, ValueError):
        return False
    return real == base or base in real.parents


def plain_name(name) -> bool:
    """Whether *name* is one path component (no separator, not ``.`` or ``..``, no NUL): a file name a ledger may hold."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name and (os.altsep is None or os.altsep not in name)


def relative_parts(rel) -> bool:
    """Whether *rel* is a relative ``a/b/c`` path of plain names (no ``..``, not absolute)."""
    return isinstance(rel, str) and all(plain_name(part) for part in rel.split("/"))


def _mounts() -> list[tuple[str, str]]:
    try:
        raw = read_small("/proc/self/mounts", limit=4 * 1024 * 1024)
    except UnsafeFile:
        return []
    found = []
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
            found.append((point, fields[2]))
    return found


def pseudo_filesystem(path) -> str | None:
    """The kernel filesystem *path* lies on (``proc``, ``sysfs``...), or None for an ordinary one.

    Decided by the longest mount point above the resolved path in
    ``/proc/self/mounts``; None where that table cannot be read.
    """
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    best, kind = "", None
    for point, fstype in _mounts():
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fstype
    return kind if kind in PSEUDO_FILESYSTEMS else None


__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_SMALL_BYTES",
    "PSEUDO_FILESYSTEMS",
    "file_kind",
    "inside",
    "json_depth",
    "load_json",
    "loads_json",
    "plain_name",
    "pseudo_filesystem",
    "read_small",
    "relative_parts",
]
