"""One S3-compatible bucket as msnb talks to it: configuration, requests, counters and one-line errors.

The client is obstore (``pip install "msnb[s3]"``), imported only when an ``s3://`` or ``obs://`` URL is given,
so the base install stays as small as it is.  Configuration is the standard one: the AWS environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_PROFILE`` with ``~/.aws/credentials`` and ``~/.aws/config``), and for ``obs://`` Huawei OBS's S3 endpoint
(``OBS_ENDPOINT`` or ``AWS_ENDPOINT_URL``; its region read from the endpoint's host when none is set).  What msnb
says about a bucket names the URL and the endpoint, never a key or a secret.
"""

from __future__ import annotations

import atexit
import configparser
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import MissingDependency, ObjectStoreError

SCHEMES = ("s3", "obs")
CONNECT_TIMEOUT_S = 5
"""Seconds to wait for a connection to the endpoint before a try counts as failed."""
REQUEST_TIMEOUT_S = 60
"""Seconds one request may take in all (a large object's whole body included)."""
RETRY_TIMEOUT_S = 15
"""Seconds retries of a failing request may take in all: an unreachable endpoint is said within this bound."""
MAX_RETRIES = 2

_OBS_REGION = re.compile(r"^obs\.([a-z0-9-]+)\.")  # obs.cn-north-4.myhuaweicloud.com
_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")


@dataclass(frozen=True)
class Url:
    """``scheme://bucket/key`` split: ``key`` without leading or trailing slashes ("" for the bucket itself)."""

    scheme: str
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}" if self.key else f"{self.scheme}://{self.bucket}"

    def child(self, rel: str) -> Url:
        return Url(self.scheme, self.bucket, f"{self.key}/{rel}".strip("/") if self.key else rel.strip("/"))


def parse(path) -> Url | None:
    """The object-store URL *path* names, or None for a local path.

    A URL that went through :class:`pathlib.Path` lost one slash (``s3:/bucket/run``); it is the same URL.

    Raises:
        ObjectStoreError: *path* starts as a URL (``s3:/``, ``obs:/``) but names no bucket, or has a ``.`` or ``..``
            part: object keys have no parent folders, so such a URL names nothing the user meant.
    """
    text = os.fspath(path) if not isinstance(path, str) else path
    m = re.match(r"^(s3|obs):/{1,2}([^/]+)(/.*)?$", text)
    if m is None:
        scheme = re.match(r"^(s3|obs):/", text)
        if scheme:
            raise ObjectStoreError(f"{text}: names no bucket (give {scheme.group(1)}://BUCKET or {scheme.group(1)}://BUCKET/PREFIX)")
        return None
    key = re.sub(r"/{2,}", "/", m.group(3) or "").strip("/")
    if any(part in (".", "..") for part in [m.group(2), *key.split("/")]):
        raise ObjectStoreError(f"{text}: '.' and '..' name no folder in object storage (keys have no parents); give the prefix itself")
    return Url(m.group(1), m.group(2), key)


_base: Path | None = None  # this process's folder of mirrored objects (msnb.events.objects), made on first use


def cache_base() -> Path:
    """The private folder mirrored objects are kept in, removed when the process ends."""
    global _base
    if _base is None:
        _base = Path(tempfile.mkdtemp(prefix="msnb-objects-"))
        atexit.register(shutil.rmtree, _base, True)
    return _base


def cached() -> bool:
    """Whether any object was mirrored in this process (else no local path can be a mirror's)."""
    return _base is not None


def shown(path):
    """What a person is shown for *path*: the object's URL for a file of a mirror (``s3://bucket/run/x``), else *path*."""
    if _base is None or path is None:
        return path
    text = os.fspath(path)
    base = str(_base)
    if not text.startswith(base + os.sep):
        return path
    parts = text[len(base) + 1 :].split(os.sep, 2)
    if len(parts) < 2:
        return path
    return f"{parts[0]}://{parts[1]}" + (f"/{parts[2]}" if len(parts) > 2 else "")


