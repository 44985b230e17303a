"""A run is named once: the reader writes each run's identity into its rows as it reads them.

Discovery finds the runs; the names (keys across several paths, labels for people, the panel's
``exp/a``) are handed to the reader, and no table is renamed afterwards.  The oracle is the way it
used to be done: read under the discovered names, then rewrite every table's ``run`` column.
"""

import subprocess
import sys

import numpy as np
import pytest

import msnb
from msnb.events.reader import ReadResult
from msnb.events.runs import discovered_runs, read_runs, run_key, run_labeller, run_root
from msnb.panel.collect import find_runs, read_run
from tests.conftest import REPO


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Two jobs laid out alike (``job_X/output/tensorboard/rank_N``), one nested run, and a TrainingStateMonitor run
    whose add_scalars head folders (``rank_0/<tag>/head_i``) belong to it; all written by the real writers."""
    base = tmp_path_factory.mktemp("identity")
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); from writers.team_runs import write_tbx_run;"
        "from writers.training_state import write_small_run; b = sys.argv[1];"
        "write_tbx_run(b + '/job_a/output/tensorboard', range(2), 40, seed=1);"
        "write_tbx_run(b + '/job_b/output/tensorboard', range(2), 40, seed=2);"
        "write_tbx_run(b + '/job_b/output/tensorboard/retry', range(1), 20, seed=3);"
        "write_small_run(b + '/state')"
    )
    subprocess.run([sys.executable, "-c", code, str(base), str(REPO / "tests")], check=True, capture_output=True, timeout=300)
    return base


def renamed(result: ReadResult, name) -> ReadResult:
    """The oracle: every table's (and file's) ``run`` rewritten after the read."""
    for kind in ReadResult.TABLES:
        table = getattr(result, kind)
        if len(table):
            table.run = np.array([name(r) for r in table.run.tolist()], dtype=object)
    for f in result.files:
        f["run"] = name(f["run"])
    return result


def same(got: ReadResult, want: ReadResult) -> None:
    for kind in ReadResult.TABLES:
        a, b = getattr(got, kind), getattr(want, kind)
        assert len(a) == len(b), kind
        for column in a.COLUMNS:
            x, y = getattr(a, column), getattr(b, column)
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), (kind, column)
    own = [f["run"] for f in got.files if "/head_" not in f["run"]]
    assert own == [f["run"] for f in want.files if "/head_" not in f["run"]]
    for f in got.files:  # a head folder's files go under their run's name (the oracle left them under their own key)
        if "/head_" in f["run"]:
            assert any(f["run"].startswith(run + "/") for run in got.runs), f["run"]


def test_the_reader_writes_the_names_it_is_given(tree):
    got = msnb.read(tree / "state", names=lambda run: f"job/{run}" if run != "." else "job")
    want = renamed(msnb.read(tree / "state"), lambda run: f"job/{run}" if run != "." else "job")
    same(got, want)
    assert set(got.runs) == {"job/log", "job/output/log", "job/tensorboard"}
    heads = sorted(t for t in got.scalars.where(run="job/tensorboard").tags() if "/head_" in t)
    assert heads == ["max_attention_logit/model.layers.0.attention/head_0", "max_attention_logit/model.layers.0.attention/head_1"]


@pytest.mark.parametrize("labelled", [False, True])
def test_several_paths_keyed_and_labelled_as_they_are_read(tree, labelled):
    paths = [tree / "job_a", tree / "job_b", tree / "state"]
    got = read_runs(paths, labelled=labelled)
    roots = [run_root(p) for p in paths]
    want = ReadResult.merge(renamed(msnb.read(p, jobs=True), lambda run, root=root: run_key(root, run)) for p, root in zip(paths, roots))
    if labelled:
        label = run_labeller(paths, want.runs)
        want = renamed(want, label)
        # one run per job: state's log, output/log and tensorboard folders are its writers; job_b's nested retry is a run
        assert set(got.runs) == {"job_a", "job_b", "retry", "state"}
    same(got, want)


def test_discovery_lists_a_head_folder_under_its_run(tree):
    assert discovered_runs(tree / "state") == ["."]  # one job: its writers' folders name no run
    assert discovered_runs(tree / "job_b") == [".", "output/tensorboard/retry"]


def test_the_panel_reads_each_run_under_its_discovered_name(tree):
    """``exp/a`` is the name the panel shows and the one its rows carry from the read on (no "." to rename)."""
    runs = {r.name: r for r in find_runs(tree)}
    assert sorted(runs) == ["job_a", "job_b", "job_b/output/tensorboard/retry", "state"]
    for name, run in runs.items():
        _reader, result = read_run(run)
        assert set(result.runs) == {name}, name
        assert {f["run"] for f in result.files if "/head_" not in f["run"]} == {name}  # a head folder's files: under the run
        assert all(f["run"].startswith(name + "/") for f in result.files if "/head_" in f["run"])
    outer = read_run(runs["job_b"])[1]
    assert sorted(set(outer.scalars.rank.tolist())) == [0, 1]  # the nested retry's rank_0 file is the retry's, not read here
    heads = [t for t in read_run(runs["state"])[1].scalars.tags() if "/head_" in t]
    assert len(heads) == 2
