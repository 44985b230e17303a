"""`pip install -e .` alone (no MindSpore, no mindformers, no pandas) reads and plots summaries.

Users copy summaries from an Ascend server to a laptop; the README promises the
core install is enough there.  This builds that environment for real.
"""

import json
import subprocess
import sys

from tests.conftest import REPO


def test_core_install_reads_and_plots_without_mindspore(ms_files, tmp_path):
    venv = tmp_path / "core-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    proc = subprocess.run(pip + ["-e", str(REPO)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = str(venv / "bin" / "python")
    code = (
        "import importlib.util, json, sys\n"
        "import msnb\n"
        "r = msnb.read(sys.argv[1])\n"
        "print(json.dumps({'points': len(r.scalars), 'problems': len(r.problems),\n"
        "                  'mindspore': importlib.util.find_spec('mindspore') is not None,\n"
        "                  'pandas': importlib.util.find_spec('pandas') is not None}))\n"
    )
    out = subprocess.run([python, "-c", code, str(ms_files)], capture_output=True, text=True, check=True).stdout
    state = json.loads(out.strip().splitlines()[-1])
    assert state["mindspore"] is False and state["points"] > 0 and state["problems"] == 0
    msnb = str(venv / "bin" / "msnb")
    export = subprocess.run([msnb, "export", str(ms_files / "ranks")], capture_output=True, text=True, check=True).stdout
    assert export.splitlines()[0] == "run,rank,tag,step,wall_time,value" and len(export.splitlines()) == 101
    plot = subprocess.run(
        [msnb, "plot", str(ms_files / "ranks"), "--ranks", "--json", "--out", str(tmp_path / "p.png")], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(plot)["flags"][0]["rank"] == 1
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
