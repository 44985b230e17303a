"""``%load_ext msnb``: registers the real magics, imports nothing heavy."""

import json
import subprocess
import sys

from msnb.magics import MsnbMagics, magic_names


def run_in_ipython(code: str) -> dict:
    """Run *code* in a fresh process with a real IPython shell that loaded msnb."""
    prelude = (
        "import json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'msnb')\n"
    )
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_load_ext_registers_magics_without_heavy_imports():
    state = run_in_ipython(
        "print(json.dumps({'line': sorted(ip.magics_manager.lsmagic()['line']),"
        " 'loaded': sorted(ip.extension_manager.loaded),"
        " 'heavy': [m for m in ('mindspore', 'mindformers', 'matplotlib.pyplot') if m in sys.modules]}))"
    )
    assert "msnb" in state["loaded"]
    for name in magic_names():
        assert name.lstrip("%") in state["line"]
    assert state["heavy"] == []


def test_every_magic_is_documented_and_listed():
    names = magic_names()
    assert "%mfmon_doctor" in names
    for _kind, table in MsnbMagics.magics.items():
        for name, method in table.items():
            doc = getattr(MsnbMagics, method).__doc__ or ""
            assert len(doc.strip()) > 40, f"%{name} needs a docstring users can read with ?"


def test_doctor_magic_returns_the_report():
    state = run_in_ipython("r = ip.run_line_magic('mfmon_doctor', '--json')\nprint(json.dumps({'keys': sorted(r), 'blocking': r['blocking']}))")
    assert {"packages", "findings", "devices", "kernels", "blocking"} <= set(state["keys"])
    assert state["blocking"] is False


def test_bad_magic_arguments_give_usage_not_a_traceback():
    state = run_in_ipython(
        "from IPython.core.error import UsageError\n"
        "try:\n"
        "    ip.run_line_magic('mfmon_doctor', '--no-such-flag')\n"
        "    print(json.dumps({'error': None}))\n"
        "except UsageError as e:\n"
        "    print(json.dumps({'error': str(e)}))\n"
    )
    assert state["error"] and "unrecognized arguments" in state["error"]
