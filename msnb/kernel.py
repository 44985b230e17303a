"""Install, remove and list the "MindSpore Kernel" kernelspec.

A kernelspec is a folder holding ``kernel.json`` (how to start the kernel) and
optional logos.  Ours starts the current interpreter's ipykernel with msnb's
IPython extension loaded, so every notebook on it has the ``%mfmon_*`` magics
without a ``%load_ext`` cell.  Jupyter and VS Code both read these folders.

Everything here is plain Python; ``msnb install-kernel`` and friends in
:mod:`msnb.cli` only parse arguments and call these functions.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from jupyter_core.paths import SYSTEM_JUPYTER_PATH, jupyter_data_dir

from .errors import KernelSpecError, UnsafeFile
from .processes import end_process_group
from .safe_files import load_json
from .version import __version__

DEFAULT_NAME = "mindspore"
DEFAULT_DISPLAY_NAME = "MindSpore Kernel"
KERNEL_NAME_RE = re.compile(r"^[a-z0-9._-]+$")
MAX_NAME_LENGTH = 128  # a folder name; file systems stop at 255 bytes
MAX_SPEC_BYTES = 1 << 20  # a kernel.json is a few hundred bytes
MARKER = "msnb"  # key under kernel.json's "metadata" that says msnb made it
LOGOS = ("logo-32x32.png", "logo-64x64.png")

# Variables a shell sets for itself; a change in them says nothing about the
# Ascend toolkit, so they never go into the kernelspec.
_SHELL_NOISE = {"_", "SHLVL", "PWD", "OLDPWD", "PS1", "PS2", "BASH_EXECUTION_STRING"}


@dataclass
class KernelInfo:
    """One installed kernelspec, as ``msnb list-kernels`` shows it."""

    name: str
    display_name: str
    resource_dir: str
    interpreter: str
    interpreter_exists: bool
    made_by_msnb: bool
    env: dict = field(default_factory=dict)
    where: str = ""  # the folder in words: "for the user", "in this Python environment (sys.prefix)", ...
    option: str | None = None  # the install-kernel / uninstall-kernel option naming that folder, None when none does
    shadowed_by: str | None = None  # the kernelspec of the same name Jupyter starts instead (it comes first in the search order)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "resource_dir": self.resource_dir,
            "interpreter": self.interpreter,
            "interpreter_exists": self.interpreter_exists,
            "made_by_msnb": self.made_by_msnb,
            "where": self.where,
            "shadowed_by": self.shadowed_by,
        }


def validate_name(name: str) -> str:
    """Return *name* if Jupyter accepts it as a kernel name and it is safe as a folder name, else raise with the rule.

    Args:
        name: the kernel name (``mindspore``).

    Returns:
        *name* unchanged.

    Raises:
        KernelSpecError: not a string, outside ``^[a-z0-9._-]+$``, ``.`` or ``..`` (they name the kernels folder
            itself or its parent), or longer than :data:`MAX_NAME_LENGTH`.
    """
    if not isinstance(name, str) or not KERNEL_NAME_RE.match(name):
        raise KernelSpecError(
            f"invalid kernel name {name!r}: kernel names may only contain lower-case "
            "letters, digits, '.', '_' and '-' (they must match ^[a-z0-9._-]+$); "
            "put spaces and capitals in --display-name instead"
        )
    if name in (".", ".."):
        raise KernelSpecError(f"invalid kernel name {name!r}: it names a folder's own entry, not a kernel (pick a name such as 'mindspore')")
    if len(name) > MAX_NAME_LENGTH:
        raise KernelSpecError(f"invalid kernel name {name[:20]!r}... ({len(name)} characters): at most {MAX_NAME_LENGTH}")
    return name


def logo_dir() -> Path:
    """Folder holding msnb's kernel logos.

    They live in ``kernel/`` at the top of the source tree, which the package
    maps to ``msnb.kernel_resources`` so a wheel carries them too.
    """
    candidates = []
    try:
        candidates.append(Path(str(files("msnb.kernel_resources"))))
    except (ImportError, TypeError):
        pass
    candidates.append(Path(__file__).resolve().parent.parent / "kernel")
    for candidate in candidates:
        if all((candidate / logo).is_file() for logo in LOGOS):
            return candidate
    raise KernelSpecError(f"msnb's kernel logos {LOGOS} were not found in {[str(c) for c in candidates]}")


def parse_env_assignments(items) -> dict:
    """Turn ``["KEY=VALUE", ...]`` into a dict; a malformed item names itself."""
    env = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise KernelSpecError(f"--env expects KEY=VALUE with a valid variable name, got {item!r}")
        env[key] = value
    return env


def read_env_script(script: str | os.PathLike, *, timeout: float = 60.0) -> dict:
    """Source a shell script (e.g. Ascend's ``set_env.sh``) in a subshell and
    return the variables it set or changed.

    Values are recorded in full, as the script left them: a ``${VAR}`` written
    into kernel.json would stay literal text when VAR is unset at launch.

    The environment is written to files by the shell itself (an ``EXIT`` trap),
    so a script that ends with ``exit 0`` is still recorded, and a background
    process the script leaves behind (holding its stdout) cannot make the read
    wait; such leftovers are ended with the shell.  The script is also sourced
    from a minimal environment, so the variables it sets are found even when
    this shell has sourced it already (their values come from this shell's run).

    Args:
        script: the script to source.
        timeout: seconds the script may take.

    Returns:
        Variable -> value for every variable the script set or changed.

    Raises:
        KernelSpecError: the script is missing, fails, runs past *timeout*, never returns to the shell,
            or sets nothing at all (nothing would be recorded).
    """
    path = Path(script).expanduser()
    if not path.is_file():
        raise KernelSpecError(f"--ascend-env: {path} does not exist or is not a file")
    path = path.resolve()
    before, after = _source(path, dict(os.environ), timeout)
    changed = {k for k, v in after.items() if before.get(k) != v}
    minimal = {k: os.environ[k] for k in ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR") if k in os.environ}
    minimal["PATH"] = "/usr/bin:/bin"
    try:
        clean_before, clean_after = _source(path, minimal, timeout)
    except KernelSpecError:  # the script may need this shell's variables: what it changed here is enough
        clean_before, clean_after = {}, {}
    changed |= {k for k, v in clean_after.items() if clean_before.get(k) != v and k in after}
    recorded = {k: after[k] for k in sorted(changed) if k not in _SHELL_NOISE and not k.startswith("BASH_FUNC_")}
    if not recorded:
        raise KernelSpecError(f"--ascend-env: sourcing {path} set no environment variable, so there is nothing to record in the kernelspec")
    return recorded


def _source(path: Path, env: dict, timeout: float) -> tuple[dict, dict]:
    """The exported environment before and after sourcing *path* in ``bash`` started with *env*.

    The script's own output goes to a pipe drained by a thread that keeps only
    its tail (a chatty script costs no memory or disk), and nothing waits for
    that pipe to close: a background job holding it cannot stall the read.
    """
    with tempfile.TemporaryDirectory(prefix="msnb-ascend-env-") as tmp:
        before_file, after_file = os.path.join(tmp, "before"), os.path.join(tmp, "after")
        # env -0 keeps values with newlines intact; the trap runs on every way out, `exit 0` in the script included.
        code = '__msnb_after=$3; env -0 > "$2"; trap \'env -0 > "$__msnb_after"\' EXIT; . "$1"; __msnb_rc=$?; env -0 > "$__msnb_after"; exit $__msnb_rc'
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(
                ["bash", "-c", code, "msnb-ascend-env", str(path), before_file, after_file],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=write_end,
                cwd=str(path.parent),
                env=env,
                start_new_session=True,  # its own process group: leftovers are ended with it
            )
        finally:
            os.close(write_end)
        tail = _drain(read_end)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            end_process_group(proc.pid, grace=2.0)
            raise KernelSpecError(f"--ascend-env: sourcing {path} did not finish within {timeout:.0f} s") from None
        end_process_group(proc.pid, grace=2.0)
        tail.thread.join(1.0)  # the group is gone; only a process that left it (setsid) could still hold the pipe
        if status != 0:
            lines = bytes(tail.data).decode(errors="replace").strip().splitlines()[-5:]
            raise KernelSpecError(f"--ascend-env: sourcing {path} failed with exit code {status}" + (":\n  " + "\n  ".join(lines) if lines else ""))
        if not os.path.exists(after_file):
            raise KernelSpecError(
                f"--ascend-env: sourcing {path} never returned to the shell (does it exec another program, or replace the EXIT trap and exit?); nothing recorded"
            )
        return _parse_env(Path(before_file).read_bytes()), _parse_env(Path(after_file).read_bytes())


@dataclass
class _Tail:
    data: bytearray
    thread: object


def _drain(fd: int, keep: int = 8192) -> _Tail:
    """Read *fd* to its end in a daemon thread, keeping the last *keep* bytes; the thread closes *fd*."""
    tail = _Tail(bytearray(), None)

    def run() -> None:
        try:
            while chunk := os.read(fd, 65536):
                tail.data.extend(chunk)
                del tail.data[:-keep]
        finally:
            os.close(fd)

    tail.thread = threading.Thread(target=run, name="msnb-ascend-env-output", daemon=True)
    tail.thread.start()
    return tail


def _parse_env(raw: bytes) -> dict:
    out = {}
    for entry in raw.split(b"\0"):
        if b"=" in entry:
            k, _, v = entry.partition(b"=")
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def build_spec(
    *,
    display_name: str = DEFAULT_DISPLAY_NAME,
    python: str | None = None,
    env: dict | None = None,
) -> dict:
    """The kernel.json content msnb writes: ipykernel on *python*, msnb auto-loaded."""
    spec = {
        "argv": [
            python or sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            "--IPKernelApp.extensions=msnb",
        ],
        "display_name": display_name,
        "language": "python",
        "metadata": {"debugger": True, MARKER: {"version": __version__}},
    }
    if env:
        spec["env"] = dict(env)
    return spec


def kernels_dir(user: bool, prefix: str | None) -> Path:
    """The ``kernels`` folder jupyter_client installs into for this (user, prefix) choice."""
    if user:
        return Path(jupyter_data_dir()) / "kernels"
    if prefix:
        return Path(prefix) / "share" / "jupyter" / "kernels"
    return Path(SYSTEM_JUPYTER_PATH[0]) / "kernels"


def install_location(*, user: bool = True, sys_prefix: bool = False, prefix: str | None = None) -> tuple[bool, str | None]:
    """Resolve the --user/--sys-prefix/--prefix choice into jupyter_client's (user, prefix)."""
    chosen = [bool(sys_prefix), prefix is not None]
    if sum(chosen) > 1:
        raise KernelSpecError("choose one of --user, --sys-prefix and --prefix")
    if sys_prefix:
        return False, sys.prefix
    if prefix is not None:
        try:
            return False, str(Path(prefix).expanduser().resolve())
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop, a name too long
            raise KernelSpecError(f"--prefix {str(prefix)[:80]!r} is not a usable folder: {' '.join(str(exc).split())}") from None
    return bool(user), None


def _same_interpreter(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b) and Path(a).parent.resolve() == Path(b).parent.resolve()
    except OSError:
        return False


def install(
    name: str = DEFAULT_NAME,
    display_name: str = DEFAULT_DISPLAY_NAME,
    *,
    user: bool = True,
    sys_prefix: bool = False,
    prefix: str | os.PathLike | None = None,
    env: dict | None = None,
    ascend_env: str | os.PathLike | None = None,
    force: bool = False,
    python: str | None = None,
) -> Path:
    """Write the MindSpore Kernel's kernelspec and return the folder it went to.

    Re-installing over a kernelspec msnb made for the same interpreter updates
    it in place.  Anything else already under *name* (another tool's kernel, or
    msnb's kernel for another environment) is left alone unless *force*.
    """
    validate_name(name)
    user, prefix = install_location(user=user, sys_prefix=sys_prefix, prefix=None if prefix is None else str(prefix))
    merged_env = {}
    if ascend_env is not None:
        merged_env.update(read_env_script(ascend_env))
    merged_env.update(env or {})
    spec = build_spec(display_name=display_name, python=python, env=merged_env)

    dest = kernels_dir(user, prefix) / name
    existing = dest / "kernel.json"
    if os.path.islink(dest):
        raise KernelSpecError(f"{dest} is a symbolic link (to {os.readlink(dest)}); msnb does not write through it: remove the link or pick another --name")
    if os.path.lexists(existing) and not force:
        try:
            old = read_spec(existing)
        except KernelSpecError as exc:
            raise KernelSpecError(f"a kernelspec already exists at {dest} and {exc}; use --force to replace it") from None
        argv = old.get("argv") if isinstance(old.get("argv"), list) else []
        old_python = str(argv[0]) if argv else ""
        if not _made_by_msnb(old):
            raise KernelSpecError(
                f"a kernelspec named {name!r} that msnb did not make already exists at {dest} "
                f"(display name {old.get('display_name')!r}); use --force to replace it or --name to pick another name"
            )
        if not _same_interpreter(old_python, spec["argv"][0]):
            raise KernelSpecError(
                f"the kernelspec {name!r} at {dest} starts another interpreter ({old_python}), "
                f"not {spec['argv'][0]}; use --force to replace it or --name to pick another name"
            )

    from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

    logos = logo_dir()
    try:
        with tempfile.TemporaryDirectory(prefix="msnb-kernelspec-") as tmp:
            src = Path(tmp) / name
            src.mkdir()
            (src / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
            for logo in LOGOS:
                shutil.copyfile(logos / logo, src / logo)
            installed = KernelSpecManager().install_kernel_spec(str(src), name, user=user, prefix=prefix)
    except OSError as exc:
        raise KernelSpecError(f"cannot install the kernelspec into {dest}: {_reason(exc)}") from None
    return Path(installed)


def _reason(exc: OSError) -> str:
    """One line for an OSError: its message and, when it names one, the path it failed on."""
    text = exc.strerror or str(exc)
    return f"{text} ({exc.filename})" if exc.filename else " ".join(str(text).split())


def _made_by_msnb(spec: dict) -> bool:
    metadata = spec.get("metadata")
    return isinstance(metadata, dict) and MARKER in metadata


def read_spec(path: str | os.PathLike) -> dict:
    """A kernel.json as a dict, read safely: a regular file of at most :data:`MAX_SPEC_BYTES` holding a JSON object.

    Read by :mod:`msnb.safe_files` (no FIFO blocks, no device is read, the
    nesting is measured before parsing) and checked by :func:`spec_problem`,
    so every later ``spec["env"].items()`` meets the shape it expects.

    Args:
        path: the kernel.json.

    Returns:
        Its content.

    Raises:
        KernelSpecError: it is missing, not a regular file (a FIFO would block), too large, too deep, not a JSON
            object, or its ``argv``/``env``/``display_name``/``metadata`` have the wrong type.
    """
    try:
        spec = load_json(path, limit=MAX_SPEC_BYTES, max_depth=MAX_SPEC_DEPTH)
    except UnsafeFile as exc:
        reason = exc.reason
        if reason.startswith("cannot be read") or reason == "no such file":
            raise KernelSpecError(f"its kernel.json cannot be read: {reason.removeprefix('cannot be read: ')} ({path})") from None
        raise KernelSpecError(f"its kernel.json ({path}) {reason}") from None
    if not isinstance(spec, dict):
        raise KernelSpecError(f"its kernel.json ({path}) holds a JSON {type(spec).__name__}, not an object")
    problem = spec_problem(spec)
    if problem:
        raise KernelSpecError(f"its kernel.json ({path}) {problem}")
    return spec


MAX_SPEC_DEPTH = 16  # kernel.json nests 3 deep (metadata -> a tool's entry -> its settings)


def spec_problem(spec: dict) -> str | None:
    """What is wrong with the shape of a parsed kernel.json, or None.

    Jupyter itself requires ``argv`` (a list of strings) and ``display_name``;
    ``env`` and ``metadata`` must be objects when present.  Values of ``env``
    that are not strings are left to the kernel check, which reports them as a
    finding (front ends refuse to start such a kernel).
    """
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "has no argv list of strings (Jupyter starts the kernel from it)"
    if not isinstance(spec.get("display_name", ""), str):
        return f"has a display_name that is a JSON {type(spec['display_name']).__name__}, not a string"
    for key in ("env", "metadata"):
        if spec.get(key) is not None and not isinstance(spec[key], dict):
            return f"has an {key!r} that is a JSON {type(spec[key]).__name__}, not an object"
    return None


def search_dirs(*, user: bool = False, sys_prefix: bool = False, prefix: str | os.PathLike | None = None) -> list[Path]:
    """The ``kernels`` folders :func:`uninstall` looks in: the one chosen, else every one Jupyter searches.

    Never the folder ipykernel ships its own ``python3`` kernel in (jupyter_client's lookup falls back to
    that package folder when no ``python3`` kernelspec is installed).

    Args:
        user: only the user's kernels folder.
        sys_prefix: only this environment's (``sys.prefix/share/jupyter/kernels``).
        prefix: only ``prefix/share/jupyter/kernels``.

    Returns:
        The folders, in Jupyter's search order.
    """
    if sum((bool(user), bool(sys_prefix), prefix is not None)) > 1:
        raise KernelSpecError("choose one of --user, --sys-prefix and --prefix")
    if user or sys_prefix or prefix is not None:
        chosen_user, chosen_prefix = install_location(user=bool(user), sys_prefix=sys_prefix, prefix=None if prefix is None else str(prefix))
        return [kernels_dir(chosen_user, chosen_prefix)]
    from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

    return [Path(d) for d in KernelSpecManager().kernel_dirs]


def _inside_a_package(path: Path) -> str | None:
    """The package folder *path* lies in (a parent holding ``__init__.py``, or site-packages), else None."""
    for folder in (path, *path.parents):
        if folder.name in ("site-packages", "dist-packages") or (folder / "__init__.py").exists():
            return str(folder)
    return None


def uninstall(name: str = DEFAULT_NAME, *, force: bool = False, user: bool = False, sys_prefix: bool = False, prefix: str | os.PathLike | None = None) -> Path:
    """Remove the kernelspec *name* if msnb made it; return the removed folder.

    Only a folder directly in a Jupyter ``kernels`` folder is removed, and only
    when its kernel.json says msnb wrote it (with *force*: any kernelspec folder
    there, even one whose kernel.json is broken).  A symbolic link is never
    followed, and a folder inside a Python package (ipykernel's own ``python3``
    kernel) is never touched.

    Args:
        name: the kernel name.
        force: remove a kernelspec msnb did not make.
        user: look only in the user's kernels folder.
        sys_prefix: look only in ``sys.prefix/share/jupyter/kernels``.
        prefix: look only in ``prefix/share/jupyter/kernels`` (where ``install(prefix=...)`` put it).

    Returns:
        The folder removed.

    Raises:
        KernelSpecError: no such kernelspec there, or msnb refused to remove it (the message says why).
    """
    validate_name(name)
    dirs = search_dirs(user=user, sys_prefix=sys_prefix, prefix=prefix)
    spec_dir = next((d / name for d in dirs if os.path.lexists(d / name)), None)
    if spec_dir is None:
        looked = ", ".join(str(d) for d in dirs)
        raise KernelSpecError(f"no kernelspec named {name!r} is installed in {looked} (see `msnb list-kernels`)")
    return _remove(name, spec_dir, force)


def _remove(name: str, spec_dir: Path, force: bool) -> Path:
    """Remove the kernelspec folder *spec_dir* after :func:`uninstall`'s checks; raises KernelSpecError saying why not."""
    if os.path.islink(spec_dir):
        raise KernelSpecError(f"{spec_dir} is a symbolic link (to {os.readlink(spec_dir)}); msnb does not follow it: remove the link yourself")
    if not spec_dir.is_dir():
        raise KernelSpecError(f"{spec_dir} is not a folder, so not a kernelspec; not removing it")
    package = _inside_a_package(spec_dir.resolve())
    if package is not None:
        raise KernelSpecError(f"{spec_dir} lies inside the Python package folder {package}; msnb never removes a package's own files")
    spec_file = spec_dir / "kernel.json"
    if not os.path.lexists(spec_file):
        raise KernelSpecError(f"{spec_dir} holds no kernel.json, so it is not a kernelspec; not removing it")
    try:
        made = _made_by_msnb(read_spec(spec_file))
    except KernelSpecError as exc:
        if not force:
            raise KernelSpecError(f"the kernelspec {name!r} at {spec_dir}: {exc}; use --force to remove it anyway") from None
        made = False
    if not made and not force:
        raise KernelSpecError(
            f"the kernelspec {name!r} at {spec_dir} was not made by msnb; not removing it (use --force, or `jupyter kernelspec remove` for kernels of other tools)"
        )
    try:
        shutil.rmtree(spec_dir)  # removes links inside as links, never what they point to
    except OSError as exc:
        raise KernelSpecError(f"cannot remove {spec_dir}: {_reason(exc)}") from None
    return spec_dir


def uninstall_all(name: str = DEFAULT_NAME, *, force: bool = False) -> tuple[list[Path], list[tuple[KernelInfo, str]]]:
    """Remove every kernelspec named *name* in the folders Jupyter searches, each as :func:`uninstall` would.

    One that is refused (not made by msnb without *force*, a link, inside a
    package) is left, with the reason, and the others are still removed.

    Returns:
        (the folders removed, the kernelspecs left with why each was left).

    Raises:
        KernelSpecError: no kernelspec of that name is installed anywhere Jupyter looks.
    """
    validate_name(name)
    found = locate(name)
    if not found:
        looked = ", ".join(str(d) for d in search_dirs())
        raise KernelSpecError(f"no kernelspec named {name!r} is installed in {looked} (see `msnb list-kernels`)")
    removed, left = [], []
    for info in found:
        try:
            removed.append(_remove(name, Path(info.resource_dir), force))
        except KernelSpecError as exc:
            left.append((info, str(exc)))
    return removed, left


def where_of(kernels: str | os.PathLike) -> tuple[str, str | None]:
    """A ``kernels`` folder in words, and the ``--user`` / ``--sys-prefix`` / ``--prefix DIR`` option naming it (None if none does)."""
    here = _real(kernels)
    if here == _real(kernels_dir(True, None)):
        return "for the user", "--user"
    if here == _real(kernels_dir(False, sys.prefix)):
        return "in this Python environment (sys.prefix)", "--sys-prefix"
    path = Path(kernels)
    if path.parts[-3:] == ("share", "jupyter", "kernels"):
        prefix = str(path.parent.parent.parent)
        return f"under the prefix {prefix}", f"--prefix {shlex.quote(prefix)}"
    return f"in {path}", None


def _real(path) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return str(path)


def _info(name: str, resource_dir: str) -> KernelInfo:
    """One kernelspec folder read by :func:`read_spec`; an unreadable one gets the reason as its display name, never raised."""
    where, option = where_of(Path(resource_dir).parent)
    try:
        spec = read_spec(Path(resource_dir) / "kernel.json")
    except KernelSpecError as exc:
        return KernelInfo(
            name=name,
            display_name=f"(unreadable: {exc})",
            resource_dir=resource_dir,
            interpreter="",
            interpreter_exists=False,
            made_by_msnb=False,
            where=where,
            option=option,
        )
    interpreter = spec["argv"][0]
    exists = os.path.exists(interpreter) if os.path.isabs(interpreter) else shutil.which(interpreter) is not None
    return KernelInfo(
        name=name,
        display_name=spec.get("display_name", ""),
        resource_dir=resource_dir,
        interpreter=interpreter,
        interpreter_exists=exists,
        made_by_msnb=_made_by_msnb(spec),
        env=spec.get("env") or {},
        where=where,
        option=option,
    )


def _same_name(ksm, name: str, started: str | None) -> list[KernelInfo]:
    """Every kernelspec named *name* in *ksm*'s folders, in Jupyter's search order; the one it starts (*started*) first."""
    folders = [os.path.join(d, name) for d in ksm.kernel_dirs if os.path.isfile(os.path.join(d, name, "kernel.json"))]
    started = started or (folders[0] if folders else None)
    if started is None:
        return []
    ordered = [started, *(f for f in folders if _real(f) != _real(started))]
    seen, infos = set(), []
    for folder in ordered:
        if _real(folder) in seen:  # the same folder reached twice (a JUPYTER_PATH entry that is also the prefix)
            continue
        seen.add(_real(folder))
        info = _info(name, folder)
        info.shadowed_by = None if not infos else infos[0].resource_dir
        infos.append(info)
    return infos


def locate(name: str = DEFAULT_NAME) -> list[KernelInfo]:
    """Every kernelspec named *name*, in Jupyter's search order: the first is the one a front end starts, the rest are shadowed.

    jupyter_client looks in ``jupyter_path('kernels')`` in order and the first
    folder holding the name wins.  In a virtual environment that order puts the
    environment (``--sys-prefix``) before the user's folder (``--user``), and
    ``JUPYTER_PATH`` before both, so a ``--user`` kernel of a name already
    installed there is never started.
    """
    from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

    ksm = KernelSpecManager()
    return _same_name(ksm, name, ksm.find_kernel_specs().get(name))


def removal_command(info: KernelInfo) -> str:
    """The command that removes exactly the kernelspec *info* (a folder no option names: remove it by hand)."""
    if info.option is None:
        return f"rm -r {shlex.quote(info.resource_dir)}"
    force = "" if info.made_by_msnb else " --force"
    return f"msnb uninstall-kernel --name {info.name} {info.option}{force}"


def list_kernels() -> list[KernelInfo]:
    """Every kernelspec Jupyter can see, marking msnb's, those whose interpreter is gone, and those shadowed.

    A name installed in several folders is listed once per folder, the one a
    front end starts first and the others with ``shadowed_by`` naming it.  Each
    kernel.json is read by :func:`read_spec`; one that cannot be read (a FIFO,
    a list for ``env``, 100,000 nested brackets) is listed with the reason as
    its display name and no interpreter, never raised.
    """
    from jupyter_client.kernelspec import KernelSpecManager  # deferred: jupyter_client (zmq, traitlets)

    ksm = KernelSpecManager()
    infos = []
    for name, resource_dir in sorted(ksm.find_kernel_specs().items()):
        infos.extend(_same_name(ksm, name, resource_dir) or [_info(name, resource_dir)])
    return infos
