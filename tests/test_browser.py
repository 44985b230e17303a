"""Notebook 01 in a real browser: JupyterLab, headless Chromium, the MindSpore Kernel, the smoke cell run by a person's keys.

What is asserted is what the page shows (the DOM): one output area updated
in place while the run goes, its status line within 2 s, the verdict once,
figures that are images with a size, no traceback and no
``<IPython.core.display ...>`` placeholder.  Screenshots go to the test's
temporary directory; the server and the browser are stopped whatever happens.
Needs Debian's ``chromium`` and ``chromium-driver`` and the ``jupyterlab`` and
``selenium`` packages (the ``test`` extra); skipped, saying which, without them.
"""

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from msnb import kernel
from tests.conftest import REPO
from tests.panel.test_runs import expected, team  # noqa: F401  (fixtures, used by name)

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1100",
]
NOTEBOOK = "01_smoke_test.ipynb"
SMOKE_CELL = 1  # the first code cell: result = %mfmon_smoke --steps 200
STATUS_WITHIN_S = 15.0  # loose: the kernel, the server, the websocket and the page share 2 cores with other trainings
RUN_TIMEOUT_S = 420

# what the smoke cell's output area holds, read from the page
PROBE = """
const cells = document.querySelectorAll('.jp-Notebook .jp-Cell');
const cell = cells[arguments[0]];
if (!cell) return null;
const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
const all = [...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText);
return {
  outputs: outs.length,
  live: [...cell.querySelectorAll('.msnb-live .msnb-status')].map(e => e.innerText),
  verdicts: cell.querySelectorAll('.msnb-smoke').length,
  verdictText: [...cell.querySelectorAll('.msnb-verdict')].map(e => e.innerText),
  images: [...cell.querySelectorAll('.msnb-smoke img')].map(i => [i.naturalWidth, i.naturalHeight, i.complete]),
  prompt: (cell.querySelector('.jp-InputPrompt') || {}).innerText || '',
  allText: all,
};
"""


def _missing() -> str | None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        return "headless Chromium is not installed (apt-get install -y chromium chromium-driver)"
    for module in ("jupyterlab", "selenium"):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[test]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"jupyter lab did not answer {url} within {timeout} s")


def _stop_server(proc, base: str, token: str) -> None:
    """Ask the server to shut down (it stops its kernels), then make sure it is gone."""
    if proc.poll() is None:
        try:
            request = urllib.request.Request(f"{base}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"})
            urllib.request.urlopen(request, timeout=10).close()
        except OSError:
            pass
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(15)


