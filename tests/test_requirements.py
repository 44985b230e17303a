"""What the installed MindSpore requires, read from its metadata, and the rules that follow it (doctor, lint, the switch).

msnb asks ``packaging`` (pip's own parser) every version question; the tests hold msnb's entry points (``satisfies``,
``version_tuple``, ``parse_requires``) to ``packaging``'s answers on adversarial versions and specifiers, so that no
hand-written checker creeps back; the rules are checked with the Requires-Dist lines MindSpore 2.9 and 2.10 ship,
and against whichever of them is installed here.
"""

import importlib.metadata as md

import packaging.requirements as packaging_requirements
import packaging.specifiers as packaging_specifiers
import packaging.utils as packaging_utils
import packaging.version as packaging_version
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msnb import doctor
from msnb.environment import version_tuple
from msnb.requirements import StackFacts, dataset_graph_breaks, installed_stack_facts, parse_requires, satisfies, summary_modules_pre4

# the Requires-Dist lines of each release, as their wheels ship them (protobuf and NumPy; the others do not matter here)
MINDSPORE_2_9 = ["numpy<2.0.0,>=1.20.0", "protobuf>=3.13.0", "asttokens>=2.0.4", "scipy>=1.5.4"]
MINDSPORE_2_10 = ["numpy>=1.25.0", "protobuf>=7.34.1", "asttokens>=2.0.4", "scipy>=1.5.4"]
MINDFORMERS_2_0 = ["setuptools>=83.0.0", "pyarrow>=23.0.1", "numpy<2.0.0", "mindspore~=2.10.0", "hyper-parallel~=1.0.0"]


def facts(ms_lines, mf_lines=(), pre4=None):
    pick = ("protobuf", "numpy")
    requires = {"mindspore": {k: v for k, v in parse_requires(ms_lines).items() if k in pick}}
    if mf_lines:
        requires["mindformers"] = {k: v for k, v in parse_requires(mf_lines).items() if k in pick}
    return StackFacts(requires, pre4)


STACK_2_9 = facts(MINDSPORE_2_9, pre4=True)
STACK_2_10 = facts(MINDSPORE_2_10, MINDFORMERS_2_0, pre4=False)
BASE = {"msnb": "0.1.0", "ipykernel": "7.4.0", "mindinsight": None, "mindformers": None}


def rules(found, severity=None):
    return {f.rule for f in found if severity is None or f.severity == severity}


def test_requires_dist_lines_are_read_as_pip_reads_them():
    assert parse_requires(MINDSPORE_2_9)["numpy"] == "<2.0.0,>=1.20.0"
    assert parse_requires(["Foo_Bar (>=1.0)", "extra-thing>=2; extra == 'dev'", "numpy ; python_version>'3'"]) == {"foo-bar": ">=1.0", "numpy": ""}


# Adversarial versions: pre-, post- and dev-releases, epochs, local labels, uneven lengths, zero padding.
RELEASES = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))
VERSIONS = st.tuples(
    st.sampled_from(["", "", "", "1!"]),
    RELEASES,
    st.sampled_from(["", "", "", "a1", "b2", "rc1", "rc0", ".post1", ".post0", ".dev0", "rc1.post2.dev3", "-1"]),
    st.sampled_from(["", "", "", "", "+local.7"]),
).map("".join)
OPERATORS = st.sampled_from(["<", "<=", ">", ">=", "==", "!=", "~=", "==="])
PUBLIC = st.tuples(st.sampled_from(["", "", "1!"]), RELEASES, st.sampled_from(["", "", "rc1", ".post1", ".dev0"])).map("".join)
CLAUSES = st.one_of(
    st.tuples(OPERATORS, PUBLIC).map("".join),
    st.tuples(st.sampled_from(["==", "!="]), RELEASES).map(lambda t: f"{t[0]}{t[1]}.*"),
    st.sampled_from([">=banana", "~=1", "<1.0.*", "==1.0+local"]),
)


