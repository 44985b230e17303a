"""Run the example notebooks on the MindSpore Kernel and store their fresh outputs, the one way they are regenerated.

    msnb install-kernel --sys-prefix            # once: the kernel nbval and this script start
    python scripts/refresh_notebooks.py [notebooks/01_smoke_test.ipynb ...]

Each notebook is executed top to bottom in its own folder (as nbval runs it in CI), then the paths that only
existed on this machine are replaced by placeholders (``/tmp/msnb-smoke-XXXXXXXX``), so the stored outputs
say what a reader will see and ``tests/test_notebooks_clean.py`` accepts them. CI then checks them fresh:
nbval compares every cell not tagged ``nbval-ignore-output`` with what the notebook prints today.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# a scratch folder's random suffix (mkdtemp's eight characters) is the only machine-specific text the examples print
SCRATCH = re.compile(r"(/tmp/msnb-[a-z]+-)[A-Za-z0-9_]{8}")
# an environment's packages, wherever it lives (already shortened to "…" or not)
SITE_PACKAGES = re.compile(r"(?:…|/[^\s\"'<>]*)/lib/python\d+\.\d+/site-packages/")


def scrub(text: str, prefix: str = sys.prefix, checkout: str = str(NOTEBOOKS.parent)) -> str:
    """*text* with every scratch folder's random suffix replaced by ``XXXXXXXX``, and this environment's
    folder (the doctor prints the kernel's interpreter) and this checkout's (a traceback's files) by ``…``."""
    text = SCRATCH.sub(r"\1XXXXXXXX", text)
    text = SITE_PACKAGES.sub("site-packages/", text)  # a traceback through an installed package
    for folder in (prefix, checkout):  # the environment, and this checkout (an editable install's tracebacks)
        if folder.rstrip("/"):
            text = text.replace(folder.rstrip("/") + "/", "…/")
    return text


def _scrub_outputs(nb) -> None:
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = scrub(output["text"])
            for kind, value in output.get("data", {}).items():
                if isinstance(value, str) and not kind.startswith("image/"):
                    output["data"][kind] = scrub(value)


def refresh(path: Path, kernel: str = "mindspore", timeout: int = 900) -> None:
    """Execute one notebook in its folder on *kernel* and write it back with scrubbed outputs."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)
    # no widget state: a stored board shows its figure (image/png), and the state would double the file
    NotebookClient(nb, kernel_name=kernel, timeout=timeout, store_widget_state=False, resources={"metadata": {"path": str(path.parent)}}).execute()
    _scrub_outputs(nb)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to refresh (default: every one in notebooks/)")
    parser.add_argument("--kernel", default="mindspore", help="the kernel to run them on (default: mindspore)")
    args = parser.parse_args(argv)
    for path in args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb")):
        print(f"refreshing {path.name} ...", flush=True)
        refresh(path, kernel=args.kernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