def open_notebook(driver, lab: dict, name: str, source: str) -> None:
    """Write a one-cell notebook on the MindSpore Kernel into the lab's root and open it in *driver*."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    nb.metadata["kernelspec"] = {"name": "mindspore", "display_name": "MindSpore Kernel", "language": "python"}
    nbformat.write(nb, lab["root"] / name)
    driver.get(f"{lab['base']}/lab/tree/{name}?token={lab['token']}")


@contextlib.contextmanager
def serve_lab(where: Path):
    """JupyterLab on 127.0.0.1 with a random port and token, its own Jupyter folders under *where* (the MindSpore Kernel
    installed there), serving *where*/served; asked to shut down (it stops its kernels) and gone when the block ends."""
    data, prefix, runtime = where / "jupyter-data", where / "prefix", where / "jupyter-runtime"
    kernel.install("mindspore", prefix=prefix)  # the kernel the notebooks name, in the server's own Jupyter folders
    root = where / "served"
    root.mkdir()
    settings = where / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # answer JupyterLab's "notified about official Jupyter news?" question up front: unanswered, its toast covers the outputs
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_DATA_DIR=str(data), JUPYTER_PATH=str(prefix / "share" / "jupyter"), JUPYTER_RUNTIME_DIR=str(runtime))
    log = open(where / "jupyter-lab.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            f"--LabApp.user_settings_dir={where / 'lab-settings'}",
            f"--LabApp.workspaces_dir={where / 'lab-workspaces'}",  # emptied after each test: no tabs reopened from another test
            *(["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(root),
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(f"{base}/api/status?token={token}", proc)
        yield {"base": base, "token": token, "root": root, "log": where / "jupyter-lab.log", "workspaces": where / "lab-workspaces"}
    finally:
        _stop_server(proc, base, token)
        log.close()


def _api(lab, path: str, method: str = "GET"):
    request = urllib.request.Request(f"{lab['base']}/api/{path}", method=method, headers={"Authorization": f"token {lab['token']}"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        body = reply.read()
    return json.loads(body) if body else None


@pytest.fixture
def lab(lab_server):
    """The session's JupyterLab (tests/conftest.py's ``lab_server``: one server for every browser test), handed to one
    test: its notebooks' sessions and kernels are shut down and its open tabs forgotten when the test ends, so the
    next test starts from a server with no kernel running and nothing to reopen."""
    yield lab_server
    for session in _api(lab_server, "sessions"):
        _api(lab_server, f"sessions/{session['id']}", method="DELETE")  # stops the session's kernel
    for running in _api(lab_server, "kernels"):
        _api(lab_server, f"kernels/{running['id']}", method="DELETE")
    shutil.rmtree(lab_server["workspaces"], ignore_errors=True)


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _kernel_idle(lab) -> bool:
    sessions = _api(lab, "sessions")  # this test's only: the lab fixture shut down those of the tests before
    return any(s["kernel"]["name"] == "mindspore" and s["kernel"]["execution_state"] == "idle" for s in sessions)


def _wait(predicate, timeout: float, what: str, step: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_smoke_cell_in_jupyterlab(lab, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shutil.copy(REPO / "notebooks" / NOTEBOOK, lab["root"] / NOTEBOOK)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    browser.get(f"{lab['base']}/lab/tree/{NOTEBOOK}?token={lab['token']}")
    try:
        # the notebook is open and its kernel (the MindSpore Kernel) is idle
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180, "the notebook's cells")
        _wait(lambda: "MindSpore Kernel" in browser.find_element(By.TAG_NAME, "body").text, 120, "the MindSpore Kernel's name on the page")
        _wait(lambda: _kernel_idle(lab), 180, "an idle kernel")
        cells = browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")
        editor = cells[SMOKE_CELL].find_element(By.CSS_SELECTOR, ".jp-InputArea-editor")
        editor.click()
        pressed = time.monotonic()
        ActionChains(browser).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()  # run the cell, stay on it
        # JupyterLab clears the committed outputs as the cell starts: count only this run's
        _wait(lambda: "*" in browser.execute_script(PROBE, SMOKE_CELL)["prompt"], 30, "the cell to start", step=0.05)

        samples = []
        first_status_s = None
        while time.monotonic() - pressed < RUN_TIMEOUT_S:
            state = browser.execute_script(PROBE, SMOKE_CELL)
            state["t"] = time.monotonic() - pressed
            samples.append(state)
            if state["live"] and first_status_s is None:
                first_status_s = state["t"]
                browser.save_screenshot(str(shots / "status.png"))
            if len(samples) == 40:
                browser.save_screenshot(str(shots / "running.png"))
            if state["live"] and re.match(r"step 1\d\d/", state["live"][0]) and not (shots / "halfway.png").exists():
                browser.save_screenshot(str(shots / "halfway.png"))  # the live curve and its ETA, halfway through
            if state["verdicts"] and all(ok for _w, _h, ok in state["images"]) and "*" not in state["prompt"]:
                break
            time.sleep(0.3)
        browser.save_screenshot(str(shots / "final.png"))
        (tmp_path / "samples.json").write_text(json.dumps(samples, indent=1))
    except BaseException:
        browser.save_screenshot(str(shots / "failure.png"))
        raise

    final = samples[-1]
    assert final["verdicts"] == 1, f"no verdict after {RUN_TIMEOUT_S} s; see {shots}"
    # the status line first: the view is on screen before MindSpore has started (its first state is not a step)
    assert first_status_s is not None and first_status_s <= STATUS_WITHIN_S, f"first status after {first_status_s} s"
    first_live = next(s["live"][0] for s in samples if s["live"])
    assert re.search(r"starting MindSpore on \w+\.\.\.$", first_live), first_live
    # while it ran: one output area, redrawn in place (its status line changed), nothing appended
    running = [s for s in samples if not s["verdicts"] and s["live"]]
    assert running and all(s["outputs"] == 1 for s in running)
    assert len({s["live"][0] for s in running}) >= 3  # "starting...", then steps: updated in place
    assert any(re.search(r"/200 \(\d+%\), ETA \d+ (s|min)", s["live"][0]) for s in running)  # the promised ETA, once the pace is steady
    # the end: the live view's last state and the verdict, once (no Out[n] beside it)
    assert final["outputs"] == 2 and len(final["verdictText"]) == 1 and re.fullmatch(r"msnb smoke PASSED( with \d+ warnings?)?", final["verdictText"][0])
    assert len(final["images"]) >= 2 and all(w > 0 and h > 0 for w, h, _ in final["images"])
    for text in final["allText"]:
        assert "Traceback" not in text and "<IPython.core.display" not in text


PANEL_PROBE = """
const area = document.querySelectorAll('.jp-Notebook .jp-Cell')[arguments[0]].querySelector('.jp-OutputArea');
const panel = area ? area.querySelector('.msnb-runs') : null;
const rows = panel ? [...panel.querySelectorAll('tbody tr')] : [];
return {
  prompt: document.querySelectorAll('.jp-Notebook .jp-Cell')[arguments[0]].querySelector('.jp-InputPrompt').textContent,
  outputs: area ? area.querySelectorAll('.jp-OutputArea-child').length : 0,
  rows: rows.map(r => ({
    run: r.cells[0].textContent, status: r.cells[1].textContent,
    svg: r.querySelectorAll('svg').length, path: r.querySelectorAll('svg polyline, svg path').length,
    width: r.querySelector('svg') ? r.querySelector('svg').getBoundingClientRect().width : 0})),
  head: panel ? panel.querySelector('b').textContent : '',
  flags: panel ? [...panel.querySelectorAll('li')].map(li => li.textContent) : [],
  text: area ? area.textContent : ''
};
"""


def test_runs_panel_in_jupyterlab(lab, browser, tmp_path, team, expected):  # noqa: F811
    """``%mfmon_runs`` on the team base in JupyterLab: one table, a row per run with its sparkline, failed runs red and flagged."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    shots = tmp_path / "screenshots"
    shots.mkdir()
    open_notebook(browser, lab, "panel.ipynb", f"%mfmon_runs {team}")
    try:
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180, "the notebook's cells")
        _wait(lambda: _kernel_idle(lab), 180, "an idle kernel")
        browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")[0].find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").click()
        ActionChains(browser).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
        _wait(lambda: "*" in browser.execute_script(PANEL_PROBE, 0)["prompt"], 30, "the cell to start", step=0.05)
        state = _wait(lambda: (s := browser.execute_script(PANEL_PROBE, 0))["rows"] and "*" not in s["prompt"] and s, 180, "the runs table")
        browser.save_screenshot(str(shots / "panel.png"))
    except BaseException:
        browser.save_screenshot(str(shots / "failure.png"))
        raise

    assert state["outputs"] == 1, state  # one display, no Out[n] beside it
    assert "Traceback" not in state["text"] and "<IPython.core.display" not in state["text"]
    assert sorted(r["run"] for r in state["rows"]) == sorted(expected)
    for row in state["rows"]:
        drawn = expected[row["run"]]["last_step"] is not None  # a run with no readable point gets an empty frame
        assert row["svg"] == 1 and (row["path"] >= 1) is drawn and row["width"] > 0, row  # one sparkline in every row
        assert ("failed" in row["status"]) is (not expected[row["run"]]["passed"]), row
    assert any("nan_rank" in f and "FLAG" in f for f in state["flags"]), state["flags"]


