"""What the installed MindSpore and mindformers require of protobuf and NumPy, read from their own metadata.

MindSpore 2.9 requires ``numpy<2.0.0,>=1.20.0`` and ``protobuf>=3.13.0``; 2.10 requires ``numpy>=1.25.0`` and
``protobuf>=7.34.1`` (with 3.20.3 ``import mindspore`` fails).  Rules that assumed one release's needs (``msnb
doctor``'s advice, the config lint, the SummaryCollector dataset-graph switch) read these facts instead, so that no
advice breaks the MindSpore that is installed.

Whether protobuf 4 and later break SummaryCollector's dataset graph is a property of MindSpore's *generated* modules:
the old-style ones (protobuf 3's code generator, MindSpore 2.9) fail with ``RepeatedCompositeFieldContainer object
does not support item assignment``; the new-style ones (``runtime_version``, MindSpore 2.10) work.  That is read from
the installed ``mindspore/train/summary_pb2.py``, never from a version number.

A bottom-layer module: metadata and files only, nothing imported.
"""

from __future__ import annotations

import importlib.metadata as md
from dataclasses import dataclass, field

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .environment import package_dir

# the packages whose requirements on these dependencies msnb's rules follow, and the dependencies
REQUIRERS = ("mindspore", "mindformers")
DEPENDENCIES = ("protobuf", "numpy")
SUMMARY_MODULE = "train/summary_pb2.py"
_MAX_MODULE = 1 << 20  # a generated module is tens of KB; only its first lines are needed


def _norm(name: str) -> str:
    return canonicalize_name(name)


def parse_requires(lines, environment: dict | None = None) -> dict:
    """``{dependency: specifier}`` from Requires-Dist lines that apply here, as pip reads them (``packaging``).

    A line under an extra (``; extra == "dev"``) or whose marker is false for *environment* (``; python_version <
    "3.8"``, ``; sys_platform == "win32"``) is left out: it is not a requirement of this installation.  Markers are
    evaluated by ``packaging`` (``Marker.evaluate``), this interpreter's values under *environment*'s; a marker it
    cannot evaluate (``python_version ~= "3"``) leaves its line out, as an unreadable line.  Two lines that both
    apply to one dependency (``numpy>=1.20`` and ``numpy<2; python_version < "3.13"``) both hold: their specifiers
    are joined, as pip joins them.

    Args:
        lines: Requires-Dist values, e.g. ``["numpy<2.0.0,>=1.20.0", "protobuf>=3.13.0"]``.
        environment: marker variables that override this interpreter's (``{"python_version": "3.9"}``).

    Returns:
        Normalised names to their specifier text (``""`` when unversioned); unreadable lines are skipped.
    """
    env = {**(environment or {}), "extra": ""}
    found: dict = {}
    for line in lines or ():
        try:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidRequirement, UndefinedComparison, UndefinedEnvironmentName, InvalidMarker, TypeError):
            continue
        name = _norm(req.name)
        found[name] = found[name] & req.specifier if name in found else req.specifier
    return {name: str(spec) for name, spec in found.items()}


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether an installed *version* meets a PEP 440 specifier such as ``<2.0.0,>=1.20.0``, as pip decides it.

    ``packaging`` answers, with pre-releases allowed as pip allows them for what is installed: ``2.10.0rc1`` meets
    ``>=2.9`` and not ``>=2.10.0``; ``1.0.post1`` does not meet ``>1.0``.

    Args:
        version: an installed version, e.g. ``"1.26.4"``.
        specifier: comma-separated clauses; ``""`` means any version.

    Returns:
        True or False; None when the version or a clause cannot be read (then no rule fires on it).
    """
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion, TypeError):
        return None


def _requires_of(dist: str) -> dict | None:
    try:
        return parse_requires(md.requires(dist) or [])
    except md.PackageNotFoundError:
        return None


def summary_modules_pre4(mindspore_dir=None) -> bool | None:
    """Whether MindSpore's generated summary module is protobuf 3's old style (which protobuf >= 4 breaks).

    Args:
        mindspore_dir: the ``mindspore`` package folder (default: the installed one, found without importing it).

    Returns:
        True (old style), False (new style: protobuf 4+ works), None (no MindSpore or no such module here).
    """
    pkg = mindspore_dir if mindspore_dir is not None else package_dir("mindspore")
    if pkg is None:
        return None
    try:
        with open(f"{pkg}/{SUMMARY_MODULE}", "rb") as f:
            head = f.read(_MAX_MODULE).decode("utf-8", errors="replace")
    except OSError:
        return None
    if "_builder" in head or "runtime_version" in head:
        return False
    if "_reflection" in head or "_descriptor.FileDescriptor(" in head:
        return True
    return None


@dataclass(frozen=True)
class StackFacts:
    """What the installed MindSpore and mindformers declare and ship: the input of the version rules."""

    requires: dict = field(default_factory=dict)  # {"mindspore": {"protobuf": ">=7.34.1", "numpy": ">=1.25.0"}, "mindformers": {...}}
    summary_pre4: bool | None = None  # MindSpore's generated summary module is protobuf 3's style (None: not known)

    def requirement(self, dist: str, dep: str) -> str | None:
        """*dist*'s specifier for *dep*, or None when it declares none (or is not installed)."""
        return (self.requires.get(dist) or {}).get(dep)

    def combined(self, dep: str) -> str:
        """Every installed requirer's specifier for *dep*, joined: a fix that meets this breaks none of them."""
        parts = [self.requirement(d, dep) for d in REQUIRERS]
        return ",".join(p for p in parts if p)


def installed_stack_facts() -> StackFacts:
    """The facts for this environment, from installed metadata and files."""
    requires = {}
    for dist in REQUIRERS:
        found = _requires_of(dist)
        if found is not None:
            requires[dist] = {dep: found[dep] for dep in DEPENDENCIES if dep in found}
    return StackFacts(requires, summary_modules_pre4())


def dataset_graph_breaks(protobuf_major: int | None, facts: StackFacts | None = None) -> bool:
    """Whether SummaryCollector would crash collecting the dataset graph with this protobuf and this MindSpore.

    Args:
        protobuf_major: the installed protobuf's major version (None: not installed).
        facts: the stack's facts (default: read from this environment).

    Returns:
        True with protobuf >= 4 and MindSpore's old-style generated modules (or modules that cannot be read: the
        safe side, the switch turns off a graph nobody reads).
    """
    if protobuf_major is None or protobuf_major < 4:
        return False
    pre4 = (facts or installed_stack_facts()).summary_pre4
    return pre4 is not False


__all__ = ["REQUIRERS", "DEPENDENCIES", "StackFacts", "parse_requires", "satisfies", "summary_modules_pre4", "installed_stack_facts", "dataset_graph_breaks"]
