"""MindSpore's memory report read from the bytes of rank logs: bare or under a glog prefix, M or G, truncated, two jobs
in one log, hostile sizes refused and said, a log without the lines giving no row (never 0)."""

from __future__ import annotations

from msnb.events import Follower, ProblemKind, read
from msnb.events.memory_lines import MemoryLines, size_mb
from msnb.events.reader import memory_rows

GLOG = "[INFO] DEVICE(4001,ffff9c2b1120,python):2026-12-06-10:41:22.123.456 [mindspore/ccsrc/plugin/device/ascend/hal/device/ascend_memory_adapter.cc:210] DeInitialize] "
REPORT = [
    "Device MOC memory size: 62420M",
    "MindSpore Used memory size: 58178M",
    "MindSpore memory base address: 0xffffe9dc1407",
    "Used peak memory usage (without fragments): 55405M",
    "Actual peak memory usage (with fragments): 57400M",
]
FIGURES = {"device_mb": 62420.0, "limit_mb": 58178.0, "used_peak_mb": 55405.0, "actual_peak_mb": 57400.0}


def mf_line(step: int, loss: float = 11.0) -> str:
    return (
        f"2024-05-01 12:00:{step % 60:02d},123 - mindformers[mindformers/core/callback/callback.py:529] - INFO - {{ Epoch:[  1/  1], step:[{step:5d}/ 1000], "
        f"loss: {loss}, per_step_time: 100ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, global_norm: [1.2], train_throughput_per_npu: 10.0T"
    )