BOARD_NOTEBOOK = "10_board.ipynb"
# the board's figure as the page shows it: the Image widget's bytes, hashed (a new figure is new bytes)
FIGURE_PROBE = """
const done = arguments[arguments.length - 1];
const img = document.querySelector('.jp-Notebook .widget-image');
if (!img || !img.src) { done(null); return; }
fetch(img.src).then(r => r.arrayBuffer()).then(b => {
  const a = new Uint8Array(b); let h = 2166136261;
  for (let i = 0; i < a.length; i++) { h ^= a[i]; h = Math.imul(h, 16777619) >>> 0; }
  done(a.length + ':' + h);
}).catch(() => done(null));
"""


# what in the board's output scrolls sideways (a horizontal scroll bar): the elements whose content is wider than they are
SCROLLS_SIDEWAYS = """
const out = [];
for (const e of document.querySelectorAll('.jp-Notebook .jp-OutputArea-output *')) {
  const style = getComputedStyle(e);
  if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1 && style.overflowX !== 'visible' && style.overflowX !== 'hidden')
    out.push([e.tagName, e.className.toString().slice(0, 60), e.scrollWidth, e.clientWidth]);
}
return out;
"""


def _run_all(browser) -> None:
    """What a person does: the Run menu, then Run All Cells."""
    from selenium.webdriver.common.by import By

    browser.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
    item = _wait(
        lambda: [i for i in browser.find_elements(By.CSS_SELECTOR, ".lm-Menu-item") if i.get_attribute("data-command") == "runmenu:run-all"],
        30,
        "the Run All Cells menu item",
    )
    item[0].click()


