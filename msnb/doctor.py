"""``msnb doctor``: what environment is this, and what in it will break monitoring?

The checks read installed package metadata and files on disk; they do not
import MindSpore or mindformers (importing mindformers writes ``./output/log``
into the current directory), so the doctor runs in a second even where
MindSpore is broken.  ``probe=True`` additionally starts MindSpore in a child
process to confirm the device it reports.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

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

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass
class Finding:
    """One problem (or notable fact) with its fix; errors make ``msnb doctor`` exit 1."""

    severity: str
    code: str
    message: str
    fix: str = ""


@dataclass
class DeviceStatus:
    device: str
    usable: bool
    reason: str


@dataclass
class Report:
    python: str
    executable: str
    platform: str
    packages: dict
    findings: list = field(default_factory=list)
    devices: list = field(default_factory=list)
    kernels: list = field(default_factory=list)

    @property
    def blocking(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)

    @property
    def best_device(self) -> str | None:
        for d in self.devices:
            if d.usable:
                return d.device
        return None

    def as_dict(self) -> dict:
        return {
            "python": self.python,
            "executable": self.executable,
            "platform": self.platform,
            "packages": self.packages,
            "findings": [asdict(f) for f in self.findings],
            "devices": [asdict(d) for d in self.devices],
            "best_device": self.best_device,
            "kernels": self.kernels,
            "blocking": self.blocking,
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def __repr__(self) -> str:
        errors = sum(f.severity == ERROR for f in self.findings)
        return f"<doctor Report: {len(self.findings)} finding(s), {errors} blocking; best device {self.best_device}>"

    def format_text(self) -> str:
        lines = [f"Python      {self.python} ({self.executable})", f"Platform    {self.platform}", ""]
        lines.append("Packages")
        for name, version in self.packages.items():
            lines.append(f"  {name:<15} {version or '-- not installed'}")
        lines.append("")
        lines.append("Devices (first usable is what msnb picks)")
        for d in self.devices:
            lines.append(f"  {d.device:<7} {'yes' if d.usable else 'no ':<4} {d.reason}")
        lines.append("")
        lines.append("Kernels")
        if not self.kernels:
            lines.append("  (no kernelspecs found)")
        for k in self.kernels:
            marks = []
            if k["made_by_msnb"]:
                marks.append("msnb")
            if not k["interpreter_exists"]:
                marks.append("INTERPRETER MISSING")
            mark = f" [{', '.join(marks)}]" if marks else ""
            lines.append(f"  {k['name']:<20} {k['display_name']!r}{mark}  {k['interpreter']}")
        lines.append("")
        if self.findings:
            lines.append("Findings")
            for f in self.findings:
                lines.append(f"  {f.severity.upper():<8} {f.message}")
                if f.fix:
                    lines.append(f"           fix: {f.fix}")
        else:
            lines.append("Findings    none: this environment is fit for monitored MindSpore training")
        return "\n".join(lines)


def _version_tuple(version: str) -> tuple:
    out = []
    for part in version.replace("-", ".").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def installed_major(name: str) -> int | None:
    """Major version of an installed distribution, None when it is absent."""
    try:
        parts = _version_tuple(md.version(name))
    except md.PackageNotFoundError:
        return None
    return parts[0] if parts else None


def installed_versions(names=PACKAGES) -> dict:
    """Version of each distribution from its metadata (no import), None when absent."""
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _package_dir(name: str) -> Path | None:
    """Folder of an installed top-level package, found without executing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def mindformers_version_map() -> dict | None:
    """mindformers' own VERSION_MAP.json ({"mf": {mf_version: {"support": [ms...]}}}), if shipped."""
    pkg = _package_dir("mindformers")
    if pkg is None:
        return None
    try:
        return json.loads((pkg / "VERSION_MAP.json").read_text())
    except (OSError, ValueError):
        return None