def write(path, lines, end="\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((end.join(lines) + end).encode())


def figures(row: dict) -> dict:
    return {k: row[k] for k in FIGURES}


def test_a_bare_report_after_training_lines(tmp_path):
    write(tmp_path / "job" / "msrun_log" / "worker_3.log", [mf_line(1), mf_line(2), *REPORT])
    res = read(tmp_path / "job", jobs=True)
    (row,) = memory_rows(res)
    assert figures(row) == FIGURES and row["rank"] == 3 and row["job"] == 0 and row["pid"] is None
    assert len(res.scalars.series("loss", rank=3)[0]) == 2  # the training lines are read as before


def test_a_report_under_a_glog_header_line_and_each_line_under_its_prefix(tmp_path):
    write(tmp_path / "a" / "worker_0.log", [mf_line(1), GLOG, *REPORT])
    write(tmp_path / "b" / "worker_0.log", [mf_line(1)] + [GLOG + line for line in REPORT])
    for run in ("a", "b"):
        (row,) = memory_rows(read(tmp_path / run))
        assert figures(row) == FIGURES and row["pid"] == 4001


def test_gigabytes_crlf_and_the_older_hbm_name(tmp_path):
    lines = ["Device HBM memory size: 61G", "MindSpore Used memory size: 58G", "Used peak memory usage (without fragments): 1.5G"]
    write(tmp_path / "worker_0.log", lines, end="\r\n")
    (row,) = memory_rows(read(tmp_path))
    assert (row["device_mb"], row["limit_mb"], row["used_peak_mb"], row["actual_peak_mb"]) == (61 * 1024, 58 * 1024, 1536.0, None)


def test_a_log_cut_mid_line_keeps_what_is_whole_and_never_a_zero(tmp_path):
    path = tmp_path / "worker_0.log"
    path.write_bytes(("\n".join([mf_line(1), *REPORT[:3]]) + "\nUsed peak memory usage (without fragm").encode())
    (row,) = memory_rows(read(tmp_path))
    assert row["device_mb"] == 62420.0 and row["used_peak_mb"] is None and row["actual_peak_mb"] is None


def test_two_jobs_in_one_log_each_kept(tmp_path):
    second = [line.replace("55405M", "30000M").replace("57400M", "31000M") for line in REPORT]
    # bare: a peak, then training lines, then a report: another job
    write(tmp_path / "bare" / "nohup.out", [mf_line(1), *REPORT, mf_line(1), mf_line(2), *second])
    # prefixed: another process id, no training line between
    write(tmp_path / "glog" / "worker_0.log", [mf_line(1), *(GLOG + x for x in REPORT), *(GLOG.replace("4001", "5120") + x for x in second)])
    for run in ("bare", "glog"):
        rows = sorted(memory_rows(read(tmp_path / run)), key=lambda r: r["job"])
        assert [r["job"] for r in rows] == [0, 1]
        assert [r["used_peak_mb"] for r in rows] == [55405.0, 30000.0]


def test_the_last_report_of_a_job_counts(tmp_path):
    early = ["Device MOC memory size: 62420M", "MindSpore Used memory size: 58178M", "Used peak memory usage (without fragments): 100M"]
    write(tmp_path / "worker_0.log", [mf_line(1), *early, *REPORT])  # no training between: one job printing twice
    (row,) = memory_rows(read(tmp_path))
    assert figures(row) == FIGURES


def test_a_rank_without_memory_lines_gives_no_row(tmp_path):
    write(tmp_path / "job" / "worker_0.log", [mf_line(1), *REPORT])
    write(tmp_path / "job" / "worker_1.log", [mf_line(1)])
    rows = memory_rows(read(tmp_path / "job"))
    assert [r["rank"] for r in rows] == [0]  # rank 1 has none: absent, never a 0 (the analysis names it)


def test_hostile_sizes_are_refused_and_said(tmp_path):
    hostile = [
        "Device MOC memory size: -62420M",
        "MindSpore Used memory size: 99999999999999999999M",
        "Used peak memory usage (without fragments): lotsM",
        "Actual peak memory usage (with fragments): 17000000G",
        "Used peak memory usage (without fragments): 12.5.1M",
    ]
    write(tmp_path / "worker_0.log", [mf_line(1), *hostile])
    res = read(tmp_path)
    assert memory_rows(res) == []
    said = [p for p in res.problems if p.kind == ProblemKind.NOT_READ and "no size" in p.message]
    assert len(said) == len(hostile) and all("never counted as 0" in p.message for p in said)
    assert [size_mb(x) for x in ("62420M", "61G", "1.5G", "62420 MB", "-1M", "1e9M", "NaNM", "M", "")] == [62420.0, 61 * 1024, 1536.0, 62420.0] + [None] * 5


def test_a_dry_run_log_with_only_the_report_is_a_log(tmp_path):
    write(tmp_path / "output_dryrun" / "nohup.out", ["some launcher line", GLOG, *REPORT])
    res = read(tmp_path / "output_dryrun")
    (row,) = memory_rows(res)
    assert figures(row) == FIGURES and not [p for p in res.problems if p.kind == ProblemKind.FOREIGN]


def test_a_followed_log_gives_the_report_as_it_completes(tmp_path):
    path = tmp_path / "worker_0.log"
    write(path, [mf_line(1), *REPORT[:2]])
    follower = Follower(tmp_path)
    follower.poll()
    with open(path, "ab") as f:
        f.write(("\n".join(REPORT[2:]) + "\n").encode())
    follower.poll(final=True)
    (row,) = memory_rows(follower.result)
    assert figures(row) == FIGURES


def test_the_report_in_a_long_log_read_at_bulk_speed(tmp_path):
    lines = [mf_line(s, 11.0 - s / 1e4) for s in range(1, 20_001)]
    write(tmp_path / "worker_0.log", [*lines[:10_000], *REPORT, *lines[10_000:]])
    res = read(tmp_path)
    assert len(res.scalars.series("loss")[0]) == 20_000
    (row,) = memory_rows(res)
    assert figures(row) == FIGURES


def test_lines_are_read_in_linear_time():
    mem = MemoryLines()
    long = "Used peak memory usage (without fragments): " + "9" * 1_000_000
    assert mem.line(long, 1, "", 0) and mem.refused == 1
    assert not mem.line("Used peak memory usage (without fragments)" * 20_000, 2, "", 0)
