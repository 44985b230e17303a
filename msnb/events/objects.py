"""Runs in object storage (``s3://bucket/prefix``, ``obs://bucket/prefix``) read by the same readers as files on disk.

A URL given wherever a run folder or base folder is taken becomes a :class:`Mirror`: a private folder of this
process (removed at exit) that holds, under the same relative names, the objects msnb would read from that
prefix, and nothing else.  Discovery, the readers, the follower, the worker processes and every command then read
that folder as they read any folder, so a bucket gives the very tables, runs and verdicts the same files give on
disk; only what is *said* names the URL (:func:`shown`: problems, file lists, errors).

What one sync costs: one paginated listing of the whole prefix (no request per folder); for an object whose
name alone says it is read (summaries, event files, ``*.log``) its body; for a name that needs its first bytes
(``nohup.out``, ``*.csv``, ``*.json``) the first :data:`~msnb.events.discovery.HEAD_BYTES` by range, and the
rest only when discovery's own sniff takes it; nothing at all for the rest (checkpoints, datasets).  Objects
are fetched concurrently (:data:`FETCHERS` at once).  A later sync (:func:`refresh`, asked by discovery at
every poll of a follow, at most once per :data:`RELIST_SECONDS`) lists again and, for an object that grew,
fetches only the bytes it gained, by range, after checking by range that its first bytes and the bytes before
its old end are unchanged; an object replaced (shorter, or changed where it was already read) is fetched whole
and its local copy swapped, so the reader starts it over as it does a replaced file.  An object that cannot be
fetched (access denied to it, deleted since the listing) is a problem of the read, and the others are kept.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..errors import ObjectStoreError
from . import msprobe
from .discovery import FORMATS, HEAD_BYTES, MAX_WALK_DEPTH, MAX_WALK_ENTRIES, SKIP_DIRS, classify, sniffed
from .problems import Problem, ProblemKind
from .s3 import Bucket, Counters, Refused, Url, cache_base, cached, parse

FETCHERS = 16
"""Objects fetched at once."""
RELIST_SECONDS = 1.0
"""A follow lists the prefix again at most this often, however many readers poll it."""
FINGERPRINT = 64
"""Bytes compared, by range, at an object's start and before its old end when it grew."""
WHOLE_NAMES = frozenset({"abnormal_global_norm.json", msprobe.ANOMALY_NAME})
"""Names read by name (mindformers' global-norm record, msprobe's anomalies): fetched whole."""

_lock = threading.RLock()
_mirrors: dict[str, Mirror] = {}  # URL -> its mirror, one per prefix given, for the life of the process


def is_url(path) -> bool:
    """Whether *path* names an object-store prefix (``s3://``, ``obs://``) rather than a local path."""
    return path is not None and parse(path) is not None


@dataclass
class _Seen:
    """What the mirror holds of one object: its size and tag when last looked at, and whether msnb reads it."""

    size: int
    etag: str
    ours: bool  # fetched (False: looked at and not msnb's: a checkpoint, a foreign CSV)


