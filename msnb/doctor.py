"""``msnb doctor``: what in this environment will break monitoring, and the fix for each.

A report built on :mod:`msnb.environment`'s facts: known-bad version
combinations, usable devices and installed kernels, as
:class:`msnb.findings.Finding` items.  It reads package metadata and files on
disk only; MindSpore is started (in a child process) only with ``probe=True``.
The kernel readiness check (``msnb doctor --kernel``) lives in
:mod:`msnb.kernel_check`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field

from .environment import (  # noqa: F401  (re-exported: callers import these from msnb.doctor)
    PACKAGES,
    DeviceStatus,
    detect_devices,
    installed_major,
    installed_versions,
    mindformers_version_map,
    probe_device,
    version_tuple,
)
from .findings import ERROR, INFO, WARNING, Finding, Severity  # noqa: F401
from .kernel import list_kernels, removal_command
from .requirements import StackFacts, dataset_graph_breaks, installed_stack_facts, satisfies
from .status import ResultView
from .words import count


@dataclass
class Report(ResultView):
    """Everything ``msnb doctor`` found; ``blocking`` when any finding is an error."""

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
    def passed(self) -> bool:
        """Nothing blocks (``msnb doctor`` exits 0)."""
        return not self.blocking

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
            "findings": [f.as_dict() for f in self.findings],
            "devices": [asdict(d) for d in self.devices],
            "best_device": self.best_device,
            "kernels": self.kernels,
            "blocking": self.blocking,
        }

    def __repr__(self) -> str:
        errors = sum(f.severity == ERROR for f in self.findings)
        return f"<doctor Report: {count(len(self.findings), 'finding')}, {errors} blocking; best device {self.best_device}>"

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
            if k.get("shadowed_by"):
                marks.append("shadowed: never started")
            mark = f" [{', '.join(marks)}]" if marks else ""
            lines.append(f"  {k['name']:<20} {k['display_name']!r}{mark}  {k['interpreter']}")
        lines.append("")
        if self.findings:
            lines.append("Findings")
            lines.extend(format_findings(self.findings))
        else:
            lines.append("Findings    none: this environment is fit for monitored MindSpore training")
        return "\n".join(lines)


def format_findings(findings) -> list[str]:
    """Findings as indented text lines: severity, message and rule, then the fix.

    Args:
        findings: :class:`~msnb.findings.Finding` items.

    Returns:
        Lines ready to join with newlines.
    """
    lines = []
    for f in findings:
        lines.append(f"  {str(f.severity).upper():<8} {f.message} [{f.rule}]")
        if f.fix:
            lines.append(f"           fix: {f.fix}")
    return lines


def check_versions(versions: dict, mf_map: dict | None = None, facts: StackFacts | None = None) -> list[Finding]:
    """Known-bad combinations among installed versions, each with its fix.

    A pure function of the version table and the stack's facts, so every rule can be tested without
    building a broken environment.

    Args:
        versions: ``{distribution: version or None}`` (see :func:`msnb.environment.installed_versions`).
        mf_map: mindformers' VERSION_MAP.json, when it ships one.
        facts: what the installed MindSpore and mindformers require of protobuf and NumPy, and the style of
            MindSpore's generated modules (default: read from this environment, :mod:`msnb.requirements`).

    Returns:
        The findings, errors first as they are found.
    """
    findings = []
    ms = versions.get("mindspore")
    mf = versions.get("mindformers")
    mi = versions.get("mindinsight")

    if not ms:
        findings.append(
            Finding(
                "mindspore-missing",
                WARNING,
                "MindSpore is not installed: msnb can read and plot summaries, but cannot train or run smoke tests",
                'pip install "msnb[mindspore]"',
            )
        )
    findings += _requirement_findings(versions, facts if facts is not None else installed_stack_facts())
    if mi:
        if not ms:
            findings.append(Finding("mindinsight-without-mindspore", WARNING, f"MindInsight {mi} is installed without MindSpore", "pip uninstall mindinsight"))
        elif version_tuple(mi)[:2] != version_tuple(ms)[:2]:
            findings.append(
                Finding(
                    "mindinsight-mismatch",
                    WARNING,
                    f"MindInsight {mi} does not match MindSpore {ms}: MindInsight was discontinued after 2.3 and "
                    "misreads newer summaries (it also pins protobuf <= 3.20.1)",
                    "pip uninstall mindinsight  # msnb reads the summaries: msnb.read(...) or %mfmon_plot",
                )
            )
    if mf and not ms:
        findings.append(
            Finding("mindformers-without-mindspore", ERROR, f"mindformers {mf} is installed but MindSpore is not", 'pip install "msnb[mindformers]"')
        )
    if mf and ms and mf_map:
        entry = (mf_map.get("mf") or {}).get(mf)
        if entry is None:
            findings.append(
                Finding(
                    "mindformers-unknown-version",
                    WARNING,
                    f"mindformers {mf} is not listed in its own VERSION_MAP.json; its MindSpore pairing cannot be checked",
                )
            )
        else:
            supported = list(entry.get("support") or [])
            if ms not in supported:
                prefer = entry.get("prefer") or (supported[0] if supported else "")
                findings.append(
                    Finding(
                        "mindformers-mindspore-pair",
                        ERROR,
                        f"mindformers {mf} supports MindSpore {', '.join(supported) or '(none listed)'}, but MindSpore {ms} is installed",
                        f"pip install mindspore=={prefer}" if prefer else "install a MindSpore version mindformers supports",
                    )
                )
    if not versions.get("ipykernel"):
        findings.append(Finding("ipykernel-missing", ERROR, "ipykernel is not installed: the MindSpore Kernel cannot start", "pip install ipykernel"))
    return findings


# what breaks when a requirement is not met, by (requirer, dependency)
_BROKEN = {
    ("mindspore", "protobuf"): "`import mindspore` fails (its generated modules need that protobuf)",
    ("mindspore", "numpy"): "MindSpore's extension fails to import",
}
# the protobuf that makes an old-style MindSpore's SummaryCollector collect the dataset graph
DATASET_GRAPH_PROTOBUF = "3.20.3"
_NAMES = {"mindspore": "MindSpore", "mindformers": "mindformers"}


def _requirement_findings(versions: dict, facts: StackFacts) -> list[Finding]:
    """protobuf and NumPy against what the installed MindSpore and mindformers declare; every fix meets all of them."""
    findings = []
    ms = versions.get("mindspore")
    for dep in ("protobuf", "numpy"):
        have = versions.get(dep)
        if not have:
            continue
        for dist in ("mindspore", "mindformers"):
            spec = facts.requirement(dist, dep)
            if not versions.get(dist) or not spec or satisfies(have, spec) is not False:
                continue
            broken = _BROKEN.get((dist, dep))
            findings.append(
                Finding(
                    f"{dep}-{dist}-requirement",
                    ERROR if broken else WARNING,
                    f"{dep} {have} does not meet {_NAMES[dist]} {versions[dist]}'s requirement {dep}{spec}"
                    + (f": {broken}" if broken else " (its own metadata says so)"),
                    f'pip install "{dep}{facts.combined(dep)}"',
                    key=dep,
                )
            )
    pb = versions.get("protobuf")
    if ms and pb and dataset_graph_breaks(version_tuple(pb)[0] if version_tuple(pb) else None, facts):
        pin_ok = satisfies(DATASET_GRAPH_PROTOBUF, facts.combined("protobuf")) is not False
        findings.append(
            Finding(
                "protobuf-summary-collector",
                ERROR,
                f"protobuf {pb} with MindSpore {ms}: SummaryCollector fails while collecting the dataset graph "
                "(TypeError: 'RepeatedCompositeFieldContainer' object does not support item assignment), "
                "so no summaries are written",
                f"pip install protobuf=={DATASET_GRAPH_PROTOBUF}"
                if pin_ok
                else "collect_specified_data: {collect_dataset_graph: False} (msnb's callbacks turn it off; no protobuf the installed packages accept fixes it)",
            )
        )
    return findings


# run by a kernel's own interpreter, isolated (-I): where it lives and what it would import, without importing it
_ENV_PROBE = (
    "import json, sys\nfrom importlib import metadata\n"
    "def v(n):\n    try:\n        return metadata.version(n)\n    except Exception:\n        return None\n"
    "print(json.dumps({'prefix': sys.prefix, 'mindspore': v('mindspore'), 'mindformers': v('mindformers')}))"
)
ENV_PROBE_TIMEOUT_S = 20.0


def kernel_environment(interpreter: str) -> dict | None:
    """The environment a kernel's interpreter runs in: ``prefix``, and its ``mindspore`` and ``mindformers`` versions
    (None when it could not say)."""
    try:
        done = subprocess.run([interpreter, "-I", "-c", _ENV_PROBE], capture_output=True, text=True, timeout=ENV_PROBE_TIMEOUT_S, check=False)
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def other_environment_findings(info) -> list[Finding]:
    """A MindSpore Kernel whose interpreter is another environment's: notebooks on it run that environment's MindSpore,
    whatever this one has (``msnb doctor`` in the mindformers 2.0 environment listed a kernel of the 1.9 one and said fit)."""
    theirs = kernel_environment(info.interpreter)
    if theirs is None:
        return [Finding("kernel-environment-unknown", WARNING, f"kernel {info.name!r} ({info.display_name}): {info.interpreter} did not say "
                        "which environment it runs in", f"msnb install-kernel --name {info.name} --force", key=info.name)]  # fmt: skip
    if os.path.realpath(theirs["prefix"]) == os.path.realpath(sys.prefix):
        return []
    ours = installed_versions()
    said = ", ".join(f"{n} {theirs.get(n) or 'none'} there, {ours.get(n) or 'none'} here" for n in ("mindspore", "mindformers"))
    return [
        Finding(
            "kernel-other-environment",
            WARNING,
            f"kernel {info.name!r} ({info.display_name}) runs {info.interpreter}, another environment than this one ({sys.prefix}): "
            f"notebooks on it get that environment's packages ({said})",
            f"a kernel of this environment beside it: {sys.executable} -m msnb install-kernel --name NAME --display-name 'MindSpore Kernel (NAME)'; "
            f"or, to make {info.name!r} this environment's: {sys.executable} -m msnb install-kernel --name {info.name} --force",
            key=info.name,
        )
    ]


def run(*, probe: bool = False) -> Report:
    """Collect the whole report; ``msnb doctor`` and ``%mfmon_doctor`` print it.

    Args:
        probe: also start MindSpore in a child process on each device that looks usable.

    Returns:
        The :class:`Report`.
    """
    versions = installed_versions()
    findings = check_versions(versions, mindformers_version_map())
    kernels = []
    try:
        infos = list_kernels()
    except Exception as exc:  # a broken kernelspec folder must not hide the rest of the report
        infos = []
        findings.append(Finding("kernelspecs-unreadable", WARNING, f"could not list kernelspecs: {exc}"))
    for info in infos:
        kernels.append(info.as_dict())
        if info.shadowed_by:  # never started: whether its interpreter exists does not matter until the other one goes
            findings.append(
                Finding(
                    "kernel-shadowed",
                    INFO,
                    f"kernel {info.name!r} {info.where} ({info.resource_dir}) is never started: the one at {info.shadowed_by} "
                    "comes first in Jupyter's search order (`msnb list-kernels` shows both)",
                    f"{removal_command(info)}, or every one of that name: msnb uninstall-kernel --name {info.name} --all",
                    key=info.name,
                )
            )
        elif not info.interpreter_exists:
            findings.append(
                Finding(
                    "kernel-interpreter-missing",
                    WARNING,
                    f"kernel {info.name!r} ({info.display_name}) starts {info.interpreter}, which no longer exists",
                    f"msnb install-kernel --name {info.name} --force" if info.made_by_msnb else f"jupyter kernelspec remove {info.name}",
                    key=info.name,
                )
            )
        elif info.made_by_msnb:
            findings.extend(other_environment_findings(info))
    if not any(k["made_by_msnb"] and k["interpreter_exists"] and not k["shadowed_by"] for k in kernels):
        findings.append(Finding("no-msnb-kernel", INFO, "no MindSpore Kernel is installed for Jupyter / VS Code", "msnb install-kernel"))
    return Report(
        python=platform.python_version(),
        executable=sys.executable,
        platform=f"{platform.system()} {platform.machine()}",
        packages=versions,
        findings=findings,
        devices=detect_devices(versions, probe=probe),
        kernels=kernels,
    )
