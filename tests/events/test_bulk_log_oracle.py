"""Bulk parsing (msnb.events.bulklog) gives the line reader's rows exactly, on generated MFLossMonitor, dynamic-graph and Megatron-LM logs.

The oracle is the line-by-line parser (:meth:`msnb.events.logs.LogParser.feed`), the reader every log was read with
before bulk parsing; it stays the reader of any chunk bulk parsing does not know.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import msnb
from msnb.events import bulklog
from msnb.events.logs import LogParser

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
value = st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf]))
stamp = st.tuples(
    st.integers(2000, 2030), st.integers(1, 12), st.integers(1, 28), st.integers(0, 23), st.integers(0, 59), st.integers(0, 61), st.integers(0, 999)
)


def fmt(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else f"{v:.6g}"))


@st.composite
def mf_lines(draw):
    n = draw(st.integers(1, 40))
    sink = draw(st.booleans())
    separate = draw(st.booleans())
    lr = draw(st.booleans())
    tput = draw(st.booleans())
    prefixes = st.sampled_from(["{t} - mindformers[callback.py:747] - INFO - ", "[INFO] {t} ", "", "[rank 3] {t} ", "{t}.5 "])
    prefix = draw(prefixes)
    mixed = draw(st.booleans())  # the time at other columns on some lines
    norm = draw(st.sampled_from(["[{}]", "{}"]))
    progress = draw(st.booleans())  # numpy's print of a one-element tensor, of a scalar (mindformers 1.9's own writer)
    lines = []
    for i in range(n):
        if mixed:
            prefix = draw(prefixes)
        y, mo, d, h, mi, s, ms = draw(stamp)
        t = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d},{ms:03d}"
        loss = fmt(draw(value))
        head = f"{{ Epoch:[{1 + i // 10:3d}/{9:3d}], step:[{i % 10 + 1:5d}/{10:5d}], "
        head += f"loss: {loss}, " if sink else f"loss:[{loss}/{fmt(draw(value))}], "
        if separate:
            head += f"lm_loss: {fmt(draw(value))}, mtp_loss: {fmt(draw(value))}, "
        head += f"per_step_time: {draw(st.integers(0, 99999))}ms, "
        if lr:
            head += f"lr: {fmt(draw(value))}, "
        head += f"overflow cond: {draw(st.sampled_from(['True', 'False']))}, loss_scale: {fmt(draw(value))}, global_norm: {norm.format(fmt(draw(value)))}"
        if tput:
            head += f", train_throughput_per_npu: {fmt(draw(finite))}T"
        lines.append(prefix.format(t=t) + head)
        if progress:  # mindformers 1.x's progress line after each loss line
            lines.append(prefix.format(t=t) + f"  {i:.1f}% |\u2588\u2588    | {fmt(draw(finite))} samples/s/p  0:00:11 }}")
    return lines


@st.composite
def megatron_lines(draw):
    n = draw(st.integers(1, 40))
    fields = draw(
        st.lists(
            st.sampled_from(["learning rate", "lm loss", "grad norm", "loss scale", "consumed samples", "elapsed time per iteration (ms)"]),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    bracket = draw(st.booleans())
    lines = []
    for i in range(n):
        y, mo, d, h, mi, s, _ = draw(stamp)
        t = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
        body = " | ".join(f"{name}: {fmt(draw(value))}" for name in fields)
        lines.append(f" [{t}] iteration {draw(st.integers(1, 10**9)):8d}/ {10**9:8d} | {body} |" if bracket else f"iteration {i + 1}/ 100 | {body} |")
    return lines


@st.composite
def pynative_lines(draw, mixed=False):
    """mindformers' dynamic-graph trainer lines as 1.9, 2.0 and 2.1 print them (``loss_callback.py``'s formats)."""
    n = draw(st.integers(1, 40))
    counts = draw(st.booleans())
    extra = draw(st.lists(st.sampled_from(["lm_loss", "load_balancing_loss", "indexer_loss", "mtp_1_loss", "mtp_2_loss", "mtp_loss"]), max_size=4, unique=True))
    lr = draw(st.booleans())
    # a pipeline stage's lines: "loss: N/A" on a non-last one; both in one log (none in practice) is the line reader's
    stage = draw(st.sampled_from(["last", "last", "non-last"] + ["mixed"] * mixed))
    lines = []
    for i in range(n):
        y, mo, d, h, mi, s, ms = draw(stamp)
        head = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d},{ms:03d} - mindformers[loss_callback.py] - INFO - "
        head += f"{{ step:[{i + 1:5d}/{n:5d}], "
        if counts:
            head += f"consumed_samples: {64 * (i + 1)}, global_batch_size: 64, "
        if stage == "non-last" or (stage == "mixed" and draw(st.booleans())):
            lines.append(
                head + f"loss: N/A (non-last PP stage, refer to last stage for real loss), per_step_time: {draw(st.integers(0, 99999)):6d}ms, grad_norm: NaN }}"
            )
            continue
        head += f"loss: {fmt(draw(value)):>10}, per_step_time: {draw(st.integers(0, 99999)):6d}ms, "
        head += "".join(f"{name}: {fmt(draw(value)):>10}, " for name in extra)
        if lr:
            head += f"lr: {fmt(draw(value))}, "
        head += f"grad_norm: {fmt(draw(value)):>10}, throughput: {fmt(draw(finite)):>6}T }}"
        lines.append(head)
    return lines


# mindformers' and Megatron's other lines, as they sit between the loss lines of an info.log (none gives a point)
OTHER_LINES = [
    "2024-06-01 10:00:00,001 - mindformers[mindformers/trainer/base_trainer.py:1050] - INFO - .........Build Network For Train..........",
    "2024-06-01 10:00:00,002 - mindformers[mindformers/core/callback/callback.py:530] - INFO - Full model flops is 1.0, Shard model flops is 1.0.",
    "[INFO] 2024-06-01 10:00:00,003 [callback.py:600] training epoch: 1 sink size 1 \u4e2d\u6587",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1000.0 | max allocated: 2000.0",
    "  loss_scale_value: 1024",
    "",
    "\t  iteration_count = 7",
]


@st.composite
def with_other_lines(draw, lines):
    out = []
    for line in draw(lines):
        out.extend(draw(st.lists(st.sampled_from(OTHER_LINES), max_size=2)))
        out.append(line)
    return out


def oracle(lines: list[str]) -> list:
    return LogParser().feed(lines)


def bulk(lines: list[str], wanted=None) -> list | None:
    parser = LogParser()
    got = bulklog.parse(parser, ("\n".join(lines) + "\n").encode(), wanted)
    if got is None:
        return None
    if not got[0]:
        return []
    (names, tag, step, wall, value), _ = got
    return [(names[t], s, w, v) for t, s, w, v in zip(tag.tolist(), step.tolist(), wall.tolist(), value.tolist())]


def same(a: list, b: list) -> bool:
    def eq(x, y):
        return (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) or x == y

    return len(a) == len(b) and all(len(p) == len(q) and all(eq(x, y) for x, y in zip(p, q)) for p, q in zip(a, b))


@settings(max_examples=150, deadline=None)
@given(mf_lines())
def test_mindformers_lines_read_in_bulk_equal_the_line_reader(lines):
    got = bulk(lines)
    assert got is not None, lines[0]
    assert same(got, oracle(lines)), (got[:4], oracle(lines)[:4])


@settings(max_examples=150, deadline=None)
@given(megatron_lines())
def test_megatron_lines_read_in_bulk_equal_the_line_reader(lines):
    got = bulk(lines)
    assert got is not None, lines[0]
    assert same(got, oracle(lines)), (got[:4], oracle(lines)[:4])


@settings(max_examples=150, deadline=None)
@given(pynative_lines())
def test_dynamic_graph_lines_read_in_bulk_equal_the_line_reader(lines):
    got = bulk(lines)
    assert got is not None, lines[0]
    assert same(got, oracle(lines)), (got[:4], oracle(lines)[:4])


@settings(max_examples=100, deadline=None)
@given(st.one_of(with_other_lines(mf_lines()), with_other_lines(megatron_lines()), with_other_lines(pynative_lines())))
def test_other_info_lines_are_skipped_in_bulk_not_sent_to_the_line_reader(lines):
    got = bulk(lines)
    assert got is not None, lines[:3]
    assert same(got, oracle(lines))


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(mf_lines(), megatron_lines(), pynative_lines()),
    st.sets(st.sampled_from(["loss", "lr", "lm loss", "grad norm", "global_norm", "grad_norm", "learning rate", "mtp-1-loss", "nothing"])),
)
def test_wanted_tags_give_the_line_readers_rows_of_those_tags(lines, wanted):
    got = bulk(lines, frozenset(wanted))
    assert got is not None
    assert same(got, [p for p in oracle(lines) if p[0] in wanted])


def test_rows_read_alone_beside_a_layout_naming_a_field_twice_keep_their_own_tags():
    # a damaged iteration line (two lines run together) names "lm loss" and "loss scale" twice; the LossMonitor line
    # beside it is read alone and merged: its "loss" became "lm loss" (the merge numbered new names from the distinct
    # ones, not from the columns), found by feeding spliced real lines to both readers
    lines = [
        " iteration       58/    1000 | consumed samples:        59392 | lm loss: 1.979258E+01 | loss scale: 12.0 |"
        " grad norm: 7.987 | number of skipplapsed time per iteration (ms): 124730.9 | lm loss: 2.485645E+01 |"
        " loss scale: 12.0 | grad norm: 35.316 | number of nan iterations:   0 |",
        "epoch: 1 step: 6, loss is 0.369109",
    ]
    got, want = bulk(lines), oracle(lines)
    assert got is not None and same(sorted(got, key=repr), sorted(want, key=repr))
    assert ("loss", 6) in {(p[0], p[1]) for p in got}


def test_an_unknown_line_sends_the_chunk_to_the_line_reader():
    lines = [
        "epoch: 1 step: 1, loss is 2.5",
        "{ Epoch:[  1/  1], step:[    1/   10], loss: 2.0, per_step_time: 5ms, overflow cond: False, loss_scale: 1.0, global_norm: [1.0]",
    ]
    assert bulk(lines) is None
    assert np.isclose(oracle(lines)[0][3], 2.5)


def test_mindformers_own_info_log_is_read_in_bulk_as_the_line_reader_reads_it(mf_files):
    """The log MFLossMonitor itself wrote (a scalar global norm, a progress line after each loss line)."""
    body = (mf_files / "output" / "log" / "rank_0" / "info.log").read_bytes()
    lines = body.decode("utf-8", errors="replace").splitlines()
    got = bulklog.parse(LogParser(), body)
    assert got is not None
    (names, tag, step, wall, value), _ = got
    rows = [(names[t], s, w, v) for t, s, w, v in zip(tag.tolist(), step.tolist(), wall.tolist(), value.tolist())]
    assert {"loss", "throughput", "global_norm"} <= set(names)
    assert same(rows, oracle(lines))


# text a line could hold where a layout's values or prefix are free: markers of other layouts, a stamp, line breaks
HOSTILE = [
    "Epoch:[ 1/ 1]",
    "epoch: 3",
    "epoch time: 5 ms",
    "12.5 samples/s/p",
    "{ step:[ 1/ 2],",
    "iteration 7/ 9 |",
    "2024-06-01 10:00:00,5",
    "\r",
    "\x0b",
    " " * 80,
    "nan",
    "\u2028",
    "\u4e2d\u6587 2024-06-01 10:00:00",
    "\u2588\u2588",
]


@st.composite
def hostile_lines(draw):
    """A generated log with hostile text put into one line's free part (a Megatron value or text before a loss line)."""
    lines = draw(st.one_of(mf_lines(), megatron_lines(), pynative_lines(mixed=True)))
    i = draw(st.integers(0, len(lines) - 1))
    text = draw(st.sampled_from(HOSTILE))
    line = lines[i]
    if "iteration" in line and " | " in line and draw(st.booleans()):
        head, sep, rest = line.partition(": ")
        lines[i] = head + sep + text + rest  # inside the first value
    elif draw(st.booleans()):
        lines[i] = text + line
    else:
        lines.insert(i, text)
    return lines


