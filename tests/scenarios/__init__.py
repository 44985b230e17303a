"""A corpus of runs built by the real writers, with what the judge must say about each (see catalog.py)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(out: Path, *, notebooks: bool = False) -> Path:
    """Write every scenario under *out* (once: a finished corpus is reused), in child processes run side by side.

    With *notebooks*, the notebooks' data is written too, under ``out/notebooks`` (see notebook_data.py).
    """
    jobs = []
    if not (out / ".complete").exists():
        jobs += [("write.py", str(out), which) for which in ("tbx", "ms")]
    if notebooks and not (out / ".notebooks").exists():
        jobs.append(("notebook_data.py", str(out / "notebooks")))
    if not jobs:
        return out
    out.mkdir(parents=True, exist_ok=True)
    started = [
        (job, subprocess.Popen([sys.executable, str(HERE / job[0]), *job[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(out)))
        for job in jobs
    ]
    for job, proc in started:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{' '.join(job)} failed:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    (out / ".complete").write_text("ok")
    if notebooks:
        (out / ".notebooks").write_text("ok")
    return out
