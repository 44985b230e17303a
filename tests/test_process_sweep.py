"""msnb.process_sweep on real processes: what carries the marker ends (its own session, a deaf SIGTERM handler
included), what does not carry exactly it lives on."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from msnb.process_sweep import marked, sweep

VAR = "MSNB_TEST_SWEEP_ID"
SLEEPER = "import time; print('up', flush=True); time.sleep(120)"
DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(120)"

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="the marker is read from /proc here")


def start(code: str, value: str | None, **popen) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != VAR}
    if value is not None:
        env[VAR] = value
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, **popen)
    assert proc.stdout.readline().strip() == "up"  # its handlers are set before it is swept
    return proc


@pytest.fixture
def started():
    procs = []
    yield lambda code, value, **popen: procs.append(start(code, value, **popen)) or procs[-1]
    for proc in procs:  # a failed assertion must not leave sleepers behind
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_sweep_ends_the_marked_processes_and_only_them(started):
    marker = uuid.uuid4().hex
    own_session = started(SLEEPER, marker, start_new_session=True)  # out of reach of any process-group signal
    deaf = started(DEAF, marker)
    unmarked = started(SLEEPER, None)
    longer = started(SLEEPER, marker + "0")  # the marker is a prefix of its value: not the same marker
    assert sorted(marked(VAR, marker)) == sorted([own_session.pid, deaf.pid])

    begun = time.monotonic()
    sweep(VAR, marker, grace=0.5, poll=0.02)
    assert own_session.wait(5) == -signal.SIGTERM
    assert deaf.wait(5) == -signal.SIGKILL  # SIGTERM ignored: killed after the grace
    assert time.monotonic() - begun < 5
    assert marked(VAR, marker) == []
    assert unmarked.poll() is None and longer.poll() is None


def test_also_stops_a_child_without_the_marker_and_an_empty_marker_sweeps_nothing(started):
    blank = started(SLEEPER, "")
    sweep(VAR, "", grace=0.2)  # every process with the variable empty would match: none is touched
    assert blank.poll() is None

    child = started(SLEEPER, None)
    sweep(VAR, uuid.uuid4().hex, grace=0.5, also=lambda: [child.pid] if child.poll() is None else [])
    assert child.wait(5) == -signal.SIGTERM
