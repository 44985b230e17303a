"""glibc heap settings for a process that reads events: keep scratch memory between arrays, give back a table's parts.

Decoding a file builds and frees scratch arrays of a few MB hundreds of times.
glibc's default gives the top of the heap back to the system after each free
(it keeps 128 KB), so the next array of that size faults every page in again:
for a 5 MB event file, about 2,000 page faults (310 with the pad below) and
4-7 ms of system time instead of 1-3 ms, on a read of 25-40 ms.
Keeping :data:`SCRATCH_PAD` at the top of the heap (``M_TOP_PAD``) turns those
into reuse; pages that were never touched cost nothing.  Elsewhere than glibc
(musl, macOS) both calls do nothing.
"""

from __future__ import annotations

import ctypes
import sys

M_TOP_PAD = -2  # glibc's mallopt parameter: bytes kept at the top of the heap when it grows or shrinks
SCRATCH_PAD = 32 << 20  # measured on 5 MB event files: 2,026 page faults a file at glibc's default, 310 with this
_LIBC = False  # not looked up yet


def _glibc():
    global _LIBC
    if _LIBC is False:
        _LIBC = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt"):
                    _LIBC = libc
            except OSError:  # not glibc (musl...)
                _LIBC = None
    return _LIBC


def keep_scratch_memory(pad: int = SCRATCH_PAD) -> bool:
    """Ask glibc to keep *pad* bytes at the top of the heap (for processes msnb owns: its CLI and its read workers).

    Returns:
        Whether the setting was taken (False where this is not glibc).
    """
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_TOP_PAD, int(pad)))


def give_back_freed_memory() -> None:
    """Return the heap pages just freed to the system (glibc keeps them otherwise), so joining many small parts
    into one table needs the table and one column more, not the parts and the table."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