def quick(lines: list[str], wanted=None, max_line: int | None = None):
    """The quick way's rows alone (None where it gives up); the careful way is not tried."""
    parser = LogParser() if max_line is None else LogParser(max_line)
    got = bulklog._quick(parser, ("\n".join(lines) + "\n").encode(), wanted)
    if got is None:
        return None
    (names, tag, step, wall, value), _ = got
    return [(names[t], s, w, v) for t, s, w, v in zip(tag.tolist(), step.tolist(), wall.tolist(), value.tolist())]


@settings(max_examples=300, deadline=None)
@given(hostile_lines())
def test_hostile_text_in_a_free_part_never_changes_what_bulk_reading_gives(lines):
    """Both bulk ways (split whole, or every marker placed) give the line reader's rows, or give the chunk up."""
    expected = oracle(lines)
    for got in (quick(lines), bulk(lines)):
        assert got is None or same(got, expected), (lines[:3], got[:3], expected[:3])


@settings(max_examples=60, deadline=None)
@given(st.one_of(mf_lines(), megatron_lines(), pynative_lines()))
def test_the_quick_way_reads_a_plain_log_whole(lines):
    """A chunk of one layout's lines is split whole (no marker placed), and gives the line reader's rows."""
    text = "\n".join(lines)
    if "iteration" in text and not text.lstrip().startswith("["):
        return  # Megatron lines without a stamp before the values: the line reader looks for one in them, the careful way's
    got = quick(lines)
    assert got is not None, lines[0]
    assert same(got, oracle(lines))


