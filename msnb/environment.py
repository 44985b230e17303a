"""Facts about this machine and Python environment, with no judgement attached.

The bottom layer under ``msnb doctor``, the kernel readiness check, the smoke
runner's device choice and the config linter: installed versions, the devices
MindSpore could use, the Ascend (CANN) toolkit, the login shell's variables; and the
machine's load and memory as Linux's ``/proc`` says them (the readers' worker count,
the smoke's load and memory watches).
Nothing here imports MindSpore or mindformers (importing mindformers writes
``./output/log`` into the current directory); :func:`probe_device` starts
MindSpore in a child process when asked to.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .words import count

PROC = Path("/proc")  # Linux's process and machine facts: the load and memory facts below read only here

PACKAGES = (
    "msnb",
    "mindspore",
    "mindformers",
    "protobuf",
    "numpy",
    "ipykernel",
    "jupyter_client",
    "mindinsight",
    "transformers",
    "tensorboardX",
    "crc32c",
    "matplotlib",
)

# Where CANN installs itself when no variable says otherwise (root and user installs).
ASCEND_TOOLKIT_DIRS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest", "~/Ascend/ascend-toolkit/latest")
# Variables CANN's set_env.sh exports that name the toolkit's home.
ASCEND_HOME_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_AICPU_PATH", "ASCEND_OPP_PATH")
# Path-like variables whose Ascend entries matter to MindSpore's Ascend plugin.
ASCEND_PATH_VARS = ("LD_LIBRARY_PATH", "PYTHONPATH", "PATH")
_ASCEND_ENTRY = re.compile(r"ascend|cann", re.IGNORECASE)
_MARKER = "__msnb_login_env__"


@dataclass
class DeviceStatus:
    """Whether MindSpore could use *device* here, and why (not)."""

    device: str
    usable: bool
    reason: str


def version_tuple(version: str) -> tuple:
    """The release numbers of a PEP 440 version, as ``packaging`` (pip's own parser) reads them.

    ``"2.9.0rc1"`` -> ``(2, 9, 0)``, ``"1.0.post1"`` -> ``(1, 0)``; ``()`` for a string that is no version (``"?"``).
    """
    try:
        return Version(version).release
    except (InvalidVersion, TypeError):
        return ()


def installed_major(name: str) -> int | None:
    """Major version of an installed distribution.

    Args:
        name: distribution name, e.g. ``"protobuf"``.

    Returns:
        The major version, or None when the distribution is absent.
    """
    try:
        parts = version_tuple(md.version(name))
    except md.PackageNotFoundError:
        return None
    return parts[0] if parts else None


def installed_versions(names=PACKAGES) -> dict:
    """Version of each distribution read from its metadata (no import).

    Args:
        names: distribution names to look up.

    Returns:
        ``{name: version or None}`` in the order of *names*.
    """
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def package_dir(name: str) -> Path | None:
    """Folder of an installed top-level package, found without executing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def mindformers_version_map() -> dict | None:
    """mindformers' own VERSION_MAP.json (``{"mf": {mf_version: {"support": [ms...]}}}``), None if not shipped."""
    pkg = package_dir("mindformers")
    if pkg is None:
        return None
    try:
        return json.loads((pkg / "VERSION_MAP.json").read_text())
    except (OSError, ValueError):
        return None


def mindspore_plugins() -> set[str]:
    """Names of the device plugins the installed MindSpore wheel ships (``ascend``, ``gpu11.6``, ...)."""
    pkg = package_dir("mindspore")
    if pkg is None:
        return set()
    try:
        return {p.name for p in (pkg / "lib" / "plugin").iterdir() if p.is_dir()}
    except OSError:
        return set()


def ascend_toolkit_home(env: dict | None = None) -> str | None:
    """The CANN toolkit's folder: named by *env*'s Ascend variables, else found at a usual install place.

    Args:
        env: the environment to read (default: this process's).

    Returns:
        An existing folder, or None when no toolkit is found.
    """
    env = os.environ if env is None else env
    for var in ASCEND_HOME_VARS[:3]:
        value = env.get(var)
        if value and os.path.isdir(value):
            return value
    return installed_ascend_toolkit()


def installed_ascend_toolkit() -> str | None:
    """A CANN toolkit at one of the usual install places, whatever any environment says."""
    for path in ASCEND_TOOLKIT_DIRS:
        path = os.path.expanduser(path)
        if os.path.isdir(path):
            return path
    return None


def ascend_variables(env: dict) -> dict:
    """The Ascend-related part of an environment.

    Args:
        env: any environment mapping (this process's, a login shell's, a kernel's).

    Returns:
        ``ASCEND_*`` variables in full, and for ``LD_LIBRARY_PATH``/``PYTHONPATH``/``PATH``
        only their entries that mention Ascend or CANN (a list), when there are any.
    """
    out = {k: v for k, v in sorted(env.items()) if k.startswith("ASCEND_")}
    for var in ASCEND_PATH_VARS:
        entries = [e for e in (env.get(var) or "").split(os.pathsep) if e and _ASCEND_ENTRY.search(e)]
        if entries:
            out[var] = entries
    return out


def npu_device_nodes(dev_dir: str = "/dev") -> list[str]:
    """The Ascend NPU device nodes (``davinci0``, ``davinci1``...; not ``davinci_manager``) under *dev_dir*."""
    try:
        return sorted(e for e in os.listdir(dev_dir) if e.startswith("davinci") and e[len("davinci") :].isdigit())
    except OSError:
        return []


def login_shell_env(*, shell: str = "bash", timeout: float = 20.0, env: dict | None = None) -> dict | None:
    """The variables a login shell (``bash -lc env``) ends up with: what a terminal user has.

    Args:
        shell: the shell to start as a login shell.
        timeout: seconds before giving up on a profile that hangs.
        env: the environment the shell starts from (default: this process's).

    Returns:
        The shell's environment, or None when it could not be started or timed out.
    """
    if shutil.which(shell) is None:
        return None
    try:
        # the marker separates env's output from whatever the profile itself prints
        proc = subprocess.run([shell, "-lc", f"printf '\\0{_MARKER}\\0'; env -0"], capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout, env=env)
    except (subprocess.TimeoutExpired, OSError):
        return None
    marker = f"\0{_MARKER}\0".encode()
    if proc.returncode != 0 or marker not in proc.stdout:
        return None
    out = {}
    for entry in proc.stdout.rpartition(marker)[2].split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def detect_devices(versions: dict, *, probe: bool = False, dev_dir: str = "/dev") -> list[DeviceStatus]:
    """Which backends MindSpore can use here, in msnb's order of preference, and why not the others.

    Args:
        versions: :func:`installed_versions`' table (only ``mindspore`` is read).
        probe: also run MindSpore on each device that looks usable, in a child process.
        dev_dir: where device nodes live (a test points it at a folder of fake nodes).

    Returns:
        Ascend, GPU and CPU statuses, in that order.
    """
    ms = versions.get("mindspore")
    if not ms:
        reason = "MindSpore is not installed"
        return [DeviceStatus(d, False, reason) for d in ("Ascend", "GPU", "CPU")]
    plugins = mindspore_plugins()
    try:
        dev_entries = os.listdir(dev_dir)
    except OSError:
        dev_entries = []

    # Ascend: the wheel's plugin, an NPU device node, and the CANN toolkit.
    npu_nodes = npu_device_nodes(dev_dir)
    toolkit = ascend_toolkit_home()
    missing = []
    if "ascend" not in plugins:
        missing.append("this MindSpore build has no Ascend plugin")
    if not npu_nodes:
        missing.append(f"no NPU device nodes ({dev_dir}/davinci*)")
    if not toolkit:
        missing.append("no CANN toolkit found (source set_env.sh, or install the kernel with --ascend-env)")
    ascend = DeviceStatus(
        "Ascend",
        not missing,
        "; ".join(missing) if missing else f"{count(len(npu_nodes), 'NPU')}, CANN at {toolkit}",
    )

    # GPU: a CUDA plugin in the wheel and an NVIDIA device.
    gpu_plugins = sorted(p for p in plugins if p.startswith("gpu"))
    nvidia_nodes = sorted(e for e in dev_entries if e.startswith("nvidia") and e[len("nvidia") :].isdigit())
    missing = []
    if not gpu_plugins:
        missing.append("this MindSpore build has no GPU plugin")
    if not nvidia_nodes and shutil.which("nvidia-smi") is None:
        missing.append(f"no NVIDIA GPU ({dev_dir}/nvidia* absent, nvidia-smi not on PATH)")
    gpu = DeviceStatus(
        "GPU",
        not missing,
        "; ".join(missing) if missing else f"{count(len(nvidia_nodes) or 'some', 'NVIDIA GPU')}, plugins {', '.join(gpu_plugins)}",
    )
    cpu = DeviceStatus("CPU", True, "always available")
    devices = [ascend, gpu, cpu]
    if probe:
        for d in devices:
            if d.usable:
                ok, detail = probe_device(d.device)
                if not ok:
                    d.usable = False
                    d.reason = f"{d.reason}; but MindSpore failed on it: {detail}"
                else:
                    d.reason = f"{d.reason}; confirmed by running MindSpore"
    return devices


def probe_device(device: str, *, timeout: float = 180.0) -> tuple[bool, str]:
    """Start MindSpore on *device* in a child process and add two tensors there.

    Args:
        device: ``"Ascend"``, ``"GPU"`` or ``"CPU"``.
        timeout: seconds before the child is given up on.

    Returns:
        ``(worked, detail)``: detail is ``"ok"`` or the child's last error line.
    """
    code = f"import mindspore as ms, numpy as np\nms.set_device({device!r})\nx = ms.Tensor(np.ones(4, np.float32))\nprint(float((x + x).sum().asnumpy()))\n"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout:.0f} s"
    if proc.returncode == 0 and proc.stdout.strip().endswith("8.0"):
        return True, "ok"
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return False, tail[0][:300]


