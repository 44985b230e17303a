"""The log-layout table: a layout added as one entry is read by msnb.read, in a folder, from a .txt log (the sniff,
the bulk reader and the line reader all take it from the table), and the built-in entries name real readers."""

import numpy as np

import msnb
from msnb.events import bulklog, log_layouts
from msnb.events.logs import LogParser

# a trainer msnb has never seen: "[train] step 12 | loss=2.5 | lr=1e-4", a timestamp first
NEW = log_layouts.LogLayout(
    "a new trainer",
    marker=b"[train] step",
    line=r"\[train\] step (?P<step>\d{1,19}) \| loss=(?P<loss>{num}) \| lr=(?P<lr>{num})",
    fields=(("loss", "loss"), ("lr", "lr")),
)


def write_new_trainer_log(path, steps):
    lines = ["starting the new trainer"]  # text of no layout: the file is known by its per-step lines
    for step in range(1, steps + 1):
        lines.append(f"2024-06-01 10:{step // 60:02d}:{step % 60:02d} [train] step {step} | loss={4.0 / step:.6f} | lr={1e-4 * step:.3e}")
    path.write_text("\n".join(lines) + "\n")


def test_a_layout_added_in_one_entry_is_read_from_a_txt_log_in_a_folder(tmp_path, monkeypatch):
    run = tmp_path / "job"
    run.mkdir()
    write_new_trainer_log(run / "train.txt", 40)
    assert not len(msnb.read(tmp_path).scalars)  # unknown before: not sniffed as a log at all

    monkeypatch.setattr(log_layouts, "LAYOUTS", [*log_layouts.LAYOUTS, NEW])  # the one entry
    got = msnb.read(tmp_path)
    steps, loss = got.scalars.series("loss")
    assert steps.tolist() == list(range(1, 41))
    assert np.allclose(loss, [4.0 / s for s in range(1, 41)], atol=1e-6)
    assert np.allclose(got.scalars.series("lr")[1], [float(f"{1e-4 * s:.3e}") for s in range(1, 41)])
    assert np.isfinite(got.scalars.where(tag="loss").wall_time).all()  # the timestamp is the wall time
    assert set(got.runs) == {"job"}

    # the bulk reader hands such a chunk to the line reader, which reads it as above: the same rows either way
    parser = LogParser()
    body = (run / "train.txt").read_bytes()
    assert bulklog.parse(parser, body) is None
    assert len(LogParser().feed(body.decode().splitlines())) == 80


def test_every_built_in_entry_has_its_readers():
    from msnb.events.logs import LINE_READERS

    for layout in log_layouts.LAYOUTS:
        assert layout.line is None and layout in LINE_READERS, layout.name
    assert set(bulklog.CHUNK_READERS) <= set(log_layouts.LAYOUTS) and set(LINE_READERS) == set(log_layouts.LAYOUTS)
    assert log_layouts.markers()[-1] == log_layouts.PROGRESS_MARKER


def test_the_line_reader_tries_the_layouts_in_table_order(monkeypatch):
    # an entry placed before MindSpore's LossMonitor reads its lines first; appended, it never sees them
    first = log_layouts.LogLayout(
        "LossMonitor read by the table",
        marker=b"epoch:",
        line=r"epoch: (?P<epoch>\d{1,9}) step: (?P<step>\d{1,19}), loss is (?P<v>{num})",
        fields=(("v", "mine"),),
    )
    line = ["epoch: 1 step: 7, loss is 2.5"]
    monkeypatch.setattr(log_layouts, "LAYOUTS", [*log_layouts.LAYOUTS, first])
    assert [p[0] for p in LogParser().feed(line)] == ["loss"]
    monkeypatch.setattr(log_layouts, "LAYOUTS", [first, *log_layouts.LAYOUTS])
    assert [(p[0], p[1], p[3]) for p in LogParser().feed(line)] == [("mine", 7, 2.5)]
