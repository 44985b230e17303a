"""The one line iterator of the text readers (msnb.events.line_chunks): byte cases, and a differential test against a
plain split of the whole file, read at once or polled while it grows."""

from __future__ import annotations

import io
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from msnb.events.line_chunks import LineChunks, lines_at


def pieces(data: bytes, *, chunk: int, max_line: int, cr_ends: bool = False, polls=(), final: bool = True) -> tuple[list, LineChunks]:
    """Every ``(offset, data, long)`` handed over: one read per size in *polls* (not final), then one of the whole file."""
    f = io.BytesIO(data)
    chunks = LineChunks(chunk=chunk, max_line=max_line, cr_ends=cr_ends)
    got = []
    for size in polls:
        got += list(chunks.read(f, size, final=False))
    got += list(chunks.read(f, len(data), final=final))
    return got, chunks


def lines_of(got: list, cr_ends: bool) -> list:
    """The lines the pieces hold: a long piece is one line (its start), a body its lines."""
    out = []
    for offset, data, long in got:
        out += [(offset, data, True)] if long else [(offset + at, line, False) for at, line in lines_at(data, cr_ends)]
    return out


def test_whole_lines_only_until_the_read_is_final():
    data = b"a 1\nb 2\nc 3"
    got, chunks = pieces(data, chunk=64, max_line=64, final=False)
    assert got == [(0, b"a 1\nb 2\n", False)] and chunks.pos == 8  # "c 3" may still be written
    got, chunks = pieces(data, chunk=64, max_line=64)
    assert got == [(0, data, False)] and chunks.pos == len(data)


def test_a_chunk_ends_before_the_line_it_cuts():
    got, _ = pieces(b"aaaa\nbbbb\ncccc\n", chunk=7, max_line=64)
    assert got == [(0, b"aaaa\n", False), (5, b"bbbb\n", False), (10, b"cccc\n", False)]


def test_a_long_line_is_handed_over_by_its_start_and_its_rest_skipped():
    data = b"ok\n" + b"x" * 50 + b"\nafter\n"
    got, chunks = pieces(data, chunk=8, max_line=10)
    assert got == [(0, b"ok\n", False), (3, b"x" * 11, True), (54, b"after\n", False)]
    assert not chunks.in_long_line and chunks.pos == len(data)


def test_a_long_line_still_being_written_is_skipped_as_it_grows():
    data = b"x" * 40 + b"\nnext\n"
    got, chunks = pieces(data, chunk=8, max_line=10, polls=(15, 30))
    assert got == [(0, b"x" * 11, True), (41, b"next\n", False)]  # its start once, never again


def test_a_chunk_smaller_than_the_limit_reads_on_before_calling_a_line_long():
    data = b"y" * 20 + b"\n"
    got, _ = pieces(data, chunk=4, max_line=64)
    assert got == [(0, data, False)]


def test_cr_ends_and_a_crlf_split_by_a_chunk_stay_one_line_end():
    data = b"aa\r\nbb\rcc\n"
    for chunk in range(3, 12):
        got, _ = pieces(data, chunk=chunk, max_line=64, cr_ends=True)
        assert [line for _, line, _ in lines_of(got, True)] == [b"aa", b"bb", b"cc"], chunk
    got, _ = pieces(b"aa\r", chunk=3, max_line=64, cr_ends=True, polls=(3,))
    assert lines_of(got, True) == [(0, b"aa", False)]  # (the \r ended the file: no line after it)


def test_without_cr_ends_a_cr_is_text():
    got, _ = pieces(b"aa\rbb\n", chunk=64, max_line=64)
    assert lines_of(got, False) == [(0, b"aa\rbb", False)]


def test_lines_at_gives_offsets_in_the_body():
    assert list(lines_at(b"a\r\nbb\rccc\n\nd", True)) == [(0, b"a"), (3, b"bb"), (6, b"ccc"), (10, b""), (11, b"d")]
    assert list(lines_at(b"a\r\nb\n", False)) == [(0, b"a\r"), (3, b"b")]


def oracle(data: bytes, cr_ends: bool, long_at: int, max_line: int) -> list:
    """``(offset, line, long)`` of a plain split of the whole file: a line of *long_at* bytes or more by its start."""
    ends = rb"\r\n|\r|\n" if cr_ends else rb"\n"
    out, start = [], 0
    for m in re.finditer(ends, data):
        line = data[start : m.start()]
        out.append((start, line[: max_line + 1], True) if len(line) >= long_at else (start, line, False))
        start = m.end()
    if start < len(data):  # the last line, without its end
        line = data[start:]
        out.append((start, line[: max_line + 1], True) if len(line) >= long_at else (start, line, False))
    return out


texts = st.lists(
    st.tuples(st.one_of(st.integers(0, 12), st.integers(40, 90)), st.sampled_from([b"\n", b"\r\n", b"\r"])),
    min_size=0,
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(texts, st.integers(14, 24), st.integers(14, 24), st.booleans(), st.lists(st.integers(0, 3000), max_size=6), st.booleans())
def test_polled_while_growing_or_read_at_once_the_lines_are_a_plain_splits(spec, chunk, max_line, cr_ends, polls, last_end):
    # lines of up to 12 bytes are never long, of 40 or more always (the chunk and the limit are 14-24 bytes)
    spec = [(n, end if cr_ends else b"\n") for n, end in spec]
    data = b"".join(bytes([97 + i % 26]) * n + end for i, (n, end) in enumerate(spec))
    if spec and not last_end:
        data = data[: -len(spec[-1][1])]  # the last line without its end
    got, chunks = pieces(data, chunk=chunk, max_line=max_line, cr_ends=cr_ends, polls=sorted(p % (len(data) + 1) for p in polls))
    assert lines_of(got, cr_ends) == oracle(data, cr_ends, 40, max_line)
    assert chunks.pos == len(data) and all(len(d) <= max(chunk, max_line + 1) + 1 for _, d, _ in got)
