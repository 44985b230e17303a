"""``msnb report``: the page says what the judge, the reader and the lint say, names from files stay text, the size stays bounded.

Runs are written by tensorboardX (the judge scenarios' curves) and by MindSpore's
SummaryCollector (lineage, histograms, step times); the page is read back with
an HTML parser, as a browser would build it.  tests/html_report/test_report_browser.py looks
at the same pages in Chromium.
"""

import json
import os
import shutil

import pytest

import msnb
from msnb.config import check_config
from msnb.environment import installed_major, installed_versions
from msnb.errors import ConfigError, NothingReadable, UsageError
from msnb.html_report import page
from tests.conftest import load_expected
from tests.html_report.report_pages import (
    HOSTILE_HIST,
    HOSTILE_MATH,
    HOSTILE_RUN,
    HOSTILE_TAG,
    HOSTILE_TEXT,
    Page,
    write_hostile,
    write_many,
    write_scenario,
    write_wide,
)
from tests.scenarios.catalog import SCENARIOS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-runs")
    return {
        "healthy": write_scenario(root, "healthy_2"),
        "drift": write_scenario(root, "drift_4"),
        "hostile": write_hostile(root),
        "wide": write_wide(root),
        "root": root,
    }


def _self_contained(text: str) -> None:
    """No URL a browser would fetch, no script, no inline handler: the page works offline and with JavaScript off."""
    doc = Page(text)
    assert doc.tags("script") == [] and doc.tags("link") == [] and doc.tags("iframe") == [] and doc.tags("object") == []
    assert "url(" not in text and "@import" not in text
    for _tag, attrs in doc.elements:
        assert not any(name.startswith("on") for name in attrs), attrs
        assert not any("://" in (value or "") or (value or "").startswith("//") for value in attrs.values()), attrs
    for a in doc.tags("a"):
        assert a["href"].startswith("#"), a
    for img in doc.tags("img"):
        assert img["src"].startswith("data:image/png;base64,") and img["alt"]


def test_the_page_gives_the_judges_verdict_per_run(runs, tmp_path):
    paths = [runs["healthy"], runs["drift"]]
    result = msnb.report(paths, out=tmp_path / "r.html")
    judged = msnb.check(paths)
    expected = {name: SCENARIOS[name][2] for name in ("healthy_2", "drift_4")}
    assert result.passed is False and result.passed == judged.passed == all(e["passed"] for e in expected.values())
    assert result.exit_code == 1 and result.bytes == (tmp_path / "r.html").stat().st_size
    text = (tmp_path / "r.html").read_text()
    _self_contained(text)
    doc = Page(text)
    # one heading per run, with the word the judge gave it
    assert sorted(doc.run_headings) == sorted(f"{'PASS' if r.passed else 'FAIL'} run {r.run} (ranks {', '.join(map(str, r.ranks))})" for r in judged.runs)
    assert sorted(result.runs) == sorted(r.run for r in judged.runs)
    verdict = doc.section("verdict")
    for run in judged.runs:
        for c in run.checks:
            assert c.name in verdict and c.detail in verdict
        for f in run.flags:
            assert f.reason in verdict
    (flag,) = judged.flags
    lo, hi = next((lo, hi) for rank, lo, hi in expected["drift_4"]["flags"] if rank == flag.rank)
    assert lo <= flag.step <= hi
    assert "FAILED" in doc.section("header")
    # the curves: one figure of the usual panels (loss and learning rate here), every tag in the table
    scalars = doc.section("scalars")
    assert "usual panels: loss, learning-rate" in scalars and "one line per rank" in scalars
    assert len(doc.tags("img")) >= 1


def test_names_from_files_reach_the_page_as_text(runs, tmp_path):
    result = msnb.report(runs["hostile"], out=tmp_path / "hostile.html", title=f"report on {HOSTILE_RUN}")
    text = (tmp_path / "hostile.html").read_text()
    _self_contained(text)  # no <script>, <img onerror> or external href came through
    doc = Page(text)
    assert result.runs == [HOSTILE_RUN] and doc.run_headings == [f"PASS run {HOSTILE_RUN} (ranks 0)"]
    assert f"report on {HOSTILE_RUN}" in doc.section("header")
    shown = " ".join(" ".join(parts) for parts in doc.text.values())
    for name in (HOSTILE_TAG, HOSTILE_MATH, HOSTILE_HIST, HOSTILE_TEXT):
        assert name in shown, name  # the parser decoded it back to the very name: it was text, not markup
    assert HOSTILE_TAG in doc.section("scalars") and HOSTILE_HIST in doc.section("histograms") and HOSTILE_TEXT in doc.section("lineage")
    assert len(doc.tags("img")) == 3  # usual panels, the other tags (both hostile ones drawn), the histograms