class Mirror:
    """The objects under one prefix that msnb reads, kept in a local folder of the same shape.

    Args:
        url: the prefix (a folder of runs, one run, or one object).
        counters: where requests and bytes are counted (default: the process's :data:`msnb.events.s3.COUNTERS`).
    """

    def __init__(self, url: Url, counters: Counters | None = None):
        self.url = url
        self.bucket = Bucket(url, counters)
        self.counters = self.bucket.counters
        self.base = cache_base() / url.scheme / url.bucket
        self.root = self.base / url.key if url.key else self.base
        self.single = False  # the URL names one object, not a prefix
        self.seen: dict[str, _Seen] = {}
        self.problems: list[Problem] = []
        self.synced = 0.0
        self.cut = False

    # ------------------------------------------------------------------ listing
    def _listing(self) -> dict:
        """``rel -> (size, etag, mtime)`` of the objects under the prefix that a walk would look at (one paginated listing)."""
        prefix = f"{self.url.key}/" if self.url.key else ""
        found: dict = {}
        for key, size, etag, mtime in self.bucket.list(prefix):
            rel = key[len(prefix) :]
            parts = rel.split("/")
            if not rel or rel.endswith("/") or any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1]) or len(parts) > MAX_WALK_DEPTH + 1:
                continue
            found[rel] = (size, etag, mtime)
            if len(found) >= MAX_WALK_ENTRIES:
                self.cut = True
                break
        if not found and self.url.key and not self.seen:
            one = self.bucket.head(self.url.key)  # the URL may name one object
            if one is not None:
                self.single = True
                self.root = self.base / self.url.key
                return {"": one}
        return found

    def sync(self) -> None:
        """List the prefix once and bring the local folder up to date (new, grown, replaced and deleted objects)."""
        with _lock:
            listing = self._listing()
            if not listing and not self.seen:
                raise ObjectStoreError(f"{self.url}: no object under this prefix at {self.bucket.endpoint}")
            for rel in [r for r in self.seen if r not in listing]:  # deleted: gone from the folder too
                del self.seen[rel]
                self._local(rel).unlink(missing_ok=True)
            first = not self.synced
            work = [(rel, size, etag, mtime) for rel, (size, etag, mtime) in listing.items() if self._changed(rel, size, etag)]
            failed = []
            if work:
                with ThreadPoolExecutor(min(FETCHERS, len(work))) as pool:
                    for rel, outcome in zip([w[0] for w in work], pool.map(lambda w: self._fetch_safely(*w), work)):
                        if outcome is not None:
                            failed.append((rel, outcome))
                            self._problem(rel, outcome)
            self.synced = time.monotonic()
            if first and failed and not any(s.ours for s in self.seen.values()):  # nothing could be read at all: one line
                raise ObjectStoreError(f"{self._shown(failed[0][0])}: {failed[0][1]}" + (f" (and {len(failed) - 1:,} more objects)" if len(failed) > 1 else ""))
            if not self.single:
                self.root.mkdir(parents=True, exist_ok=True)  # a prefix of objects msnb does not read is an empty folder, as on disk

    def _changed(self, rel: str, size: int, etag: str) -> bool:
        seen = self.seen.get(rel)
        return seen is None or seen.size != size or seen.etag != etag

    def _local(self, rel: str) -> Path:
        return self.root if self.single else self.root / rel

    def _shown(self, rel: str) -> str:
        return str(self.url if self.single else self.url.child(rel))

    def _problem(self, rel: str, message: str) -> None:
        self.problems.append(Problem(self._shown(rel), None, ProblemKind.UNREADABLE, message, "error"))

    # ------------------------------------------------------------------ fetching
    def _fetch_safely(self, rel: str, size: int, etag: str, mtime: float | None) -> str | None:
        """Fetch what *rel* needs (its local copy dated as the object is); the reason it could not be (one line), or None."""
        try:
            self._fetch(rel, size, etag)
            if mtime is not None and self.seen[rel].ours:
                os.utime(self._local(rel), (mtime, mtime))  # a run's age and activity read from its files' times
        except Refused as exc:  # the store refused or failed this one object: the others are kept
            self.seen.pop(rel, None)
            self._local(rel).unlink(missing_ok=True)
            return f"cannot fetch: {exc}"
        except OSError as exc:
            return f"cannot write its local copy: {exc.strerror or exc}"
        return None

    def _fetch(self, rel: str, size: int, etag: str) -> None:
        key = self.url.key if self.single else f"{self.url.key}/{rel}".lstrip("/")
        name = key.rsplit("/", 1)[-1]
        local = self._local(rel)
        seen = self.seen.get(rel)
        if seen is not None and not seen.ours:
            if seen.size >= HEAD_BYTES and seen.size < size:  # not ours by its head, and only grew: still not ours
                self.seen[rel] = _Seen(size, etag, False)
                return
        if seen is not None and seen.ours and size > seen.size and self._append(key, local, seen.size, size):
            self.seen[rel] = _Seen(size, etag, True)
            return
        if self.single or classify(name) is not None or name in WHOLE_NAMES:
            self._write(local, self.bucket.get(key))
            self.seen[rel] = _Seen(size, etag, True)
            return
        lower = name.lower()
        if not (lower.endswith((".csv", ".json")) or any(f.sniff is not None and f.name.search(lower) for f in FORMATS)):
            self.seen[rel] = _Seen(size, etag, False)  # nothing msnb reads is named so: never fetched
            return
        head = self.bucket.get(key, 0, min(size, HEAD_BYTES)) if size else b""
        self._write(local, head)
        ours = size <= HEAD_BYTES or bool(msprobe.file_kind(local) or sniffed(local, name)[0])
        if ours and size > len(head):
            with open(local, "ab") as f:
                f.write(self.bucket.get(key, len(head)))
        elif not ours:
            local.unlink(missing_ok=True)
        self.seen[rel] = _Seen(size, etag, ours)

    def _append(self, key: str, local: Path, old: int, size: int) -> bool:
        """Fetch only the bytes an object gained, when its first bytes and those before its old end are unchanged."""
        try:
            with open(local, "rb") as f:
                start = f.read(FINGERPRINT)
                f.seek(max(0, old - FINGERPRINT))
                before = f.read()
        except OSError:
            return False
        if len(before) != min(old, FINGERPRINT):  # the local copy is not what was fetched: fetch it whole
            return False
        if self.bucket.get(key, 0, len(start)) != start:
            return False
        gained = self.bucket.get(key, old - len(before), size)
        if gained[: len(before)] != before:
            return False
        with open(local, "r+b") as f:
            f.seek(old)
            f.write(gained[len(before) :])
            f.truncate()
        return True

    @staticmethod
    def _write(local: Path, data: bytes) -> None:
        """A new local copy put in place at once (another file, so a reader of the old one starts over)."""
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.msnb-part")
        tmp.write_bytes(data)
        os.replace(tmp, local)


