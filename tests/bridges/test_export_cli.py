"""``msnb export``: the column contract, formats, problems on stderr, and exit codes."""

import csv
import io
import json
import math
import os
import shutil

import msnb


def test_scalars_csv_contract(ms_files, run_msnb):
    proc = run_msnb("export", ms_files, check=0)
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0] == ["run", "rank", "tag", "step", "wall_time", "value"]
    body = rows[1:]
    result = msnb.read(ms_files)
    assert len(body) == len(result.scalars)
    runs = {r[0] for r in body}
    assert {"record", "record_custom", "collector", "ranks"} <= runs  # relative to PATH
    log_rows = [r for r in body if r[0] == "collector" and r[1] == ""]
    assert log_rows and all(r[2] in ("loss", "step_time_ms") for r in log_rows)  # unknown rank is empty
    nan_row = next(r for r in body if r[0] == "record" and r[2] == "loss" and r[3] == "77")
    assert math.isnan(float(nan_row[5]))
    exact = next(r for r in body if r[0] == "record" and r[2] == "lr" and r[3] == "5")
    assert float(exact[5]) == result.scalars.where(run="record", tag="lr", step=5).value[0]
    assert proc.stderr == ""


def test_jsonl_and_other_kinds(ms_files, tb_files, run_msnb):
    lines = run_msnb("export", ms_files / "ranks", "--format", "jsonl", check=0).stdout.splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["run", "rank", "tag", "step", "wall_time", "value"]
    assert first["run"] == "." and first["rank"] in (0, 1)

    hist = [json.loads(x) for x in run_msnb("export", ms_files / "record", "--kind", "histograms", "--format", "jsonl", check=0).stdout.splitlines()]
    assert len(hist) == 3 and sum(hist[0]["counts"]) == hist[0]["count"]

    tensors = list(csv.DictReader(io.StringIO(run_msnb("export", ms_files / "record", "--kind", "tensors", check=0).stdout)))
    assert json.loads(tensors[0]["dims"]) == [2, 3] and tensors[0]["dtype"] == "float32"

    images = [json.loads(x) for x in run_msnb("export", ms_files / "record", "--kind", "images", "--format", "jsonl", check=0).stdout.splitlines()]
    import base64

    assert base64.b64decode(images[0]["png_base64"])[:4] == b"\x89PNG"

    lineage = [json.loads(x) for x in run_msnb("export", ms_files / "collector", "--kind", "lineage", "--format", "jsonl", check=0).stdout.splitlines()]
    assert {r["kind"] for r in lineage} >= {"train"}

    texts = list(csv.DictReader(io.StringIO(run_msnb("export", tb_files, "--kind", "text", check=0).stdout)))
    assert texts[0]["text"].startswith("seed: 0")


def test_problems_go_to_stderr_and_strict_exits_3(ms_files, tmp_path, run_msnb):
    run = tmp_path / "run"
    shutil.copytree(ms_files / "record", run)
    (path,) = run.glob("*_MS")
    os.chmod(path, 0o600)
    data = path.read_bytes()
    path.write_bytes(data[:-10])

    proc = run_msnb("export", run, check=0)
    assert "truncated" in proc.stderr and str(path) in proc.stderr
    assert len(proc.stdout.splitlines()) == 1 + 238  # header + every intact point

    proc = run_msnb("export", run, "--strict", check=3)
    assert len(proc.stdout.splitlines()) == 1 + 238  # the data still comes out
    assert "--strict" in proc.stderr


def test_nothing_readable_exits_2(tmp_path, run_msnb):
    proc = run_msnb("export", tmp_path / "missing", check=2)
    assert "no such file or directory" in proc.stderr
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "events.out.events.summary.1.0.h_MS").write_bytes(os.urandom(1000))
    proc = run_msnb("export", garbage, check=2)
    assert "nothing readable" in proc.stderr and "events.out.events.summary.1.0.h_MS" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    run_msnb("export", empty, check=2)