def test_a_line_longer_than_the_line_reader_reads_is_left_to_it():
    line = " [2024-06-01 10:00:00] iteration 1/ 10 | lm loss: 2.5 | grad norm: 1.0 |"
    lines = [line, "x" * 5000, line.replace(" 1/", " 2/")]
    assert quick(lines, max_line=4096) is None
    parser = LogParser(4096)
    bulklog.parse(parser, ("\n".join(lines) + "\n").encode())
    assert parser.long_lines == 1 or bulklog.parse(LogParser(4096), ("\n".join(lines) + "\n").encode()) is None


@st.composite
def megatron_with_validation(draw):
    """Megatron iteration lines with its validation lines (and their dashed frames) every few iterations, as Megatron-LM prints them."""
    lines = draw(megatron_lines())
    every = draw(st.integers(1, 5))
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if (i + 1) % every == 0:
            loss = fmt(draw(value))
            out += ["-" * 60, f" validation loss at iteration {i + 1} | lm loss value: {loss} | lm loss PPL: {fmt(draw(finite))} | ", "-" * 60]
    return out


@settings(max_examples=120, deadline=None)
@given(megatron_with_validation())
def test_megatron_validation_lines_are_read_beside_the_bulk_iteration_lines(lines):
    """Validation lines do not send the chunk to the line reader: they are read alone and merged by line."""
    got = bulk(lines)
    assert got is not None, lines[:3]
    assert same(got, oracle(lines))


