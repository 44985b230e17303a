"""A widget change that reaches the kernel while a cell awaits gets its busy and idle status (see msnb.kernel_comms).

ipywidgets' front end holds a widget's next change until the kernel says "idle" for the one before; without that
status the widget is dead for the rest of the session.  The cell below awaits until the slider's change has arrived,
so the change is handled beside the awaiting cell, the case ipykernel 7 leaves without a status.  The same exchange
with a plain IPython kernel (no msnb) is the oracle: if it ever answers by itself, the wrapper must go (the test
fails on two idles).
"""

import json
import sys
import time

import pytest

from msnb import kernel
from tests.conftest import kernel_from_spec, stream_text

MAKE_SLIDER = "import asyncio, ipywidgets\ns = ipywidgets.FloatSlider(value=0.9, min=0, max=0.99, step=0.01)\nprint(s.comm.comm_id)\n"
AWAIT_CHANGE = "for _ in range(600):\n    if s.value == 0.25:\n        break\n    await asyncio.sleep(0.05)\nprint(s.value)\n"


def _plain_spec(prefix, name: str) -> None:
    """A kernelspec for this interpreter's ipykernel without msnb's extension."""
    folder = prefix / "share" / "jupyter" / "kernels" / name
    folder.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": name, "language": "python"}
    (folder / "kernel.json").write_text(json.dumps(spec))


def _statuses_of_a_change_during_an_await(kc) -> tuple[list[str], str]:
    """Send the slider a change while a cell awaits it; the statuses whose parent is that change, and what the cell printed."""
    outputs = []
    kc.execute_interactive(MAKE_SLIDER, timeout=120, output_hook=outputs.append)
    comm_id = stream_text(outputs).strip()
    cell = kc.execute(AWAIT_CHANGE)
    while True:  # the cell has started (its busy status) before the change is sent
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") == cell and m["msg_type"] == "execute_input":
            break
    change = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "update", "state": {"value": 0.25}, "buffer_paths": []}})
    kc.shell_channel.send(change)
    states, printed = [], []
    deadline = time.monotonic() + 120
    cell_done = False
    while time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=5)
        except Exception:  # queue empty: the cell is done and the change's statuses, if any, came before
            if cell_done:
                break
            continue
        parent = m["parent_header"].get("msg_id")
        if parent == change["header"]["msg_id"] and m["msg_type"] == "status":
            states.append(m["content"]["execution_state"])
        if parent == cell and m["msg_type"] == "stream":
            printed.append(m["content"]["text"])
        if parent == cell and m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            cell_done = True
    return states, "".join(printed)


def test_a_widget_change_during_an_async_cell_gets_its_idle_status(jupyter_dirs):
    kernel.install("msnb-test-comms", prefix=jupyter_dirs["prefix"])
    with kernel_from_spec("msnb-test-comms") as kc:
        states, printed = _statuses_of_a_change_during_an_await(kc)
    assert printed.strip() == "0.25"  # the change reached the kernel while the cell awaited it
    assert states == ["busy", "idle"], states  # once each: the front end may send the slider's next change


def test_the_plain_kernel_still_needs_it(jupyter_dirs):
    """The oracle: ipykernel alone publishes no status for that change (when it does, msnb.kernel_comms should go)."""
    pytest.importorskip("ipykernel")
    _plain_spec(jupyter_dirs["prefix"], "msnb-test-plain")
    with kernel_from_spec("msnb-test-plain") as kc:
        states, printed = _statuses_of_a_change_during_an_await(kc)
        assert printed.strip() == "0.25"
        assert states == [], f"ipykernel now answers comm messages during async cells itself ({states}): remove msnb.kernel_comms"
        # a board made in that kernel (msnb imported, the extension never loaded) makes the same repair
        kc.execute_interactive("from msnb.dashboard.widgets import _keep_widgets_live\n_keep_widgets_live()\n", timeout=120)
        states, printed = _statuses_of_a_change_during_an_await(kc)
    assert printed.strip() == "0.25" and states == ["busy", "idle"], states
