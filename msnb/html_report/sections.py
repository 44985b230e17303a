"""The report's sections, each built from what the library already computes (the judge, the plots, the lint).

Every function returns the body of one section as HTML; nothing here reads
files or judges anew.  Sizes are bounded whatever the data holds: figures are
drawn for at most :data:`MAX_FIGURE_RUNS` runs, tables stop at
:data:`~msnb.html_report.page.MAX_ROWS` rows, texts at a few thousand characters.
"""

from __future__ import annotations

import json
import platform

import numpy as np
import yaml

from ..doctor import check_versions, mindformers_version_map
from ..environment import installed_versions
from ..events.problems import ProblemKind
from ..events.tables import object_codes
from ..events.tags import ALIASES, DEFAULT_PANELS
from ..plot.histograms import plot_histograms, plot_step_time
from ..plot.render import describe_figure, figure_png
from ..plot.scalars import plot_scalars
from ..status import status_word
from ..words import count
from . import page
from .page import esc, note, table

MAX_FIGURE_RUNS = 8  # runs drawn in the scalar panels and given their own step-time and histogram figures
MAX_VERDICT_RUNS = 100  # runs whose checks are listed (failed runs first)
MAX_LINEAGE_RUNS = 20  # runs whose lineage tables are shown
MAX_OTHER_PANELS = 6  # scalar tags drawn beyond the usual panels
PER_RANK_UP_TO = 8  # with at most this many ranks a run is drawn one line per rank, else as the mean
MAX_TEXT_BLOCKS = 12  # logged texts (mindformers writes its config so) shown
MAX_FIELD = 300  # characters of one lineage value


def _png(figure, dpi: int) -> bytes:
    return figure_png(figure, dpi=dpi)


def _alt(figure) -> str:
    return describe_figure(figure)


def _number(value) -> str:
    """A value in six significant digits; nan and inf as they are."""
    value = float(value)
    return str(value) if not np.isfinite(value) else f"{value:.6g}"


def verdict(checked, why_not: str | None) -> str:
    """The judge's checks and flags per run, as ``msnb check`` gives them.

    Args:
        checked: a :class:`~msnb.analysis.check.CheckResult`, or None when nothing could be judged.
        why_not: why nothing was judged (the judge's own message).

    Returns:
        The section's HTML.
    """
    if checked is None:
        return f'<p class="verdict">{page.status("NOT JUDGED")}: {esc(why_not)}</p>'
    parts = []
    runs = sorted(checked.runs, key=lambda r: r.passed)  # failed runs first, each group in the judge's order
    for run in runs[:MAX_VERDICT_RUNS]:
        ranks = f" (ranks {', '.join(map(str, run.ranks))})" if run.ranks else ""
        word = "PASS" if run.passed else "FAIL"
        parts.append(f'<h3 class="run">{page.status(word)} run <code>{esc(run.run)}</code>{esc(ranks)}</h3>')
        if run.judged_from:
            parts.append(f"<p>judged from {esc(run.judged_from)}</p>")
        rows = [(page.status(status_word(c.status)), c.name, c.detail) for c in run.checks]
        parts.append(table(("status", "check", "detail"), rows, raw_columns=(0,)))
        if run.flags:
            flags = [("run" if f.rank < 0 else f.rank, f.tag, f.step, f.reason) for f in run.flags]
            parts.append("<p>Flags (where a rank or the run went wrong first):</p>" + table(("rank", "tag", "from step", "reason"), flags, numeric=(2,)))
    if len(runs) > MAX_VERDICT_RUNS:
        rest = runs[MAX_VERDICT_RUNS:]
        failed = sum(not r.passed for r in rest)
        parts.append(note(f"{count(len(rest), 'more run', thousands=True)} left out ({failed:,} of them failed); msnb check PATH lists every one."))
    return "".join(parts)