def _all_cells_ran(browser, lab) -> bool:
    from selenium.webdriver.common.by import By

    prompts = [p.text for p in browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell .jp-InputPrompt")]
    return bool(prompts) and all(re.search(r"\[\d+\]", p) for p in prompts) and _kernel_idle(lab)


def test_board_controls_after_run_all(lab, browser, tmp_path):
    """Notebook 10 run whole (its cells set the board's controls from Python and await a follow), then the board driven
    by hand: the smoothing slider dragged, a run unticked, the x axis switched, and the figure new after each."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    shutil.copy(REPO / "notebooks" / BOARD_NOTEBOOK, lab["root"] / BOARD_NOTEBOOK)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    browser.get(f"{lab['base']}/lab/tree/{BOARD_NOTEBOOK}?token={lab['token']}")
    figure = lambda: browser.execute_async_script(FIGURE_PROBE)  # noqa: E731
    slider_text = lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .widget-hslider")[0].text  # noqa: E731

    def changed_from(before, what: str):
        return _wait(lambda: (now := figure()) and now != before and now, 60, f"the figure to change after {what}")

    try:
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180, "the notebook's cells")
        _wait(lambda: _kernel_idle(lab), 180, "an idle kernel")
        _run_all(browser)
        _wait(lambda: "*" in "".join(p.text for p in browser.find_elements(By.CSS_SELECTOR, ".jp-InputPrompt")), 60, "Run All to start", step=0.1)
        _wait(lambda: _all_cells_ran(browser, lab), 400, "every cell to have run")
        first = _wait(figure, 60, "the board's figure")
        assert "0.90" in slider_text(), slider_text()  # the notebook set it to 0.9 from Python
        browser.save_screenshot(str(shots / "after-run-all.png"))

        # drag the smoothing slider to the left
        handle = browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .widget-hslider .noUi-handle")[0]
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", handle)
        ActionChains(browser).drag_and_drop_by_offset(handle, -90, 0).perform()
        dragged = changed_from(first, "dragging the smoothing slider")
        assert "0.90" not in slider_text(), slider_text()
        browser.save_screenshot(str(shots / "dragged.png"))

        # untick a run
        box = browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .widget-checkbox input[type=checkbox]")[0]
        was = box.is_selected()
        box.click()
        unticked = changed_from(dragged, "unticking a run")
        assert box.is_selected() is not was

        # switch the x axis to wall time
        wall = [b for b in browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .widget-toggle-button") if b.text.strip() == "wall"][0]
        wall.click()
        changed_from(unticked, "switching the x axis to wall time")
        browser.save_screenshot(str(shots / "wall.png"))
        assert browser.execute_script(SCROLLS_SIDEWAYS) == [], "the board scrolls sideways at 1,400 px"
        [t for t in browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .lm-TabBar-tab") if t.text.strip() == "Flags"][0].click()
        _wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".jp-Notebook .widget-select select option"), 30, "the flags list")
        browser.save_screenshot(str(shots / "flags.png"))
        assert browser.execute_script(SCROLLS_SIDEWAYS) == [], "the flags list scrolls sideways (a long reason)"
    except BaseException:
        browser.save_screenshot(str(shots / "failure.png"))
        raise
    text = browser.find_element(By.CSS_SELECTOR, ".jp-Notebook").text
    assert "Traceback" not in text and "<IPython.core.display" not in text
