"""The report as a person sees it: headless Chromium, JavaScript off, loaded from a file with no network.

Asserted from the browser itself: the screenshot is not blank, the console has
no error, every request the page made was the file itself or a data: URI, every
figure decoded, and the DOM shows the run names, the PASS/FAIL words and the tag
titles.  Printing to PDF gives pages.  Every contents link is clicked in the saved file and in
``%mfmon_report``'s frame inside JupyterLab (JavaScript on there, as JupyterLab needs; the frame stays sandboxed).  Needs Debian's ``chromium`` and
``chromium-driver`` and ``selenium`` (the ``test`` extra); skipped, saying which,
without them.  Screenshots and the PDF stay in the test's temporary directory.
"""

import base64
import io
import json

import numpy as np
import pytest

import msnb
from tests.html_report.report_pages import HOSTILE_RUN, HOSTILE_TAG, write_hostile, write_scenario
from tests.test_browser import CHROMEDRIVER, CHROMIUM, FLAGS, lab  # noqa: F401  (lab: a fixture, used by name)

# elements reaching past the right edge of the page (what would be cut off on paper or need a sideways scroll)
OVERFLOW = """
const W = document.documentElement.clientWidth;
return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > W + 1).map(e => e.tagName + ' ' + e.innerText.slice(0, 40));
"""

PROBE = """
return {
  scripts: document.scripts.length,
  runs: [...document.querySelectorAll('h3.run')].map(e => e.innerText),
  overall: (document.getElementById('overall') || {}).innerText || '',
  captions: [...document.querySelectorAll('figcaption')].map(e => e.innerText),
  images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  title: document.title,
};
"""


def _missing() -> str | None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        return "headless Chromium is not installed (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


def _chromium(tmp_path, *, javascript: bool):
    """Debian's headless Chromium through chromedriver, a profile of its own; without JavaScript, console and network logged."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")), options=options)


@pytest.fixture
def browser(tmp_path):
    """Chromium with JavaScript disabled for pages, its console and network logged."""
    driver = _chromium(tmp_path, javascript=False)
    try:
        yield driver
    finally:
        driver.quit()


def _requests_of(driver, url: str) -> list[str]:
    """URLs of every request made for the document at *url* (the browser's own start page left out)."""
    messages = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    sent = [m["params"] for m in messages if m["method"] == "Network.requestWillBeSent"]
    return [p["request"]["url"] for p in sent if p.get("documentURL") == url or p["request"]["url"] == url]


def _not_blank(png: bytes) -> float:
    """The share of pixels that are not background."""
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64)
    return float((pixels < 200).mean()) if pixels.std() > 5 else 0.0