def check_versions(versions: dict, mf_map: dict | None = None) -> list[Finding]:
    """Known-bad combinations among installed versions, each with its fix.

    A pure function of the version table so every rule can be tested without
    building a broken environment.
    """
    findings = []
    ms = versions.get("mindspore")
    mf = versions.get("mindformers")
    pb = versions.get("protobuf")
    np_ = versions.get("numpy")
    mi = versions.get("mindinsight")

    if not ms:
        findings.append(
            Finding(
                WARNING,
                "mindspore-missing",
                "MindSpore is not installed: msnb can read and plot summaries, but cannot train or run smoke tests",
                'pip install "msnb[mindspore]"',
            )
        )
    if ms and pb and _version_tuple(pb)[:1] >= (4,):
        findings.append(
            Finding(
                ERROR,
                "protobuf-summary-collector",
                f"protobuf {pb} with MindSpore {ms}: SummaryCollector fails while collecting the dataset graph "
                "(TypeError: 'RepeatedCompositeFieldContainer' object does not support item assignment), "
                "so no summaries are written",
                "pip install protobuf==3.20.3",
            )
        )
    if ms and np_ and _version_tuple(np_)[:1] >= (2,):
        findings.append(
            Finding(
                ERROR,
                "numpy2-mindspore",
                f"numpy {np_} with MindSpore {ms}: MindSpore's extension was built against NumPy 1.x and fails to import",
                'pip install "numpy<2"',
            )
        )
    if mi:
        if not ms:
            findings.append(Finding(WARNING, "mindinsight-without-mindspore", f"MindInsight {mi} is installed without MindSpore", "pip uninstall mindinsight"))
        elif _version_tuple(mi)[:2] != _version_tuple(ms)[:2]:
            findings.append(
                Finding(
                    WARNING,
                    "mindinsight-mismatch",
                    f"MindInsight {mi} does not match MindSpore {ms}: MindInsight was discontinued after 2.3 and "
                    "misreads newer summaries (it also pins protobuf <= 3.20.1)",
                    "pip uninstall mindinsight  # msnb reads the summaries: msnb.read(...) or %mfmon_plot",
                )
            )
    if mf and not ms:
        findings.append(
            Finding(ERROR, "mindformers-without-mindspore", f"mindformers {mf} is installed but MindSpore is not", 'pip install "msnb[mindformers]"')
        )
    if mf and ms and mf_map:
        entry = (mf_map.get("mf") or {}).get(mf)
        if entry is None:
            findings.append(
                Finding(
                    WARNING,
                    "mindformers-unknown-version",
                    f"mindformers {mf} is not listed in its own VERSION_MAP.json; its MindSpore pairing cannot be checked",
                )
            )
        else:
            supported = list(entry.get("support") or [])
            if ms not in supported:
                prefer = entry.get("prefer") or (supported[0] if supported else "")
                findings.append(
                    Finding(
                        ERROR,
                        "mindformers-mindspore-pair",
                        f"mindformers {mf} supports MindSpore {', '.join(supported) or '(none listed)'}, but MindSpore {ms} is installed",
                        f"pip install mindspore=={prefer}" if prefer else "install a MindSpore version mindformers supports",
                    )
                )
    if not versions.get("ipykernel"):
        findings.append(Finding(ERROR, "ipykernel-missing", "ipykernel is not installed: the MindSpore Kernel cannot start", "pip install ipykernel"))
    return findings


def _mindspore_plugins() -> set[str]:
    pkg = _package_dir("mindspore")
    if pkg is None:
        return set()
    plugin_dir = pkg / "lib" / "plugin"
    try:
        return {p.name for p in plugin_dir.iterdir() if p.is_dir()}
    except OSError:
        return set()


def _ascend_toolkit_home() -> str | None:
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_AICPU_PATH"):
        value = os.environ.get(var)
        if value and os.path.isdir(value):
            return value
    for path in ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/latest"):
        if os.path.isdir(path):
            return path
    return None


def detect_devices(versions: dict, *, probe: bool = False, dev_dir: str = "/dev") -> list[DeviceStatus]:
    """Which backends MindSpore can use here, in msnb's order of preference, and why not the others."""
    ms = versions.get("mindspore")
    if not ms:
        reason = "MindSpore is not installed"
        return [DeviceStatus(d, False, reason) for d in ("Ascend", "GPU", "CPU")]
    plugins = _mindspore_plugins()
    try:
        dev_entries = os.listdir(dev_dir)
    except OSError:
        dev_entries = []

    # Ascend: the wheel's plugin, an NPU device node, and the CANN toolkit.
    npu_nodes = sorted(e for e in dev_entries if e.startswith("davinci") and e[len("davinci") :].isdigit())
    toolkit = _ascend_toolkit_home()
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
        "; ".join(missing) if missing else f"{len(npu_nodes)} NPU(s), CANN at {toolkit}",
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
        "; ".join(missing) if missing else f"{len(nvidia_nodes) or 'some'} NVIDIA GPU(s), plugins {', '.join(gpu_plugins)}",
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
    """Start MindSpore on *device* in a child process and add two tensors there."""
    code = f"import mindspore as ms, numpy as np\nms.set_device({device!r})\nx = ms.Tensor(np.ones(4, np.float32))\nprint(float((x + x).sum().asnumpy()))\n"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout:.0f} s"
    if proc.returncode == 0 and proc.stdout.strip().endswith("8.0"):
        return True, "ok"
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return False, tail[0][:300]


def run(*, probe: bool = False) -> Report:
    """Collect the whole report; ``msnb doctor`` and ``%mfmon_doctor`` print it."""
    from .kernel import list_kernels

    versions = installed_versions()
    findings = check_versions(versions, mindformers_version_map())
    kernels = []
    try:
        infos = list_kernels()
    except Exception as exc:  # a broken kernelspec folder must not hide the rest of the report
        infos = []
        findings.append(Finding(WARNING, "kernelspecs-unreadable", f"could not list kernelspecs: {exc}"))
    for info in infos:
        kernels.append(info.as_dict())
        if not info.interpreter_exists:
            findings.append(
                Finding(
                    WARNING,
                    "kernel-interpreter-missing",
                    f"kernel {info.name!r} ({info.display_name}) starts {info.interpreter}, which no longer exists",
                    f"msnb install-kernel --name {info.name} --force" if info.made_by_msnb else f"jupyter kernelspec remove {info.name}",
                )
            )
    if not any(k["made_by_msnb"] and k["interpreter_exists"] for k in kernels):
        findings.append(Finding(INFO, "no-msnb-kernel", "no MindSpore Kernel is installed for Jupyter / VS Code", "msnb install-kernel"))
    return Report(
        python=platform.python_version(),
        executable=sys.executable,
        platform=f"{platform.system()} {platform.machine()}",
        packages=versions,
        findings=findings,
        devices=detect_devices(versions, probe=probe),
        kernels=kernels,
    )