def packaging_says(version: str, spec: str):
    """pip's answer for an installed version (pre-releases allowed), None when either side cannot be read."""
    try:
        return packaging_specifiers.SpecifierSet(spec).contains(packaging_version.Version(version), prereleases=True)
    except (packaging_specifiers.InvalidSpecifier, packaging_version.InvalidVersion):
        return None


@settings(max_examples=500, deadline=None)
@given(VERSIONS, st.lists(CLAUSES, min_size=0, max_size=3))
def test_satisfies_agrees_with_packaging(version, clauses):
    spec = ",".join(clauses)
    assert satisfies(version, spec) == packaging_says(version, spec), (version, spec)


@settings(max_examples=500, deadline=None)
@given(VERSIONS)
def test_release_numbers_are_packagings(version):
    assert version_tuple(version) == packaging_version.Version(version).release


def test_the_pairs_the_hand_written_checker_got_wrong():
    assert satisfies("2.10.0rc1", ">=2.10.0") is False  # a release candidate comes before its release
    assert satisfies("2.10.0rc1", ">=2.9") is True  # and after the release before it (pip allows installed pre-releases)
    assert satisfies("1.0.post1", ">1.0") is False  # ">V" excludes V's post-releases (PEP 440)
    assert satisfies("1.0.post1", ">=1.0") is True
    assert satisfies("1!1.0", ">=2.0") is True  # an epoch outranks every release
    assert version_tuple("1.0.post1") == (1, 0) and version_tuple("2.9.0rc1") == (2, 9, 0) and version_tuple("?") == ()


def test_wildcards_and_unreadable_clauses():
    assert satisfies("2.10.3", "==2.10.*") and not satisfies("2.11.0", "==2.10.*") and not satisfies("2.10.0", "!=2.10.*")
    assert satisfies("1.0", ">=banana") is None and satisfies("banana", ">=1.0") is None


def test_a_requirement_whose_marker_is_false_here_is_not_a_requirement():
    lines = [
        'numpy<2; python_version < "3.0"',
        'numpy>=1.20; python_version >= "3.0"',
        'protobuf>=3.13; sys_platform == "no-such-platform"',
        'pywin32; os_name == "nt" and extra == "win"',
    ]
    assert parse_requires(lines) == {"numpy": ">=1.20"}
    assert parse_requires(lines, {"python_version": "2.7"}) == {"numpy": "<2"}
    assert parse_requires(lines, {"sys_platform": "no-such-platform"}) == {"numpy": ">=1.20", "protobuf": ">=3.13"}


@given(
    st.sampled_from(["numpy", "Foo_Bar", "protobuf", "a.b-c"]),
    st.lists(CLAUSES, max_size=3),
    st.sampled_from(["", "; python_version >= '3'", "; extra == 'dev'"]),
)
def test_parse_requires_reads_as_packaging_does(name, clauses, marker):
    line = f"{name}{','.join(clauses)}{marker}"
    try:
        req = packaging_requirements.Requirement(line)
    except packaging_requirements.InvalidRequirement:
        assert parse_requires([line]) == {}
        return
    expected = {} if "extra" in marker else {packaging_utils.canonicalize_name(req.name): str(req.specifier)}
    assert parse_requires([line]) == expected


# ---- doctor: every fix meets what the installed MindSpore requires -------------------------------------------------


def test_mindspore_2_10_with_protobuf_3_is_blocking_and_never_told_to_keep_3_20_3():
    found = doctor.check_versions({**BASE, "mindspore": "2.10.0", "protobuf": "3.20.3", "numpy": "1.26.4"}, facts=STACK_2_10)
    f = next(f for f in found if f.rule == "protobuf-mindspore-requirement")
    assert f.severity == doctor.ERROR and "import mindspore` fails" in f.message
    assert f.fix == 'pip install "protobuf>=7.34.1"'
    assert not any("3.20.3" in x.fix for x in found)


