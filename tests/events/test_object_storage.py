"""Runs read from object storage (``s3://``) by every reader, against a real S3 server (SeaweedFS, started by the tests).

The same runs, written by the real writers, are read from disk and from the bucket: the tables, the panel's rows and
the verdicts must be the same.  A run growing while followed is fetched by the bytes it gained; a replaced object is
read again; a denied read, a missing bucket and an empty prefix are one line each, exit 2; 10,000 objects under
one prefix are listed and read.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from msnb.events import Follower, objects, read, s3
from tests.conftest import REPO, WRITERS
from tests.s3server import BUCKET, LISTER, OTHER, upload


@pytest.fixture
def aws(s3_server, monkeypatch):
    """The admin identity in the standard AWS variables; every mirror forgotten after the test."""
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "OBS_ENDPOINT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    yield s3_server
    objects.forget()


@pytest.fixture(scope="session")
def team_on_both(s3_server, tmp_path_factory):
    """tests/writers/team_runs.py's base of runs (tensorboardX and MindSpore writers), on disk and under s3://runs/team."""
    base = tmp_path_factory.mktemp("both") / "team"
    for which in ("tbx", "ms"):
        proc = subprocess.run([sys.executable, str(WRITERS / "team_runs.py"), str(base), which], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert upload(s3_server.client(), base, "team") > 10
    return base


def _env(server, keys=None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.update(server.env() if keys is None else server.env(keys))
    return env


def _cli(server, *args, keys=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "msnb.cli", *map(str, args)], capture_output=True, text=True, env=_env(server, keys), cwd=cwd, timeout=300)


def _same_tables(a, b):
    for kind in a.TABLES:
        ta, tb = getattr(a, kind), getattr(b, kind)
        assert len(ta) == len(tb), kind
        for column in ta.COLUMNS:
            x, y = getattr(ta, column), getattr(tb, column)
            if x.dtype.kind == "f":
                np.testing.assert_array_equal(x, y)
            else:
                assert x.tolist() == y.tolist(), (kind, column)


def test_disk_and_bucket_give_the_same_tables_rows_and_verdicts(aws, team_on_both):
    _same_tables(read(team_on_both), read(f"s3://{BUCKET}/team"))
    disk = _cli(aws, "runs", team_on_both, "--json")
    bucket = _cli(aws, "runs", f"s3://{BUCKET}/team", "--json")
    assert disk.returncode == bucket.returncode == 1  # the NaN rank fails its run, from either place
    rows = [json.loads(p.stdout)["runs"] for p in (disk, bucket)]
    for r in rows:
        for row in r:
            row.pop("last_write"), row.pop("judged_from", None)  # upload time, not the writer's; the writer's file
    assert rows[0] == rows[1]
    for run in ("healthy", "nan_rank", "ms_run"):
        a, b = _cli(aws, "check", team_on_both / run, "--json"), _cli(aws, "check", f"s3://{BUCKET}/team/{run}", "--json")
        assert a.returncode == b.returncode and json.loads(a.stdout)["runs"] == json.loads(b.stdout)["runs"], run
    damaged = [p for p in read(f"s3://{BUCKET}/team/damaged").problems if p.kind == "crc"]
    assert damaged and damaged[0].path.startswith(f"s3://{BUCKET}/team/damaged/rank_0/")  # named by its URL, the intact runs kept


def test_a_growing_run_is_followed_by_the_bytes_it_gained_and_a_replaced_object_read_again(aws, team_on_both, monkeypatch):
    monkeypatch.setattr(objects, "RELIST_SECONDS", 0.0)
    client = aws.client()
    body = (team_on_both / "healthy" / "rank_0").iterdir().__next__().read_bytes()
    key = "grow/rank_0/events.out.tfevents.1700000000.host"
    cut = body.rfind(b"\x00", 0, len(body) // 2)  # any cut: a partial last record waits for the rest
    client.put_object(Bucket=BUCKET, Key=key, Body=body[:cut])
    counters = s3.Counters()
    objects.local(f"s3://{BUCKET}/grow", counters)
    follower = Follower(f"s3://{BUCKET}/grow")
    follower.poll()
    first = len(follower.result.scalars)
    before = counters.bytes_fetched
    client.put_object(Bucket=BUCKET, Key=key, Body=body)
    follower.poll(final=True)
    whole = read(team_on_both / "healthy" / "rank_0")
    assert len(follower.result.scalars) == len(whole.scalars) > first
    fetched = counters.bytes_fetched - before
    assert fetched < len(body) - cut + 2 * objects.FINGERPRINT + 1  # only what it gained (and the bytes that prove it grew)
    other = next((team_on_both / "nan_rank" / "rank_2").iterdir()).read_bytes()
    client.put_object(Bucket=BUCKET, Key=key, Body=other)  # replaced by another run's file
    follower.poll(final=True)
    assert any(p.kind == "replaced" for p in follower.result.problems)
    _same_tables_scalars = read(team_on_both / "nan_rank" / "rank_2").scalars
    assert np.array_equal(follower.result.scalars.value, _same_tables_scalars.value, equal_nan=True)


def test_a_denied_read_a_missing_bucket_and_an_empty_prefix_are_one_line_exit_2(aws, team_on_both):
    cases = {
        ("runs", f"s3://{BUCKET}/team", OTHER): "access denied",  # may not even list this bucket
        ("check", f"s3://{BUCKET}/team/healthy", LISTER): "cannot fetch: access denied",  # may list, not read
        ("runs", "s3://no-such-bucket/team", None): "no such bucket",
        ("runs", f"s3://{BUCKET}/no/run/here", None): "no object under this prefix",
    }
    for (command, url, keys), said in cases.items():
        proc = _cli(aws, command, url, keys=keys)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and said in lines[0] and url.split("/")[2] in lines[0], (url, proc.stderr)
        for secret in ("msnb-admin-secret", "msnb-other-secret", "msnb-lister-secret", "msnbadmin"):
            assert secret not in proc.stderr + proc.stdout


def test_an_unreachable_endpoint_is_said_within_a_bounded_wait(aws, tmp_path):
    def timed(env):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "msnb.cli", "runs", f"s3://{BUCKET}/team"], capture_output=True, text=True, env=env, timeout=120)
        return proc, time.monotonic() - started

    reachable, baseline = timed(_env(aws))  # the same command's start-up and imports on this machine now, as it is loaded
    assert "cannot reach" not in reachable.stderr, reachable.stderr  # it answered (with runs, or none under the prefix yet)
    env = _env(aws)
    env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # nothing listens there
    proc, elapsed = timed(env)
    assert proc.returncode == 2 and "cannot reach the endpoint http://127.0.0.1:9" in proc.stderr
    assert elapsed - baseline < s3.RETRY_TIMEOUT_S + 10, (elapsed, baseline)