def test_a_chunk_given_up_leaves_the_parser_as_it_found_it():
    """The line reader then reads the chunk from the same state: nothing counted twice."""
    lines = [
        "{ Epoch:[  1/  1], step:[    1/   10], loss: 2.0, per_step_time: 5ms, overflow cond: False, loss_scale: 1.0, global_norm: [1.0]",
        "epoch: 1 step: 1, loss is 2.5",
    ]
    parser = LogParser()
    assert bulklog.parse(parser, ("\n".join(lines) + "\n").encode()) is None
    assert (parser.matched, parser.last_global, parser.generation) == (0, None, None)
    parser.feed(lines)
    reference = LogParser()
    reference.feed(lines)
    assert parser.matched == reference.matched == 2


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(mf_lines(), megatron_with_validation(), pynative_lines(), hostile_lines()), min_size=1, max_size=4),
    st.integers(200, 4000),
)
def test_a_whole_file_read_in_chunks_equals_it_read_line_by_line(tmp_path_factory, parts, chunk):
    """msnb.read of a file of several layouts, in small chunks (state carried across them), with and without bulk parsing."""
    from msnb.events import reader

    path = tmp_path_factory.mktemp("log") / "train.log"
    path.write_text("\n".join(line for part in parts for line in part) + "\n", encoding="utf-8")
    results = []
    for use_bulk in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(reader, "LOG_CHUNK", chunk)
            if not use_bulk:
                mp.setattr(reader, "parse_bulk", lambda *args: None)
            r = msnb.read(path)
        s = r.scalars
        rows = list(zip(s.tag.tolist(), s.step.tolist(), [repr(w) for w in s.wall_time.tolist()], [repr(v) for v in s.value.tolist()]))
        results.append((rows, sorted(str(p) for p in r.problems)))
    assert results[0] == results[1]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(mf_lines(), megatron_with_validation(), pynative_lines()), min_size=1, max_size=3),
    st.lists(st.integers(1, 900), min_size=1, max_size=12),
)
def test_a_log_followed_while_it_is_written_equals_it_read_once(tmp_path_factory, parts, cuts):
    """Pieces of any size (a line cut anywhere) appended between polls: the rows and problems of one read at the end."""
    from msnb.events import Follower

    folder = tmp_path_factory.mktemp("follow")
    data = ("\n".join(line for part in parts for line in part) + "\n").encode()
    follower = Follower(folder)
    at = 0
    with open(folder / "train.log", "wb") as f:
        for cut in cuts + [len(data)]:
            f.write(data[at : at + cut])
            f.flush()
            at += cut
            follower.poll()
            if at >= len(data):
                break
    follower.close()
    once = msnb.read(folder)

    def rows(result):
        s = result.scalars
        return list(zip(s.tag.tolist(), s.step.tolist(), [repr(w) for w in s.wall_time.tolist()], [repr(v) for v in s.value.tolist()]))

    assert rows(follower.result) == rows(once)

    def said(result):  # each poll says what it read ("1 line of a non-last stage", then "11 lines"): the same things, counted per poll
        return {re.sub(r"\d[\d,]*( [a-z]+?)s?\b", r"N\1", str(p)) for p in result.problems}

    assert said(follower.result) == said(once)


