"""A user's mistake in a magic fails the cell with one line, in a real kernel started from the kernelspec.

Jupyter marks a cell whose magic raised IPython's ``UsageError`` as failed
("Run All" stops there, nbval notices) and shows the message without a
traceback.  Printing a message and returning None would let the cell pass.
"""

import pytest

from msnb import kernel
from msnb.magics import magic_names
from tests.conftest import kernel_from_spec

# one bad call per magic: a missing file, a broken option, a path with nothing to read
BAD_CALLS = {
    "%mfmon_doctor": "%mfmon_doctor --no-such-option",
    "%mfmon_config": "%mfmon_config {tmp}/missing.yaml",
    "%mfmon_memory": "%mfmon_memory {tmp}/missing.yaml --card-gb 64",
    "%mfmon_preflight": "%mfmon_preflight {tmp}/missing.yaml --devices 8",
    "%mfmon_plot": "%mfmon_plot {tmp}/empty",
    "%mfmon_tail": "%mfmon_tail {tmp}/empty --every -1",
    "%mfmon_smoke": "%mfmon_smoke --steps 0",
    "%mfmon_check": "%mfmon_check {tmp}/empty",
    "%mfmon_health": "%mfmon_health {tmp}/missing",
    "%mfmon_report": "%mfmon_report {tmp}/empty --out {tmp}/report.html",
    "%mfmon_runs": "%mfmon_runs {tmp}/empty",
    "%mfmon_compare": "%mfmon_compare {tmp}/missing.log {tmp}/empty",
    "%mfmon_board": "%mfmon_board {tmp}/empty",
    "%%mfmon_smoke": "%%mfmon_smoke --steps 0\nnet = None",
}


@pytest.fixture(scope="module")
def shell_client(tmp_path_factory):
    """One kernel for all cases (starting one takes a second or two)."""
    import os

    tmp = tmp_path_factory.mktemp("magic-errors")
    prefix = tmp / "prefix"
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(prefix / "share" / "jupyter")
    try:
        kernel.install("msnb-test-errors", prefix=str(prefix))
        (tmp / "empty").mkdir()
        (tmp / "bad.yaml").write_text("monitor_config: [unclosed\n")
        with kernel_from_spec("msnb-test-errors", cwd=str(tmp)) as kc:
            yield kc, tmp
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


def run_cell(kc, code):
    outputs = []
    reply = kc.execute_interactive(code, timeout=180, output_hook=outputs.append)
    # IPython shows a UsageError as one stderr line (no error message with a traceback)
    shown = [line for m in outputs if m["msg_type"] == "error" for line in m["content"]["traceback"]]
    shown += [m["content"]["text"] for m in outputs if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"]
    return reply["content"], "".join(shown)


def test_every_magic_has_a_bad_call_listed():
    magics = set(magic_names())
    assert set(BAD_CALLS) <= magics
    missing = magics - set(BAD_CALLS) - {"%mfmon_smoke"}
    assert not missing, f"add a bad call for {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_users_mistake_fails_the_cell_with_one_line(shell_client, name):
    kc, tmp = shell_client
    if name.lstrip("%") not in {m.lstrip("%") for m in magic_names()}:
        pytest.skip(f"{name} is not registered")
    content, shown = run_cell(kc, BAD_CALLS[name].format(tmp=tmp))
    assert content["status"] == "error", f"{name}: the cell passed although the magic failed"
    assert content["ename"] == "UsageError", content
    assert "UsageError: msnb" in shown or "UsageError:" in shown, f"the front end was shown no error: {shown!r}"
    assert "Traceback" not in shown and 'File "' not in shown, shown
    assert len([line for line in shown.splitlines() if line.strip()]) <= 2, shown


def test_a_broken_yaml_names_the_file_and_line(shell_client):
    kc, tmp = shell_client
    content, shown = run_cell(kc, f"%mfmon_config {tmp}/bad.yaml")
    assert content["ename"] == "UsageError"
    assert "bad.yaml:" in content["evalue"] and "invalid YAML" in content["evalue"]


def test_a_good_call_still_passes_after_a_failed_one(shell_client):
    kc, tmp = shell_client
    run_cell(kc, "%mfmon_config /nonexistent.yaml")
    content, shown = run_cell(kc, "r = %mfmon_doctor\nprint(type(r).__name__)")
    assert content["status"] == "ok" and "Error" not in shown
