"""What an exporter already wrote, per source file, so exporting again writes only what is new.

Both bridges (TensorBoard and Parquet) write into a destination that outlives
one run of msnb.  The ledger, a JSON file in that destination, remembers for
every source file its identity (device, inode), how many bytes were read and
how many rows of each kind were written.  A later export skips unchanged files
without opening them; a grown file is read again through the same per-file
incremental reader :class:`msnb.events.Follower` uses, and its first rows (the
ones written before) are dropped; a replaced file (new inode, or shorter) is
exported again from its start.  Within one process the reader keeps its place,
so following a live job reads each byte once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..events.discovery import Source, discover
from ..events.reader import FileState, ReadResult

KINDS = ReadResult.TABLES  # scalars, histograms, tensors, images, texts, lineage, markers
VERSION = 1


class Ledger:
    """Yields, file by file, the rows of *src* no earlier export into the ledger's destination wrote."""

    def __init__(self, src, state_path, *, verify: bool = True, exclude=None):
        self.src = Path(src).resolve()
        self.state_path = Path(state_path)
        self.exclude = Path(exclude).resolve() if exclude is not None else None
        self.verify = verify
        self.unchanged = 0
        self.problems: list = []
        self._dir_cache: dict = {}
        self._files: dict[str, FileState] = {}
        self._seen: dict[str, dict] = {}
        self.state = self._load()

    def _load(self) -> dict:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            state = None
        if not isinstance(state, dict) or state.get("version") != VERSION or not isinstance(state.get("sources"), dict):
            state = {"version": VERSION, "sources": {}}
        return state

    def save(self) -> None:
        """Write the ledger atomically (a reader never sees half of it)."""
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, default=str))
        os.replace(tmp, self.state_path)

    @property
    def opened(self) -> int:
        """Source files read in this process (unchanged ones are never opened)."""
        return len(self._files)

    def forget(self, predicate) -> None:
        """Drop the records *predicate* picks: those files are exported again from their start."""
        for path in [p for p, rec in self.state["sources"].items() if predicate(rec)]:
            del self.state["sources"][path]

    @property
    def ever_written(self) -> bool:
        """Whether any source ever gave a row (in this process or an earlier export)."""
        return any(any(rec["written"].values()) for rec in self.state["sources"].values())

    def discover(self) -> list[Source]:
        """Every readable file under the source, less anything inside the excluded destination."""
        if not self.src.exists():
            return []
        found = discover(self.src, self._dir_cache)
        if self.exclude is None:
            return found
        return [s for s in found if not (Path(s.path) == self.exclude or self.exclude in Path(s.path).parents)]

    def new_rows(self, sources, *, final: bool):
        """``(source, ReadResult)`` for each source with rows not written before; updates the counts.

        Call :meth:`save` once the rows were written: a crash before that
        writes them again next time (duplicates), never loses them.
        """
        self.unchanged = 0
        for src in sources:
            try:
                st = os.stat(src.path)
            except OSError:
                continue
            ident = [st.st_dev, st.st_ino]
            rec = self.state["sources"].get(src.path)
            fs = self._files.get(src.path)
            if fs is None:
                if rec and rec["ident"] == ident and rec["pos"] == st.st_size:
                    self.unchanged += 1
                    continue
                if rec is None or rec["ident"] != ident or st.st_size < rec["pos"]:
                    rec = self.state["sources"][src.path] = {"ident": ident, "pos": 0, "written": {}}
                fs = self._files[src.path] = FileState(src, verify=self.verify)
                self._seen[src.path] = {}
            new = fs.poll(final=final)
            seen = self._seen[src.path]
            if any(p.kind == "replaced" for p in new.problems):
                seen.clear()
                rec["written"] = {}
            self.problems.extend(new.problems)
            rec["ident"], rec["pos"] = ident, fs.pos
            fresh = _drop_written(new, seen, rec["written"])
            if not fresh.empty:
                yield src, fresh


def _drop_written(new: ReadResult, seen: dict, done: dict) -> ReadResult:
    """The rows of *new* past those an earlier export wrote (rows of one file come in the same order every time)."""
    out = ReadResult()
    for attr in KINDS:
        table = getattr(new, attr)
        n = len(table)
        if not n:
            continue
        already = seen.get(attr, 0)
        start = max(0, done.get(attr, 0) - already)
        seen[attr] = already + n
        done[attr] = max(done.get(attr, 0), seen[attr])
        if start < n:
            setattr(out, attr, table if start == 0 else table.take(np.arange(start, n)))
    return out
