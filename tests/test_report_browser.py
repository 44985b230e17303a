"""The report as a person sees it: headless Chromium, JavaScript off, loaded from a file with no network.

Asserted from the browser itself: the screenshot is not blank, the console has
no error, every request the page made was the file itself or a data: URI, every
figure decoded, and the DOM shows the run names, the PASS/FAIL words and the tag
titles.  Printing to PDF gives pages.  Needs Debian's ``chromium`` and
``chromium-driver`` and ``selenium`` (the ``test`` extra); skipped, saying which,
without them.  Screenshots and the PDF stay in the test's temporary directory.
"""

import base64
import io
import json

import numpy as np
import pytest

import msnb

from .report_pages import HOSTILE_RUN, HOSTILE_TAG, write_hostile, write_scenario
from .test_browser import CHROMEDRIVER, CHROMIUM, FLAGS

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


@pytest.fixture
def browser(tmp_path):
    """Chromium with JavaScript disabled for pages, its console and network logged."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")), options=options)
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
    assert state["sections"] == ["verdict", "scalars", "step-time", "histograms", "config", "lineage", "problems", "files", "environment"]
    # printable: a PDF of several pages, nothing wider than the page
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 2
    assert overflow == [], overflow