@dataclass
class Counters:
    """Requests made and bytes fetched (the benchmark's and the follower's measure of what reading cost)."""

    lists: int = 0
    gets: int = 0
    puts: int = 0
    bytes_fetched: int = 0
    bytes_put: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def requests(self) -> int:
        return self.lists + self.gets + self.puts

    def add(self, **n) -> None:
        with self._lock:
            for name, value in n.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict:
        return {
            "requests": self.requests,
            "lists": self.lists,
            "gets": self.gets,
            "puts": self.puts,
            "bytes_fetched": self.bytes_fetched,
            "bytes_put": self.bytes_put,
        }


COUNTERS = Counters()
"""Every request this process made to object storage, all buckets together."""


def _profile() -> dict:
    """``AWS_PROFILE``'s keys, region and endpoint from the shared files (``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``)."""
    name = os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or "default"
    found: dict = {}
    home = os.path.expanduser("~/.aws")
    files = [(os.environ.get("AWS_CONFIG_FILE") or os.path.join(home, "config"), name if name == "default" else f"profile {name}")]
    files.append((os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, "credentials"), name))
    for path, section in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            found.update({k: v for k, v in parser.items(section) if v})
    return found


def _endpoint(url: Url, profile: dict) -> str | None:
    """The endpoint URL: ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``OBS_ENDPOINT`` for obs://, the profile's ``endpoint_url``."""
    env = os.environ
    value = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if url.scheme == "obs":
        value = env.get("OBS_ENDPOINT") or value
    value = value or profile.get("endpoint_url")
    if value and "://" not in value:
        value = f"https://{value}"  # OBS's documentation gives its endpoints as host names
    return value