def _covering(url: Url) -> Mirror | None:
    """The mirror already made for *url* or a prefix above it (the deepest), or None."""
    best = None
    for m in _mirrors.values():
        if m.url.scheme == url.scheme and m.url.bucket == url.bucket and (not m.url.key or url.key == m.url.key or url.key.startswith(m.url.key + "/")):
            if best is None or len(m.url.key) > len(best.url.key):
                best = m
    return best


def local(path, counters: Counters | None = None):
    """*path* itself when it is local; for a URL, the local folder (or file) that mirrors it, synced once.

    A URL below a prefix already mirrored is that mirror's subfolder (no second listing).

    Raises:
        ObjectStoreError: no such bucket, access denied, the endpoint unreachable, nothing under the prefix.
        MissingDependency: the object-store client is not installed.
    """
    url = parse(path)
    if url is None:
        return path
    with _lock:
        mirror = _covering(url)
        if mirror is None:
            mirror = Mirror(url, counters)
            mirror.sync()
            _mirrors[str(url)] = mirror
        if mirror.single or url.key == mirror.url.key:
            return mirror.root
        return mirror.root / url.key[len(mirror.url.key) :].lstrip("/")


def mirror_of(path) -> Mirror | None:
    """The mirror whose folder holds the local *path*, or None."""
    if path is None or not cached():
        return None
    text = os.path.abspath(os.fspath(path))
    with _lock:
        for m in sorted(_mirrors.values(), key=lambda m: -len(str(m.root))):
            root = str(m.root)
            if text == root or text.startswith(root + os.sep):
                return m
    return None


def refresh(path, problems: list | None = None) -> None:
    """Before a walk of *path*: if it lies in a mirror, list its prefix again (at most once per :data:`RELIST_SECONDS`).

    The mirror's problems (objects it could not fetch) are added to *problems*; a caller that walks again and
    again keeps each once (:class:`~msnb.events.problems.SaidOnce`).
    """
    mirror = mirror_of(path)
    if mirror is None:
        return
    with _lock:
        if time.monotonic() - mirror.synced >= RELIST_SECONDS:
            try:
                mirror.sync()
            except ObjectStoreError as exc:  # a follow goes on: the store is asked again at the next poll
                mirror.synced = time.monotonic()
                if problems is not None:
                    problems.append(Problem(str(mirror.url), None, ProblemKind.UNREADABLE, f"listing again failed: {exc}", "warning"))
        if problems is not None:
            problems.extend(mirror.problems)


def identity(path) -> tuple[str, list] | None:
    """For a file of a mirror: its object's URL and a lasting identity (``[0, crc32 of the ETag]``), or None.

    A ledger (``msnb export``, ``msnb convert``) keys its sources by these, so an export run again in another
    process, whose mirror lies elsewhere, knows the objects it already wrote.
    """
    mirror = mirror_of(path)
    if mirror is None:
        return None
    rel = "" if mirror.single else os.path.relpath(os.path.abspath(os.fspath(path)), mirror.root).replace(os.sep, "/")
    seen = mirror.seen.get(rel)
    return (mirror._shown(rel), [0, zlib.crc32(seen.etag.encode())]) if seen is not None else None


def upload(folder: Path, url, *, last: tuple = (), skip: tuple = ()) -> list[str]:
    """Every file under *folder* put under the prefix *url* (same relative names), those named in *last* after the others.

    Returns:
        The relative names put.
    """
    target = parse(url)
    bucket = Bucket(target)
    files = sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file() and p.name not in skip)
    first = [f for f in files if f not in last]
    with ThreadPoolExecutor(FETCHERS) as pool:
        list(pool.map(lambda rel: bucket.put(target.child(rel).key, (Path(folder) / rel).read_bytes()), first))
    for rel in [f for f in files if f in last]:
        bucket.put(target.child(rel).key, (Path(folder) / rel).read_bytes())
    return files


def download(url) -> bytes | None:
    """One object's bytes, or None when there is none (``msnb export --out s3://...`` reads its ledger so)."""
    target = parse(url)
    bucket = Bucket(target)
    if bucket.head(target.key) is None:
        return None
    try:
        return bucket.get(target.key)
    except Refused as exc:
        raise ObjectStoreError(f"{target}: {exc}") from None


def forget() -> None:
    """Drop every mirror (their folders too): the next URL given is listed and fetched afresh."""
    with _lock:
        for m in _mirrors.values():
            shutil.rmtree(m.base, ignore_errors=True)
        _mirrors.clear()
