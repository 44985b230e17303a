"""``msnb convert SRC --to tensorboard DST``: MindSpore summaries, lineage and logs as TensorBoard runs.

TensorBoard cannot open MindSpore summaries (it only opens names containing
``tfevents`` and reads the scalar from another field), so this writes what
msnb reads into ``DST/<run>/rank_N/events.out.tfevents.<time>.<host>.msnb``:
scalars as ``simple_value``, histograms with their bucket limits and counts,
images as PNG image summaries, tensors as tensor summaries, texts for the TEXT
tab, and lineage as the hparams plugin's session summaries (the HPARAMS tab)
plus one text per lineage record (nothing of it is lost).  Graphs and loss
landscapes have no TensorBoard counterpart and are counted, not written.

Idempotent: a :class:`~msnb.bridges.ledger.Ledger` in ``DST/.msnb-convert.json`` remembers, per source file, its identity,
how many bytes were read and how many rows of each kind were written, so a
second conversion skips unchanged files without opening them and writes only
the rows a grown file added (appending to the same output file).  A source
replaced since (a new inode, or shorter) is converted again from its start.
With ``follow`` the per-file incremental reader that :class:`msnb.events.Follower`
is built on keeps converting as a job writes; partial records wait for the next pass.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import AlreadyTensorBoard, NothingReadable, UsageError
from ..events.discovery import MS_LINEAGE, MS_SUMMARY, TFEVENTS
from ..events.objects import local
from ..safe_files import inside, plain_name, relative_parts
from ..words import count
from . import tfevents
from .ledger import Ledger, prepare_destination

STATE_FILE = ".msnb-convert.json"
_KINDS = ("scalars", "histograms", "tensors", "images", "texts", "lineage")


@dataclass
class ConvertReport:
    """What one conversion (all its passes) wrote, and what it could not."""

    src: str
    dst: str
    written: dict = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))
    files: list = field(default_factory=list)  # output files that received records
    unchanged: int = 0  # source files skipped because they had not changed since the last conversion
    not_converted: dict = field(default_factory=dict)  # graph / loss_landscape markers, tfevents sources
    problems: list = field(default_factory=list)
    passes: int = 0

    @property
    def total(self) -> int:
        return sum(self.written.values())

    def as_dict(self) -> dict:
        return {
            "src": self.src,
            "dst": self.dst,
            "written": dict(self.written),
            "files": list(self.files),
            "unchanged": self.unchanged,
            "not_converted": dict(self.not_converted),
            "problems": [p.as_dict() for p in self.problems],
            "passes": self.passes,
        }

    def format_text(self) -> str:
        if not self.total:
            head = f"nothing new to convert in {self.src}" + (
                f" ({count(self.unchanged, 'file')} unchanged since the last conversion)" if self.unchanged else ""
            )
        else:
            kinds = ", ".join(f"{n} {k}" for k, n in self.written.items() if n)
            head = f"wrote {kinds} to {count(len(self.files), 'event file')} under {self.dst}"
        lines = [head]
        for what, n in self.not_converted.items():
            lines.append(f"  not converted: {n} {what}")
        if self.total:
            lines.append(f"  view: tensorboard --logdir {self.dst}")
        return "\n".join(lines)


def _flatten(fields: dict, prefix: str = "") -> dict:
    """Lineage fields as hparams: numbers, strings and bools; nested dicts dotted; lists as JSON."""
    out = {}
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        elif isinstance(value, (bool, np.bool_, str)):
            out[name] = value
        elif isinstance(value, (int, float, np.integer, np.floating)):
            if math.isfinite(float(value)):
                out[name] = value
        elif value is not None:
            out[name] = json.dumps(value, default=str)
    return out


def _json_text(fields) -> str:
    """A lineage record for the TEXT tab: indented JSON in a Markdown code block."""
    return "```\n" + json.dumps(fields, indent=2, sort_keys=True, default=str) + "\n```"


class Converter:
    """Converts *src* into *dst* pass by pass; :func:`convert` drives it."""

    def __init__(self, src, dst, *, verify: bool = True):
        self.src = Path(local(src)).resolve()
        self.dst = prepare_destination(src, dst, what="the destination")
        self.report = ConvertReport(str(self.src), str(self.dst))
        self.ledger = Ledger(self.src, self.dst / STATE_FILE, verify=verify, exclude=self.dst)
        self._outputs = self.ledger.state.setdefault("outputs", {})
        problem = self._outputs_problem()
        if problem:
            raise self.ledger.refuse(problem)
        self._writers: dict[str, tfevents.EventFileWriter] = {}
        self._current: dict = {}
        # an output file deleted since: the rows it held are written again (into a new file)
        gone = {rel for rel, rec in self._outputs.items() if not (self.dst / rel / rec["file"]).exists()}
        if gone:
            for rel in gone:
                del self._outputs[rel]
            self.ledger.forget(lambda rec: bool(gone & set(rec.get("outputs", ()))))

    def _outputs_problem(self) -> str | None:
        """What is wrong with the ledger's output files (None: each is a plain name in a folder inside DST)."""
        if not isinstance(self._outputs, dict):
            return "has 'outputs' that is not an object"
        for rel, rec in self._outputs.items():
            if not relative_parts(rel):
                return f"names an output folder {rel!r} that is not a relative path inside the destination"
            if not (isinstance(rec, dict) and plain_name(rec.get("file")) and isinstance(rec.get("size"), int) and isinstance(rec.get("hparams", {}), dict)):
                return f"output {rel!r} is not a (file name, size, hparams) record"
            if not inside(self.dst / rel / rec["file"], self.dst):
                return f"output {rel}/{rec['file']} leads outside the destination (through a symlink)"
        return None

    def _inside(self, path: Path) -> Path:
        """*path* if it stays inside DST once resolved; a symlink planted in DST that leads out is refused."""
        if not inside(path, self.dst):
            raise UsageError(f"{path} leads outside the destination {self.dst} (a symlink): msnb writes only inside it")
        return path

    # -------------------------------------------------------------- where things go
    def _out_dir(self, run: str, rank: int) -> str:
        name = self.src.name if self.src.is_dir() else self.src.parent.name
        parts = [name or "run"] if run == "." else run.split("/")
        if rank >= 0:
            parts.append(f"rank_{rank}")
        return "/".join(parts)

    def _writer(self, out_rel: str) -> tfevents.EventFileWriter:
        w = self._writers.get(out_rel)
        if w is None:
            rec = self._outputs.get(out_rel)
            path = None
            if rec:
                candidate = self._inside(self.dst / out_rel / rec["file"])
                # append only to a regular file exactly as this converter left it; otherwise start a new one
                if candidate.is_file() and not candidate.is_symlink() and candidate.stat().st_size == rec["size"]:
                    path = candidate
            w = tfevents.EventFileWriter(self._inside(self.dst / out_rel), path=path)
            self._writers[out_rel] = w
            self._outputs[out_rel] = {"file": os.path.basename(w.path), "size": w.flush(), "hparams": (rec or {}).get("hparams", {})}
        if w.path not in self.report.files:
            self.report.files.append(w.path)
        return w

    # -------------------------------------------------------------- one pass
    def _sources(self):
        found = self.ledger.discover()
        tf = sum(1 for s in found if s.kind == TFEVENTS)
        ours = [s for s in found if s.kind != TFEVENTS]
        if tf and not any(s.kind in (MS_SUMMARY, MS_LINEAGE) for s in ours):
            raise AlreadyTensorBoard(
                f"{self.src} holds TensorBoard event files ({count(tf, 'tfevents file')}) and no MindSpore summary: "
                f"TensorBoard reads them as they are (tensorboard --logdir {self.src})"
            )
        if tf:
            self.report.not_converted["tfevents files (already TensorBoard)"] = tf
        return ours

    def run_pass(self, *, final: bool) -> int:
        """Convert what is new; returns the number of rows written in this pass."""
        self.report.passes += 1
        written = 0
        sources = self._sources()
        for src, new in self.ledger.new_rows(sources, final=final):
            self._current = self.ledger.state["sources"][src.path]
            for attr in _KINDS:
                if len(getattr(new, attr)):
                    written += self._write_table(attr, getattr(new, attr))
            for kind in new.markers.kind.tolist():
                key = {"graph": "graphs (MindSpore IR, no TensorBoard counterpart)"}.get(kind, f"{kind} records (no TensorBoard counterpart)")
                self.report.not_converted[key] = self.report.not_converted.get(key, 0) + 1
        self.report.unchanged = self.ledger.unchanged
        self.report.problems = list(self.ledger.problems)
        for out_rel, w in self._writers.items():
            self._outputs[out_rel]["size"] = w.flush()
        if written or sources:
            self.ledger.save()
        return written

    def _groups(self, table):
        """Row indices by output directory, in read order (one file's rows usually share one)."""
        if (table.run == table.run[0]).all() and (table.rank == table.rank[0]).all():
            return [(self._out_dir(table.run[0], int(table.rank[0])), np.arange(len(table)))]
        groups: dict = {}
        for i, (r, k) in enumerate(zip(table.run.tolist(), table.rank.tolist())):
            groups.setdefault((r, k), []).append(i)
        return [(self._out_dir(r, int(k)), np.asarray(idx)) for (r, k), idx in groups.items()]

    def _write_table(self, attr: str, t) -> int:
        n = 0
        for out_rel, idx in self._groups(t):
            w = self._writer(out_rel)
            outs = self._current.setdefault("outputs", [])
            if out_rel not in outs:
                outs.append(out_rel)
            idx = np.asarray(idx)
            if attr == "scalars":
                w.write_raw(tfevents.scalar_records(t.tag[idx].tolist(), t.step[idx], t.wall_time[idx], t.value[idx]))
            elif attr == "lineage":
                self._write_lineage(out_rel, w, t.take(idx))
            else:
                for i in idx.tolist():
                    w.write_event(int(t.step[i]), float(t.wall_time[i]), [self._value(attr, t, i)])
            n += len(idx)
        self.report.written[attr] += n
        return n

    @staticmethod
    def _value(attr: str, t, i: int) -> bytes:
        tag = t.tag[i]
        if attr == "histograms":
            return tfevents.histogram_value(tag, t.min[i], t.max[i], t.count[i], t.sum[i], t.left[i], t.right[i], t.counts[i])
        if attr == "images":
            return tfevents.image_value(tag, int(t.height[i]), int(t.width[i]), int(t.colorspace[i]), t.png[i])
        if attr == "tensors":
            dtype = t.dtype[i]
            return tfevents.tensor_value(tag, np.asarray(t.values[i]), dtype if dtype in tfevents.TF_DTYPES else None)
        return tfevents.text_value(tag, str(t.text[i]))

    def _write_lineage(self, out_rel: str, w, t) -> None:
        out = self._outputs[out_rel]
        hparams = dict(out.get("hparams", {}))
        changed = False
        start = None
        for step, wall, kind, fields in zip(t.step.tolist(), t.wall_time.tolist(), t.kind.tolist(), t.fields.tolist()):
            w.write_event(int(step), wall, [tfevents.text_value(f"lineage/{kind}", _json_text(fields))])
            if kind in ("train", "user_defined"):
                hparams.update(_flatten(fields))
                changed = True
                start = wall if start is None else start
            elif kind == "evaluation" and isinstance(fields.get("metric"), dict):
                numbers = {k: v for k, v in fields["metric"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                metrics = [tfevents.scalar_value(f"eval/{k}", float(v)) for k, v in numbers.items()]
                if metrics:
                    w.write_event(int(step), wall, metrics)
        if changed:
            w.write_event(0, start if start is not None else time.time(), tfevents.hparams_values(hparams, start or 0.0))
            out["hparams"] = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in hparams.items()}

    def close(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()


def convert(
    src, dst, *, follow: bool = False, interval: float = 2.0, timeout: float | None = None, stop=None, verify: bool = True, on_pass=None
) -> ConvertReport:
    """Convert MindSpore summaries, lineage and logs under *src* into TensorBoard runs under *dst*.

    Args:
        src: a summary file, a run directory or a tree of runs.
        dst: the TensorBoard log directory to write (created if missing).
        follow: keep converting as a job writes, until *timeout*, *stop* or Ctrl-C; a last pass then
            reports incomplete records as truncated.
        interval: seconds between passes when following.
        timeout: stop following after this many seconds (None: until stopped).
        stop: a callable returning True to stop following (e.g. ``threading.Event().is_set``).
        verify: check record CRCs (skip damaged records) while reading.
        on_pass: called with the report after each pass while following.

    Returns:
        A :class:`ConvertReport`: rows written per kind, output files, what was not converted, problems.

    Raises:
        AlreadyTensorBoard: *src* holds TensorBoard event files and no MindSpore summary.
        NothingReadable: without *follow*, *src* holds nothing msnb can read.
        UsageError: *src* does not exist (without *follow*); *dst* is *src*, holds it, is not a directory, is on a
            pseudo-filesystem or cannot be written; ``DST/.msnb-convert.json`` is not a ledger msnb wrote, or names a
            file outside *dst*.
    """
    if not follow and not Path(local(src)).exists():  # a bucket's prefix: its mirror (msnb.events.objects)
        raise UsageError(f"no such file or directory: {src}")
    conv = Converter(src, dst, verify=verify)
    try:
        return _drive(conv, src, follow, interval, timeout, stop, on_pass)
    except OSError as exc:  # the destination refused a write (full, read-only, removed): the sources are read as problems, never raised
        raise UsageError(f"cannot write under {conv.dst}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")) from None
    finally:
        conv.close()


def _drive(conv: Converter, src, follow: bool, interval: float, timeout, stop, on_pass) -> ConvertReport:
    """One pass, or passes until told to stop when following (see :func:`convert`)."""
    if not follow:
        conv.run_pass(final=True)
        if not conv.ledger.ever_written:
            raise NothingReadable(f"nothing msnb can read in {src}")
        return conv.report
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            conv.run_pass(final=False)
            if on_pass is not None:
                on_pass(conv.report)
            if (stop is not None and stop()) or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass
    conv.run_pass(final=True)
    return conv.report


__all__ = ["convert", "Converter", "ConvertReport", "AlreadyTensorBoard", "STATE_FILE"]