def test_a_unit_fault_said_while_following_is_withdrawn_once_a_later_line_proves_mindformers_2(tmp_path):
    """Found by the property above: the first poll sees only a line either release writes (its throughput maybe 1000x
    too small), a later poll a line only 2.x writes.  The followed result then says what one read says: nothing."""
    from msnb.events import Follower
    from msnb.events.problems import ProblemKind

    head = "2000-01-01 00:00:00,000 - mindformers[loss_callback.py] - INFO - "
    either = head + "{ step:[    1/    2], loss:          0, per_step_time:      0ms, grad_norm:          0, throughput:      0T }\n"
    only_2x = head + "{ step:[    2/    2], loss: N/A (non-last PP stage, refer to last stage for real loss), per_step_time:      0ms, grad_norm: NaN }\n"
    path = tmp_path / "train.log"
    path.write_text(either)
    follower = Follower(tmp_path)
    first = follower.poll()
    assert [p.kind for p in first.problems] == [ProblemKind.UNIT]  # said at once: the live reader cannot wait for the end
    with open(path, "a") as f:
        f.write(only_2x)
    follower.poll()
    assert ProblemKind.UNIT not in [p.kind for p in follower.result.problems]
    assert {str(p) for p in follower.result.problems} == {str(p) for p in msnb.read(tmp_path).problems}
    with open(path, "a") as f:  # proven once, the file never says it again
        f.write(either.replace("step:[    1/", "step:[    3/"))
    follower.poll()
    assert ProblemKind.UNIT not in [p.kind for p in follower.result.problems]