def running_processes() -> int | None:
    """Processes running or ready to run at this moment (this one included), from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"procs_running "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def runnable_threads() -> int | None:
    """Threads runnable on the machine now (this one included), from /proc/loadavg; None where the system does not say."""
    try:
        running = (PROC / "loadavg").read_text().split()[3]  # "3/412": runnable / existing
        return int(running.split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def _thread_state(stat: str) -> str:
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3]  # the name in parentheses may hold spaces and ')'


def own_runnable(root: int, most: int = 256) -> int:
    """Runnable threads of *root* and its descendants (at most *most* processes walked), from /proc/<pid>/task/<tid>/stat."""
    n, todo, seen = 0, [root], set()
    while todo and len(seen) < most:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tasks = list((PROC / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                n += _thread_state((task / "stat").read_text()) == "R"
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    return n


def _counter(path: str, key: str, scale: int = 1) -> int | None:
    """The number after *key* in a kernel file of "key value" lines (``Key: N kB`` in /proc/meminfo and
    /proc/PID/status, ``key N`` in a cgroup's memory.stat), times *scale*; None where the file or the key cannot be read."""
    try:
        with open(path, "rb") as f:
            for line in f.read(1 << 16).decode("ascii", "replace").splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0].rstrip(":") == key and parts[1].isdigit():
                    return int(parts[1]) * scale
    except OSError:
        return None
    return None