def test_mindspore_2_10_with_protobuf_7_and_its_dataset_graph_is_healthy():
    found = doctor.check_versions({**BASE, "mindspore": "2.10.0", "mindformers": "2.0.0", "protobuf": "7.36.2", "numpy": "1.26.4"}, facts=STACK_2_10)
    assert not {r for r in rules(found) if "protobuf" in r or "numpy" in r}


def test_mindspore_2_9_with_protobuf_4_keeps_its_dataset_graph_advice():
    found = doctor.check_versions({**BASE, "mindspore": "2.9.0", "protobuf": "4.25.9", "numpy": "1.26.4"}, facts=STACK_2_9)
    f = next(f for f in found if f.rule == "protobuf-summary-collector")
    assert f.severity == doctor.ERROR and f.fix == "pip install protobuf==3.20.3"


def test_numpy_2_is_an_error_for_mindspore_2_9_and_for_2_10_only_mindformers_objects():
    old = doctor.check_versions({**BASE, "mindspore": "2.9.0", "protobuf": "3.20.3", "numpy": "2.1.3"}, facts=STACK_2_9)
    assert "numpy-mindspore-requirement" in rules(old, doctor.ERROR)
    assert next(f for f in old if f.rule == "numpy-mindspore-requirement").fix == 'pip install "numpy<2.0.0,>=1.20.0"'
    new = doctor.check_versions({**BASE, "mindspore": "2.10.0", "mindformers": "2.0.0", "protobuf": "7.36.2", "numpy": "2.1.3"}, facts=STACK_2_10)
    assert "numpy-mindspore-requirement" not in rules(new)  # MindSpore 2.10 trains with NumPy 2
    f = next(f for f in new if f.rule == "numpy-mindformers-requirement")
    assert f.severity == doctor.WARNING and f.fix == 'pip install "numpy>=1.25.0,<2.0.0"'


@given(
    ms_pb=st.sampled_from([">=3.13.0", ">=4.21", ">=7.34.1", "<4", ""]),
    pb=st.sampled_from(["3.20.3", "4.25.9", "5.29.0", "7.36.2"]),
    pre4=st.sampled_from([True, False, None]),
)
def test_no_fix_ever_breaks_the_installed_mindspore(ms_pb, pb, pre4):
    stack = StackFacts({"mindspore": {"protobuf": ms_pb} if ms_pb else {}}, pre4)
    for f in doctor.check_versions({**BASE, "mindspore": "2.x", "protobuf": pb, "numpy": "1.26.4"}, facts=stack):
        if f.fix.startswith("pip install protobuf=="):
            assert satisfies(f.fix.split("==")[1], ms_pb) is not False, f
        if f.fix.startswith('pip install "protobuf'):
            assert f.fix == f'pip install "protobuf{ms_pb}"'


# ---- this environment ------------------------------------------------------------------------------------------------


def test_this_environments_facts_come_from_the_installed_mindspore():
    pytest.importorskip("mindspore")
    here = installed_stack_facts()
    ms = version_tuple(md.version("mindspore"))[:2]
    expected = {(2, 9): MINDSPORE_2_9, (2, 10): MINDSPORE_2_10}.get(ms)
    if expected is None:
        pytest.skip(f"MindSpore {md.version('mindspore')} is not one of the tested releases")
    assert here.requires["mindspore"] == facts(expected).requires["mindspore"]
    # MindSpore 2.9's generated modules are protobuf 3's (its dataset graph breaks on protobuf 4+); 2.10's are new-style
    assert summary_modules_pre4() is (ms == (2, 9)) and here.summary_pre4 is (ms == (2, 9))
    assert dataset_graph_breaks(7) is (ms == (2, 9)) and dataset_graph_breaks(3) is False


