"""Write the runs the notebooks read, with the notebooks' own code (run in a child process).

Usage: python notebook_data.py OUT_DIR

The cells that write a notebook's data are taken from the notebook itself and run
here, so the corpus follows the notebooks when they change; each notebook's
scratch folder (its ``tempfile.mkdtemp``) is OUT_DIR/<notebook>.  Notebook 07's
data is its writer's small run (tests/writers/training_state.py: the same
simulated fault on 2 ranks, with tensorboardX's ``add_scalars`` head folders and
the log lines); its 8-rank run is left out (17 MB: too slow for a consistency
test).  Notebook 03 trains under msrun (minutes) and 01, 06, 09 run the smoke:
the smoke's own check covers those.
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = os.path.join(HERE, "..", "..", "notebooks")

# notebook -> the text that marks the cells writing its data (02: every cell before the clean-up)
CELLS = {
    "02_reading_summaries": None,
    "08_precision_alignment": "def megatron_log",
    "10_board": "def write_run",
}


def _cells(name: str, marker) -> list[str]:
    with open(os.path.join(NOTEBOOKS, name + ".ipynb"), encoding="utf-8") as f:
        cells = ["".join(c["source"]) for c in json.load(f)["cells"] if c["cell_type"] == "code"]
    if marker is not None:
        return [c for c in cells if marker in c]
    out = []
    for c in cells:
        if "rmtree" in c:
            break
        out.append(c)
    return out


def main(out: str) -> None:
    import logging

    logging.getLogger("tensorboardX").setLevel(logging.ERROR)  # it warns at every NaN it writes
    home = os.getcwd()
    for name, marker in CELLS.items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        tempfile.mkdtemp = lambda *a, folder=folder, **k: folder  # the notebook's scratch folder
        cells = _cells(name, marker)
        assert cells, f"no data cell found in {name}.ipynb"
        scope: dict = {"__name__": "__notebook__"}
        for source in cells:
            assert not any(line.lstrip().startswith("%") or "= %" in line for line in source.splitlines()), f"a magic in {name}'s data cell"
            exec(compile(source, f"{name}.ipynb", "exec"), scope)  # noqa: S102 - the notebook's own code
        os.chdir(home)
    sys.path.insert(0, os.path.join(HERE, ".."))
    from writers.training_state import write_small_run

    write_small_run(os.path.join(out, "07_where_it_broke", "small"))
    print("wrote", out)


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]))