def total_memory_bytes() -> int | None:
    """The machine's memory (MemTotal of /proc/meminfo), or None where it cannot be read."""
    return _counter("/proc/meminfo", "MemTotal", 1024)


def available_memory_bytes() -> int | None:
    """Memory this process may still use: the smaller of MemAvailable and the cgroup's limit less its usage (None when unknown)."""
    available = _counter("/proc/meminfo", "MemAvailable", 1024)
    found = [] if available is None else [available]
    for limit_file, usage_file, stat_file, cache_key in (
        ("memory.max", "memory.current", "memory.stat", "inactive_file"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "memory/memory.stat", "total_inactive_file"),
    ):
        try:
            with open(f"/sys/fs/cgroup/{limit_file}") as f:
                limit = f.read(64).strip()
            with open(f"/sys/fs/cgroup/{usage_file}") as f:
                usage = int(f.read(64).strip())
            if limit.isdigit() and int(limit) < 1 << 60:
                # the page cache the kernel can reclaim counts in the cgroup's usage: it is not memory in use
                reclaimable = _counter(f"/sys/fs/cgroup/{stat_file}", cache_key) or 0
                found.append(max(0, int(limit) - max(0, usage - reclaimable)))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def resident_bytes(pids) -> int:
    """The resident memory (VmRSS of /proc/<pid>/status) of *pids*, summed; a process gone meanwhile counts nothing."""
    held = 0
    for pid in pids:
        try:
            held += _counter(f"/proc/{int(pid)}/status", "VmRSS", 1024) or 0
        except ValueError:
            continue
    return held


def has_proc() -> bool:
    """Whether this system has Linux's /proc (the facts above can be read)."""
    return os.path.isdir("/proc")