def _codes(col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a run or tag column, sorted, and each row's index among them.

    Never a fixed-width string array: ``astype(str)`` pads every row to the
    longest value (4 bytes a character), so one 2,000-character tag made a
    300,000-row table cost 2.4 GB.  Here a long tag costs its own length once.
    """
    got = object_codes(col) if col.dtype.kind == "O" and col.ndim == 1 else None
    if got is None:
        seen: dict = {}
        codes = np.fromiter((seen.setdefault(v, len(seen)) for v in col.tolist()), dtype=np.int64, count=len(col))
        objects = list(seen)
    else:
        objects, codes = got
    values = sorted({str(o) for o in objects})
    where = {v: i for i, v in enumerate(values)}
    lut = np.fromiter((where[str(o)] for o in objects), dtype=np.int64, count=len(objects))
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out, lut[codes]


def _group_stats(scalars):
    """One row per (run, tag): points, ranks, first and last step, last finite value, min, max, non-finite count."""
    runs, run_code = _codes(scalars.run)
    tags, tag_code = _codes(scalars.tag)
    code = run_code * len(tags) + tag_code
    finite = np.isfinite(scalars.value)
    order = np.lexsort((scalars.step, code))
    rows = []
    bounds = np.flatnonzero(np.r_[True, code[order][1:] != code[order][:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx = order[a:b]
        ok = idx[finite[idx]]
        c = int(code[idx[0]])
        values = scalars.value[ok]
        rows.append(
            (
                runs[c // len(tags)],
                tags[c % len(tags)],
                f"{idx.size:,}",
                len(np.unique(scalars.rank[idx])),
                f"{int(scalars.step[idx[0]])}-{int(scalars.step[idx[-1]])}",
                _number(values[-1]) if values.size else "-",
                _number(values.min()) if values.size else "-",
                _number(values.max()) if values.size else "-",
                int(idx.size - ok.size),
            )
        )
    return rows


def _most_ranks(table_) -> int:
    """The largest number of ranks any one run has (one pass over the table, whatever the number of runs)."""
    _, run_code = _codes(table_.run)
    rank = table_.rank.astype(np.int64) + 1  # NO_RANK (-1) becomes 0
    pairs = np.unique(run_code * (int(rank.max()) + 1) + rank)
    return int(np.bincount(pairs // (int(rank.max()) + 1)).max())


def scalars(result, *, dpi: int, first=()) -> str:
    """Scalar panels (the usual ones first, then a few others), non-finite values, and a table of every tag.

    Args:
        result: the :class:`~msnb.events.ReadResult` (runs already named).
        dpi: resolution of the embedded figures.
        first: runs to draw first when there are more than :data:`MAX_FIGURE_RUNS` (the failed ones).

    Returns:
        The section's HTML.
    """
    table_ = result.scalars
    if not len(table_):
        return note("No scalars were read.")
    runs = _runs(table_, first)
    shown = table_.where(run=runs[:MAX_FIGURE_RUNS]) if len(runs) > MAX_FIGURE_RUNS else table_
    present = shown.tags()  # the panels are of the runs drawn: a tag only a run left out has is no panel
    usual = [t for p in DEFAULT_PANELS for t in ALIASES[p] if t in present][:8]
    others = [t for t in present if t not in usual]
    groups = [("usual panels", usual or others[:MAX_OTHER_PANELS])]
    if usual and others:
        groups.append(("other tags", others[:MAX_OTHER_PANELS]))
    parts, drawn, nonfinite = [], [], []
    ranks = _most_ranks(shown)
    per_rank = 1 < ranks <= PER_RANK_UP_TO
    for name, tags in groups:
        report = plot_scalars(shown, tags=tags, ranks=per_rank, origins=result.origins)
        drawn += report.tags
        nonfinite += report.nonfinite
        how = "one line per rank" if per_rank else ("the mean over ranks" if ranks > 1 else "one line per run")
        marks = "raw values faint, smoothed solid, NaN/Inf as red x, rank flags as dashed lines"
        caption = f"{name}: {', '.join(report.tags)}; {how}; {marks}. {report.summary_line()}"
        parts.append(page.figure(_png(report.figure, dpi), _alt(report.figure), caption))
    parts.append(_too_many(runs, "Curves are"))
    left = [t for t in table_.tags() if t not in drawn]
    if left:
        parts.append(
            note(f"{count(len(left), 'more tag', thousands=True)} not drawn (in the table below): {', '.join(left[:20])}" + (" ..." if len(left) > 20 else ""))
        )
    if nonfinite:
        # one row per range of consecutive steps (not per step); table() says how many rows it left out
        rows = [
            (
                n["run"],
                "-" if n["rank"] < 0 else n["rank"],
                n["tag"],
                str(n["step"]) if n["steps"] == 1 else f"{n['step']}-{n['last_step']}",
                n["steps"],
                n["value"],
            )
            for n in nonfinite
        ]
        parts.append("<h3>Non-finite values</h3>" + table(("run", "rank", "tag", "steps", "how many", "value"), rows, numeric=(3, 4)))
    header = ("run", "tag", "points", "ranks", "steps", "last", "min", "max", "NaN/Inf")
    parts.append("<h3>Every scalar tag</h3>" + table(header, _group_stats(table_), numeric=(2, 3, 5, 6, 7, 8)))
    return "".join(parts)


def _runs(table_, first=()) -> list[str]:
    """The runs of *table_*, those in *first* (the failed ones) ahead of the rest: what a capped figure shows."""
    present = sorted(set(table_.run.tolist()))
    return [r for r in first if r in present] + [r for r in present if r not in first]


def _too_many(runs: list, what: str) -> str:
    """A note when figures were drawn for only some of *runs*."""
    return note(f"{what} drawn for {MAX_FIGURE_RUNS} of {len(runs)} runs (failed runs first).") if len(runs) > MAX_FIGURE_RUNS else ""


def step_time(result, *, dpi: int, first=()) -> str:
    """The step-time distribution of each run (compilation left out), with median, p90 and max.

    Args:
        result: the :class:`~msnb.events.ReadResult`.
        dpi: resolution of the embedded figures.
        first: runs drawn first when there are too many (the failed ones).

    Returns:
        The section's HTML.
    """
    table_ = result.scalars
    tag = next((t for t in ALIASES["step_time"] if len(table_) and t in set(table_.tags())), None)
    if tag is None:
        return note("No step-time tag was recorded (" + ", ".join(ALIASES["step_time"]) + ").")
    runs = _runs(table_.where(tag=tag), first)
    parts, rows = [], []
    for run in runs[:MAX_FIGURE_RUNS]:
        mine = table_.where(run=run, tag=tag)
        ranks = len(set(mine.rank.tolist()))
        # sorted by step, the first record of every rank comes first: each rank's compile step is left out
        fig, stats = plot_step_time(mine, tag, skip_first=ranks)
        fig.suptitle(f"run {run}")
        each = f"each of its {ranks} ranks" if ranks > 1 else "the run"
        parts.append(page.figure(_png(fig, dpi), _alt(fig), f"run {run}: {tag}, the first step of {each} (compilation) left out"))
        rows.append((run, ranks, stats["count"], *(_number(stats[k]) if k in stats else "-" for k in ("median", "p90", "max"))))
    header = ("run", "ranks", "points", "median", "p90", "max")
    return table(header, rows, numeric=(1, 2, 3, 4, 5)) + "".join(parts) + _too_many(runs, "Step-time figures are")


def histograms(result, *, dpi: int, first=()) -> str:
    """Histograms over steps per run (its lowest rank; a few steps spread over the run, weights first).

    Args:
        result: the :class:`~msnb.events.ReadResult`.
        dpi: resolution of the embedded figures.
        first: runs drawn first when there are too many (the failed ones).

    Returns:
        The section's HTML.
    """
    table_ = result.histograms
    if not len(table_):
        return note("No histograms were recorded.")
    runs = _runs(table_, first)
    parts = []
    for run in runs[:MAX_FIGURE_RUNS]:
        mine = table_.where(run=run)
        rank = int(mine.rank.min())
        mine = mine.where(rank=rank)
        fig = plot_histograms(mine, max_steps=10)
        tags = sorted(set(mine.tag.tolist()))
        where = f", rank {rank}" if rank >= 0 else ""
        names = ", ".join(tags[:10]) + (f" and {len(tags) - 10} more" if len(tags) > 10 else "")
        parts.append(page.figure(_png(fig, dpi), _alt(fig), f"run {run}{where}: {count(len(mine), 'histogram', thousands=True)} of {names}"))
    return "".join(parts) + _too_many(runs, "Histograms are")


def config(checked) -> str:
    """The monitoring config, resolved, with its lint findings; or how to add one.

    Args:
        checked: a :class:`~msnb.config.ConfigReport`, or None when no config was given.

    Returns:
        The section's HTML.
    """
    if checked is None:
        return note("No config was given: pass the run's YAML (msnb report PATH --config run.yaml) to see it resolved and linted here.")
    parts = [f"<p>File <code>{esc(checked.path)}</code>" + (f", inheriting {esc(' <- '.join(checked.files[:-1]))}" if len(checked.files) > 1 else "") + "</p>"]
    if checked.findings:
        rows = [(page.severity(f.severity), f.key, f.message, f.fix, f.rule) for f in checked.findings]
        parts.append(table(("severity", "key", "finding", "fix", "rule"), rows, raw_columns=(0,)))
    else:
        parts.append(f"<p>{page.status('PASS')} no lint findings.</p>")
    parts.append("<h3>Resolved</h3>" + page.pre(yaml.safe_dump(checked.config, sort_keys=False, default_flow_style=False)))
    return "".join(parts)


def _flatten(value, prefix: str = "") -> list[tuple[str, str]]:
    """Nested lineage fields as (dotted key, short text) pairs."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _flatten(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [pair for i, v in enumerate(value) for pair in _flatten(v, f"{prefix}[{i}]")]
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return [(prefix, text if len(text) <= MAX_FIELD else text[:MAX_FIELD] + " ...")]


_KIND_ORDER = {"train": 0, "evaluation": 1, "user_defined": 2, "dataset_graph": 3}


def lineage(result, first=()) -> str:
    """Hyper-parameters and lineage per run (the latest record of each kind) and the texts a run logged.

    Args:
        result: the :class:`~msnb.events.ReadResult`.
        first: runs shown first when there are too many (the failed ones).

    Returns:
        The section's HTML.
    """
    parts = []
    lin = result.lineage
    runs = _runs(lin, first)
    if len(runs) > MAX_LINEAGE_RUNS:
        parts.append(note(f"Lineage of {MAX_LINEAGE_RUNS} of {len(runs)} runs (failed runs first)."))
    for run in runs[:MAX_LINEAGE_RUNS]:
        mine = lin.where(run=run)
        kinds = sorted(set(mine.kind.tolist()), key=lambda k: (_KIND_ORDER.get(k, len(_KIND_ORDER)), k))
        for kind in kinds:
            of_kind = mine.where(kind=kind)
            ranks = sorted(set(of_kind.rank.tolist()))
            first = of_kind.where(rank=ranks[0])
            fields = first.fields[int(np.argmax(first.step))]  # the lowest rank's latest record
            whence = f" (rank {ranks[0]}; {len(ranks)} ranks wrote one)" if len(ranks) > 1 else ""
            parts.append(f"<h3>run <code>{esc(run)}</code>: {esc(kind.replace('_', ' '))}{esc(whence)}</h3>")
            parts.append(table(("key", "value"), _flatten(fields if isinstance(fields, dict) else {"value": fields})))
    texts = result.texts
    if len(texts):
        order = np.lexsort((texts.step, _codes(texts.tag)[1], _codes(texts.run)[1]))
        latest = {}
        for i in order.tolist():
            latest[(texts.run[i], texts.tag[i])] = i  # the last text of each run and tag
        for (run, tag), i in list(latest.items())[:MAX_TEXT_BLOCKS]:
            parts.append(f"<h3>run <code>{esc(run)}</code>: text <code>{esc(tag)}</code> at step {int(texts.step[i])}</h3>" + page.pre(texts.text[i], 4000))
        if len(latest) > MAX_TEXT_BLOCKS:
            parts.append(note(f"{count(len(latest) - MAX_TEXT_BLOCKS, 'more text tag')} left out."))
    return "".join(parts) or note("No lineage or logged texts were read (MindSpore writes lineage with SummaryCollector; mindformers logs its config as text).")


def problems(result) -> str:
    """What the reader skipped or found suspicious, with file and byte offset.

    Args:
        result: the :class:`~msnb.events.ReadResult`.

    Returns:
        The section's HTML.
    """
    if not result.problems:
        return f"<p>{page.status('PASS')} every file read cleanly: nothing skipped.</p>"
    rows = [(str(p.severity), str(p.kind), p.path, "-" if p.offset is None else p.offset, p.message) for p in result.problems]
    if all(p.kind == ProblemKind.COPY for p in result.problems):  # a writer's copy read once: a note, nothing skipped
        return f"<p>{page.status('PASS')} every file read cleanly: nothing skipped; a note on a series two writers keep:</p>" + table(
            ("severity", "kind", "file", "byte", "what"), rows, numeric=(3,), paths=(2,)
        )
    return table(("severity", "kind", "file", "byte", "what"), rows, numeric=(3,), paths=(2,))


def memory(checked) -> str:
    """Each rank's memory as MindSpore reported it in the logs: the card, MindSpore's limit, both peaks, the headroom.

    Args:
        checked: the :class:`~msnb.analysis.check.CheckResult` (its ``memory``), or None when nothing was judged.

    Returns:
        The section's HTML.
    """
    found = getattr(checked, "memory", None) or {}
    if not found:
        return note(
            "No rank's log holds MindSpore's memory report (printed at the end of an Ascend job or a DryRun with GLOG_v=1 or "
            "MS_MEMORY_STATISTIC=1): nothing measured here, and nothing judged of memory."
        )

    def mib(x) -> str:
        return "-" if x is None else f"{x:,.0f}"

    parts = []
    for run, mem in found.items():
        rows = [
            (
                r.rank,
                mib(r.device_mb),
                mib(r.limit_mb),
                mib(r.used_peak_mb),
                mib(r.actual_peak_mb),
                mib(r.headroom_mb),
                "-" if r.headroom is None else f"{r.headroom:.1%}",
                r.path,
            )
            for r in sorted(mem.ranks, key=lambda r: r.rank)
        ]
        parts.append(f'<h3 class="run">run <code>{esc(run)}</code></h3>')
        header = ("rank", "card MiB", "MindSpore's limit MiB", "used peak MiB", "actual peak MiB", "headroom MiB", "headroom", "log")
        parts.append(table(header, rows, numeric=(0, 1, 2, 3, 4, 5, 6), paths=(7,)))
        if mem.missing:
            ranks = count(len(mem.missing), "rank")
            parts.append(note(f"No memory report in the log of {ranks} ({', '.join(map(str, mem.missing))}): their headroom is unknown, not 0."))
    return "".join(parts)


def files(result) -> str:
    """The files read, each with its kind, rank and size (the path says which run).

    Args:
        result: the :class:`~msnb.events.ReadResult`.

    Returns:
        The section's HTML.
    """
    rows = [(f["path"], f["kind"], "-" if f["rank"] < 0 else f["rank"], f.get("records", "-"), f"{f.get('bytes_read', 0):,}") for f in result.files]
    return table(("file", "kind", "rank", "records", "bytes"), rows, numeric=(2, 3, 4), paths=(0,)) if rows else note("No files were read.")


def environment() -> str:
    """Versions and known-bad combinations of the machine that wrote the report (``msnb doctor``, without MindSpore).

    Returns:
        The section's HTML.
    """
    versions = installed_versions()
    found = check_versions(versions, mindformers_version_map())
    parts = [note("Of the machine that wrote this report, which may not be the one that trained.")]
    rows = [("Python", platform.python_version()), ("platform", f"{platform.system()} {platform.machine()}")]
    rows += [(name, version or "not installed") for name, version in versions.items()]
    parts.append(table(("package", "version"), rows))
    if found:
        rows = [(page.severity(f.severity), f.message, f.fix, f.rule) for f in found]
        parts.append(table(("severity", "finding", "fix", "rule"), rows, raw_columns=(0,)))
    else:
        parts.append(f"<p>{page.status('PASS')} no known-bad version combination.</p>")
    return "".join(parts)
