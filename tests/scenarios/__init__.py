"""A corpus of runs built by the real writers, with what the judge must say about each (see catalog.py)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(out: Path) -> Path:
    """Write every scenario under *out* (once: a finished corpus is reused), in child processes."""
    done = out / ".complete"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    for which in ("tbx", "ms"):
        proc = subprocess.run([sys.executable, str(HERE / "write.py"), str(out), which], capture_output=True, text=True, timeout=600, cwd=str(out))
        assert proc.returncode == 0, f"write.py {which} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    done.write_text("ok")
    return out
