"""Whole lines of a text file that may still be growing, a bounded chunk at a time: the one line iterator of every
text reader (training logs, msprobe's CSVs, metric tables).

Every text reader needs the same four things, and each kept its own copy of them before: read from where it stopped,
hand over only whole lines (a line still being written waits for its end, unless the reading is final), never hold
more than a chunk plus one line's limit, and give a line longer than the limit by its start only, skipping the rest
as it comes.  :class:`LineChunks` is that, once; what a reader does with a long line's start (parse it, count it as
skipped) stays the reader's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class LineChunks:
    """Where a reader stands in a text file, and the whole lines after it.

    Attributes:
        chunk: bytes read at once.
        max_line: a line is longer than this (bytes) when no line end follows its start within ``max(chunk,
            max_line + 1)`` bytes; only its first ``max_line + 1`` bytes are handed over (the reader sees it is long).
        cr_ends: a lone ``\\r`` ends a line too (old Mac files, some launchers' logs); ``\\r\\n`` is one end either way.
        pos: the offset of the first byte not handed over yet.
        in_long_line: the start of a long line was handed over, its end not yet seen.
    """

    chunk: int
    max_line: int
    cr_ends: bool = False
    pos: int = 0
    in_long_line: bool = False

    def read(self, f, size: int, final: bool) -> Iterator[tuple[int, bytes, bool]]:
        """``(offset, data, long)`` from :attr:`pos` up to *size*: whole lines, or (*long* True) a long line's start.

        Args:
            f: the file, open in binary mode (seekable).
            size: how far to read (the file's size, or less for a bounded slice).
            final: the file is complete: a last line without its end is handed over too.

        :attr:`pos` moves past what is handed over before it is yielded, so a reader that stops early stands after
        the last data it was given.  The data of one yield is at most ``max(chunk, max_line + 1) + 1`` bytes.
        """
        while self.pos < size:
            f.seek(self.pos)
            data = f.read(min(self.chunk, size - self.pos))
            if not data:
                return
            if self._last_end(data) < 0 and len(data) <= self.max_line and self.pos + len(data) < size:
                f.seek(self.pos)  # a chunk smaller than a line's limit: read on to the limit before calling the line long
                data = f.read(min(self.max_line + 1, size - self.pos))
            if self.cr_ends and data.endswith(b"\r") and self.pos + len(data) < size:
                data += f.read(1)  # a \r\n split by the chunk stays one line end
            at_eof = self.pos + len(data) >= size
            if final and at_eof:
                usable = len(data)
            elif self.cr_ends and data.endswith(b"\r"):  # a \n may follow it yet: not a line end before more is read
                usable = self._last_end(data[:-1]) + 1
            else:
                usable = self._last_end(data) + 1
            if usable <= 0:
                if at_eof:
                    return  # a line still being written: its end comes with a later read
                start = self.pos
                self.pos += len(data)
                if not self.in_long_line:
                    self.in_long_line = True
                    yield start, data[: self.max_line + 1], True
                continue
            start, body = self.pos, data[:usable]
            self.pos += usable
            if self.in_long_line:  # the end of a line whose start was handed over: skipped
                self.in_long_line = False
                cut = self._first_end(body)
                body = body[cut:] if cut > 0 else b""
                start += cut
            if body:
                yield start, body, False

    def _last_end(self, data: bytes) -> int:
        at = data.rfind(b"\n")
        return max(at, data.rfind(b"\r")) if self.cr_ends else at

    def _first_end(self, body: bytes) -> int:
        """Bytes up to and with the first line end of *body* (``\\r\\n`` taken whole), or 0 when it holds none."""
        at = body.find(b"\n")
        if self.cr_ends:
            cr = body.find(b"\r")
            if cr >= 0 and (at < 0 or cr < at):
                return cr + (2 if body[cr + 1 : cr + 2] == b"\n" else 1)
        return at + 1


def lines_at(body: bytes, cr_ends: bool) -> Iterator[tuple[int, bytes]]:
    """``(offset in body, line)`` of each line of *body*, without its end (``\n``; with *cr_ends* also ``\r\n`` and a lone ``\r``).

    A body ending with a line end has no empty line after it; an empty line inside it is one.
    """
    start, size = 0, len(body)
    while start < size:
        nl = body.find(b"\n", start)
        stop = nl if nl >= 0 else size
        if cr_ends:
            cr = body.find(b"\r", start, stop)
            if cr >= 0:
                yield start, body[start:cr]
                start = cr + (2 if body[cr + 1 : cr + 2] == b"\n" else 1)
                continue
        yield start, body[start:stop]
        start = stop + 1


def split_lines(text: str) -> list[str]:
    """The lines of *text* as :func:`lines_at` cuts them with CR ends: only at ``\n``, ``\r\n`` and a lone ``\r``.

    ``str.splitlines`` also cuts at a form feed, ``\x1c``-``\x1e``, U+0085, U+2028 and U+2029, which a line of a
    log may hold; every text reader cuts where the line iterator does, so a line is one line in every reader.
    A text ending with a line end has no empty line after it.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


__all__ = ["LineChunks", "lines_at", "split_lines"]
