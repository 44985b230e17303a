"""The example notebooks as a reader opens them: no test plumbing in the code, no paths of the machine that ran them."""

import re

import nbformat
import pytest

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
TAGS = {"nbval-ignore-output", "raises-exception", "nbval-skip"}  # nbval's cell tags
# a scratch directory with its random suffix, a home or checkout, an absolute site-packages.  The last is tried only
# where a word starts (no backtracking from every '/' of a long base64 image in an HTML output: 6 s a notebook); it
# finds what '/[^\s"'<>]*/site-packages/' finds: a word with a '/' before its '/site-packages/'
MACHINE_PATH = re.compile(
    r"/tmp/(?:msnb-[a-z]+-|tmp)(?!X{8})[A-Za-z0-9_]{8}|/(?:home|root|work|Users)/[^\s\"'<>]+|(?<![^\s\"'<>])[^\s\"'<>/]*/[^\s\"'<>]*/site-packages/"
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_tags_not_markers_and_no_machine_paths(path):
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert "NBVAL" not in cell.source, f"cell {index}: use a cell tag, not a # NBVAL_ comment"
        assert set(cell.metadata.get("tags", [])) <= TAGS, f"cell {index}: unknown tags {cell.metadata.get('tags')}"
        for output in cell.outputs:
            texts = [output.get("text", "")] + [v for k, v in output.get("data", {}).items() if isinstance(v, str) and not k.startswith("image/")]
            for text in texts:
                found = MACHINE_PATH.search(text)
                assert found is None, f"cell {index} output holds a machine path: {found.group(0)!r}"


def test_the_pattern_catches_what_it_should():
    assert MACHINE_PATH.search("kept in /tmp/msnb-smoke-d0v87h3s/summary")
    assert MACHINE_PATH.search('File "/work/main/msnb/smoke/builtin/worker.py"')
    assert MACHINE_PATH.search("/opt/venv/lib/python3.11/site-packages/mindspore/train/model.py")
    assert not MACHINE_PATH.search("kept in /tmp/msnb-smoke-XXXXXXXX/summary")
    assert MACHINE_PATH.search("see lib/python3.11/site-packages/x") and MACHINE_PATH.search('"C:/py/site-packages/x"')
    assert not MACHINE_PATH.search("site-packages/x and a/ b/site-packages/") and not MACHINE_PATH.search("a/<site-packages/")


def test_the_refresh_script_scrubs_what_this_test_refuses():
    import importlib.util

    spec = importlib.util.spec_from_file_location("refresh_notebooks", REPO / "scripts" / "refresh_notebooks.py")
    refresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refresh)
    raw = "summary directory /tmp/msnb-smoke-fef85sm_/summary removed; kept /tmp/msnb-notebook-a1B2c3D4"
    assert MACHINE_PATH.search(raw) and not MACHINE_PATH.search(refresh.scrub(raw))
    assert refresh.scrub(raw) == "summary directory /tmp/msnb-smoke-XXXXXXXX/summary removed; kept /tmp/msnb-notebook-XXXXXXXX"
    venv = "Python 3.11.7 (/work/main/.venv/bin/python3)"  # the doctor names the interpreter
    assert MACHINE_PATH.search(venv) and refresh.scrub(venv, prefix="/work/main/.venv") == "Python 3.11.7 (…/bin/python3)"
    checkout = "/work/main/msnb/smoke/builtin/worker.py"  # a traceback through an editable install in /work/main
    assert MACHINE_PATH.search(checkout) and refresh.scrub(checkout, prefix="/nowhere", checkout="/work/main") == "…/msnb/smoke/builtin/worker.py"