def test_doctor_finds_nothing_wrong_with_either_tested_environment():
    pytest.importorskip("mindspore")
    found = doctor.check_versions(doctor.installed_versions(), doctor.mindformers_version_map())
    assert not {f.rule for f in found if "protobuf" in f.rule or "numpy" in f.rule}, [f.as_dict() for f in found]
    assert not [f for f in found if f.severity == doctor.ERROR], [f.as_dict() for f in found]


def test_the_dataset_graph_switch_follows_the_installed_mindspore():
    """msnb's callbacks keep the dataset graph where the installed MindSpore writes it (2.10 + protobuf 7), turn it off
    where it would crash (2.9 + protobuf 4+), and lint says so only in the second case."""
    pytest.importorskip("mindspore")
    from msnb.config import parse_monitor_config
    from msnb.config.lint import lint
    from msnb.environment import installed_major
    from msnb.monitor import safe_collect_specified_data

    data = safe_collect_specified_data(parse_monitor_config({"summary_dir": "./s"}))
    breaks = dataset_graph_breaks(installed_major("protobuf"))
    assert data.get("collect_dataset_graph", True) is (not breaks)
    linted = lint({"monitor_config": {"summary_dir": "./s"}}, protobuf_major=installed_major("protobuf"))
    assert ("dataset-graph-protobuf" in {f.rule for f in linted}) is breaks


def test_a_real_summary_collector_writes_the_dataset_graph_exactly_where_it_is_kept(tmp_path):
    """The built-in smoke's SummaryCollector, as msnb configures it: with MindSpore 2.10 and protobuf 7 the dataset graph
    is written and read back; with 2.9 and protobuf 3.20.3 it is not crashed on (and with protobuf 4+ switched off)."""
    pytest.importorskip("mindspore")
    import msnb
    from msnb.environment import installed_major
    from msnb.smoke import run_smoke

    result = run_smoke(live=False, steps=20, summary_dir=tmp_path / "summary")
    assert result.passed, result.format_text()
    read = msnb.read(tmp_path / "summary")
    kinds = set(read.lineage.to_pandas()["kind"])
    assert not read.problems and "train" in kinds
    assert ("dataset_graph" in kinds) is (not dataset_graph_breaks(installed_major("protobuf")))


MARKERS = [
    "",
    "; python_version >= '3'",
    "; python_version < '3'",
    "; extra == 'dev'",
    "; sys_platform == 'linux'",
    "; sys_platform == 'win32'",
    "; platform_machine == 'aarch64' or platform_machine == 'x86_64'",
    "; python_version ~= '3'",  # packaging cannot evaluate it: the line is left out
    "; os_name == 'posix' and extra == 'test'",
    "; implementation_name == 'cpython'",
]


@given(st.lists(st.tuples(st.sampled_from(["numpy", "NumPy", "protobuf"]), st.lists(CLAUSES, max_size=2), st.sampled_from(MARKERS)), max_size=5))
def test_lines_that_apply_are_joined_and_markers_evaluated_as_packaging_does(lines):
    texts = [f"{name}{','.join(clauses)}{marker}" for name, clauses, marker in lines]
    expected: dict = {}
    for text in texts:
        try:
            req = packaging_requirements.Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
        except (packaging_requirements.InvalidRequirement, ValueError):
            continue
        name = packaging_utils.canonicalize_name(req.name)
        expected[name] = expected[name] & req.specifier if name in expected else req.specifier
    got = parse_requires(texts)
    assert {k: packaging_specifiers.SpecifierSet(v) for k, v in got.items()} == expected


def test_two_lines_for_one_dependency_both_hold():
    lines = ["numpy>=1.20", 'numpy<2; python_version >= "3"', 'numpy<1.0; python_version < "3"', 'protobuf; python_version ~= "3"']
    assert packaging_specifiers.SpecifierSet(parse_requires(lines)["numpy"]) == packaging_specifiers.SpecifierSet(">=1.20,<2")
    assert "protobuf" not in parse_requires(lines)  # a marker packaging cannot evaluate: left out, never a crash