def config_for(url: Url) -> dict:
    """obstore's S3 configuration for *url*'s bucket: the environment first, then the profile, then what OBS implies."""
    env = os.environ
    profile = _profile()
    config: dict = {"bucket": url.bucket}
    endpoint = _endpoint(url, profile)
    if endpoint:
        config["endpoint"] = endpoint
    keys = {"access_key_id": ("AWS_ACCESS_KEY_ID", "aws_access_key_id"), "secret_access_key": ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key")}
    keys["token"] = ("AWS_SESSION_TOKEN", "aws_session_token")
    if not env.get("AWS_ACCESS_KEY_ID"):  # a profile's keys are used only when the environment names none
        for option, (_var, key) in keys.items():
            if profile.get(key):
                config[option] = profile[key]
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or profile.get("region")
    if not region and url.scheme == "obs" and endpoint:
        m = _OBS_REGION.match(urlsplit(endpoint).hostname or "")
        region = m.group(1) if m else None
    config["region"] = region or "us-east-1"
    return config


def shown_endpoint(config: dict) -> str:
    """The endpoint as it may be printed: scheme, host and port only (never a user or password in it)."""
    endpoint = config.get("endpoint")
    if not endpoint:
        return "AWS S3"
    parts = urlsplit(endpoint)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _obstore():
    try:
        import obstore  # deferred: the object-store client is an optional extra, loaded only for a URL
    except ImportError as exc:
        raise MissingDependency('reading s3:// or obs:// needs the object-store client: pip install "msnb[s3]"') from exc
    return obstore


class Bucket:
    """One bucket: listing, ranged and whole reads, writes; each request counted, each refusal one line."""

    def __init__(self, url: Url, counters: Counters | None = None):
        obstore = _obstore()
        from obstore.store import S3Store  # deferred with obstore itself

        self.url = Url(url.scheme, url.bucket, "")
        config = config_for(url)
        self.endpoint = shown_endpoint(config)
        client = {"connect_timeout": timedelta(seconds=CONNECT_TIMEOUT_S), "timeout": timedelta(seconds=REQUEST_TIMEOUT_S)}
        if config.get("endpoint", "").startswith("http://"):
            client["allow_http"] = True
        retry = {"max_retries": MAX_RETRIES, "retry_timeout": timedelta(seconds=RETRY_TIMEOUT_S)}
        self.store = S3Store(config=config, client_options=client, retry_config=retry)
        self.ob = obstore
        self.counters = counters or COUNTERS

    def list(self, prefix: str):
        """``(key, size, etag, mtime)`` of every object under *prefix*, page by page (the store's paginated listing)."""
        try:
            for batch in self.ob.list(self.store, prefix=prefix or None, chunk_size=1000):
                self.counters.add(lists=1)
                for meta in batch:
                    modified = meta.get("last_modified")
                    yield meta["path"], int(meta["size"]), meta.get("e_tag") or str(modified), modified.timestamp() if modified else None
        except Exception as exc:  # obstore's errors, and the client's own (a bad endpoint URL): said in one line
            raise self.error(exc, self.url.child(prefix)) from None

    def _missing(self, exc: Exception) -> bool:
        return isinstance(exc, FileNotFoundError) or type(exc).__name__ == "NotFoundError"

    def head(self, key: str):
        """``(size, etag, mtime)`` of one object, or None when there is none."""
        try:
            self.counters.add(gets=1)
            meta = self.ob.head(self.store, key)
        except Exception as exc:
            if self._missing(exc):
                return None
            raise self.error(exc, self.url.child(key)) from None
        modified = meta.get("last_modified")
        return int(meta["size"]), meta.get("e_tag") or str(modified), modified.timestamp() if modified else None

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of one object (all of it from *start* when *end* is None).

        Raises:
            Refused: the store refused or failed the request (its reason in a few words).
        """
        try:
            if end is None and start == 0:
                data = bytes(self.ob.get(self.store, key).bytes())
            elif end is None:
                data = bytes(self.ob.get(self.store, key, options={"range": {"offset": start}}).bytes())
            else:
                data = bytes(self.ob.get_range(self.store, key, start=start, end=end))
        except Exception as exc:  # obstore's errors (a missing object is its FileNotFoundError): said in a few words
            self.counters.add(gets=1)
            raise Refused("no such object (deleted since the listing)" if self._missing(exc) else why(exc, self.endpoint)) from None
        self.counters.add(gets=1, bytes_fetched=len(data))
        return data

    def put(self, key: str, data: bytes) -> None:
        try:
            self.ob.put(self.store, key, data)
        except Exception as exc:
            raise self.error(exc, self.url.child(key)) from None
        self.counters.add(puts=1, bytes_put=len(data))

    def error(self, exc: Exception, where: Url) -> ObjectStoreError:
        """The one line a refusal or failure is said in (the endpoint named; never a key)."""
        return ObjectStoreError(f"{where}: {why(exc, self.endpoint)}")


class Refused(Exception):
    """One request the store refused or failed; the message says why in a few words (no key, no secret)."""


_INSTANCE_METADATA = "/latest/api/token"
"""Where the S3 client asks an EC2-style metadata service for a token when no credentials were given."""


def why(exc: Exception, endpoint: str) -> str:
    """A library error in a few words: no such bucket, access denied, the endpoint unreachable, or the store's code."""
    text = str(exc)
    code = _CODE.search(text)
    name = type(exc).__name__
    if code and code.group(1) == "NoSuchBucket":
        return f"no such bucket at {endpoint}"
    if name in ("PermissionDeniedError", "UnauthenticatedError") or (code and code.group(1) in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")):
        what = code.group(1) if code else "refused"
        return f"access denied at {endpoint} ({what}): check AWS_ACCESS_KEY_ID / AWS_PROFILE and the bucket's policy"
    if name == "NotFoundError":
        return "no such object"
    if _INSTANCE_METADATA in text:  # no key anywhere, so the client asked the cloud machine's metadata service, which is not here
        return (
            f"no credentials for {endpoint}: none in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE's files "
            "(~/.aws/credentials), and no cloud instance's metadata service answered"
        )
    if "error sending request" in text or "timed out" in text.lower() or "connect" in text.lower():
        return f"cannot reach the endpoint {endpoint} (gave up after {RETRY_TIMEOUT_S} s of retries): check AWS_ENDPOINT_URL and the network"
    if code:
        return f"the store at {endpoint} answered {code.group(1)}"
    first = text.splitlines()[0] if text else name
    return f"request failed at {endpoint}: {first[:200]}"
