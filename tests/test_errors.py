"""Every exception msnb raises on purpose is defined in msnb/errors.py, under MsnbError (one place to read them all)."""

import ast
import inspect
from pathlib import Path

import msnb
from msnb import errors

PACKAGE = Path(msnb.__file__).parent


def test_every_msnb_error_is_defined_in_errors_py():
    tree = {name for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.MsnbError)}
    assert {"MsnbError", "UsageError", "ConfigError", "MissingDependency", "AlreadyTensorBoard", "OutputError"} <= tree
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases}
                if bases & tree:
                    elsewhere.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert elsewhere == []


def test_moved_errors_are_still_importable_where_they_are_used():
    from msnb.bridges.parquet import MissingDependency
    from msnb.bridges.tensorboard import AlreadyTensorBoard
    from msnb.events.export import OutputError

    assert (MissingDependency, AlreadyTensorBoard, OutputError) == (errors.MissingDependency, errors.AlreadyTensorBoard, errors.OutputError)