def test_a_chunk_split_in_vain_costs_the_next_chunk_only():
    """A line outside the layout past a chunk's head (a stray LossMonitor line): the next chunk goes the careful way, the one after is split whole again."""
    line = "2024-06-01 10:00:{s:02d},100 - mindformers[callback.py:747] - INFO - {{ Epoch:[  1/  1], step:[{i:6d}/999999], loss:[2.5/2.5], per_step_time: 5ms, overflow cond: False, loss_scale: 1.0, global_norm: [1.0]"
    lines = [line.format(s=i % 60, i=i) for i in range(1, 3001)]
    body = ("\n".join(lines[:1000] + ["epoch: 1 step: 1, loss is 2.5"] + lines[1000:2000]) + "\n").encode()
    assert body.index(b"epoch:") > bulklog._HEAD
    parser = LogParser()
    bulklog.parse(parser, body)
    assert (parser.bulk_misses, parser.bulk_wait) == (1, 1)
    pure = ("\n".join(lines[2000:2500]) + "\n").encode()
    bulklog.parse(parser, pure)
    assert parser.bulk_wait == 0
    assert bulklog._quick(parser, ("\n".join(lines[2500:]) + "\n").encode(), None) is not None


# ---- found by an adversarial pass: each reproduction read both ways ------------------------------------------------

MF = "{ Epoch:[  1/  1], step:[ 1/ 10], loss: 2.0, per_step_time: 5ms, overflow cond: False, loss_scale: 1.0, global_norm: [1.0]"
PROGRESS = "  5.0% |##   | 13.05 samples/s/p  0:00:11 }"


def read_both(text: str, chunk: int = 1 << 20, tags=None, tmp_path=None):
    """msnb.read of *text* with bulk parsing and with the line reader alone: (rows, problems) each."""
    from msnb.events import reader

    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    out = []
    for use_bulk in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(reader, "LOG_CHUNK", chunk)
            if not use_bulk:
                mp.setattr(reader, "parse_bulk", lambda *args: None)
            r = msnb.read(path, tags=tags)
        s = r.scalars
        out.append((list(zip(s.tag.tolist(), s.step.tolist(), [repr(v) for v in s.value.tolist()])), sorted(map(str, r.problems))))
    return out


@pytest.mark.parametrize(
    "text",
    [
        MF + "\n" + MF.replace("step:[ 1/", "step:[ 2/") + " 7 samples/s/p\n",  # a loss line with a progress bar's tail
        MF.replace("loss: 2.0", "loss:[2.0/2.0.0]") + "\n",  # an average that is no number
        PROGRESS + "\n" + MF + "\n  6.0% |##   | 14 samples/s/p samples/s/p }\n",  # the literal twice after a progress line
        MF + "\n  5.0% |##   | 1" + "0" * 55 + " samples/s/p  0:00:11 }\n",  # a progress number longer than the pattern takes
        "{ step:[    1/   10], loss:   2.5, grad_norm: 1.lr }\n",  # a unit the line reader reads as a field
        MF.replace("global_norm: [1.0]", "global_norm: [1.0 ]") + "\n",
    ],
)
def test_lines_an_adversarial_pass_found_read_as_the_line_reader_reads_them(text, tmp_path):
    with_bulk, alone = read_both(text, tmp_path=tmp_path)
    assert with_bulk == alone


def test_a_line_that_only_changes_the_epoch_is_no_inert_line(tmp_path):
    """A LossMonitor step too large to count sets the epoch all the same: the next chunk's step depends on it."""
    first = MF + "\nepoch: 1 step: 9999999999999999999, loss is 1.0\n"
    with_bulk, alone = read_both(first + "epoch: 2 step: 5, loss is 2.0\n", chunk=len(first) + 5, tmp_path=tmp_path)
    assert with_bulk == alone


def test_a_field_left_out_by_tags_is_still_judged(tmp_path):
    """tags= gives the full read's rows of those tags and the same problems: a declined lr is said."""
    with_bulk, alone = read_both(MF.replace("per_step_time: 5ms, ", "per_step_time: 5ms, lr: .e5, ") + "\n", tags=["loss"], tmp_path=tmp_path)
    assert with_bulk == alone and any("'lr'" in p for p in alone[1])


