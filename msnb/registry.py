"""Guarded model registration: re-running a notebook cell never raises a model_type collision.

``register_model(config_cls, model_cls)`` registers into every registry the
classes belong to: Hugging Face transformers' ``AutoConfig`` (and ``AutoModel``
where PyTorch is installed) for transformers classes; mindformers' own
``AutoConfig``/``AutoModel`` copies and ``MindFormerRegister`` for mindformers
classes.  The rules:

- the same definition again (a re-run cell makes new class objects with the
  same module and qualified name, or the same source) quietly replaces the
  earlier one everywhere, stale entries included;
- a name an installed library ships is refused with the library's name, the
  reason and a free name to use (``on_conflict="rename"`` takes it);
- two different definitions under one custom name are refused, naming both
  (file and line);
- a config whose ``model_type`` is not the name passed is refused.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata as md
import importlib.util
import inspect
import os
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .config.loader import check_shape, read_bytes
from .errors import MsnbError, RegistrationError, UsageError
from .events.discovery import walk


@dataclass
class Registration:
    """What one registration did."""

    model_type: str
    config_cls: type
    model_cls: type | None
    registries: list = field(default_factory=list)  # where it went
    skipped: list = field(default_factory=list)  # (registry, why)
    replaced: bool = False  # an earlier run of the same definition was replaced
    renamed_from: str | None = None
    where: str = ""


_REGISTERED: dict = {}  # model_type -> Registration


# ------------------------------------------------------------------ names the libraries ship


def _static_mapping(package: str, relative: str, name: str = "CONFIG_MAPPING_NAMES") -> dict:
    """A literal mapping from a library's source file, read with ast: no import, no side effects
    (importing mindformers writes ./output/log wherever it happens)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(node.value, ast.Call) and node.value.args:
            try:
                return dict(ast.literal_eval(node.value.args[0]))
            except (ValueError, TypeError):
                return {}
    return {}


@functools.lru_cache(maxsize=1)
def _shipped_cached() -> tuple:
    return tuple(_shipped_uncached().items())


def shipped_model_types() -> dict:
    """model_type -> "library version" for every name transformers and mindformers ship (read once per process)."""
    return dict(_shipped_cached())


def _shipped_uncached() -> dict:
    out = {}
    for package, relative in (("mindformers", "models/auto/configuration_auto.py"), ("transformers", "models/auto/configuration_auto.py")):
        try:
            version = md.version(package)
        except md.PackageNotFoundError:
            continue
        for name in _static_mapping(package, relative):
            out.setdefault(name, f"{package} {version}")
    return out


# ------------------------------------------------------------------ definitions


def _where(cls: type) -> str:
    """``file:line`` of a class; for classes from notebook cells (no file), where their first method is."""
    try:
        file = inspect.getsourcefile(cls)
        _, line = inspect.getsourcelines(cls)
        if file:
            return f"{file}:{line}"
    except (TypeError, OSError):
        pass
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is not None:
            return f"{code.co_filename}:{code.co_firstlineno} (in class {cls.__qualname__})"
    module = sys.modules.get(cls.__module__)
    return f"{getattr(module, '__file__', None) or cls.__module__} (class {cls.__qualname__})"