def test_report_in_headless_chromium(browser, tmp_path):
    runs = tmp_path / "runs"
    paths = [write_scenario(runs, "healthy_2"), write_scenario(runs, "drift_4"), write_hostile(runs)]
    out = tmp_path / "report.html"
    result = msnb.report(paths, out=out)
    judged = msnb.check(paths)
    url = out.as_uri()

    browser.get(url)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    top = browser.get_screenshot_as_png()
    (shots / "top.png").write_bytes(top)
    state = browser.execute_script(PROBE)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    requests = _requests_of(browser, url)
    pdf = base64.b64decode(browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": False})["data"])
    (tmp_path / "report.pdf").write_bytes(pdf)
    browser.set_window_size(800, 1100)  # about an A4 page's width: the print styles must keep everything inside
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    overflow = browser.execute_script(OVERFLOW)
    browser.save_screenshot(str(shots / "print-media.png"))

    # what a person sees: a page, not a blank screen, and no error in the console
    assert _not_blank(top) > 0.02, f"the screenshot looks blank: {shots / 'top.png'}"
    assert errors == [], errors
    # nothing fetched: the file itself and its data: figures, nothing else
    assert requests and requests[0] == url, requests
    assert all(u.startswith(("file://", "data:")) for u in requests), [u for u in requests if not u.startswith(("file://", "data:"))]
    assert state["scripts"] == 0
    # every figure decoded, with a size
    assert state["images"] and all(ok and w > 100 and h > 100 for ok, w, h in state["images"]), state["images"]
    # the content, from the DOM: one heading per run with the judge's word, the verdict, the tag titles
    assert sorted(state["runs"]) == sorted(f"{'PASS' if r.passed else 'FAIL'} run {r.run} (ranks {', '.join(map(str, r.ranks))})" for r in judged.runs)
    assert any(HOSTILE_RUN in text for text in state["runs"])
    assert state["overall"].startswith("FAILED") and result.passed is False
    captions = " ".join(state["captions"])
    assert "loss" in captions and "learning-rate" in captions and HOSTILE_TAG in captions
    assert state["sections"] == ["verdict", "scalars", "step-time", "memory", "histograms", "config", "lineage", "problems", "files", "environment"]
    # printable: a PDF of several pages, nothing wider than the page
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 2
    assert overflow == [], overflow


# where each contents link took the page: the address, the report still there, the section's top in the window
WHERE = """
const id = arguments[0];
const s = document.getElementById(id);
const top = s ? s.getBoundingClientRect().top : null;
const atBottom = window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2;
return {href: location.href, title: document.title, sections: [...document.querySelectorAll('section')].map(s => s.id),
        top: top, scrolled: window.scrollY, atBottom: atBottom, height: window.innerHeight};
"""
CONTENTS = "return [...document.querySelectorAll('nav a')].map(a => [a.getAttribute('href'), a.innerText]);"


def _follow_contents(driver, expected_href) -> list[dict]:
    """Click each contents link of the page *driver* is in (from the top each time); where each one landed."""
    from selenium.webdriver.common.by import By

    landed = []
    for href, _name in driver.execute_script(CONTENTS):
        driver.execute_script("window.scrollTo(0, 0)")
        driver.find_element(By.CSS_SELECTOR, f'nav a[href="{href}"]').click()
        anchor = href.rpartition("#")[2]
        where = _wait_for(lambda a=anchor: (w := driver.execute_script(WHERE, a))["href"] == expected_href(a) and w, driver, anchor)
        landed.append({"anchor": anchor, **where})
        if where.get("timed_out"):  # the page left the report: no contents to click any more
            break
    return landed


def _wait_for(probe, driver, anchor, timeout: float = 10.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    return {"href": driver.execute_script("return location.href"), "title": driver.title, "anchor": anchor, "timed_out": True}


def _assert_scrolled_to_each(landed, sections, title):
    for w in landed:
        assert not w.get("timed_out"), w  # the address became the section's own
    assert [w["anchor"] for w in landed] == sections, landed
    for w in landed:
        assert w["title"] == title and w["sections"] == sections, w  # still the report
        # the section's heading at the top of the window, or the page scrolled as far as it goes with the section in view
        assert w["top"] is not None and (abs(w["top"]) <= 2 or (w["atBottom"] and 0 <= w["top"] < w["height"])), w
    assert any(w["scrolled"] > 0 for w in landed), landed


def test_saved_report_contents_links_scroll_to_their_section(browser, tmp_path):
    """The file opened as a file: each contents link keeps the page and brings its section to the top."""
    runs = tmp_path / "runs"
    out = tmp_path / "report.html"
    msnb.report([write_scenario(runs, "healthy_2"), write_scenario(runs, "drift_4")], out=out)
    url = out.as_uri()
    browser.get(url)
    sections = browser.execute_script("return [...document.querySelectorAll('section')].map(s => s.id)")
    assert [h for h, _ in browser.execute_script(CONTENTS)] == [f"#{s}" for s in sections]

    landed = _follow_contents(browser, lambda anchor: f"{url}#{anchor}")
    _assert_scrolled_to_each(landed, sections, browser.execute_script("return document.title"))


@pytest.fixture
def lab_browser(tmp_path):
    """Chromium with JavaScript on, as JupyterLab needs."""
    driver = _chromium(tmp_path, javascript=True)
    try:
        yield driver
    finally:
        driver.quit()


def test_inline_report_contents_links_stay_in_the_frame(lab, lab_browser, tmp_path):  # noqa: F811  (lab: the fixture)
    """``%mfmon_report`` in JupyterLab: each contents link scrolls the frame to its section; the frame keeps the report.

    A plain ``#anchor`` in a srcdoc frame resolves against the notebook's URL:
    the frame then showed JupyterLab's login page instead of the report.
    """
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from tests.test_browser import _kernel_idle, _wait, open_notebook

    runs = tmp_path / "runs"
    paths = [write_scenario(runs, "healthy_2"), write_scenario(runs, "drift_4")]
    out = tmp_path / "inline-report.html"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    driver = lab_browser
    open_notebook(driver, lab, "report.ipynb", f"%mfmon_report {paths[0]} {paths[1]} --out {out}")
    try:
        _wait(lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"), 180, "the notebook's cells")
        _wait(lambda: _kernel_idle(lab), 180, "an idle kernel")
        notebook_url = driver.current_url
        driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")[0].find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").click()
        ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
        frame = _wait(lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea iframe"), 240, "the report's frame")[0]
        driver.execute_script("arguments[0].scrollIntoView()", frame)
        driver.switch_to.frame(frame)
        _wait(lambda: driver.execute_script("return document.querySelectorAll('section').length"), 30, "the report in the frame")
        sections = driver.execute_script("return [...document.querySelectorAll('section')].map(s => s.id)")
        title = driver.execute_script("return document.title")  # the frame's (driver.title is the notebook's)
        landed = _follow_contents(driver, lambda anchor: f"about:srcdoc#{anchor}")
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots / "after-links.png"))
        outer = driver.current_url
    except BaseException:
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots / "failure.png"))
        raise

    assert title.startswith("msnb report") and sections[:2] == ["verdict", "scalars"]
    _assert_scrolled_to_each(landed, sections, title)
    assert outer == notebook_url  # the notebook itself never navigated
    # the saved file of the same call keeps plain fragment links, which work when it is opened as a file
    saved = out.read_text(encoding="utf-8")
    assert f'href="#{sections[1]}"' in saved and "about:srcdoc" not in saved
