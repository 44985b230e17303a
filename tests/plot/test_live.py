"""The live view (one handle, throttled) under a real kernel via nbclient, its text fallback, and tail()."""

import io
import shutil
import threading
import time

import nbformat
from nbclient import NotebookClient

from msnb import kernel
from msnb.plot import LiveView, tail
from tests.writers.framing import payloads

LOOP = """\
import time, numpy as np
from msnb.plot import LiveView
from msnb.events import ScalarTable

def table(n):
    return ScalarTable(run=np.array(["."] * n, dtype=object), rank=np.zeros(n, dtype=int), tag=np.array(["loss"] * n, dtype=object),
                       step=np.arange(n), wall_time=np.zeros(n), value=1.0 / (1.0 + np.arange(n)))

view = LiveView(min_interval=0.5, title="live test", status="starting...")
view.update(table(2), force=True)  # the first curve (matplotlib's import) before the clock starts
t0 = time.monotonic(); calls = skipped = bursts = 0; drawn = 1
while time.monotonic() - t0 < 3.0 or drawn < 4:  # at least 3 throttled draws, however slow the machine
    drew = view.update(table(calls + 3))
    drawn += drew
    if drew:  # right after a draw, five more: all skipped (unless the machine held this process past the interval)
        b0 = time.monotonic()
        after = [view.update(table(calls + 3)) for _ in range(5)]
        if time.monotonic() - b0 < 0.5:
            bursts += 1
            skipped += sum(not a for a in after)
        drawn += sum(after)
    calls += 1
    time.sleep(0.02)
print(calls, drawn, skipped, bursts, view.updates, view.text_mode, time.monotonic() - t0)
"""


class CountingClient(NotebookClient):
    """nbclient, counting the iopub messages a cell sends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.counts = {}

    def process_message(self, msg, cell, cell_index):
        kind = msg["msg_type"]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return super().process_message(msg, cell, cell_index)


def test_live_view_is_one_handle_updated_at_most_twice_a_second(jupyter_dirs):
    kernel.install("msnb-test-live", prefix=jupyter_dirs["prefix"])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(LOOP)])
    client = CountingClient(nb, kernel_name="msnb-test-live", timeout=120)
    client.execute()
    calls, drawn, skipped, bursts, updates, text_mode, elapsed = client.nb.cells[0].outputs[-1]["text"].split()
    calls, drawn, skipped, bursts, elapsed = int(calls), int(drawn), int(skipped), int(bursts), float(elapsed)
    assert text_mode == "False"  # a kernel: rich output
    # the throttle's bounds, whatever the machine's load: draws at least 0.5 s apart, calls right after one skipped
    assert drawn - 1 <= elapsed / 0.5 + 1 and bursts >= 1 and skipped == 5 * bursts and calls > drawn
    assert int(updates) == drawn + 1  # the "starting..." line, then each curve
    assert client.counts.get("display_data") == 1  # one handle, showing "starting..." at once...
    assert client.counts.get("update_display_data") == drawn  # ...updated in place
    assert "clear_output" not in client.counts
    (display,) = [o for o in client.nb.cells[0].outputs if o["output_type"] == "display_data"]
    html = display["data"]["text/html"]
    assert "msnb-live" in html and "data:image/png;base64," in html and "step" in html


class TimedStream(io.StringIO):
    """A text stream noting when each line was written."""

    def __init__(self):
        super().__init__()
        self.times = []

    def write(self, text):
        self.times += [time.monotonic()] * text.count("\n")
        return super().write(text)


def test_text_fallback_is_throttled_too():
    buf = TimedStream()
    view = LiveView(min_interval=0.2, text=True, stream=buf, title="job", status=None)
    t0 = time.monotonic()
    calls = 0
    while time.monotonic() - t0 < 1.0:
        view.update(None, status="working")
        calls += 1
        time.sleep(0.01)
    view.close(None, status="done")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "[job] working" and lines[-1] == "[job] done" and len(lines) == len(buf.times)
    working = buf.times[:-1]  # the closing line is forced
    # at least 0.2 s between lines, however busy the machine; most of the calls were skipped
    assert 2 <= len(working) < calls / 4 and all(b - a >= 0.2 for a, b in zip(working, working[1:]))


def test_tail_follows_a_growing_file(ms_files, tmp_path):
    (src,) = (ms_files / "record").glob("*_MS")
    data = src.read_bytes()
    bounds = [pos for pos, _ in payloads(src)] + [len(data)]
    target = tmp_path / "run" / src.name
    target.parent.mkdir()
    target.write_bytes(b"")

    def writer():
        # the job writes its records in five bursts, the last cut mid-record until the end
        for k in range(1, 6):
            cut = bounds[len(bounds) * k // 6] + (7 if k < 5 else 0)
            with open(target, "r+b") as f:
                f.seek(0)
                f.write(data[:cut])
            time.sleep(0.3)
        with open(target, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=writer)
    thread.start()
    buf = io.StringIO()
    view = LiveView(text=True, stream=buf, min_interval=0.1, title="tail", status=None)
    result = tail(target.parent, every=0.2, duration=5.0, view=view)  # the writer ends after about 1.5 s
    thread.join()
    assert result.problems == []
    assert result.scalars.series("loss")[0].tolist() == list(range(1, 121))
    out = buf.getvalue().splitlines()
    assert out[0].startswith("[tail] following") and "stopped after" in out[-1]
    assert sum("loss" in line for line in out) >= 3  # redrawn as data arrived
    shutil.rmtree(tmp_path / "run")


def test_tail_magic_returns_what_it_read(ms_files):
    import json
    import subprocess
    import sys

    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
        f"r = ip.run_line_magic('mfmon_tail', '{ms_files / 'ranks'} --every 0.2 --for 1')\n"
        "print(json.dumps({'points': len(r.scalars), 'ranks': sorted(set(r.scalars.rank.tolist()))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"points": 100, "ranks": [0, 1]}
    assert any("following" in line for line in lines) and any("stopped after 1 s" in line for line in lines)


def _loss_rows(runs_and_tags):
    import numpy as np

    from msnb.events import ScalarTable

    rows = [(run, tag, step) for run, tag, steps in runs_and_tags for step in steps]
    n = len(rows)
    return ScalarTable(
        run=np.array([r for r, _, _ in rows], dtype=object),
        rank=np.zeros(n, dtype=int),
        tag=np.array([t for _, t, _ in rows], dtype=object),
        step=np.array([s for _, _, s in rows]),
        wall_time=np.zeros(n),
        value=np.ones(n),
    )


def test_one_loss_source_keeps_the_run_that_logs_the_loss_most_often():
    from msnb.plot.live import one_loss_source

    # a smoke's two writers: msnb's step callback every step, the summary every fifth (with its lr)
    table = _loss_rows([(".", "loss", range(1, 101)), ("summary", "loss/auto", range(5, 101, 5)), ("summary", "lr", range(5, 101, 5))])
    kept = one_loss_source(table)
    assert set(kept.run.tolist()) == {"."} and len(kept) == 100
    # the summary alone (the step callback's file not read yet): everything kept
    alone = _loss_rows([("summary", "loss/auto", range(5, 51, 5)), ("summary", "lr", range(5, 51, 5))])
    assert one_loss_source(alone) is alone
    # no loss at all, or nothing: unchanged
    no_loss = _loss_rows([("a", "lr", range(3)), ("b", "lr", range(5))])
    assert one_loss_source(no_loss) is no_loss and one_loss_source(None) is None
