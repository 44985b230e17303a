"""Framed records, as TensorFlow and MindSpore both write them.

Each record is ``u64 length | u32 masked crc32c(length bytes) | payload |
u32 masked crc32c(payload)``, little-endian.  This module finds the payloads in
a buffer, checks both checksums, and keeps going past damage: a record whose
payload checksum fails is skipped; after a header whose checksum fails, the
scanner searches forward for the next header that checks out.  Every skip is
reported as a :class:`Problem` with the byte offset, never raised.

Speed matters here (event files reach gigabytes), so the walk is one tight
loop that caches headers already verified (all records of one tag and step
width share a length, so most headers are a dict hit) and the payload
checksums are compared in bulk with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from crc32c import crc32c

MASK_DELTA = 0xA282EAD8
HEADER = 12  # u64 length + u32 crc
FOOTER = 4
# No writer produces a single record this large; a header claiming more is damage.
MAX_RECORD = 1 << 31


def masked_crc(data) -> int:
    """TensorFlow's masked CRC32C, which both file formats store."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF


def _masked_array(crcs: np.ndarray) -> np.ndarray:
    c = crcs.astype(np.uint32)
    return ((c >> np.uint32(15)) | (c << np.uint32(17))) + np.uint32(MASK_DELTA)


@dataclass
class Problem:
    """Something skipped or suspicious, with enough detail to find it on disk."""

    path: str
    offset: int | None
    kind: str  # truncated | crc | header | decode | empty | foreign | unreadable | replaced
    message: str
    severity: str = "warning"

    def __str__(self) -> str:
        where = f"{self.path}" + (f" at byte {self.offset}" if self.offset is not None else "")
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        return {"path": self.path, "offset": self.offset, "kind": self.kind, "message": self.message, "severity": self.severity}


@dataclass
class Scan:
    """Result of scanning a buffer: payload spans, where to resume, what was skipped."""

    offsets: np.ndarray  # payload start, relative to the buffer
    lengths: np.ndarray
    end: int  # first byte not consumed (a held-back partial record starts here)
    problems: list
    skipped_bytes: int = 0


def _valid_header(buf, pos: int, end: int) -> int | None:
    """Length of the record whose header starts at *pos*, if its checksum holds and it fits."""
    if pos + HEADER > end:
        return None
    n = int.from_bytes(buf[pos : pos + 8], "little")
    if n > MAX_RECORD or pos + HEADER + n + FOOTER > end:
        return None
    if masked_crc(buf[pos : pos + 8]) != int.from_bytes(buf[pos + 8 : pos + HEADER], "little"):
        return None
    return n


def _next_nonzero(view: np.ndarray, p: int, end: int) -> int:
    step = 1 << 16
    while p < end:
        nz = np.flatnonzero(view[p : min(end, p + step)])
        if nz.size:
            return p + int(nz[0])
        p += step
    return end


def _resync(buf, pos: int, end: int) -> int | None:
    """First offset after *pos* where a complete record with valid checksums starts.

    Lengths below 4 GiB have four zero high bytes, so only offsets followed by
    ``00 00 00 00`` at +4 are candidates; runs of zeros are jumped over whole.
    """
    zeros4 = b"\x00\x00\x00\x00"
    zero_header = b"\x00" * HEADER
    q = pos + 1 + 4
    view = None
    while True:
        q = buf.find(zeros4, q, end)
        if q < 0:
            return None
        p = q - 4
        if p + HEADER + FOOTER > end:
            return None
        if buf[p : p + HEADER] == zero_header:
            # preallocated or wiped space: a header must contain the first non-zero byte
            if view is None:
                view = np.frombuffer(buf, dtype=np.uint8)
            z = _next_nonzero(view, p, end)
            if z >= end:
                return None
            q = max(q + 1, z - HEADER + 1 + 4)
            continue
        n = _valid_header(buf, p, end)
        if n is not None:
            stop = p + HEADER + n
            if masked_crc(buf[p + HEADER : stop]) == int.from_bytes(buf[stop : stop + FOOTER], "little"):
                return p
        q += 1


def scan(buf: bytes, path: str = "", *, start: int = 0, verify: bool = True, final: bool = True, base_offset: int = 0) -> Scan:
    """Find the records in ``buf[start:]``.

    *final*: the buffer ends where the file ends, so an incomplete last record
    is reported as truncated.  With ``final=False`` (following a file still being
    written) it is held back: ``Scan.end`` points at its first byte.
    *base_offset* is added to offsets in problem reports (the buffer's position in the file).
    """
    end = len(buf)
    pos = start
    offsets: list[int] = []
    lengths: list[int] = []
    problems: list[Problem] = []
    skipped = 0
    seen: dict = {}  # header bytes already verified -> payload length
    get = seen.get
    append_off = offsets.append
    append_len = lengths.append
    while True:
        if pos + HEADER > end:
            break
        head = buf[pos : pos + HEADER]
        n = get(head)
        if n is None:
            n = int.from_bytes(head[:8], "little")
            ok = n <= MAX_RECORD
            if ok and verify:
                ok = masked_crc(head[:8]) == int.from_bytes(head[8:], "little")
            if not ok:
                nxt = _resync(buf, pos, end)
                if nxt is None:
                    if not final:
                        break  # hold back: a later poll may find the next intact record
                    problems.append(Problem(path, base_offset + pos, "header", f"corrupt record header; {end - pos} bytes to the end of the data skipped"))
                    skipped += end - pos
                    pos = end
                    break
                problems.append(
                    Problem(
                        path,
                        base_offset + pos,
                        "header",
                        f"corrupt record header; skipped {nxt - pos} bytes to the next intact record at byte {base_offset + nxt}",
                    )
                )
                skipped += nxt - pos
                pos = nxt
                continue
            seen[head] = n
        stop = pos + HEADER + n + FOOTER
        if stop > end:
            break
        append_off(pos + HEADER)
        append_len(n)
        pos = stop

    if pos < end and final:
        problems.append(
            Problem(
                path,
                base_offset + pos,
                "truncated",
                f"truncated last record ({end - pos} bytes of an incomplete record at the end of the file); every record before it was read",
            )
        )
        skipped += end - pos
        pos = end

    offs = np.asarray(offsets, dtype=np.int64)
    lens = np.asarray(lengths, dtype=np.int64)
    if verify and offs.size:
        mv = memoryview(buf)
        crcs = np.fromiter((crc32c(mv[o : o + n]) for o, n in zip(offsets, lengths)), dtype=np.uint32, count=len(offsets))
        raw = np.frombuffer(buf, dtype=np.uint8)
        idx = (offs + lens)[:, None] + np.arange(4)
        stored = raw[idx].copy().view("<u4").ravel()
        bad = _masked_array(crcs) != stored
        if bad.any():
            for o, n in zip(offs[bad].tolist(), lens[bad].tolist()):
                problems.append(Problem(path, base_offset + o - HEADER, "crc", f"record of {n} bytes fails its payload checksum; skipped, reading went on"))
                skipped += HEADER + n + FOOTER
            keep = ~bad
            offs, lens = offs[keep], lens[keep]
    return Scan(offs, lens, pos, problems, skipped)
