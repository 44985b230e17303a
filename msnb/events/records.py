"""Framed records, as TensorFlow and MindSpore both write them.

Each record is ``u64 length | u32 masked crc32c(length bytes) | payload |
u32 masked crc32c(payload)``, little-endian.  This module finds the payloads in
a buffer, checks both checksums, and keeps going past damage.  The rule is the
simplest one that loses nothing: a record is kept where both of its checksums
hold; anywhere else the scanner moves on one byte and looks again.  So a torn
record (its header intact, its payload cut short by the next write) costs only
its own bytes, and every record after it is found again.  Every skip is
reported as a :class:`Problem` with the byte offset, never raised.

Memory stays bounded by the buffer the caller passes: damage that runs past
the buffer's end is handed back as a :class:`Damage` to carry into the next
buffer, and a header announcing a record longer than the buffer is handed back
as ``Scan.need`` so the caller can check it (:func:`read_record`) before
allocating it.

Speed matters here (event files reach gigabytes), so the walk over intact
records is one tight loop that caches headers already verified (all records
of one tag and step width share a length, so most headers are a dict hit) and
the payload checksums are compared in bulk with numpy; the slower byte-by-byte
search runs only inside damage.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np
from crc32c import crc32c

from .crcs import crc_many
from .problems import Problem, ProblemKind
from .rowwords import equal_under_mask, gather_rows, placed

MASK_DELTA = 0xA282EAD8
HEADER = 12  # u64 length + u32 crc
FOOTER = 4
# No writer produces a single record this large; a header claiming more is damage.
MAX_RECORD = 1 << 31
CHUNK = 32 << 20  # bytes a reader scans at once: memory stays near this, speed does not gain from more

__all__ = ["CHUNK", "Damage", "FOOTER", "HEADER", "MAX_RECORD", "Problem", "Scan", "masked_crc", "read_record", "scan"]


def masked_crc(data, value: int = 0) -> int:
    """TensorFlow's masked CRC32C, which both file formats store."""
    c = crc32c(data, value) if value else crc32c(data)
    return (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF


def _masked_array(crcs: np.ndarray) -> np.ndarray:
    c = crcs.astype(np.uint32)
    return ((c >> np.uint32(15)) | (c << np.uint32(17))) + np.uint32(MASK_DELTA)


@dataclass
class Damage:
    """A span being skipped, carried from one buffer to the next until an intact record ends it.

    Attributes:
        origin: file offset of the first skipped byte.
        kind: why the span began: ``header`` (not a valid header), ``crc`` (a valid header whose payload
            checksum fails) or ``truncated`` (a valid header claiming more bytes than the file holds).
        claimed_end: for ``crc``/``truncated``, the file offset where the record its header announces would end.
        length: for ``crc``/``truncated``, the payload length that header announces.
    """

    origin: int
    kind: ProblemKind
    claimed_end: int | None = None
    length: int = 0


@dataclass
class Scan:
    """Result of scanning a buffer.

    Attributes:
        offsets: payload starts of the intact records, relative to the buffer.
        lengths: their payload lengths.
        end: first byte not consumed, relative to the buffer: where the next buffer should start
            (a held-back partial record, the record that ``need`` is about, or the last bytes of a damaged span).
        problems: what was skipped, with file offsets.
        skipped_bytes: how many bytes those problems cover.
        damage: a damaged span still open at the end of the buffer (``final=False`` only); pass it to the next scan.
        need: when non-zero, a valid header at ``end`` announces a record of this many bytes (header and
            footer included) that does not fit in the buffer.
    """

    offsets: np.ndarray
    lengths: np.ndarray
    end: int
    problems: list
    skipped_bytes: int = 0
    damage: Damage | None = None
    need: int = 0


def _header_length(buf, pos: int) -> int | None:
    """Payload length of a header at *pos* if its checksum holds (the caller checked 12 bytes are there)."""
    n = int.from_bytes(buf[pos : pos + 8], "little")
    if n > MAX_RECORD:
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


def _resync(buf, first: int, end: int, final: bool) -> tuple[int | None, int]:
    """First offset >= *first* where an intact record starts: ``(offset, 0)``.

    When *final* is false, a valid header whose record runs past *end* comes
    back as ``(offset, record size)`` (it may be intact; the caller decides),
    and ``(None, 0)`` means no record starts at any offset up to ``end - HEADER``.

    Lengths are below 2**31, so the four high bytes of a header are zero: only
    offsets followed by ``00 00 00 00`` at +4 are candidates, and runs of zeros
    (preallocated or wiped space) are jumped over whole, since an all-zero
    header never checks.
    """
    zeros4 = b"\x00\x00\x00\x00"
    zero_header = b"\x00" * HEADER
    q = first + 4
    view = None
    while True:
        q = buf.find(zeros4, q, end)
        if q < 0:
            return None, 0
        p = q - 4
        if p + HEADER > end:
            return None, 0
        if buf[p : p + HEADER] == zero_header:
            if view is None:
                view = np.frombuffer(buf, dtype=np.uint8)
            z = _next_nonzero(view, p, end)
            if z >= end:
                return None, 0
            q = max(q + 1, z - HEADER + 1 + 4)
            continue
        n = _header_length(buf, p)
        if n is not None:
            stop = p + HEADER + n
            if stop + FOOTER <= end:
                if masked_crc(buf[p + HEADER : stop]) == int.from_bytes(buf[stop : stop + FOOTER], "little"):
                    return p, 0
            elif not final:
                return p, HEADER + n + FOOTER
        q += 1


def read_chunk(f, n: int):
    """Up to *n* bytes from *f*'s position, read into an anonymous memory map that asks for huge pages.

    Filling a fresh 32 MB ``bytes`` from ``f.read`` takes 8,000 page faults, most of the time a first read
    of a file costs (measured in new processes: 0.024-0.036 s, against 0.010-0.012 s into huge pages; the very
    first huge page a machine hands out after boot can take longer, while the kernel compacts memory).  A map reads
    like ``bytes`` (slices are bytes, items ints, ``find`` works, numpy views it), so the scanner and the
    decoders take either.  Small reads, systems without ``MADV_HUGEPAGE`` and short reads get plain bytes.
    """
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if n < HUGE_READ or advice is None or not hasattr(mmap, "MAP_ANONYMOUS"):
        return f.read(n)
    buf = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # private: a shared map is shmem, which gets no huge pages
    try:
        buf.madvise(advice)
    except OSError:  # the kernel refuses (THP off): the map still works, with small pages
        pass
    got = f.readinto(buf) or 0  # None: a non-blocking file with nothing to give yet
    return buf if got == n else buf[:got]


HUGE_READ = 4 << 20  # below this a read is fast enough as bytes


_END, _BAD, _OVER = 0, 1, 2
MAX_PERIOD = 32  # longest repeating pattern of record lengths looked for (a job writing 32 tags a step, one event each)
BATCH = 2 * MAX_PERIOD  # records walked one by one before looking for the pattern again


def _walk_some(buf, pos: int, end: int, verify: bool, seen: dict, offsets: list, lengths: list, limit: int):
    """Follow the chain one record at a time for at most *limit* records; returns ``(pos, state, over, stopped)``."""
    get = seen.get
    append_off = offsets.append
    append_len = lengths.append
    for _ in range(limit):
        if pos + HEADER > end:
            return pos, _END, 0, True
        head = buf[pos : pos + HEADER]
        n = get(head)
        if n is None:
            n = int.from_bytes(head[:8], "little")
            ok = n <= MAX_RECORD
            if ok and verify:
                ok = masked_crc(head[:8]) == int.from_bytes(head[8:], "little")
            if not ok:
                return pos, _BAD, 0, True
            seen[head] = n
        stop = pos + HEADER + n + FOOTER
        if stop > end:
            return pos, _OVER, n, True
        append_off(pos + HEADER)
        append_len(n)
        pos = stop
    return pos, _END, 0, False


def _period(lengths: list) -> int:
    """The shortest p with which all of *lengths* repeat (at least twice over), else 0."""
    for p in range(1, min(MAX_PERIOD, len(lengths) // 2) + 1):
        if lengths[p:] == lengths[:-p]:
            return p
    return 0


def _run_ahead(buf, raw: np.ndarray, pos: int, end: int, pattern: list, periods: int):
    """Records from *pos* on, guessing that the lengths repeat *pattern*; only the guesses that hold are kept.

    A guess holds where the 12 header bytes at the guessed position are exactly
    the header of the guessed length with its checksum: that is what the walk
    one record at a time would have read there, so the chain kept is the one it
    would have followed, up to the first position where they differ.

    Returns:
        ``(payload offsets, lengths, pos after the last kept record)``.
    """
    sizes = np.array(pattern, dtype=np.int64) + (HEADER + FOOTER)
    period = int(sizes.sum())
    periods = min(periods, (end - pos) // period)
    if periods <= 0:
        return None, None, pos
    within = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    starts = (pos + np.arange(periods, dtype=np.int64)[:, None] * period + within[None, :]).ravel()
    rows, lead = gather_rows(raw, starts, HEADER)  # each guessed header as two 64-bit words, compared a word at a time
    heads = np.stack([placed(np.frombuffer(_header_bytes(n), dtype=np.uint8), HEADER, lead) for n in pattern])  # one per pattern position
    mask = placed(np.full(HEADER, 0xFF, dtype=np.uint8), HEADER, lead)
    good = equal_under_mask(rows.reshape(periods, len(pattern), rows.shape[1]), heads, mask).ravel()
    k = starts.size if good.all() else int(np.argmin(good))
    if k == 0:
        return None, None, pos
    lens = np.tile(np.array(pattern, dtype=np.int64), periods)[:k]
    return starts[:k] + HEADER, lens, int(starts[k - 1] + HEADER + lens[-1] + FOOTER)


def _header_bytes(n: int) -> bytes:
    head = n.to_bytes(8, "little")
    return head + masked_crc(head).to_bytes(4, "little")


def _walk(buf, pos: int, end: int, verify: bool, seen: dict):
    """Chain of records from *pos*, trusting each checked header's length.

    Returns ``(offsets, lengths, bad, stop, state, over_length)``: *state* says
    why the chain stopped at *stop*: the data ends (``_END``), a header fails
    (``_BAD``) or a valid header announces a record past *end* (``_OVER``, with
    its payload length).  *bad* marks records whose payload checksum fails.

    The chain is followed one record at a time until the lengths repeat (a job
    writes the same tags every step); then positions further on are guessed
    from the pattern and checked all at once (:func:`_run_ahead`), twice as
    far each time the guess held, back to one at a time where it did not.
    """
    raw = np.frombuffer(buf, dtype=np.uint8)
    parts_off: list = []
    parts_len: list = []
    ahead = 16
    while True:
        offsets: list[int] = []
        lengths: list[int] = []
        pos, state, over, stopped = _walk_some(buf, pos, end, verify, seen, offsets, lengths, BATCH)
        parts_off.append(np.asarray(offsets, dtype=np.int64))
        parts_len.append(np.asarray(lengths, dtype=np.int64))
        if stopped:
            break
        p = _period(lengths)
        if not p:
            continue
        offs, lens, pos = _run_ahead(buf, raw, pos, end, lengths[-p:], ahead)
        if offs is None:
            ahead = 16
            continue
        parts_off.append(offs)
        parts_len.append(lens)
        ahead = min(ahead * 2, 1 << 16) if offs.size == ahead * p else 16
    offs = np.concatenate(parts_off) if len(parts_off) > 1 else parts_off[0]
    lens = np.concatenate(parts_len) if len(parts_len) > 1 else parts_len[0]
    if verify and offs.size:
        crcs = crc_many(raw, offs, lens)
        idx = (offs + lens)[:, None] + np.arange(4)
        stored = raw[idx].copy().view("<u4").ravel()
        bad = _masked_array(crcs) != stored
    else:
        bad = np.zeros(offs.size, dtype=bool)
    return offs, lens, bad, pos, state, over


def _damage_problem(path: str, damage: Damage, stop: int, at_end: bool) -> Problem:
    """The problem for a skipped span ``[damage.origin, stop)``; *at_end*: no intact record followed it."""
    span = stop - damage.origin
    if damage.kind == ProblemKind.HEADER:
        if at_end:
            return Problem(path, damage.origin, ProblemKind.HEADER, f"corrupt record header; {span} bytes to the end of the data hold no intact record")
        return Problem(path, damage.origin, ProblemKind.HEADER, f"corrupt record header; skipped {span} bytes to the next intact record at byte {stop}")
    n = damage.length
    if damage.kind == ProblemKind.TRUNCATED:
        if at_end:
            return Problem(
                path,
                damage.origin,
                ProblemKind.TRUNCATED,
                f"truncated last record ({span} bytes of an incomplete record at the end of the file); every record before it was read",
            )
        return Problem(
            path,
            damage.origin,
            ProblemKind.TORN,
            f"record of {n} bytes cut short (torn write): it claims more than the file holds, and an intact record starts at byte {stop}; skipped {span} bytes",
        )
    if at_end:
        return Problem(
            path, damage.origin, ProblemKind.CRC, f"record of {n} bytes fails its payload checksum; the {span} bytes from it to the end hold no intact record"
        )
    if stop == damage.claimed_end:
        return Problem(path, damage.origin, ProblemKind.CRC, f"record of {n} bytes fails its payload checksum; skipped, reading went on")
    if damage.claimed_end is not None and stop < damage.claimed_end:
        return Problem(
            path, damage.origin, ProblemKind.TORN, f"record of {n} bytes cut short (torn write): an intact record starts at byte {stop}; skipped {span} bytes"
        )
    return Problem(
        path, damage.origin, ProblemKind.CRC, f"record of {n} bytes fails its payload checksum; skipped {span} bytes to the next intact record at byte {stop}"
    )


def _truncated_last(path: str, offset: int, size: int) -> Problem:
    """The file ends inside a record: what was before it was read."""
    message = f"truncated last record ({size} bytes of an incomplete record at the end of the file); every record before it was read"
    return Problem(path, offset, ProblemKind.TRUNCATED, message)


class _Scanner:
    """One :func:`scan`'s walk: where it is, the records found, the damage it is inside, the problems said so far.

    It alternates two steps until one says the buffer is done: :meth:`resync` (inside damage: find the next intact
    record, or the end) and :meth:`take_walk` (a run of records walked at once: kept up to the first that fails its
    checksum, or to where the walk stopped).
    """

    def __init__(self, buf, path: str, start: int, verify: bool, final: bool, base_offset: int, damage: Damage | None):
        self.buf, self.path, self.verify, self.final, self.base_offset = buf, path, verify, final, base_offset
        self.end = len(buf)
        self.pos = start
        self.damage = damage
        self.parts_off: list = []
        self.parts_len: list = []
        self.problems: list[Problem] = []
        self.skipped = 0
        self.seen: dict = {}  # header bytes already verified -> payload length
        self.chain = None
        self.ci = 0
        self.need = 0

    def resync(self) -> bool:
        """Inside damage: move to the next intact record and report the span skipped; True when the buffer ends first."""
        end, base_offset = self.end, self.base_offset
        q, self.need = _resync(self.buf, self.pos, end, self.final)
        if q is None:
            if self.final:
                self.problems.append(_damage_problem(self.path, self.damage, base_offset + end, True))
                self.skipped += base_offset + end - self.damage.origin
                self.damage = None
                self.pos = end
            else:
                self.pos = max(self.pos, end - HEADER + 1)
            return True
        self.pos = q
        if self.need:
            return True
        self.problems.append(_damage_problem(self.path, self.damage, base_offset + q, False))
        self.skipped += base_offset + q - self.damage.origin
        self.damage = None
        if self.chain is not None:
            # a record already walked? then the chain from it is what a new walk would give
            starts = self.chain[0] - HEADER
            j = int(np.searchsorted(starts, q))
            if j < starts.size and starts[j] == q and j >= self.ci:
                self.ci = j
            else:
                self.chain = None
        return False

    def take_walk(self) -> bool:
        """Keep the walked records up to the first bad one (then inside damage), or all; True when the buffer is done."""
        if self.chain is None:
            self.chain = _walk(self.buf, self.pos, self.end, self.verify, self.seen)
            self.ci = 0
        offs, lens, bad, stop, state, over = self.chain
        ci, base_offset = self.ci, self.base_offset
        rest = np.flatnonzero(bad[ci:])
        if rest.size:
            k = ci + int(rest[0])
            self.parts_off.append(offs[ci:k])
            self.parts_len.append(lens[ci:k])
            rec = int(offs[k]) - HEADER
            self.damage = Damage(base_offset + rec, ProblemKind.CRC, base_offset + int(offs[k] + lens[k]) + FOOTER, int(lens[k]))
            self.pos = rec + 1
            self.ci = k + 1
            return False
        self.parts_off.append(offs[ci:])
        self.parts_len.append(lens[ci:])
        self.chain = None
        self.pos = stop
        if state == _END:
            return True
        if state == _BAD:
            self.damage = Damage(base_offset + stop, ProblemKind.HEADER)
            self.pos = stop + 1
            return False
        if self.final:
            self.damage = Damage(base_offset + stop, ProblemKind.TRUNCATED, base_offset + stop + HEADER + over + FOOTER, over)
            self.pos = stop + 1
            return False
        self.need = HEADER + over + FOOTER
        return True

    def result(self) -> Scan:
        """The :class:`Scan`, an incomplete last record of a final buffer reported as truncated."""
        end = self.end
        if self.damage is None and not self.need and self.pos < end and self.final:
            self.problems.append(_truncated_last(self.path, self.base_offset + self.pos, end - self.pos))
            self.skipped += end - self.pos
            self.pos = end
        offsets = np.concatenate(self.parts_off) if self.parts_off else np.zeros(0, dtype=np.int64)
        lengths = np.concatenate(self.parts_len) if self.parts_len else np.zeros(0, dtype=np.int64)
        return Scan(offsets, lengths, self.pos, self.problems, self.skipped, self.damage, self.need)


def scan(buf, path: str = "", *, start: int = 0, verify: bool = True, final: bool = True, base_offset: int = 0, damage: Damage | None = None) -> Scan:
    """Find the intact records in ``buf[start:]``.

    Args:
        buf: the bytes (``bytes``, ``bytearray`` or ``memoryview`` of bytes).
        path: file name for problem reports.
        start: where to begin in *buf*.
        verify: check both checksums on the fast walk (resynchronising after damage always checks them).
        final: the buffer ends where the file ends, so an incomplete last record is reported as truncated.
            With ``final=False`` (a file still being written, or a buffer in the middle of a file) it is held
            back: ``Scan.end`` points at its first byte, and ``Scan.need`` says how long it is when its header
            is valid.
        base_offset: the buffer's position in the file, added to offsets in problem reports.
        damage: a damaged span carried over from the previous buffer; the search for the next intact record
            resumes at *start*.

    Returns:
        A :class:`Scan`.
    """
    scanner = _Scanner(buf, path, start, verify, final, base_offset, damage)
    while True:
        if scanner.damage is not None and scanner.resync():
            break
        if scanner.take_walk():
            break
    return scanner.result()


def read_record(f, pos: int, size: int, *, verify: bool = True, chunk: int = CHUNK) -> bytes | None:
    """The *size* bytes of the record at *pos* in the open file *f*, or None when its payload checksum fails.

    Used for a record longer than a scan buffer: the checksum is computed in
    pieces of *chunk* bytes first, so a header announcing a huge length in
    damaged data never makes the reader allocate that length.

    Args:
        f: a binary file open for reading.
        pos: file offset of the record's header (already checked by :func:`scan`).
        size: the whole record's size, header and footer included.
        verify: compute the payload checksum before reading the record.
        chunk: bytes read at once while checking.

    Returns:
        The record's bytes, or None.
    """
    n = size - HEADER - FOOTER
    if verify:
        f.seek(pos + HEADER)
        c = 0
        left = n
        while left:
            piece = f.read(min(chunk, left))
            if not piece:
                return None
            c = crc32c(piece, c)
            left -= len(piece)
        stored = f.read(FOOTER)
        if len(stored) != FOOTER or (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF != int.from_bytes(stored, "little"):
            return None
    f.seek(pos)
    data = f.read(size)
    return data if len(data) == size else None


class FrameReader:
    """Every intact record of an open file, in buffers of at most *chunk* bytes.

    This is where the chunks meet: damage running past a buffer is carried
    into the next one, a record longer than a buffer is checked in pieces
    (:func:`read_record`) and only then read whole, so memory stays near
    *chunk* whatever the file holds, and a header announcing more bytes than
    the file has is never allocated.

    Args:
        path: file name for problem reports.
        verify: check checksums on the fast walk.
        chunk: bytes read at once (default :data:`CHUNK`).

    After :meth:`read` is exhausted, :attr:`pos` is where the next read should
    start (the first byte not yet accounted for: a held-back record or the
    start of damage that may still be written over) and :attr:`problems` lists
    what was skipped.
    """

    def __init__(self, path: str = "", *, verify: bool = True, chunk: int | None = None):
        self.path = path
        self.verify = verify
        self.chunk = chunk or CHUNK
        self.pos = 0
        self.problems: list[Problem] = []

    def read(self, f, start: int, size: int, *, final: bool):
        """Yield ``(buffer, buffer_file_offset, payload_offsets, payload_lengths)`` for ``f[start:size]``.

        Args:
            f: a binary file open for reading.
            start: file offset to begin at (a record boundary).
            size: the file's size.
            final: the file is complete: report an incomplete tail instead of holding it back.
        """
        path, verify, chunk = self.path, self.verify, self.chunk
        self.pos = cursor = start
        damage: Damage | None = None
        buf = None
        while cursor < size:
            f.seek(cursor)
            del buf  # released before the next chunk is read: one chunk in memory, not two
            buf = read_chunk(f, min(chunk, size - cursor))
            if not buf:
                break
            at_eof = cursor + len(buf) >= size
            sc = scan(buf, path, verify=verify, final=final and at_eof, base_offset=cursor, damage=damage)
            self.problems.extend(sc.problems)
            if sc.offsets.size:
                yield buf, cursor, sc.offsets, sc.lengths
            damage = sc.damage
            if sc.need:
                p = cursor + sc.end
                n = sc.need - HEADER - FOOTER
                if p + sc.need > size:
                    if not final:
                        self.pos = damage.origin if damage else p  # may still be being written: wait for it
                        return
                    damage = damage or Damage(p, ProblemKind.TRUNCATED, p + sc.need, n)
                    cursor = p + 1
                    continue
                rec = read_record(f, p, sc.need, verify=verify, chunk=chunk)
                if rec is None:
                    damage = damage or Damage(p, ProblemKind.CRC, p + sc.need, n)
                    cursor = p + 1
                    continue
                one = scan(rec, path, verify=verify, final=True, base_offset=p, damage=damage)
                self.problems.extend(one.problems)
                if one.offsets.size:
                    yield rec, p, one.offsets, one.lengths
                damage = None
                cursor = self.pos = p + sc.need
                continue
            self.pos = damage.origin if damage is not None else cursor + sc.end
            nxt = cursor + sc.end
            if at_eof or nxt <= cursor:
                break
            cursor = nxt
