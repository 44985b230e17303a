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
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KernelSpecError

DEFAULT_NAME = "mindspore"
DEFAULT_DISPLAY_NAME = "MindSpore Kernel"
KERNEL_NAME_RE = re.compile(r"^[a-z0-9._-]+$")
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

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "resource_dir": self.resource_dir,
            "interpreter": self.interpreter,
            "interpreter_exists": self.interpreter_exists,
            "made_by_msnb": self.made_by_msnb,
        }


def validate_name(name: str) -> str:
    """Return *name* if Jupyter accepts it as a kernel name, else raise with the rule."""
    if not KERNEL_NAME_RE.match(name or ""):
        raise KernelSpecError(
            f"invalid kernel name {name!r}: kernel names may only contain lower-case "
            "letters, digits, '.', '_' and '-' (they must match ^[a-z0-9._-]+$); "
            "put spaces and capitals in --display-name instead"
        )
    return name


def logo_dir() -> Path:
    """Folder holding msnb's kernel logos.

    They live in ``kernel/`` at the top of the source tree, which the package
    maps to ``msnb.kernel_resources`` so a wheel carries them too.
    """
    candidates = []
    try:
        from importlib.resources import files

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
    """
    path = Path(script).expanduser()
    if not path.is_file():
        raise KernelSpecError(f"--ascend-env: {path} does not exist or is not a file")
    sep = "__msnb_env_separator__"
    # env -0 keeps values with newlines intact; the script's own output goes to stderr.
    code = f'env -0; printf "\\0{sep}\\0"; . "$1" 1>&2 || exit $?; env -0'
    try:
        proc = subprocess.run(
            ["bash", "-c", code, "msnb-ascend-env", str(path.resolve())],
            capture_output=True,
            timeout=timeout,
            cwd=str(path.resolve().parent),
        )
    except subprocess.TimeoutExpired:
        raise KernelSpecError(f"--ascend-env: sourcing {path} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise KernelSpecError(f"--ascend-env: sourcing {path} failed with exit code {proc.returncode}" + (":\n  " + "\n  ".join(tail) if tail else ""))
    before_raw, _, after_raw = proc.stdout.partition(f"\0{sep}\0".encode())

    def parse(raw: bytes) -> dict:
        out = {}
        for entry in raw.split(b"\0"):
            if b"=" in entry:
                k, _, v = entry.partition(b"=")
                out[k.decode(errors="replace")] = v.decode(errors="replace")
        return out

    before, after = parse(before_raw), parse(after_raw)
    return {k: v for k, v in after.items() if k not in _SHELL_NOISE and before.get(k) != v and not k.startswith("BASH_FUNC_")}


def build_spec(
    *,
    display_name: str = DEFAULT_DISPLAY_NAME,
    python: str | None = None,
    env: dict | None = None,
) -> dict:
    """The kernel.json content msnb writes: ipykernel on *python*, msnb auto-loaded."""
    from . import __version__

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
    from jupyter_core.paths import SYSTEM_JUPYTER_PATH, jupyter_data_dir

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
        return False, str(Path(prefix).expanduser().resolve())
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
    if existing.exists() and not force:
        try:
            old = json.loads(existing.read_text())
        except (OSError, ValueError) as exc:
            raise KernelSpecError(f"a kernelspec already exists at {dest} and its kernel.json cannot be read ({exc}); use --force to replace it") from None
        old_python = (old.get("argv") or [""])[0]
        if MARKER not in (old.get("metadata") or {}):
            raise KernelSpecError(
                f"a kernelspec named {name!r} that msnb did not make already exists at {dest} "
                f"(display name {old.get('display_name')!r}); use --force to replace it or --name to pick another name"
            )
        if not _same_interpreter(old_python, spec["argv"][0]):
            raise KernelSpecError(
                f"the kernelspec {name!r} at {dest} starts another interpreter ({old_python}), "
                f"not {spec['argv'][0]}; use --force to replace it or --name to pick another name"
            )

    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory(prefix="msnb-kernelspec-") as tmp:
        src = Path(tmp) / name
        src.mkdir()
        (src / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
        logos = logo_dir()
        for logo in LOGOS:
            shutil.copyfile(logos / logo, src / logo)
        installed = KernelSpecManager().install_kernel_spec(str(src), name, user=user, prefix=prefix)
    return Path(installed)


def _find_spec_dir(name: str) -> Path:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        return Path(KernelSpecManager().get_kernel_spec(name).resource_dir)
    except NoSuchKernel:
        raise KernelSpecError(f"no kernelspec named {name!r} is installed (see `msnb list-kernels`)") from None


def uninstall(name: str = DEFAULT_NAME, *, force: bool = False) -> Path:
    """Remove the kernelspec *name* if msnb made it; return the removed folder."""
    validate_name(name)
    spec_dir = _find_spec_dir(name)
    try:
        spec = json.loads((spec_dir / "kernel.json").read_text())
    except (OSError, ValueError):
        spec = {}
    if MARKER not in (spec.get("metadata") or {}) and not force:
        raise KernelSpecError(
            f"the kernelspec {name!r} at {spec_dir} was not made by msnb; not removing it (use `jupyter kernelspec remove` for kernels of other tools)"
        )
    shutil.rmtree(spec_dir)
    return spec_dir


def list_kernels() -> list[KernelInfo]:
    """Every kernelspec Jupyter can see, marking msnb's and those whose interpreter is gone."""
    from jupyter_client.kernelspec import KernelSpecManager

    infos = []
    for name, entry in sorted(KernelSpecManager().get_all_specs().items()):
        spec = entry.get("spec", {})
        argv = spec.get("argv") or [""]
        interpreter = argv[0]
        if os.path.isabs(interpreter):
            exists = os.path.exists(interpreter)
        else:
            exists = shutil.which(interpreter) is not None
        infos.append(
            KernelInfo(
                name=name,
                display_name=spec.get("display_name", ""),
                resource_dir=entry.get("resource_dir", ""),
                interpreter=interpreter,
                interpreter_exists=exists,
                made_by_msnb=MARKER in (spec.get("metadata") or {}),
                env=spec.get("env") or {},
            )
        )
    return infos