def _source_digest(cls: type) -> str | None:
    try:
        return hashlib.sha256(textwrap.dedent(inspect.getsource(cls)).encode()).hexdigest()
    except (TypeError, OSError):
        pass
    # classes from notebook cells: their methods' code is still there
    parts = [cls.__qualname__]
    for name, value in sorted(vars(cls).items()):
        code = getattr(value, "__code__", None)
        if code is not None:
            parts.append(f"{name}:{code.co_code.hex()}:{code.co_consts!r}")
        elif not name.startswith("__"):
            parts.append(f"{name}={value!r}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def same_definition(a: type | None, b: type | None) -> bool:
    """Two class objects from one definition: same module and qualified name, or the same source."""
    if a is None or b is None:
        return a is b
    if a is b:
        return True
    if (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__):
        return True
    return _source_digest(a) == _source_digest(b)


def _candidates(name: str):
    """Names close to *name*, best first: the team prefix (``MSNB_MODEL_PREFIX``, else "custom"), then version suffixes."""
    prefix = os.environ.get("MSNB_MODEL_PREFIX", "custom").strip("_-") or "custom"
    yield f"{prefix}_{name}"
    version = 2
    while True:
        yield f"{prefix}_{name}_v{version}"
        version += 1


def _rename_for(name: str, shipped: dict, config_cls: type, model_cls: type | None) -> str:
    """The name a rename gives *config_cls*: the first candidate that is free or already holds this same
    definition, so re-running a cell registers under the name the first run chose (not ``_v2``, ``_v3``...)."""
    for candidate in _candidates(name):
        if candidate in shipped:
            continue
        previous = _REGISTERED.get(candidate)
        if previous is None or _same_registration(previous, config_cls, model_cls):
            return candidate
    raise AssertionError("unreachable: the candidates never end")  # pragma: no cover


def _same_registration(previous: Registration, config_cls: type, model_cls: type | None) -> bool:
    return same_definition(previous.config_cls, config_cls) and (
        model_cls is None or previous.model_cls is None or same_definition(previous.model_cls, model_cls)
    )


# ------------------------------------------------------------------ registries


def _is_subclass_of(cls, module: str, name: str) -> bool:
    base = getattr(sys.modules.get(module), name, None)
    return isinstance(base, type) and isinstance(cls, type) and issubclass(cls, base)


def _drop_stale(mapping, cls) -> None:
    """Remove entries keyed by earlier class objects of *cls*'s definition (auto model mappings key by config class)."""
    extra = getattr(mapping, "_extra_content", None)
    if isinstance(extra, dict):
        for key in [k for k in extra if isinstance(k, type) and k is not cls and same_definition(k, cls)]:
            del extra[key]


def _register_transformers(reg: Registration) -> None:
    if not _is_subclass_of(reg.config_cls, "transformers", "PretrainedConfig"):
        return
    from transformers import AutoConfig  # optional: transformers, only for a transformers config class

    AutoConfig.register(reg.model_type, reg.config_cls, exist_ok=True)
    reg.registries.append("transformers AutoConfig")
    if reg.model_cls is None:
        return
    try:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING  # optional: transformers
    except ImportError as exc:  # pragma: no cover - present in every transformers this msnb supports
        reg.skipped.append(("transformers AutoModel", str(exc)))
        return
    if importlib.util.find_spec("torch") is None:
        reg.skipped.append(("transformers AutoModel", "needs PyTorch, which is not installed (MindSpore models use mindformers' auto classes)"))
        return
    from transformers import AutoModel  # optional: transformers (and PyTorch)

    _drop_stale(MODEL_MAPPING, reg.config_cls)
    AutoModel.register(reg.config_cls, reg.model_cls, exist_ok=True)
    reg.registries.append("transformers AutoModel")


def _register_mindformers(reg: Registration) -> None:
    if not _is_subclass_of(reg.config_cls, "mindformers.models.configuration_utils", "PretrainedConfig"):
        return
    # optional: mindformers, only for a mindformers config class
    from mindformers.models.auto import AutoConfig, AutoModel
    from mindformers.models.auto.modeling_auto import MODEL_MAPPING
    from mindformers.tools.register import MindFormerModuleType, MindFormerRegister

    AutoConfig.register(reg.model_type, reg.config_cls, exist_ok=True)
    reg.registries.append("mindformers AutoConfig")
    _register_mf_class(reg, reg.config_cls, MindFormerRegister, MindFormerModuleType.CONFIG)
    if reg.model_cls is not None:
        _drop_stale(MODEL_MAPPING, reg.config_cls)
        AutoModel.register(reg.config_cls, reg.model_cls, exist_ok=True)
        reg.registries.append("mindformers AutoModel")
        _register_mf_class(reg, reg.model_cls, MindFormerRegister, MindFormerModuleType.MODELS)


def _register_mf_class(reg: Registration, cls: type, register, module_type: str) -> None:
    """MindFormerRegister keys by class name and silently overwrites: never let a user class replace a mindformers one."""
    existing = register.registry.get(module_type, {}).get(cls.__name__)
    if existing is not None and existing.__module__.startswith("mindformers.") and not same_definition(existing, cls):
        reg.skipped.append((f"MindFormerRegister {module_type}", f"mindformers ships a class named {cls.__name__} ({existing.__module__}); not replaced"))
        return
    register.register_cls(cls, module_type=module_type)
    reg.registries.append(f"MindFormerRegister {module_type}")


def _check_name(model_type: str, config_cls: type) -> None:
    declared = getattr(config_cls, "model_type", None)
    if declared not in (None, "", model_type):
        raise RegistrationError(
            f"{config_cls.__qualname__} declares model_type = {declared!r} but is being registered as {model_type!r}: "
            f"the auto classes look configs up by model_type, so the two must match; set {config_cls.__qualname__}.model_type = "
            f"{model_type!r} or register it as {declared!r}"
        )


def register_model(config_cls=None, model_cls=None, *, model_type: str | None = None, on_conflict: str = "error"):
    """Register *config_cls* (and *model_cls*) in every registry present; returns the model_type used.

    ``on_conflict``: "error" (default) refuses a name a library ships and a
    second definition under a custom name; "rename" registers under a free
    name instead (and sets ``config_cls.model_type`` to it); "replace" lets a
    new definition replace an earlier custom one.  Used without classes,
    ``@register_model(model_type=...)`` decorates a model class (its
    ``config_class`` is registered with it) or a config class.
    """
    _check_arguments(config_cls, model_cls, model_type, on_conflict, allow_none=True)
    if config_cls is None:

        def decorate(cls):
            try:
                config = getattr(cls, "config_class", None)
            except ImportError:
                config = None
            if isinstance(config, type):
                register_model(config, cls, model_type=model_type, on_conflict=on_conflict)
            else:
                register_model(cls, None, model_type=model_type, on_conflict=on_conflict)
            return cls

        return decorate
    return register(config_cls, model_cls, model_type=model_type, on_conflict=on_conflict).model_type


def _check_arguments(config_cls, model_cls, model_type, on_conflict, *, allow_none: bool = False) -> None:
    """Refuse arguments of the wrong kind with a RegistrationError that says what is expected."""
    if on_conflict not in ("error", "rename", "replace"):
        raise RegistrationError(f"on_conflict must be 'error', 'rename' or 'replace', not {on_conflict!r}")
    if model_type is not None and not (isinstance(model_type, str) and model_type.strip()):
        raise RegistrationError(f"model_type must be a non-empty string, not {model_type!r}")
    if isinstance(config_cls, str):
        raise RegistrationError(
            f"register_model expects a config class (a PretrainedConfig subclass), not the string {config_cls!r}; "
            f"to choose the name, pass model_type={config_cls!r} (as a decorator: @register_model(model_type={config_cls!r}))"
        )
    if not (isinstance(config_cls, type) or (allow_none and config_cls is None)):
        raise RegistrationError(f"register_model expects a config class (a PretrainedConfig subclass), not {config_cls!r} ({type(config_cls).__name__})")
    if model_cls is not None and not isinstance(model_cls, type):
        raise RegistrationError(
            f"register_model expects a model class (a PreTrainedModel subclass) or None as model_cls, not {model_cls!r} ({type(model_cls).__name__})"
        )


def register(config_cls: type, model_cls: type | None = None, *, model_type: str | None = None, on_conflict: str = "error") -> Registration:
    """Like :func:`register_model`, returning the full :class:`Registration`.

    Args:
        config_cls: the config class.
        model_cls: its model class, or None.
        model_type: the name to register under (default: ``config_cls.model_type``).
        on_conflict: "error", "rename" or "replace" (see :func:`register_model`).

    Returns:
        What was registered where.

    Raises:
        RegistrationError: arguments of the wrong kind, or a registration msnb refuses (the message says why).
    """
    _check_arguments(config_cls, model_cls, model_type, on_conflict)
    name = model_type or getattr(config_cls, "model_type", None)
    if name is not None and not isinstance(name, str):
        raise RegistrationError(f"{config_cls.__qualname__}.model_type must be a string, not {name!r}")
    if not name:
        raise RegistrationError(f"{config_cls.__qualname__} has no model_type; pass model_type= or set {config_cls.__qualname__}.model_type")
    _check_name(name, config_cls)
    if model_cls is not None:
        try:
            linked = getattr(model_cls, "config_class", None)
        except ImportError:  # transformers' stand-in classes when PyTorch is missing raise on any attribute
            linked = None
        if isinstance(linked, type) and not same_definition(linked, config_cls):
            raise RegistrationError(
                f"{model_cls.__qualname__}.config_class is {linked.__qualname__} ({_where(linked)}), "
                f"not {config_cls.__qualname__} ({_where(config_cls)}): the auto classes pair a model with its config_class"
            )

    renamed_from = None
    shipped = shipped_model_types()
    if name in shipped:
        alternative = _rename_for(name, shipped, config_cls, model_cls)
        if on_conflict != "rename":
            raise RegistrationError(
                f"model_type {name!r} is already used by {shipped[name]}, which ships a model of that name: its auto classes "
                f"refuse to register another config under it (and silently replacing it would break {name} for everyone in "
                f"this process). Use a name of your own, e.g. {alternative!r} (set MSNB_MODEL_PREFIX for your team's prefix), "
                f"or pass on_conflict='rename' to register as {alternative!r}"
            )
        renamed_from, name = name, alternative
        config_cls.model_type = name

    previous = _REGISTERED.get(name)
    replaced = False
    if previous is not None:
        if _same_registration(previous, config_cls, model_cls) or on_conflict == "replace":
            replaced = True
        elif on_conflict == "rename":
            renamed_from, name = name, _rename_for(name, shipped, config_cls, model_cls)
            config_cls.model_type = name
            replaced = name in _REGISTERED
        else:
            raise RegistrationError(
                f"model_type {name!r} is already registered for {previous.config_cls.__qualname__} at {previous.where}; "
                f"{config_cls.__qualname__} at {_where(config_cls)} is a different definition. Rename one of them, "
                f"or pass on_conflict='replace' to replace the first"
            )

    where = _where(config_cls)
    if " (class " in where:  # no line known for the class itself: say where it was registered from
        caller = next((f for f in inspect.stack()[1:] if f.filename != __file__), None)
        if caller is not None:
            where = f"{caller.filename}:{caller.lineno} (registered there; class {config_cls.__qualname__})"
    reg = Registration(name, config_cls, model_cls, replaced=replaced, renamed_from=renamed_from, where=where)
    _register_transformers(reg)
    _register_mindformers(reg)
    if not reg.registries:
        reg.skipped.append(("all", f"{config_cls.__qualname__} derives from neither transformers' nor mindformers' PretrainedConfig"))
    _REGISTERED[name] = reg
    return reg


def registered() -> dict:
    """model_type -> :class:`Registration` for what msnb registered in this process."""
    return dict(_REGISTERED)


# ------------------------------------------------------------------ scanning a project


@dataclass
class ModelTypeUse:
    name: str
    file: str
    line: int
    kind: str  # "class" (model_type = ... in a class), "register" (a register call), "yaml" (model_type: in YAML)
    owner: str = ""  # the class defining it


MAX_SCAN_BYTES = 4 * 1024 * 1024  # a model's source file is well under 1 MB; larger ones are generated, and skipped
_SUFFIXES = (".py", ".yaml", ".yml")


class _Unreadable(Exception):
    """A file the scan skips; the message says why (it becomes one of the result's problems)."""


def _read_source(path: Path) -> str:
    if path.stat().st_size > MAX_SCAN_BYTES:  # checked before reading: a huge file is never read
        raise _Unreadable(f"larger than {MAX_SCAN_BYTES // (1024 * 1024)} MiB; not scanned")
    try:
        return read_bytes(path).decode("utf-8", errors="replace")  # regular files only: a FIFO never blocks the scan
    except MsnbError as exc:
        raise _Unreadable(_without_location(exc)) from None


def _without_location(exc) -> str:
    """A ConfigError's message without its leading ``file:line`` (the scan names the file itself), the line kept in words."""
    where = (exc.file or "") + (f":{exc.line}" if getattr(exc, "line", None) else "")
    text = str(exc).removeprefix(f"{where}: ")
    return f"line {exc.line}: {text}" if getattr(exc, "line", None) else text


def _scan_python(path: Path) -> list:
    text = _read_source(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, ValueError):
        return []  # not Python this interpreter reads: nothing to report about model types
    except (RecursionError, MemoryError):
        raise _Unreadable("nested too deeply for Python's parser; not scanned") from None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                value = getattr(stmt, "value", None)
                if (
                    any(isinstance(t, ast.Name) and t.id == "model_type" for t in targets)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and value.value
                ):
                    found.append(ModelTypeUse(value.value, str(path), stmt.lineno, "class", node.name))
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if fname not in ("register", "register_model"):
                continue
            owner = _unparse(func.value) if isinstance(func, ast.Attribute) else ""
            if (
                fname == "register"
                and owner.endswith("AutoConfig")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append(ModelTypeUse(node.args[0].value, str(path), node.lineno, "register", _unparse(node.args[1]) if len(node.args) > 1 else ""))
            else:
                for kw in node.keywords:
                    if kw.arg == "model_type" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                        found.append(ModelTypeUse(kw.value.value, str(path), node.lineno, "register", _unparse(node.args[0]) if node.args else ""))
    return found


def _unparse(node) -> str:
    try:
        return ast.unparse(node)
    except RecursionError:
        return "<expression>"


def _scan_yaml(path: Path) -> list:
    text = _read_source(path)
    try:
        check_shape(text, path)  # alias bombs and deep nesting: refused before a node graph is built
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    except MsnbError as exc:
        raise _Unreadable(_without_location(exc)) from None
    found = []
    stack = [root] if root is not None else []
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "model_type" and isinstance(value, yaml.ScalarNode) and value.value:
                    found.append(ModelTypeUse(value.value, str(path), key.start_mark.line + 1, "yaml"))
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return found


def _project_files(root: Path, problems: list) -> list[Path]:
    """The .py/.yaml files under *root* by the bounded walk; hidden folders, site-packages and caches are not entered.
    A folder that cannot be listed is added to *problems*."""
    if root.is_file():
        return [root]
    left: list = []
    out = [
        folder / n for folder, names in walk(root, left) for n in names if n.endswith(_SUFFIXES) and not n.startswith(".")
    ]  # hidden, cache and package folders: not walked
    problems.extend({"file": p.path, "problem": p.message} for p in left)  # the bounded walk: inside root, no /proc, capped
    return out


def scan_model_types(root: str | os.PathLike) -> dict:
    """model_type definitions in a project's .py and .yaml files, with duplicates and collisions.

    A file that cannot be scanned (too large, nested too deeply, an alias bomb,
    not a regular file) is reported in ``problems``, never raised.

    Args:
        root: a project folder, or one .py/.yaml file.

    Returns:
        ``{"definitions": [...], "duplicates": {name: [uses]}, "collisions": {name: {"library", "uses"}},
        "unknown": [yaml uses of names neither defined nor shipped], "files": count scanned,
        "problems": [{"file", "problem"}]}``.

    Raises:
        UsageError: *root* does not exist, or is neither a folder nor a regular file.
    """
    root = Path(root).expanduser()
    if not root.exists():
        raise UsageError(f"{root} does not exist")
    if not (root.is_dir() or root.is_file()):
        raise UsageError(f"{root} is neither a folder nor a regular file")
    uses, problems = [], []
    files = _project_files(root, problems)
    for path in files:
        try:
            uses.extend(_scan_python(path) if path.suffix == ".py" else _scan_yaml(path))
        except _Unreadable as exc:
            problems.append({"file": str(path), "problem": str(exc)})
        except OSError as exc:
            problems.append({"file": str(path), "problem": f"cannot read: {exc.strerror or exc}"})
    shipped = shipped_model_types()
    defining = [u for u in uses if u.kind in ("class", "register")]
    by_name: dict = {}
    for u in defining:
        by_name.setdefault(u.name, []).append(u)
    duplicates = {}
    for name, items in by_name.items():
        owners = {(u.file, u.owner) for u in items if u.kind == "class"}
        if len(owners) > 1:
            duplicates[name] = [u for u in items if u.kind == "class"]
    collisions = {name: {"library": shipped[name], "uses": items} for name, items in by_name.items() if name in shipped}
    unknown = [u for u in uses if u.kind == "yaml" and u.name not in by_name and u.name not in shipped]
    return {"definitions": defining, "duplicates": duplicates, "collisions": collisions, "unknown": unknown, "files": len(files), "problems": problems}