def test_a_mindspore_run_with_lineage_step_time_histograms_and_config(ms_files, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("monitor_config:\n  summary_dir: ./summary\n  collect_freq: 1\n  histogram_settings: {regular: '.*'}\n")
    linted = check_config(config, protobuf_major=installed_major("protobuf"))
    assert linted.findings, "the config must give the lint something to say"
    result = msnb.report(ms_files / "collector", out=tmp_path / "ms.html", config=config)
    doc = Page((tmp_path / "ms.html").read_text())
    _self_contained((tmp_path / "ms.html").read_text())
    assert result.passed is True and result.runs == ["collector"]
    # lineage as MindSpore's own lineage_pb2 decoded it (writers/mindspore_summary.py)
    (lineage_file,) = [v for k, v in load_expected(ms_files)["files"].items() if k.startswith("collector/") and k.endswith("_lineage")]
    train = next(r for r in lineage_file["lineage"] if r["kind"] == "train")
    shown = doc.section("lineage")
    for key, value in train.items():
        if key not in ("kind", "step") and value != "":  # an empty string is protobuf's default: not on the wire
            assert key in shown and (str(value) in shown or json.dumps(value) in shown), (key, value)
    user = next(r for r in lineage_file["lineage"] if r["kind"] == "user_defined")
    assert all(k in shown and str(v) in shown for k, v in user["info"].items()) and "user defined" in shown
    for f in linted.findings:
        assert f.rule in doc.section("config") and f.message in doc.section("config")
    assert "collect_freq" in doc.section("config")
    assert "step_time_ms" in doc.section("step-time") and "median" in doc.section("step-time")
    assert "histogram" in doc.section("histograms")
    figures = {section: 0 for section in ("scalars", "step-time", "histograms")}
    section = None
    for tag, attrs in doc.elements:
        section = attrs.get("id", section) if tag == "section" else section
        if tag == "img" and section in figures:
            figures[section] += 1
    assert all(figures.values()), figures
    # the versions of the machine that wrote it, as the doctor reads them
    versions = installed_versions()
    assert all(name in doc.section("environment") for name in versions)
    assert versions["numpy"] in doc.section("environment")


def test_size_is_bounded_and_every_tag_is_still_counted(runs, tmp_path):
    result = msnb.report(runs["wide"], out=tmp_path / "wide.html")
    text = (tmp_path / "wide.html").read_text()
    doc = Page(text)
    rows = text.count("<tr>")
    tags = len(msnb.read(runs["wide"]).scalars.tags())
    assert tags > page.MAX_ROWS
    assert f"{tags - page.MAX_ROWS:,} more rows left out" in doc.section("scalars")
    assert "more tags not drawn" in doc.section("scalars")
    assert rows < 3 * page.MAX_ROWS and result.bytes < 1_500_000


def test_many_runs_failed_first_within_the_caps(tmp_path, monkeypatch):
    from msnb.html_report import sections

    monkeypatch.setattr(sections, "MAX_VERDICT_RUNS", 5)  # the cap, small enough to cross with a dozen runs
    many = write_many(tmp_path, runs=12, bad=9)
    judged = msnb.check(many)
    (failed,) = [r.run for r in judged.runs if not r.passed]
    result = msnb.report(many, out=tmp_path / "many.html")
    doc = Page((tmp_path / "many.html").read_text())
    assert result.passed is False and len(result.runs) == 12
    assert len(doc.run_headings) == 5 and doc.run_headings[0].startswith(f"FAIL run {failed} ")
    assert "7 more runs left out (0 of them failed)" in doc.section("verdict")
    assert f"Curves are drawn for {sections.MAX_FIGURE_RUNS} of 12 runs (failed runs first)." in doc.section("scalars")
    assert len(doc.tags("img")) == 1 and "Non-finite values" in doc.section("scalars")  # the 10th run by name, drawn: it failed


def test_problems_met_while_reading_are_listed(runs, tmp_path):
    damaged = tmp_path / "damaged" / "rank_0"
    damaged.mkdir(parents=True)
    source = next((runs["healthy"] / "tensorboard" / "rank_0").glob("events.out.tfevents.*"))
    data = bytearray(source.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: a CRC problem, the other records kept
    (damaged / source.name).write_bytes(bytes(data))
    read = msnb.read(tmp_path / "damaged")
    assert read.problems
    msnb.report(tmp_path / "damaged", out=tmp_path / "d.html")
    shown = Page((tmp_path / "d.html").read_text()).section("problems")
    for p in read.problems:
        assert p.message in shown and str(p.kind) in shown


def test_mistakes_are_usage_errors_and_nothing_is_written(runs, tmp_path):
    with pytest.raises(NothingReadable):
        msnb.report(tmp_path / "nothing-here", out=tmp_path / "a.html")
    with pytest.raises(UsageError, match="does not exist"):
        msnb.report(runs["healthy"], out=tmp_path / "no" / "such" / "dir.html")
    with pytest.raises(UsageError, match="is a directory"):
        msnb.report(runs["healthy"], out=tmp_path)
    os.mkfifo(tmp_path / "fifo.html")  # writing there would block until someone reads
    with pytest.raises(UsageError, match="not a regular file"):
        msnb.report(runs["healthy"], out=tmp_path / "fifo.html")
    (tmp_path / "fifo.html").unlink()
    (tmp_path / "broken.yaml").write_text("monitor_config: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml"):
        msnb.report(runs["healthy"], out=tmp_path / "b.html", config=tmp_path / "broken.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml"]


def test_out_never_replaces_an_input_a_symlink_or_dev_stdout(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["healthy"], run)
    event = next(p for p in sorted(run.rglob("*")) if p.is_file())
    before = event.read_bytes()
    with pytest.raises(UsageError, match="one of the files read"):
        msnb.report(run, out=event)
    assert event.read_bytes() == before
    # a symlink is never written through (one rule for every written file): the link and its target stay as they were
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "latest.html"
    target.write_text("old")
    (tmp_path / "link.html").symlink_to(target)
    with pytest.raises(UsageError, match="symbolic link"):
        msnb.report(run, out=tmp_path / "link.html")
    assert (tmp_path / "link.html").is_symlink() and target.read_text() == "old"
    # /dev/stdout is a symlink too: replacing it (as root) would turn it into a plain file for every process
    with pytest.raises(UsageError, match="symbolic link|device"):
        msnb.report(run, out="/dev/stdout")
    assert os.path.islink("/dev/stdout") or not os.path.lexists("/dev/stdout")


def test_a_run_without_loss_is_reported_but_not_judged(runs, tmp_path):
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(tmp_path / "metrics" / "rank_0"))
    for s in range(1, 31):
        w.add_scalar("throughput", 100.0 + s, s)
    w.close()
    with pytest.raises(NothingReadable):
        msnb.check(tmp_path / "metrics")  # the judge has nothing to say ...
    result = msnb.report(tmp_path / "metrics", out=tmp_path / "w.html")  # ... the report still shows what was read
    assert result.passed is None and result.exit_code == 1
    doc = Page((tmp_path / "w.html").read_text())
    assert "NOT JUDGED" in doc.section("header") and "no 'loss' tag" in doc.section("verdict")
    assert "throughput" in doc.section("scalars") and len(doc.tags("img")) == 1
    with pytest.raises(NothingReadable, match="grad_norm"):  # a tag the user names must exist, as with msnb check
        msnb.report(runs["wide"], out=tmp_path / "x.html", tag="grad_norm")
    assert not (tmp_path / "x.html").exists()


def test_cli_exit_codes_and_json(runs, run_msnb, tmp_path):
    ok = run_msnb("report", runs["healthy"], "--out", tmp_path / "ok.html", "--json", check=0)
    doc = json.loads(ok.stdout)
    checked = msnb.check(runs["healthy"]).as_dict()
    names = [r["run"] for r in checked["runs"]]
    want = {"out": str(tmp_path / "ok.html"), "bytes": (tmp_path / "ok.html").stat().st_size, "runs": names, "passed": True}
    assert doc == {**want, "verdicts": checked["runs"], "flags": checked["flags"]}  # the judge's verdicts, as msnb check --json
    failed = run_msnb("report", runs["healthy"], runs["drift"], "--out", tmp_path / "bad.html", check=1)
    # the writing succeeded; the verdict is the runs' (a leading "FAILED: wrote" read as if writing had failed)
    assert failed.stdout.startswith(f"msnb report: wrote {tmp_path / 'bad.html'}")
    assert failed.stdout.rstrip().endswith("the runs' verdict: FAILED")
    nothing = run_msnb("report", tmp_path / "nothing", "--out", tmp_path / "n.html", check=2)
    assert nothing.stdout == "" and nothing.stderr.startswith("msnb report: error: nothing readable")
    run_msnb("report", runs["healthy"], "--out", tmp_path / "missing" / "r.html", check=2)
    run_msnb("report", runs["healthy"], check=2)  # no --out: argparse usage
    assert not (tmp_path / "n.html").exists()


def test_magic_shows_the_page_in_a_sandboxed_frame(runs, tmp_path):
    import subprocess
    import sys

    code = (
        "import json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance(); ip.run_line_magic('load_ext', 'msnb')\n"
        f"r = ip.run_line_magic('mfmon_report', '{runs['drift']} --out {tmp_path / 'm.html'} --title drift')\n"
        "shown = ip.display_formatter.format(r)[0]\n"
        f"bad = ip.run_cell('%mfmon_report {tmp_path / 'nothing'} --out {tmp_path / 'x.html'}')\n"
        "print(json.dumps({'passed': r.passed, 'html': shown['text/html'], 'plain': shown['text/plain'], 'error': type(bad.error_in_exec).__name__}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["passed"] is False and answer["error"] == "UsageError"
    (frame,) = Page(answer["html"]).tags("iframe")
    saved = (tmp_path / "m.html").read_text()
    # the saved page, its contents' links made the frame's own (a plain #anchor would load the notebook's URL into the frame)
    assert frame["sandbox"] == "" and frame["srcdoc"] == saved.replace('href="#', 'href="about:srcdoc#') and 'href="#verdict"' in saved
    assert frame["srcdoc"].count('href="about:srcdoc#') == saved.count("<section id=")
    assert "FAILED" in answer["plain"]


def test_the_report_needs_neither_mindspore_nor_pandas(ms_files, tmp_path):
    """The core install writes reports too: with MindSpore, mindformers and pandas unimportable, the page is the same kind."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "for name in ('mindspore', 'mindformers', 'pandas'):\n"
        "    sys.modules[name] = None  # import fails\n"
        "import msnb\n"
        f"r = msnb.report({str(ms_files / 'collector')!r}, out={str(tmp_path / 'core.html')!r})\n"
        "print(json.dumps({'passed': r.passed, 'loaded': sorted(n for n in ('mindspore', 'pandas') if sys.modules.get(n) is not None)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"passed": True, "loaded": []}
    assert "collector" in Page((tmp_path / "core.html").read_text()).section("verdict")


def test_a_folder_name_that_is_not_utf8_is_drawn_and_written(tmp_path):
    # Python names such a folder with lone surrogates, which FreeType refuses to draw and UTF-8 refuses to encode
    from tests.writers.team_runs import write_tbx_run

    write_tbx_run(str(tmp_path / "run"), (0, 1), 30)
    os.rename(tmp_path / "run", os.path.join(os.fsencode(tmp_path), b"r\xff\xfe"))
    result = msnb.report(tmp_path, out=tmp_path / "r.html")
    assert result.passed and result.runs == ["r\udcff\udcfe"]
    assert "r\\udcff\\udcfe" in (tmp_path / "r.html").read_text(encoding="utf-8")
    result._repr_html_().encode("utf-8")  # what a kernel sends to show it inline
    for text in msnb.runs(tmp_path).mime_bundle().values():
        assert "r\\udcff\\udcfe" in text.encode("utf-8").decode("utf-8")
    from msnb.plot import plot_scalars
    from msnb.plot.render import figure_png

    assert figure_png(plot_scalars(msnb.read(tmp_path).scalars).figure)[:4] == b"\x89PNG"
