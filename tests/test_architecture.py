"""docs/ARCHITECTURE.md's list of layers says what the import-linter contracts in pyproject.toml check (`lint-imports`)."""

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def contract_layers() -> list:
    """The layers contract's layers, lowest first: each a dict module name -> optional (written ``(name)``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["id"] == "layers"]
    out = []
    for layer in reversed(layers["layers"]):
        names = [name.strip() for name in re.split(r"[|:]", layer)]
        out.append({name.strip("()"): name.startswith("(") for name in names})
    return out


def documented_layers() -> list:
    """The numbered list under "The layers, as checked", lowest first: the module names of each item."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("### The layers, as checked", 1)[1].split("\n\n")[2]
    out = []
    for number, line in enumerate(section.splitlines(), start=1):
        m = re.match(r"(\d+)\. (`\w+`(?:, `\w+`)*)", line)
        assert m and int(m.group(1)) == number, line
        out.append(set(re.findall(r"`(\w+)`", m.group(2))))
    return out


def test_the_documented_layers_are_the_checked_ones():
    checked = contract_layers()
    assert documented_layers() == [set(layer) for layer in checked]
    package = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "msnb").iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    named = {name: optional for layer in checked for name, optional in layer.items()}
    assert package <= set(named)  # every module of msnb has its layer
    assert {name for name, optional in named.items() if not optional} <= package  # and a required layer exists


def test_the_cli_and_the_magics_start_without_the_readers():
    """Every ``msnb`` command builds the whole parser, and every kernel loads the magics: neither may load numpy,
    the readers or matplotlib before a command needs them (the export kinds' names live in msnb.options)."""
    import subprocess
    import sys

    code = (
        "import sys, msnb.cli, msnb.magics; msnb.cli.build_parser();"
        "print(sorted(m for m in ('numpy', 'msnb.events', 'matplotlib', 'mindspore', 'pandas', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_the_kind_names_are_the_tables():
    from msnb.events.tables import TABLE_KINDS, kind_name
    from msnb.options import KIND_CHOICES, KIND_NAMES

    assert KIND_NAMES == tuple(TABLE_KINDS)
    assert {kind_name(k) for k in KIND_CHOICES} == set(TABLE_KINDS)


def _function_imports(path: Path):
    """Each import statement inside a function of *path*, with whether a comment says why it is there (on its
    lines, or above its block of imports)."""
    import ast

    lines = path.read_text().splitlines()

    def said(node) -> bool:
        if any("#" in lines[i] for i in range(node.lineno - 1, node.end_lineno)):
            return True
        i = node.lineno - 2
        while i >= 0 and (lines[i].strip().startswith(("import ", "from ")) or not lines[i].strip()):
            i -= 1
        return i >= 0 and lines[i].strip().startswith("#")

    def walk(node, inside: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside:
                yield child.lineno, said(child)
            else:
                yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    yield from walk(ast.parse("\n".join(lines)), False)


def test_every_import_inside_a_function_says_what_it_defers():
    """Imports belong at a module's top; one inside a function defers something heavy or optional (matplotlib,
    MindSpore, pyarrow, IPython...) or runs only in a child process, and a comment says which."""
    silent = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "msnb").rglob("*.py")) for line, said in _function_imports(p) if not said]
    assert not silent, "imports inside functions with no comment saying what they defer: " + ", ".join(silent)


# A function of this many lines or more is split into steps a reader can name, each with its docstring.  Why: a
# function longer than a screen and a half is read by scrolling, and what it does is no longer one sentence; the
# limit catches that, it is not a target.  Split where the code has a seam (a step with its own name, inputs and
# result), never just to land under the number; a function near the limit with no such seam is left whole.
LONG_FUNCTION_LIMIT = 100


def long_functions() -> dict:
    """``{(file, function): lines}`` of every function in msnb of LONG_FUNCTION_LIMIT lines or more (ast: def to last line)."""
    out = {}
    for path in sorted((ROOT / "msnb").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines >= LONG_FUNCTION_LIMIT:
                    out[(path.relative_to(ROOT).as_posix(), node.name)] = lines
    return out


def test_every_function_is_shorter_than_a_hundred_lines():
    found = long_functions()
    assert not found, f"functions of {LONG_FUNCTION_LIMIT} lines or more, to split into named steps: {found}"


# Private names a module still imports from a neighbour: none (the smoke's and the pre-flight's went public where they
# are defined).  A name may be added here only with the issue that takes it out again; this list may only shrink.
PRIVATE_IMPORTS_LEFT: dict = {}


def private_imports() -> dict:
    """``{file: {name}}`` of every ``from msnb... import _name`` (a module's private name taken by another module)."""
    out = {}
    for path in sorted((ROOT / "msnb").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "msnb"):
                for alias in node.names:
                    if alias.name.startswith("_") and not (alias.name.startswith("__") and alias.name.endswith("__")):
                        out.setdefault(path.relative_to(ROOT).as_posix(), set()).add(alias.name)
    return out


def test_no_module_imports_another_modules_private_name():
    """A name another module needs is public where it is defined (no ``_``): a leading underscore says "only this
    module uses it", which a reader (and a refactor) may trust."""
    found = private_imports()
    new = {path: names - PRIVATE_IMPORTS_LEFT.get(path, set()) for path, names in found.items()}
    assert not {path: names for path, names in new.items() if names}, "import these names publicly, or make them public where they are defined"
    gone = {path: names - found.get(path, set()) for path, names in PRIVATE_IMPORTS_LEFT.items()}
    assert not {path: names for path, names in gone.items() if names}, "fixed: take these out of PRIVATE_IMPORTS_LEFT"


def test_every_import_of_an_msnb_module_finds_its_file():
    """A deferred import (inside a function) fails only when its function runs: each ``from msnb.x import`` and
    ``from .x import``, at any depth, names a module or package that exists (a moved module leaves none behind)."""
    missing = []
    for path in sorted((ROOT / "msnb").rglob("*.py")):
        package = path.relative_to(ROOT).with_suffix("").parts[:-1] if path.name != "__init__.py" else path.relative_to(ROOT).parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.level or (node.module or "").split(".")[0] == "msnb"):
                continue
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            parts = base + (node.module.split(".") if node.module else [])
            target = ROOT.joinpath(*parts)
            if not (target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {'.' * node.level}{node.module or ''}")
    assert not missing, "imports of msnb modules that do not exist: " + ", ".join(missing)