def test_no_credentials_anywhere_is_said_as_such_not_as_the_metadata_services_refusal(aws, tmp_path):
    """No key in the environment or a profile: the client falls back to a cloud machine's metadata service; where
    none answers (here: a closed port stands in for it), the line says that no credentials were found."""
    env = {k: v for k, v in _env(aws).items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    env.update(HOME=str(tmp_path), AWS_METADATA_ENDPOINT="http://127.0.0.1:9")
    env.pop("AWS_PROFILE", None)
    proc = subprocess.run([sys.executable, "-m", "msnb.cli", "runs", f"s3://{BUCKET}/team"], capture_output=True, text=True, env=env, timeout=120)
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and f"s3://{BUCKET}/team: no credentials for {aws.endpoint}" in line and "AWS_ACCESS_KEY_ID" in line, line
    assert "api/token" not in line and "127.0.0.1:9" not in line


def test_parquet_export_to_a_bucket_is_what_duckdb_reads_and_adds_only_new_rows(aws, team_on_both, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    out = f"s3://{BUCKET}/datasets/ms_run"
    first = _cli(aws, "export", f"s3://{BUCKET}/team/ms_run", "--format", "parquet", "--out", out)
    assert first.returncode == 0 and out in first.stdout
    again = _cli(aws, "export", f"s3://{BUCKET}/team/ms_run", "--format", "parquet", "--out", out)
    assert again.returncode == 0 and "nothing new" in again.stdout
    got = tmp_path / "got"
    client = aws.client()
    for item in client.list_objects_v2(Bucket=BUCKET, Prefix="datasets/ms_run/")["Contents"]:
        path = got / item["Key"][len("datasets/ms_run/") :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    rows = duckdb.sql(f"select count(*) from read_parquet('{got}/*/*/kind=scalars/*.parquet', hive_partitioning=true)").fetchall()[0][0]
    assert rows == len(read(team_on_both / "ms_run").scalars)


def test_ten_thousand_objects_under_one_prefix(aws, tmp_path):
    client = aws.client()
    line = b"2024-01-01 00:00:00,000 - mindformers[mindformers/core/callback/callback.py:300] - INFO - { Epoch:[  1/  1], step:[    1/  100], loss: 2.500000, per_step_time: 100ms, lr: 1e-04, overflow cond: False, loss_scale: 1.0\n"
    from concurrent.futures import ThreadPoolExecutor

    def put(i):
        name = f"many/run/rank_{i % 8}/logs/part_{i:05d}.ckpt" if i % 100 else f"many/run/rank_{i % 8}/train_{i:05d}.log"
        client.put_object(Bucket=BUCKET, Key=name, Body=line if name.endswith(".log") else b"\0" * 64)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(10_000)))
    counters = s3.Counters()
    root = objects.local(f"s3://{BUCKET}/many", counters)
    assert counters.lists == 10  # one paginated listing: 1,000 keys a page
    assert counters.gets == 100  # only the logs were fetched, never the checkpoints
    result = read(root)
    assert len(result.files) == 100


def test_a_url_with_no_bucket_or_a_dot_part_is_refused_in_msnbs_words_before_any_request(ms_files):
    """``s3://`` was read as a local folder ("no such directory"), ``..`` refused by the client's own URL parser."""
    assert s3.parse("s3://team/runs//a/") == s3.Url("s3", "team", "runs/a") and s3.parse("s3:/team") == s3.Url("s3", "team", "")
    assert s3.parse("runs/s3:/x") is None and s3.parse("s3:") is None  # local paths
    for url in ("s3://", "s3:/", "obs://", "s3:///runs"):
        with pytest.raises(s3.ObjectStoreError, match=r"names no bucket \(give (s3|obs)://BUCKET or"):
            s3.parse(url)
    for url in ("s3://team/../x", "s3://team/a/./b", "obs://../x", "s3://team/a/.."):
        with pytest.raises(s3.ObjectStoreError, match=r"'\.' and '\.\.' name no folder in object storage"):
            s3.parse(url)
    for command in (["runs", "s3://"], ["check", "s3://team/../x"], ["export", str(ms_files), "--format", "parquet", "--out", "s3://team/../x"]):
        proc = subprocess.run(
            [sys.executable, "-m", "msnb.cli", *command], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60
        )
        (line,) = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and line.startswith(f"msnb {command[0]}: error: {command[-1]}: ") and "credentials" not in line, line


def test_the_object_store_client_is_loaded_only_for_a_url(ms_files):
    code = "import sys, msnb; msnb.read(sys.argv[1]); print('obstore' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code, str(ms_files)], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    assert out.stdout.strip() == "False"
