"""One exception tree for the whole library.

Everything msnb raises on purpose derives from :class:`MsnbError`, so a caller
(the CLI, the magics, a user's script) catches one class and shows one line.
Anything else escaping msnb is a bug and keeps its traceback.

Damage found in *data* is never raised: readers return it as
``ReadResult.problems`` (see :mod:`msnb.events.problems`).
"""

from __future__ import annotations


class MsnbError(Exception):
    """Root of every error msnb raises on purpose; ``exit_code`` is what the CLI returns for it."""

    exit_code = 2


class UsageError(MsnbError, ValueError):
    """A caller's mistake: an option out of range, a path that is not there, nothing readable."""


class ConfigError(MsnbError, ValueError):
    """A configuration that cannot be loaded; ``file``, ``key`` and ``line`` say where."""

    def __init__(self, message: str, *, file=None, key: str | None = None, line: int | None = None):
        self.file = str(file) if file is not None else None
        self.key = key
        self.line = line
        where = self.file or ""
        if line is not None:
            where += f":{line}"
        if key:
            where += f" (key '{key}')" if where else f"key '{key}'"
        super().__init__(f"{where}: {message}" if where else message)


class KernelSpecError(MsnbError):
    """A kernelspec could not be installed, removed or read; the message says why."""


class RegistrationError(MsnbError, ValueError):
    """A model registration msnb refused; the message says why and what to do."""


class NothingReadable(UsageError):
    """A path held no summary, event file or log msnb could read."""


class SmokeError(UsageError):
    """A smoke run that cannot start (bad options, missing msrun, unusable directories)."""


class SizeRefused(UsageError):
    """A model size in a config that mindformers would refuse to build (``vocab_size: 0``, a negative or fractional
    size): the config's fault, a finding (exit 1) naming the key, never counted as 0."""

    exit_code = 1

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key


class NotRehearsed(SmokeError):
    """msnb cannot rehearse this run here: a kernel or feature with no CPU path, a release outside the tested set, a
    model that would not fit this machine, or msnb's own code failing. Never the user's failure: the message names
    what could not be rehearsed and what would run it (e.g. "on Ascend"). The CLI exits 3 and ``--json`` says
    ``"outcome": "not_rehearsed"``."""

    exit_code = 3


class UnsafeFile(UsageError):
    """A small file msnb was asked to read (a ledger, a state file, a kernel.json) that it refused: not a regular
    file, too large, too deeply nested, or not what it should hold. ``path`` and ``reason`` say which and why."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class MissingDependency(UsageError):
    """An optional package a feature needs is not installed; the message names the extra."""


class ObjectStoreError(UsageError):
    """An ``s3://`` or ``obs://`` URL that cannot be read: no such bucket, access denied, the endpoint unreachable,
    nothing under the prefix. One line naming the URL and the endpoint, never a credential."""


class AlreadyTensorBoard(UsageError):
    """The source holds TensorBoard event files only: TensorBoard opens them as they are."""


class OutputError(MsnbError):
    """The output could not be written (a full disk, /dev/full, a closed pipe's neighbour)."""
