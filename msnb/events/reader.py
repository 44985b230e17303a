"""Reading a path into tables, once (:func:`read`) or again and again (:class:`Follower`).

Both go through the same per-file state: it remembers how far the file was
read, so a poll reads only what was appended, holds back a partial last record
(or log line) until it is complete, and starts over when the file was replaced
(another inode, a shorter file, or different bytes where it started or where
the last read ended).  Files are read in chunks of :data:`records.CHUNK`
bytes, so memory stays bounded whatever a file holds.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path

import numpy as np

from ..words import count
from . import mindspore_proto, msprobe, records, tensorboard_proto
from .bulklog import parse as parse_bulk
from .decoded import Landscape
from .discovery import HEAD_FOLDER, LOG, MS_LINEAGE, MS_SUMMARY, SNIFF_BYTES, TFEVENTS, Source, chained, discover, head_owner, reader_of
from .fastscalars import decode_records
from .fastsummaries import decode_summaries
from .identity import as_job, root_of, settle
from .line_chunks import LineChunks, split_lines
from .logs import LogParser
from .objects import local
from .parallel import default_workers, plan, poll_states
from .problems import SKIPPED_KINDS, Problem, ProblemKind, SaidOnce
from .records import HEADER, FrameReader
from .tables import NO_RANK, TABLE_KINDS, HistogramTable, ImageTable, LineageTable, MarkerTable, ScalarTable, Table, TensorTable, TextTable
from .tags import spellings
from .training_state import fold_head_runs
from .wire import DecodeError

_DECODERS = {MS_SUMMARY: mindspore_proto.decode_event_deferred, TFEVENTS: tensorboard_proto.decode_event}
_FINISHERS = {MS_SUMMARY: mindspore_proto.resolve_histograms}  # decodes what a decoder deferred, all records at once
_BULK = {MS_SUMMARY: decode_summaries}  # whole records without a template (histograms), all at once
_DECODE_ERRORS = (DecodeError, IndexError, ValueError, OverflowError, RecursionError)
LOG_CHUNK = 8 << 20  # bytes of a log read at once
FINGERPRINT = 64  # bytes compared at the start of a file and before the last read position
RACY_NS = 2_000_000_000  # a file's clock ticks at most this coarsely (FAT: 2 s): a rewrite within the tick keeps its mtime
_KEY_COLUMNS = ("run", "rank", "tag", "step", "wall_time")  # set by the reader; the record gives the other columns


@dataclass
class ReadResult:
    """Everything read from a path: one table per data kind (:data:`msnb.events.tables.TABLE_KINDS`), the files, and what was skipped.

    Attributes:
        scalars, histograms, tensors, images, texts, lineage, markers: the tables.
        problems: every :class:`Problem` met, in reading order.
        files: one dict per file read (path, kind, run, rank, version, records, bytes_read).
        origins: ``run -> {tag: writer}``, the file or folder each tag was read from (a read by job,
            :mod:`msnb.events.identity`); empty for a read of the runs as discovered.
        memory: MindSpore's memory reports in the logs (:mod:`msnb.events.memory_lines`), one dict a job of a log
            (run, rank, path, job, pid, line and the figures in MiB, None where not printed); a later row of the same
            run, path and job (a followed log's) replaces an earlier one: :func:`memory_rows` keeps the last.
    """

    scalars: ScalarTable = field(default_factory=ScalarTable)
    histograms: HistogramTable = field(default_factory=HistogramTable)
    tensors: TensorTable = field(default_factory=TensorTable)
    images: ImageTable = field(default_factory=ImageTable)
    texts: TextTable = field(default_factory=TextTable)
    lineage: LineageTable = field(default_factory=LineageTable)
    markers: MarkerTable = field(default_factory=MarkerTable)
    problems: list = field(default_factory=list)
    files: list = field(default_factory=list)
    origins: dict = field(default_factory=dict)  # run -> {tag: the writer it was read from} (jobs=True reads)
    memory: list = field(
        default_factory=list
    )  # MindSpore's memory reports: a dict a job of a log (msnb.events.memory_lines), later rows of a job replace earlier ones

    TABLES = tuple(TABLE_KINDS)

    @property
    def skipped(self) -> list:
        """Problems where data was skipped (damaged or truncated records)."""
        return [p for p in self.problems if p.kind in SKIPPED_KINDS]

    @property
    def empty(self) -> bool:
        return not any(len(getattr(self, t)) for t in self.TABLES)

    @property
    def runs(self) -> list[str]:
        found = set()
        for t in self.TABLES:
            found.update(getattr(self, t).run.tolist())
        return sorted(found)

    def __repr__(self) -> str:
        parts = [f"{len(getattr(self, t))} {t}" for t in self.TABLES if len(getattr(self, t))]
        return f"<ReadResult: {', '.join(parts) or 'nothing'} from {count(len(self.files), 'file')}; {count(len(self.problems), 'problem')}>"

    @classmethod
    def merge(cls, results, *, consume: bool = False) -> ReadResult:
        """One result of *results*, in order; with *consume* their tables are freed column by column as they are joined."""
        results = list(results)
        out = cls()
        for t in cls.TABLES:
            setattr(out, t, type(getattr(out, t)).concat([getattr(r, t) for r in results], consume=consume))
        for r in results:
            out.problems.extend(r.problems)
            out.files.extend(r.files)
            for run, tags in r.origins.items():
                out.origins.setdefault(run, {}).update(tags)
            out.memory.extend(r.memory)
        return out


def _add(out: ReadResult, kind: str, new: Table) -> None:
    """A file read in several chunks adds to what the earlier chunks gave; joined once, by :func:`_finish`."""
    out.__dict__.setdefault("_parts", {}).setdefault(kind, []).append(new)


def _finish(out: ReadResult) -> ReadResult:
    """Join each table's chunks once, column by column, freeing the chunks as it goes (no quadratic copies, no 2x peak)."""
    for kind, parts in out.__dict__.pop("_parts", {}).items():
        setattr(out, kind, type(parts[0]).concat([getattr(out, kind), *parts], consume=True))
    return out


def _bulk_histograms(bulk, src: Source) -> HistogramTable | None:
    """The histograms :func:`decode_summaries` read, as a table (rows in file order), or None."""
    if bulk is None or not bulk.hist_record.size:
        return None
    n = bulk.hist_record.size
    tags = np.empty(len(bulk.tags), dtype=object)
    tags[:] = bulk.tags
    h = bulk.histograms
    order = np.lexsort((bulk.hist_order, bulk.hist_record))
    columns = {name: getattr(h, name)[order] for name in (*h.STATS, "left", "right", "counts")}
    return HistogramTable(
        run=_full(n, src.run),
        rank=np.full(n, src.rank, dtype=np.int64),
        tag=tags[bulk.hist_tag[order]],
        step=bulk.hist_step[order],
        wall_time=bulk.hist_wall[order],
        **columns,
    )


def _in_file_order(bulk_table: HistogramTable, bulk, generic_table: HistogramTable, generic_records: list) -> HistogramTable:
    """Bulk and one-by-one histograms of one buffer, interleaved by record as the file holds them.

    A record is read wholly one way or the other, and each table is in file order already: a stable sort by record does it.
    """
    records = np.concatenate([np.sort(bulk.hist_record), np.asarray(generic_records, dtype=np.int64)])
    return HistogramTable.concat([bulk_table, generic_table]).take(np.argsort(records, kind="stable"))


def _full(n: int, value) -> np.ndarray:
    arr = np.empty(n, dtype=object)
    arr.fill(value)
    return arr


class FileState:
    """How far one file has been read, and what it yielded."""

    budget: int | None = None  # the most bytes one poll reads (a follow's step; set by the Follower), None: all there is
    cut: bool = False  # the last poll stopped at the budget: more is there to read

    def __init__(self, source: Source, *, verify: bool = True, explicit: bool = False, wanted: frozenset | None = None):
        self.source = source
        self.verify = verify
        self.explicit = explicit
        self.wanted = wanted  # real tags to keep (None: all); lineage, which has no tag, is always kept
        self.reads = 0  # times the file was read: an unchanged file is never read
        self.peeks = 0  # times its first bytes were compared with the last read's (a same-size rewrite within a clock tick)
        self.irregular = False  # the path is no regular file now (said once, until it is one again)
        self.reset()

    def reset(self):
        self.pos = 0
        self.ident = None
        self.version = None
        self.flavor = self.source.kind
        self.records = 0
        self.results: list[ReadResult] = []
        self.parser = LogParser() if self.source.kind == LOG else None
        self.msprobe = msprobe.CsvFile(self.source.path) if self.source.kind == msprobe.MSPROBE_CSV else None
        self.reported_final = False
        self.head = b""  # the file's first bytes as last read
        self.tail = b""  # the bytes just before self.pos as last read
        self.last_key = None  # (size, mtime_ns) when last polled: unchanged means nothing to read, not even a damaged tail
        self.looked = 0  # time.time_ns() of the last poll's stat: an mtime within RACY_NS of it proves nothing yet
        self.long_line = False  # inside a log line longer than a chunk: skip to its end
        self.noted: set = set()  # (tag, message) of values not read, already reported for this file

    def info(self) -> dict:
        s = self.source
        return {"path": s.path, "kind": self.flavor, "run": s.run, "rank": s.rank, "version": self.version, "records": self.records, "bytes_read": self.pos}

    def _replaced(self, f) -> bool:
        """Do the bytes at the start and before the last read position still read as they did?"""
        if self.head:
            f.seek(0)
            if f.read(len(self.head)) != self.head:
                return True
        if self.tail:
            f.seek(self.pos - len(self.tail))
            if f.read(len(self.tail)) != self.tail:
                return True
        return False

    def _racy(self) -> bool:
        """Was the file's mtime, when last looked at, within a clock tick of that look?  A rewrite at the same size
        since then may have kept both its size and its mtime (git's "racily clean" entries)."""
        return self.last_key is not None and self.looked - self.last_key[1] < RACY_NS

    def _head_changed(self, path: str) -> bool:
        """Do the file's first bytes (and those before the last read position) differ from the last read's?  Read only
        while :meth:`_racy`; counted in :attr:`peeks`, not :attr:`reads`."""
        self.peeks += 1
        try:
            with open(path, "rb", opener=_open_nonblocking) as f:
                return stat.S_ISREG(os.fstat(f.fileno()).st_mode) and self._replaced(f)
        except OSError:
            return False

    def _remember(self, f) -> None:
        if len(self.head) < FINGERPRINT and self.pos:
            f.seek(0)
            self.head = f.read(min(FINGERPRINT, self.pos))
        if self.pos:
            f.seek(max(0, self.pos - FINGERPRINT))
            self.tail = f.read(self.pos - max(0, self.pos - FINGERPRINT))

    def poll(self, *, final: bool) -> ReadResult:
        """Read what was added since the last poll; returns only the new data."""
        out = ReadResult()
        path = self.source.path
        try:
            st = os.stat(path)
        except OSError as exc:
            if final and not self.results:
                out.problems.append(Problem(path, None, ProblemKind.UNREADABLE, f"cannot read: {exc.strerror or exc}", "error"))
            return out
        if not stat.S_ISREG(st.st_mode):  # swapped for a FIFO or a device since discovery: opening it could block for ever
            if not self.irregular:
                self.irregular = True
                out.problems.append(
                    Problem(path, None, ProblemKind.UNREADABLE, "not a regular file (a FIFO, socket, device or broken link); not read", "warning")
                )
            return out
        self.irregular = False
        ident = (st.st_dev, st.st_ino)
        replaced = self.ident is not None and (ident != self.ident or st.st_size < self.pos)
        if replaced:
            self.reset()
        self.ident = ident
        key = (st.st_size, st.st_mtime_ns)
        unchanged = key == self.last_key and not (self._racy() and self._head_changed(path))
        self.last_key, self.looked = key, time.time_ns()
        if unchanged and not (final and self.pos < st.st_size):
            if replaced:
                out.problems.append(self._replaced_problem())
            if final:
                self._final_checks(out, st.st_size)
            return out
        whole = reader_of(self.source.kind)
        if whole is not None:  # a table or JSON document: read whole again whenever it changed
            self._read_whole(whole, st.st_size, replaced or bool(self.results), out)
            if final:
                self.reported_final = True
            self.results = [out]
            return out
        size = st.st_size
        self.cut = self.budget is not None and size - self.pos > self.budget
        if self.cut:  # a follow step reads a bounded slice; the rest at the next step
            size, final, self.last_key = self.pos + self.budget, False, None
        try:
            self.reads += 1
            with open(path, "rb", opener=_open_nonblocking) as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped between the stat and the open
                    raise OSError(f"{path} is no longer a regular file")
                if not replaced and self.pos and self._replaced(f):
                    replaced = True
                    self.reset()
                    self.ident, self.last_key = ident, key
                if replaced:
                    out.problems.append(self._replaced_problem())
                if self.source.kind == LOG:
                    self._read_log(f, size, final, out)
                elif self.source.kind in msprobe.KINDS:
                    self._read_msprobe(f, size, final, out)
                else:
                    self._read_events(f, size, final, out)
                self._remember(f)
        except OSError as exc:
            out.problems.append(Problem(path, self.pos, ProblemKind.UNREADABLE, f"read failed: {exc.strerror or exc}", "error"))
        _finish(out)
        if HEAD_FOLDER.search(self.source.run) and len(out.scalars):
            out.scalars = fold_head_runs(out.scalars)  # add_scalars' head_<i> folders are the run above them: folded here, once
        if final:
            self._final_checks(out, st.st_size)
        self.results.append(out)
        return out

    def _read_whole(self, reader, size: int, again: bool, out: ReadResult) -> None:
        """A whole-file format (:attr:`msnb.events.discovery.Format.reader`): its rows under this source's run and rank."""
        src = self.source
        self.reads += 1
        try:
            got = reader(src.path, run=src.run, tags=self.wanted)
        except OSError as exc:
            out.problems.append(Problem(src.path, None, ProblemKind.UNREADABLE, f"read failed: {exc.strerror or exc}", "error"))
            return
        table = got.scalars
        if src.rank != NO_RANK and len(table) and not (table.rank != NO_RANK).any():
            table.rank = np.full(len(table), src.rank, dtype=np.int64)
        if self.wanted is not None and len(table):
            table = table.take(np.isin(table.tag, list(self.wanted)))
        for kind in TABLE_KINDS:
            setattr(out, kind, getattr(got, kind))
        out.scalars = table
        if again and self.results:
            out.problems.append(self._replaced_problem())
        out.problems.extend(got.problems)
        self.records = len(table)
        self.pos = size
        self.flavor = src.kind
        try:
            with open(src.path, "rb", opener=_open_nonblocking) as f:
                self.head = f.read(min(FINGERPRINT, size))  # a same-size rewrite shows here (:meth:`_head_changed`)
        except OSError:
            self.head = b""

    def _replaced_problem(self) -> Problem:
        return Problem(
            self.source.path,
            None,
            ProblemKind.REPLACED,
            "file was replaced, rewritten or truncated since the last read; its earlier rows were dropped and it was read again",
            "info",
        )

    def _final_checks(self, out: ReadResult, size: int) -> None:
        if self.reported_final:
            return
        self.reported_final = True
        path = self.source.path
        if self.source.kind in msprobe.KINDS:
            return  # its reader says what it found (an empty file, a foreign header) as it reads
        if self.source.kind == LOG:
            if self.parser.matched == 0 and not self.parser.memory.jobs and self.explicit:
                what = "empty file" if size == 0 else "no LossMonitor, TimeMonitor or MFLossMonitor lines found"
                out.problems.append(Problem(path, None, ProblemKind.EMPTY if size == 0 else ProblemKind.FOREIGN, what))
            return
        if size == 0:
            out.problems.append(Problem(path, 0, ProblemKind.EMPTY, "zero-length event file: nothing was ever written to it"))
        elif self.records == 0:
            if self.verify and _chained_file(path):
                what = "no record's checksums hold, yet its records chain: written without checksums (MindInsight's tests zero them); read it with verify=False"
            else:
                what = "no intact record found: not an event file, or damaged throughout"
            out.problems.append(Problem(path, 0, ProblemKind.FOREIGN, what, "error"))

    # -------------------------------------------------------------- events
    def _read_events(self, f, size: int, final: bool, out: ReadResult) -> None:
        frames = FrameReader(self.source.path, verify=self.verify, chunk=records.CHUNK)
        for buf, base, offsets, lengths in frames.read(f, self.pos, size, final=final):
            out.problems.extend(frames.problems)
            frames.problems.clear()
            self._decode(buf, base, offsets, lengths, out)
            del buf  # let the next chunk replace this one instead of joining it
        out.problems.extend(frames.problems)
        self.pos = frames.pos

    def _decode(self, buf, base: int, offsets, lengths, out: ReadResult) -> None:
        """Decode the records found in *buf* (which starts at file offset *base*) into *out*'s tables."""
        if offsets.size == 0:
            return
        if self.flavor == MS_LINEAGE:
            self._decode_lineage(buf, base, offsets, lengths, out)
            return
        src = self.source
        if self.records == 0 and self.version is None:
            self._settle_flavor(buf, base, int(offsets[0]), int(lengths[0]), out)
        wanted = self.wanted
        cols, generic, errors, bulk = decode_records(
            buf, offsets, lengths, _DECODERS[self.flavor], _FINISHERS.get(self.flavor), wanted=wanted, bulk=_BULK.get(self.flavor)
        )
        for i, exc in errors:
            out.problems.append(Problem(src.path, base + int(offsets[i]) - HEADER, ProblemKind.DECODE, f"record could not be decoded: {exc}"))
        self.records += int(offsets.size) - len(errors)

        tags, tag_ids, steps, walls, values = cols.finish()
        n = steps.size
        if n:
            tag_arr = np.empty(len(tags), dtype=object)
            tag_arr[:] = tags
            _add(
                out,
                "scalars",
                ScalarTable(run=_full(n, src.run), rank=np.full(n, src.rank, dtype=np.int64), tag=tag_arr[tag_ids], step=steps, wall_time=walls, value=values),
            )

        by_kind: dict = {}
        markers = []
        hist_records = []  # the record of each generic histogram row, to put them in file order with the bulk ones
        generic.sort(key=lambda item: item[0])
        for i, ev in generic:
            if ev.version is not None and self.version is None:
                self.version = ev.version
            if ev.graph_bytes is not None and (wanted is None or "" in wanted):
                markers.append(("", ev.step, ev.wall_time, "graph", ev.graph_bytes))
            for tag, message in ev.notes:
                self._note(out, tag, message, base + int(offsets[i]) - HEADER)
            for tag, record in ev.others:
                if wanted is not None and tag not in wanted and record.KIND != "lineage":  # lineage has no tag: always kept
                    continue
                if isinstance(record, Landscape):
                    markers.append((tag, ev.step, ev.wall_time, "loss_landscape", record.bytes))
                    continue
                by_kind.setdefault(record.KIND, []).append((tag, ev.step, ev.wall_time, record))
                if record.KIND == "histograms":
                    hist_records.append(i)
        histograms = _bulk_histograms(bulk, src)
        for kind, rows in by_kind.items():
            table_cls = TABLE_KINDS[kind]
            tags_, steps_, walls_, found = zip(*rows)
            cols_ = {"tag": list(tags_), "step": list(steps_), "wall_time": list(walls_)}
            for c in table_cls.COLUMNS:
                if c in _KEY_COLUMNS:
                    continue
                cols_[c] = list(map(attrgetter(c), found))  # one column at a time: thousands of rows cost a C loop each
            m = len(rows)
            cols_["run"] = _full(m, src.run)
            cols_["rank"] = np.full(m, src.rank)
            table = table_cls(**cols_)
            if kind == "histograms" and histograms is not None:
                table = _in_file_order(histograms, bulk, table, hist_records)
                histograms = None
            _add(out, kind, table)
        if histograms is not None:
            _add(out, "histograms", histograms)
        if markers:
            m = len(markers)
            _add(
                out,
                "markers",
                MarkerTable(
                    run=_full(m, src.run),
                    rank=np.full(m, src.rank),
                    tag=[x[0] for x in markers],
                    step=[x[1] for x in markers],
                    wall_time=[x[2] for x in markers],
                    kind=[x[3] for x in markers],
                    bytes=[x[4] for x in markers],
                ),
            )

    def _decode_lineage(self, buf, base: int, offsets, lengths, out: ReadResult) -> None:
        """MindSpore's lineage records (one per record, decoded alone): a :class:`LineageTable` in *out*."""
        src = self.source
        rows = []
        for o, n in zip(offsets.tolist(), lengths.tolist()):
            try:
                rec = mindspore_proto.decode_lineage(buf, o, o + n)
            except _DECODE_ERRORS as exc:
                out.problems.append(Problem(src.path, base + o - HEADER, ProblemKind.DECODE, f"lineage record could not be decoded: {exc}"))
                continue
            self.records += 1
            if rec.get("note"):
                out.problems.append(Problem(src.path, base + o - HEADER, ProblemKind.DECODE, rec["note"], "info"))
            if rec["kind"] == "version":
                self.version = self.version or rec["version"]
                continue
            rows.append(rec)
        if rows:
            _add(
                out,
                "lineage",
                LineageTable(
                    run=_full(len(rows), src.run),
                    rank=np.full(len(rows), src.rank),
                    step=[r["step"] for r in rows],
                    wall_time=[r["wall_time"] for r in rows],
                    kind=[r["kind"] for r in rows],
                    fields=[r["fields"] for r in rows],
                ),
            )

    def _note(self, out: ReadResult, tag: str, message: str, offset: int | None) -> None:
        """A value recognised and not read: reported once per tag and kind of value in this file, where it was first seen."""
        if (tag, message) in self.noted:
            return
        self.noted.add((tag, message))
        what = f"tag {tag!r}: " if tag else ""
        out.problems.append(Problem(self.source.path, offset, ProblemKind.NOT_READ, f"{what}{message} (reported once per tag)", "info"))

    def _settle_flavor(self, buf, base: int, o: int, n: int, out: ReadResult) -> None:
        """The first record names the writer: trust it over the file name.

        Both formats share the Event envelope, so either decoder reads the version string.
        """
        try:
            version = _DECODERS[self.flavor](buf, o, o + n).version or ""
        except _DECODE_ERRORS:
            return
        if version.startswith("brain.Event"):
            self.flavor = TFEVENTS
        elif version.startswith(mindspore_proto.VERSION_PREFIXES):
            self.flavor = MS_SUMMARY
        elif version:
            out.problems.append(
                Problem(self.source.path, base + o - HEADER, ProblemKind.FOREIGN, f"unexpected version record {version!r}; reading it as {self.flavor}", "info")
            )

    # -------------------------------------------------------------- msprobe
    def _read_msprobe(self, f, size: int, final: bool, out: ReadResult) -> None:
        """msprobe's monitor CSVs (rows appended step by step) and its anomaly.json (rewritten whole): :mod:`msprobe`."""
        src = self.source
        if src.kind == msprobe.MSPROBE_ANOMALY:
            table, problems, done = msprobe.read_anomalies(f, size, src.path, src.run, src.rank, final)
            if done:
                self.pos = size
            kind = "markers"
        else:
            self.pos, table, problems = msprobe.read_csv(self.msprobe, f, self.pos, size, final, src.run, src.rank)
            kind = "scalars"
        out.problems.extend(problems)
        if table is not None:
            if self.wanted is not None:
                table = table.take(np.isin(table.tag, list(self.wanted)))
            self.records += len(table)
            _add(out, kind, table)

    # -------------------------------------------------------------- logs
    def _read_log(self, f, size: int, final: bool, out: ReadResult) -> None:
        """Parse whole lines, :data:`LOG_CHUNK` bytes at a time; a line longer than that is parsed by its start.

        Points gather in compact columns (a tag code, step, time, value: 25 bytes a point) and become one
        table at the end, so a long log costs little more than its table.
        """
        cols = _LogColumns()
        self._read_log_chunks(f, size, final, out, cols)
        for message in self.parser.take_declined():  # once a read, however many chunks it took (one sentence, one count)
            out.problems.append(Problem(self.source.path, None, ProblemKind.NOT_READ, message, "warning"))
        for message in self.parser.take_units():
            out.problems.append(Problem(self.source.path, None, ProblemKind.UNIT, message, "warning"))
        self._memory_rows(out)
        table = cols.table(self.source, self.wanted)
        if len(table):
            _add(out, "scalars", table)

    def _memory_rows(self, out: ReadResult) -> None:
        """The memory reports this read changed, under the file's run and rank, and the figures refused (said)."""
        src = self.source
        for row in self.parser.memory.take_rows():
            out.memory.append({"run": src.run, "rank": src.rank, "path": src.path} | row)
        for message in self.parser.memory.take_problems():
            out.problems.append(Problem(src.path, None, ProblemKind.NOT_READ, message, "warning"))

    def _read_log_chunks(self, f, size: int, final: bool, out: ReadResult, cols) -> None:
        """Whole lines from :attr:`pos` (:mod:`line_chunks`; CR-only line ends are line ends too); a line longer than a
        chunk is parsed by its start, which the parser counts as a long line."""
        chunks = LineChunks(chunk=LOG_CHUNK, max_line=self.parser.max_line, cr_ends=True, pos=self.pos, in_long_line=self.long_line)
        try:
            for _offset, data, _long in chunks.read(f, size, final):
                self._feed(data, out, cols)
        finally:
            self.pos, self.long_line = chunks.pos, chunks.in_long_line

    def _feed(self, body: bytes, out: ReadResult, cols) -> None:
        bulk = parse_bulk(self.parser, body, self.wanted)
        if bulk is not None:  # every line of the chunk of a layout read at numpy speed (a few read alone by the line reader)
            points, lines = bulk
            self.parser.lines += lines
            if points:
                self.records += len(points[1])
                cols.add_columns(*points)
        else:
            before = self.parser.long_lines
            points = self.parser.feed(split_lines(body.decode("utf-8", errors="replace")))
            if self.parser.long_lines > before:
                out.problems.append(
                    Problem(
                        self.source.path,
                        None,
                        ProblemKind.LINE,
                        f"{count(self.parser.long_lines - before, 'line')} longer than {self.parser.max_line:,} characters; only their start was parsed",
                        "info",
                    )
                )
            self.records += len(points)
            cols.add(points)


class _LogColumns:
    """Log points of one poll as compact numpy parts, joined once into a :class:`ScalarTable`."""

    def __init__(self):
        self.codes: dict = {}
        self.parts: list = []

    def add(self, points: list) -> None:
        if not points:
            return
        codes = self.codes
        tag = np.fromiter((codes.setdefault(p[0], len(codes)) for p in points), dtype=np.int32, count=len(points))
        step = np.fromiter((p[1] for p in points), dtype=np.int64, count=len(points))
        wall = np.fromiter((p[2] for p in points), dtype=np.float64, count=len(points))
        value = np.fromiter((p[3] for p in points), dtype=np.float64, count=len(points))
        self.parts.append([tag, step, wall, value])

    def add_columns(self, names: list, tag_index: np.ndarray, step: np.ndarray, wall: np.ndarray, value: np.ndarray) -> None:
        """Points already in columns (:mod:`msnb.events.bulklog`): *tag_index* indexes *names*."""
        if not step.size:
            return
        lut = np.array([self.codes.setdefault(name, len(self.codes)) for name in names], dtype=np.int32)
        self.parts.append([lut[tag_index], step.astype(np.int64, copy=False), wall.astype(np.float64, copy=False), value.astype(np.float64, copy=False)])

    def table(self, src: Source, wanted: frozenset | None = None) -> ScalarTable:
        """The points as one table; only the *wanted* tags (None: all), chosen by code before any string is made."""
        if not self.parts:
            return ScalarTable()
        columns = []
        for i in range(4):
            columns.append(np.concatenate([part[i] for part in self.parts]))
            for part in self.parts:
                part[i] = None  # free each part's column once it is copied
        self.parts = []
        tag_codes, step, wall, value = columns
        if wanted is not None:
            keep = np.array([name in wanted for name in self.codes], dtype=bool)
            if not keep.all():
                mask = keep[tag_codes]
                tag_codes, step, wall, value = tag_codes[mask], step[mask], wall[mask], value[mask]
        names = np.empty(len(self.codes), dtype=object)
        for name, code in self.codes.items():
            names[code] = name
        n = step.size
        return ScalarTable(run=_full(n, src.run), rank=np.full(n, src.rank, dtype=np.int64), tag=names[tag_codes], step=step, wall_time=wall, value=value)


class Follower:
    """Follows a path while a job writes to it; each :meth:`poll` returns only new data.

    New files and new ``rank_N`` directories are picked up; a partial last
    record waits for the next poll; a replaced file is read again from the
    start (its earlier rows are dropped from :attr:`result`).  Polling a tree
    that did not change costs a stat per file and per directory.

    Args:
        path: a file, a run directory or a tree of runs (it may not exist yet).
        verify: check both checksums of every record.
        run: read only this run's files (its name relative to *path*, ``"."``
            for *path* itself), never those of runs nested below it.
        names: a run's identity from its name as discovered (relative to *path*): what its rows and files
            carry in their ``run`` column (a key ``A/exp``, a label ``exp``), so nobody renames them
            afterwards; an add_scalars head folder goes under its run's.  None: the names as discovered.
        tags: read only these tags (real tags or meanings: ``loss`` keeps ``loss/auto``, ``lm-loss``...,
            see :func:`msnb.events.tags.spellings`); None reads all.  Records of other tags are
            framed and checked but not decoded where the layout proves which tag they hold.
            Lineage records, which have no tag, are always kept.
        workers: processes a poll with much to read may use, this one included (None: the idle cores, capped);
            the result is the same as with 1.
        jobs: read by run identity (:mod:`msnb.events.identity`): one run per job, not per writer's folder
            (``output/log`` and ``output/tensorboard`` are the job's run), each tag from the writer that keeps it
            most fully, the other copies said (:attr:`ReadResult.origins` names each tag's writer).  Applies to
            :attr:`result` and :meth:`drain`; :meth:`poll` hands each file's new rows as read.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        verify: bool = True,
        run: str | None = None,
        names: Callable[[str], str] | None = None,
        tags=None,
        workers: int | None = 1,
        jobs: bool = False,
    ):
        self.path = Path(local(path))  # a bucket's prefix: its mirror (msnb.events.objects)
        self.jobs = jobs
        self.verify = verify
        self.run = run
        self.names = names
        self.tags = None if tags is None else sorted(spellings(tags))
        self._wanted = None if tags is None else frozenset(self.tags)
        self.workers = default_workers() if workers is None else max(1, int(workers))
        self._states: dict[str, FileState] = {}
        self._order: list[str] = []
        self._dir_cache: dict = {}
        self._problems: list = []
        self._cached: ReadResult | None = None
        self._walk = SaidOnce()  # what walking the tree found (loops, folders it cannot list), said once
        self.step_bytes: int | None = None  # the most bytes a poll reads from one file (a follow's bounded step); None: all

    def poll(self, *, final: bool = False) -> ReadResult:
        return ReadResult.merge(self.poll_files(final))

    def poll_files(self, final: bool) -> list[ReadResult]:
        """What each file added (one result per file, in order, not joined), recorded in this follower.

        For a caller that joins them itself, or wants only :meth:`drain`'s one copy at the end (``msnb.read``, ``msnb runs``).
        """
        if not self.path.exists():
            new = ReadResult()
            if final:
                new.problems.append(Problem(str(self.path), None, ProblemKind.MISSING, "no such file or directory", "error"))
                self._problems.extend(new.problems)
            return [new]
        explicit = self.path.is_file()
        found: list = []
        sources = discover(self.path, self._dir_cache, found)
        runs = {s.run for s in sources}
        if self.jobs:  # one run per job: a writer's folder names none (identity's rule)
            sources = [replace(s, run=job) if (job := as_job(s, runs)) != s.run else s for s in sources]
            runs = {s.run for s in sources}
        if self.run is not None:  # the run's own files, and its add_scalars head folders (the reader folds them into it)
            sources = [s for s in sources if s.run == self.run or head_owner(s.run, runs) == self.run]
        if self.names is not None:
            sources = [self._named(s, runs) for s in sources]
        before = len(self._walk.problems)
        if self._walk.add(found):  # a loop is reported once, not at every poll
            self._problems.extend(self._walk.problems[before:])
            self._cached = None
        for src in sources:
            if src.path not in self._states:
                self._states[src.path] = FileState(src, verify=self.verify, explicit=explicit, wanted=self._wanted)
            self._states[src.path].budget = self.step_bytes
        self._order = [s.path for s in sources] + [p for p in self._order if p not in {s.path for s in sources}]
        news = self._poll_states(final)
        for new in news:
            self._problems.extend(new.problems)
            if not new.empty or new.problems:
                self._cached = None
        for st in (self._states[p] for p in self._order):
            if st.parser is not None and st.parser.take_withdrawn_unit():  # what one read of the file as it is now would not say
                self._problems = [q for q in self._problems if not (q.path == st.source.path and q.kind == ProblemKind.UNIT)]
                self._cached = None
        return news

    def _named(self, src: Source, runs: set) -> Source:
        """*src* under its run's identity (:attr:`names`); an add_scalars head folder under its owner's."""
        owner = head_owner(src.run, runs)
        if owner is None:
            name = self.names(src.run)
        else:
            tail = src.run if owner == "." else src.run[len(owner) + 1 :]
            above = self.names(owner)
            name = tail if above == "." else f"{above}/{tail}"
        return src if name == src.run else replace(src, run=name)

    def _poll_states(self, final: bool) -> list:
        """Poll every file in order: here, or in worker processes when there is much to read."""
        states = [self._states[p] for p in self._order]
        tasks = plan(_pending(states), self.workers) if self.workers > 1 else []
        if not tasks:
            return [st.poll(final=final) for st in states]
        polled = set(i for t in tasks for i in t)
        news = dict(zip(sorted(polled), poll_states(states, tasks, self.workers, final=final)))
        for p, st in zip(self._order, states):
            self._states[p] = st  # the workers' states, advanced
        return [news[i] if i in polled else st.poll(final=final) for i, st in enumerate(states)]

    def close(self) -> ReadResult:
        """A last poll that reports whatever is still incomplete as truncated."""
        return self.poll(final=True)

    @property
    def result(self) -> ReadResult:
        """Everything read so far, across polls."""
        if self._cached is None:
            if self.jobs:
                merged = self._settled([ReadResult.merge(self._states[p].results) for p in self._order])
            else:
                merged = ReadResult.merge(r for p in self._order for r in self._states[p].results)
                merged.problems = list(self._problems)
            merged.files = [self._states[p].info() for p in self._order]
            self._cached = merged
        return self._cached

    def _settled(self, per_file: list, consume: bool = False) -> ReadResult:
        """Each file's rows (one result per path of :attr:`_order`) joined as runs by job: each tag from one writer."""
        sources = [self._states[p].source for p in self._order]
        scalars, copies, origins = settle(list(zip(sources, [r.scalars for r in per_file])), root_of(self.path))
        for r, s in zip(per_file, scalars):
            r.scalars = s
        merged = ReadResult.merge(per_file, consume=consume)
        merged.problems = list(self._problems) + copies
        merged.origins = origins
        return merged

    def drain(self) -> ReadResult:
        """Everything read, joined while the per-file parts are freed (a one-shot read needs no second copy).

        The follower keeps no rows afterwards.
        """
        if self.jobs:
            merged = self._settled([ReadResult.merge(self._states[p].results, consume=True) for p in self._order], consume=True)
        else:
            merged = ReadResult.merge((r for p in self._order for r in self._states[p].results), consume=True)
            merged.problems = list(self._problems)
        for p in self._order:
            self._states[p].results = []
        merged.files = [self._states[p].info() for p in self._order]
        return merged


def _chained_file(path: str) -> bool:
    """Do the file's first records chain with their checksums left unchecked (:func:`msnb.events.discovery.chained`)?"""
    try:
        with open(path, "rb", opener=_open_nonblocking) as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return False
    return len(head) >= 16 and chained(head)


def _open_nonblocking(path, flags):
    """``open``'s opener: a FIFO put in a file's place opens at once (and is then refused) instead of waiting for a writer."""
    return os.open(path, flags | os.O_NONBLOCK)


def _pending(states: list) -> list[tuple[int, int]]:
    """``(index, unread bytes)`` of each state's file that grew past where it was read."""
    out = []
    for i, st in enumerate(states):
        try:
            size = os.stat(st.source.path).st_size
        except OSError:
            continue
        unread = size - st.pos if size >= st.pos else size  # a shorter file is read again from the start
        if unread:
            out.append((i, unread))
    return out


def memory_rows(result: ReadResult, run: str | None = None) -> list[dict]:
    """*result*'s memory reports (of *run* alone when given), the last row of each run, file and job: a followed
    log's later rows replace its earlier ones, as a later report of a job replaces its earlier one."""
    last: dict = {}
    for row in result.memory:
        if run is None or row["run"] == run:
            last[(row["run"], row["path"], row["job"])] = row
    return list(last.values())


def read(
    path: str | os.PathLike, *, verify: bool = True, tags=None, workers: int | None = None, names: Callable[[str], str] | None = None, jobs: bool = False
) -> ReadResult:
    """Read every summary, event file and training log under *path*.

    *path* may be one file, one run directory or a tree of runs.  Damaged data
    never raises: intact records are returned and the rest is listed in
    ``result.problems``.

    Args:
        path: a file, a run directory or a tree of runs.
        verify: check both checksums of every record.
        tags: read only these tags (real tags or meanings, e.g. ``["loss", "lr"]``); None reads all.
            The result is the full read's with other tags' rows left out.
        workers: processes to read files in, this one included (it reads beside ``workers - 1`` worker processes;
            None: the idle cores, at most 8; 1: this process only).  Small trees are read here whatever it says;
            the result is the same.
        names: each run's identity from its name as discovered (see :class:`Follower`); None: those names.
        jobs: one run per job, each tag from the writer that keeps it most fully (see :class:`Follower`).

    Returns:
        A :class:`ReadResult`.
    """
    follower = Follower(path, verify=verify, tags=tags, workers=workers, names=names, jobs=jobs)
    follower.poll_files(final=True)
    return follower.drain()