def test_validation_rows_read_alone_keep_to_the_wanted_tags():
    body = b" [2024-06-01 10:00:00] iteration 1/ 100 | lm loss: 2.0 |\n validation loss at iteration 1 | lm loss value: 3.0 | lm loss PPL: 20.0 |\n"
    got = bulklog.parse(LogParser(), body, frozenset({"lm loss"}))
    assert got is not None
    (names, tag, *_), _ = got
    assert [names[t] for t in tag.tolist()] == ["lm loss"]


def test_megatron_lines_without_a_time_are_read_without_a_python_call_a_line(monkeypatch):
    """No date in a line's first 64 characters: its time is NaN at once (an 8 MB chunk took 1.5 s and 400 MB)."""
    calls = []
    real = bulklog.logs.wall_time
    monkeypatch.setattr(bulklog.logs, "wall_time", lambda line: calls.append(line) or real(line))
    body = b"".join(b"iteration %d/ 100 | lm loss: 1.5 |\n" % i for i in range(1, 2001))
    parser = LogParser()
    got = bulklog.parse(parser, body)
    assert got is not None and len(got[0][1]) == 2000
    assert len(calls) <= 1


def test_a_log_read_in_many_chunks_says_each_thing_once(tmp_path):
    """A non-last stage's log over several chunks: one sentence with the whole count, not one a chunk."""
    from msnb.events import reader

    line = "{{ step:[{i:6d}/  9999], loss: N/A (non-last PP stage, refer to last stage for real loss), per_step_time:   1203ms, grad_norm: NaN }}"
    (tmp_path / "info.log").write_text("".join(line.format(i=i) + "\n" for i in range(1, 501)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "LOG_CHUNK", 4096)
        problems = [str(p) for p in msnb.read(tmp_path).problems]
    assert len(problems) == 1 and "500 lines of a non-last pipeline stage" in problems[0], problems


from .test_peer_corpus import FILES as PEER_FILES  # noqa: E402  (where the peer corpus lies; tests skip when it is absent)

PEER_DYNAMIC_GRAPH = PEER_FILES / "mindformers_docs_logs/pynative_deepseek/msrun_log/worker_0.log"


@pytest.mark.skipif(not PEER_DYNAMIC_GRAPH.is_file(), reason="the peer corpus is not on this machine")
def test_the_peer_dynamic_graph_log_reads_its_throughput_as_printed_by_both_readers(tmp_path):
    """mindformers' docs print 'throughput:  25.92T' (2.x: TFLOPS); both readers read 25.92, not 0.02592, and say nothing of units."""
    text = PEER_DYNAMIC_GRAPH.read_text(encoding="utf-8")
    with_bulk, alone = read_both(text, tmp_path=tmp_path)
    assert with_bulk == alone
    rows, problems = with_bulk
    assert [v for t, _, v in rows if t == "model-flops-throughput-per-npu"] == ["1.36", "25.92"]
    assert not [p for p in problems if "unit" in p or "1.9" in p]


def test_a_release_1_9_throughput_is_named_by_both_readers_never_rescaled(tmp_path):
    """Lines nothing but the release tells apart: read as printed; 1.9's known 1000x fault is said, the same by both readers."""
    lines = "".join(
        f"{{ step:[{i:5d}/   10], loss: {2.0 / i:10.6f}, per_step_time: {700:6d}ms, grad_norm: {1.5:10.6f}, throughput: {25.92:6.2f}T }}\n" for i in range(1, 5)
    )
    with_bulk, alone = read_both(lines, tmp_path=tmp_path)
    assert with_bulk == alone
    rows, problems = with_bulk
    assert [v for t, _, v in rows if t == "model-flops-throughput-per-npu"] == ["25.92"] * 4
    assert len(problems) == 1 and "mindformers 1.9" in problems[0] and "1000 times" in problems[0]
