"""Reading a path into tables, once (:func:`read`) or again and again (:class:`Follower`).

Both go through the same per-file state: it remembers how far the file was
read, so a poll reads only what was appended, holds back a partial last record
(or log line) until it is complete, and starts over when the file was replaced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import mindspore_proto, tensorboard_proto
from .discovery import LOG, MS_LINEAGE, MS_SUMMARY, TFEVENTS, Source, discover
from .fastscalars import decode_records
from .logs import LogParser
from .records import HEADER, Problem, scan
from .tables import KIND_TABLES, LineageTable, MarkerTable, ScalarTable, Table
from .wire import DecodeError

CHUNK = 64 << 20  # bytes read and scanned at once: bounds memory on huge files
_DECODERS = {MS_SUMMARY: mindspore_proto.decode_event, TFEVENTS: tensorboard_proto.decode_event}
_SKIPS = ("truncated", "crc", "header", "decode")


@dataclass
class ReadResult:
    """Everything read from a path: tables by kind, the files, and what was skipped."""

    scalars: ScalarTable = field(default_factory=ScalarTable)
    histograms: Table = field(default_factory=KIND_TABLES["histogram"])
    tensors: Table = field(default_factory=KIND_TABLES["tensor"])
    images: Table = field(default_factory=KIND_TABLES["image"])
    texts: Table = field(default_factory=KIND_TABLES["text"])
    lineage: LineageTable = field(default_factory=LineageTable)
    markers: MarkerTable = field(default_factory=MarkerTable)
    problems: list = field(default_factory=list)
    files: list = field(default_factory=list)

    TABLES = ("scalars", "histograms", "tensors", "images", "texts", "lineage", "markers")

    @property
    def skipped(self) -> list:
        """Problems where data was skipped (damaged or truncated records)."""
        return [p for p in self.problems if p.kind in _SKIPS]

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
        return f"<ReadResult: {', '.join(parts) or 'nothing'} from {len(self.files)} file(s); {len(self.problems)} problem(s)>"

    @classmethod
    def merge(cls, results) -> ReadResult:
        results = list(results)
        out = cls()
        for t in cls.TABLES:
            setattr(out, t, type(getattr(out, t)).concat([getattr(r, t) for r in results]))
        for r in results:
            out.problems.extend(r.problems)
            out.files.extend(r.files)
        return out

    def to_parquet(self, path, **options):
        """Write these tables as a Hive-partitioned Parquet dataset under *path* (needs ``msnb[parquet]``).

        Each call adds new files; see :func:`msnb.bridges.parquet.to_parquet` for the layout and *options*.

        Returns:
            A :class:`msnb.bridges.parquet.ParquetReport`.
        """
        from ..bridges.parquet import to_parquet  # imported on use: pyarrow is optional

        return to_parquet(self, path, **options)


def _append(existing: Table, new: Table) -> Table:
    """A file read in several chunks adds to what the earlier chunks gave."""
    return type(new).concat([existing, new]) if len(existing) else new


def _full(n: int, value) -> np.ndarray:
    arr = np.empty(n, dtype=object)
    arr.fill(value)
    return arr


class FileState:
    """How far one file has been read, and what it yielded."""

    def __init__(self, source: Source, *, verify: bool = True, explicit: bool = False):
        self.source = source
        self.verify = verify
        self.explicit = explicit
        self.reads = 0  # times the file was opened: an unchanged file is never opened
        self.reset()

    def reset(self):
        self.pos = 0
        self.ident = None
        self.version = None
        self.flavor = self.source.kind
        self.records = 0
        self.results: list[ReadResult] = []
        self.parser = LogParser() if self.source.kind == LOG else None
        self.reported_final = False

    def info(self) -> dict:
        s = self.source
        return {"path": s.path, "kind": self.flavor, "run": s.run, "rank": s.rank, "version": self.version, "records": self.records, "bytes_read": self.pos}

    def poll(self, *, final: bool) -> ReadResult:
        """Read what was added since the last poll; returns only the new data."""
        out = ReadResult()
        path = self.source.path
        try:
            st = os.stat(path)
        except OSError as exc:
            if final and not self.results:
                out.problems.append(Problem(path, None, "unreadable", f"cannot read: {exc.strerror or exc}", "error"))
            return out
        ident = (st.st_dev, st.st_ino)
        if self.ident is not None and (ident != self.ident or st.st_size < self.pos):
            self.reset()
            out.problems.append(Problem(path, None, "replaced", "file was replaced or truncated since the last read; reading it again from the start", "info"))
        self.ident = ident
        if st.st_size == self.pos:
            if final:
                self._final_checks(out, st.st_size)
            return out
        try:
            self.reads += 1
            with open(path, "rb") as f:
                if self.source.kind == LOG:
                    self._read_log(f, st.st_size, final, out)
                else:
                    self._read_events(f, st.st_size, final, out)
        except OSError as exc:
            out.problems.append(Problem(path, self.pos, "unreadable", f"read failed: {exc.strerror or exc}", "error"))
        if final:
            self._final_checks(out, st.st_size)
        self.results.append(out)
        return out

    def _final_checks(self, out: ReadResult, size: int) -> None:
        if self.reported_final:
            return
        self.reported_final = True
        path = self.source.path
        if self.source.kind == LOG:
            if self.parser.matched == 0 and self.explicit:
                what = "empty file" if size == 0 else "no LossMonitor, TimeMonitor or MFLossMonitor lines found"
                out.problems.append(Problem(path, None, "empty" if size == 0 else "foreign", what))
            return
        if size == 0:
            out.problems.append(Problem(path, 0, "empty", "zero-length event file: nothing was ever written to it"))
        elif self.records == 0:
            out.problems.append(Problem(path, 0, "foreign", "no intact record found: not an event file, or damaged throughout", "error"))

    # -------------------------------------------------------------- events
    def _read_events(self, f, size: int, final: bool, out: ReadResult) -> None:
        chunk = CHUNK
        while self.pos < size:
            f.seek(self.pos)
            buf = f.read(chunk)
            if not buf:
                break
            at_eof = self.pos + len(buf) >= size
            sc = scan(buf, self.source.path, verify=self.verify, final=final and at_eof, base_offset=self.pos)
            out.problems.extend(sc.problems)
            self._decode(buf, sc.offsets, sc.lengths, out)
            if sc.end == 0 and not at_eof:
                chunk *= 2  # one record larger than the chunk: read more at once
                continue
            self.pos += sc.end
            if at_eof or sc.end == 0:
                break

    def _decode(self, buf: bytes, offsets, lengths, out: ReadResult) -> None:
        if offsets.size == 0:
            return
        src = self.source
        base = self.pos
        if self.flavor == MS_LINEAGE:
            rows = []
            for o, n in zip(offsets.tolist(), lengths.tolist()):
                try:
                    rec = mindspore_proto.decode_lineage(buf, o, o + n)
                except (DecodeError, IndexError, ValueError) as exc:
                    out.problems.append(Problem(src.path, base + o - HEADER, "decode", f"lineage record could not be decoded: {exc}"))
                    continue
                self.records += 1
                if rec["kind"] == "version":
                    self.version = self.version or rec["version"]
                    continue
                rows.append(rec)
            if rows:
                out.lineage = _append(
                    out.lineage,
                    LineageTable(
                        run=_full(len(rows), src.run),
                        rank=np.full(len(rows), src.rank),
                        step=[r["step"] for r in rows],
                        wall_time=[r["wall_time"] for r in rows],
                        kind=[r["kind"] for r in rows],
                        fields=[r["fields"] for r in rows],
                    ),
                )
            return

        if self.records == 0 and self.pos == 0:
            self._settle_flavor(buf, int(offsets[0]), int(lengths[0]), out)
        cols, generic, errors = decode_records(buf, offsets, lengths, _DECODERS[self.flavor])
        for i, exc in errors:
            out.problems.append(Problem(src.path, base + int(offsets[i]) - HEADER, "decode", f"record could not be decoded: {exc}"))
        self.records += int(offsets.size) - len(errors)

        tags, tag_ids, steps, walls, values = cols.finish()
        n = steps.size
        if n:
            tag_arr = np.empty(len(tags), dtype=object)
            tag_arr[:] = tags
            out.scalars = _append(
                out.scalars,
                ScalarTable(run=_full(n, src.run), rank=np.full(n, src.rank, dtype=np.int64), tag=tag_arr[tag_ids], step=steps, wall_time=walls, value=values),
            )

        by_kind: dict = {}
        markers = []
        generic.sort(key=lambda item: item[0])
        for _i, ev in generic:
            if ev.version is not None and self.version is None:
                self.version = ev.version
            if ev.graph_bytes is not None:
                markers.append(("", ev.step, ev.wall_time, "graph", ev.graph_bytes))
            for kind, tag, data in ev.others:
                if kind == "landscape":
                    markers.append((tag, ev.step, ev.wall_time, "loss_landscape", data["bytes"]))
                    continue
                by_kind.setdefault(kind, []).append((tag, ev.step, ev.wall_time, data))
        for kind, rows in by_kind.items():
            table_cls = KIND_TABLES[kind]
            cols_ = {c: [] for c in table_cls.COLUMNS}
            for tag, step, wall, data in rows:
                cols_["tag"].append(tag)
                cols_["step"].append(step)
                cols_["wall_time"].append(wall)
                for c in table_cls.COLUMNS[5:]:
                    cols_[c].append(data[c])
            m = len(rows)
            cols_["run"] = _full(m, src.run)
            cols_["rank"] = np.full(m, src.rank)
            attr = {"histogram": "histograms", "tensor": "tensors", "image": "images", "text": "texts"}[kind]
            setattr(out, attr, _append(getattr(out, attr), table_cls(**cols_)))
        if markers:
            m = len(markers)
            out.markers = _append(
                out.markers,
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

    def _settle_flavor(self, buf, o: int, n: int, out: ReadResult) -> None:
        """The first record names the writer: trust it over the file name.

        Both formats share the Event envelope, so either decoder reads the version string.
        """
        try:
            version = _DECODERS[self.flavor](buf, o, o + n).version or ""
        except (DecodeError, IndexError, ValueError):
            return
        if version.startswith("brain.Event"):
            self.flavor = TFEVENTS
        elif version.startswith(mindspore_proto.VERSION_PREFIXES):
            self.flavor = MS_SUMMARY
        elif version:
            out.problems.append(Problem(self.source.path, self.pos, "foreign", f"unexpected version record {version!r}; reading it as {self.flavor}", "info"))

    # -------------------------------------------------------------- logs
    def _read_log(self, f, size: int, final: bool, out: ReadResult) -> None:
        f.seek(self.pos)
        data = f.read(size - self.pos)
        if final:
            usable = len(data)
        else:
            usable = data.rfind(b"\n") + 1  # hold back a line still being written
        if usable <= 0:
            return
        text = data[:usable].decode("utf-8", errors="replace")
        points = self.parser.feed(text.splitlines())
        self.pos += usable
        self.records += len(points)
        if points:
            n = len(points)
            src = self.source
            out.scalars = _append(
                out.scalars,
                ScalarTable(
                    run=_full(n, src.run),
                    rank=np.full(n, src.rank, dtype=np.int64),
                    tag=[p[0] for p in points],
                    step=[p[1] for p in points],
                    wall_time=[p[2] for p in points],
                    value=[p[3] for p in points],
                ),
            )


class Follower:
    """Follows a path while a job writes to it; each :meth:`poll` returns only new data.

    New files and new ``rank_N`` directories are picked up; a partial last
    record waits for the next poll; a replaced file is read again from the
    start (its earlier rows are dropped from :attr:`result`).  Polling a tree
    that did not change costs a stat per file and per directory.
    """

    def __init__(self, path: str | os.PathLike, *, verify: bool = True):
        self.path = Path(path)
        self.verify = verify
        self._states: dict[str, FileState] = {}
        self._order: list[str] = []
        self._dir_cache: dict = {}
        self._problems: list = []
        self._cached: ReadResult | None = None

    def poll(self, *, final: bool = False) -> ReadResult:
        if not self.path.exists():
            new = ReadResult()
            if final:
                new.problems.append(Problem(str(self.path), None, "missing", "no such file or directory", "error"))
                self._problems.extend(new.problems)
            return new
        explicit = self.path.is_file()
        sources = discover(self.path, self._dir_cache)
        for src in sources:
            if src.path not in self._states:
                self._states[src.path] = FileState(src, verify=self.verify, explicit=explicit)
        self._order = [s.path for s in sources] + [p for p in self._order if p not in {s.path for s in sources}]
        news = [self._states[p].poll(final=final) for p in self._order]
        new = ReadResult.merge(news)
        self._problems.extend(new.problems)
        if not new.empty or new.problems:
            self._cached = None
        return new

    def close(self) -> ReadResult:
        """A last poll that reports whatever is still incomplete as truncated."""
        return self.poll(final=True)

    @property
    def result(self) -> ReadResult:
        """Everything read so far, across polls."""
        if self._cached is None:
            merged = ReadResult.merge(r for p in self._order for r in self._states[p].results)
            merged.problems = list(self._problems)
            merged.files = [self._states[p].info() for p in self._order]
            self._cached = merged
        return self._cached


def read(path: str | os.PathLike, *, verify: bool = True) -> ReadResult:
    """Read every summary, event file and training log under *path*.

    *path* may be one file, one run directory or a tree of runs.  Damaged data
    never raises: intact records are returned and the rest is listed in
    ``result.problems``.
    """
    follower = Follower(path, verify=verify)
    follower.poll(final=True)
    return follower.result
