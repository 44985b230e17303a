"""Loading mindformers-style YAML: ``base_config`` inheritance and ``${a.b}`` references.

mindformers merges a file over its ``base_config`` files (a path or a list,
relative to the file; later bases over earlier ones; dicts merged key by key,
everything else replaced).  It does not resolve ``${a.b}`` references, though
users write them; msnb resolves them with OmegaConf after merging.  Every error
names the file and, where there is one, the key.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigError, UnsafeFile
from ..safe_files import file_kind, read_small

BASE_KEY = "base_config"


@dataclass
class LoadedConfig:
    """A resolved configuration and where each of its keys came from."""

    data: dict
    path: str
    files: list = field(default_factory=list)  # every file read, the requested one last
    origin: dict = field(default_factory=dict)  # dotted key -> file that set it last
    duplicates: list = field(default_factory=list)  # (file, key, first line, second line)
    lines: dict = field(default_factory=dict)  # dotted key -> its line in the file that set it
    literal: dict | None = None  # the merged tree before ``${}`` references were resolved (what mindformers itself reads)

    def get(self, dotted: str, default=None):
        node = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def where(self, dotted: str) -> str:
        """The file that set *dotted* (or its nearest parent), for error messages."""
        parts = dotted.split(".")
        while parts:
            found = self.origin.get(".".join(parts))
            if found:
                return found
            parts.pop()
        return self.path

    def locate(self, dotted: str) -> dict:
        """``file``, ``key`` and ``line`` of *dotted*, ready to pass to :class:`ConfigError`."""
        return {"file": self.where(dotted), "key": dotted, "line": self.lines.get(dotted)}


_FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present: same events, faster

# Bounds on what one file may hold.  A real mindformers config is a few KB, a few
# hundred values and under ten levels deep; these leave wide room for that and
# refuse what only an accident or an attack produces (a /dev/zero base, a FIFO,
# an alias bomb that expands to billions of values, 500 levels of nesting that
# exhaust Python's recursion in every tool that walks the tree afterwards).
MAX_BYTES = 4 * 1024 * 1024
MAX_VALUES = 20_000  # scalars and collections, counted with every alias expanded (mindformers 1.9.0's largest config: 563)
MAX_DEPTH = 64  # nesting levels, counted through aliases
MAX_BASE_CHAIN = 32  # files in one base_config chain
MAX_FILES = 256  # distinct files one load may read
MAX_RESOLVED_BYTES = 4 * 1024 * 1024  # characters all values hold once every ${} reference is replaced
MAX_INT_DIGITS = 4000  # Python refuses to parse an integer of over 4,300 digits (a ValueError deep in PyYAML); no setting needs 19
MAX_REFERENCE_STEPS = 200_000  # ${} lookups OmegaConf makes (it re-resolves a reference each time it is used)


class _Loader(yaml.SafeLoader):
    """SafeLoader that remembers duplicate keys instead of silently keeping the last."""


class _FastLoader(_FAST):
    """The same duplicate-key bookkeeping on libyaml's parser (used once a file passed :func:`check_shape`)."""


def _construct_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue
        if key in seen:
            loader.duplicates.append((str(key), seen[key] + 1, key_node.start_mark.line + 1))
        else:
            seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


for _cls in (_Loader, _FastLoader):
    _cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_bytes(path: Path) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_BYTES`, read by :func:`msnb.safe_files.read_small`.

    Opened without blocking and checked with ``fstat`` before reading, so a
    FIFO never hangs the load and a device (``/dev/zero``) is never read.
    """
    try:
        return read_small(path, limit=MAX_BYTES)
    except UnsafeFile as exc:
        reason = exc.reason
        if reason == "no such file":
            reason = "file not found"
        elif reason.startswith("is larger than"):
            reason = f"larger than {MAX_BYTES // (1024 * 1024)} MiB; a config this size is not a config"
        elif reason.endswith("not a regular file"):
            reason = f"not a regular file ({reason[3:].split(',')[0]})"
        else:
            reason = reason.replace("cannot be read", "cannot read")
        raise ConfigError(reason, file=path) from None


def _file_kind(mode: int) -> str:
    return file_kind(mode)


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}", file=path, line=line) from None


def check_shape(text: str, path: Path) -> None:
    """Refuse alias bombs, recursive aliases and deep nesting before anything builds the tree.

    One pass over the parser's events (the parser is a state machine, so deep
    input cannot exhaust the stack here), counting each collection's values
    with aliases expanded: an alias adds the size and depth of its anchor.
    libyaml stops at its own nesting limit (1,000 flow levels) while scanning
    ahead, before the events that would show the depth; the pass is then redone
    on PyYAML's pure-Python parser, which has no such limit.  A syntax error
    ends the pass quietly; the full load reports it.

    Args:
        text: the file's text.
        path: its path, for the error.

    Raises:
        ConfigError: the file is an alias bomb, recursive, or nested more than :data:`MAX_DEPTH` deep.
    """
    if not _shape_pass(text, path, _FAST) and _FAST is not yaml.SafeLoader:
        _shape_pass(text, path, yaml.SafeLoader)


def _shape_pass(text: str, path: Path, loader_cls) -> bool:
    """One :func:`check_shape` pass with *loader_cls*'s parser; False when it met a syntax error."""
    stack = [[0, 0, None]]  # per open collection: values inside, depth inside, anchor
    sizes: dict = {}  # anchor -> (values, depth) once its node is complete
    try:
        loader = loader_cls(text)
    except yaml.YAMLError:  # the pure-Python reader refuses control characters up front; the full load names them
        return False
    try:
        while loader.check_event():
            event = loader.get_event()
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append([0, 0, event.anchor])
                if len(stack) - 1 > MAX_DEPTH:
                    raise ConfigError(f"nested more than {MAX_DEPTH} levels deep; msnb refuses configs this deep", file=path, line=line)
            elif isinstance(event, yaml.CollectionEndEvent):
                values, depth, anchor = stack.pop()
                values, depth = values + 1, depth + 1
                stack[-1][0] += values
                stack[-1][1] = max(stack[-1][1], depth)
                if anchor is not None:
                    sizes[anchor] = (values, depth)
            elif isinstance(event, yaml.ScalarEvent):
                stack[-1][0] += 1
                if len(event.value) > MAX_INT_DIGITS and loader.resolve(yaml.ScalarNode, event.value, event.implicit) == "tag:yaml.org,2002:int":
                    raise ConfigError(
                        f"an integer of {len(event.value):,} characters; msnb refuses numbers over {MAX_INT_DIGITS:,} digits", file=path, line=line
                    )
                if event.anchor is not None:
                    sizes[event.anchor] = (1, 0)
            elif isinstance(event, yaml.AliasEvent):
                if any(frame[2] == event.anchor for frame in stack):
                    raise ConfigError(f"alias *{event.anchor} refers to the collection that contains it (a recursive structure)", file=path, line=line)
                values, depth = sizes.get(event.anchor, (0, 0))  # an undefined alias: the full load names it
                stack[-1][0] += values
                stack[-1][1] = max(stack[-1][1], depth)
                if len(stack) - 1 + depth > MAX_DEPTH:
                    raise ConfigError(f"alias *{event.anchor} nests the config more than {MAX_DEPTH} levels deep", file=path, line=line)
            else:
                continue
            if stack[-1][0] > MAX_VALUES:
                how = " (counting every alias in full: an alias bomb?)" if sizes else ""
                raise ConfigError(f"expands to more than {MAX_VALUES:,} values{how}; msnb refuses configs this large", file=path, line=line)
    except yaml.YAMLError:
        return False
    finally:
        loader.dispose()
    return True


def _yaml_error(exc: yaml.YAMLError, path: Path, text: str) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return ConfigError(f"invalid YAML: control character #x{exc.character:04x} is not allowed", file=path, line=line)
    return ConfigError(f"invalid YAML: {_one_line(problem or exc)}", file=path, line=mark.line + 1 if mark else None)


def _key_lines(root) -> dict:
    """dotted key -> line (1-based) for every mapping key reachable from *root*, aliases not followed twice."""
    lines: dict = {}
    todo = [(root, "")]
    seen = set()
    while todo:
        node, prefix = todo.pop()
        if not isinstance(node, yaml.MappingNode) or id(node) in seen:
            continue
        seen.add(id(node))
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                dotted = f"{prefix}{key.value}"
                lines.setdefault(dotted, key.start_mark.line + 1)
                todo.append((value, dotted + "."))
    return lines


def read_yaml(path: Path, *, with_lines: bool = False):
    """One YAML file as a dict, plus its duplicate keys (and, *with_lines*, each key's line).

    Syntax errors name file and line; non-regular files, files over
    :data:`MAX_BYTES`, non-UTF-8 bytes, alias bombs and deep nesting are
    refused with a :class:`ConfigError` before a tree is built.
    """
    text = _decode(read_bytes(path), path)
    check_shape(text, path)
    for cls in (_FastLoader, _Loader):  # libyaml first; the pure-Python loader words errors the same on every install
        loader = None
        try:
            loader = cls(text)
            loader.duplicates = []
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
            break
        except yaml.YAMLError as exc:
            error = _yaml_error(exc, path, text)
        finally:
            if loader is not None:
                loader.dispose()
    else:
        raise error
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping of keys, not a {type(data).__name__}", file=path)
    if with_lines:
        return data, loader.duplicates, _key_lines(node)
    return data, loader.duplicates


def _merge(base: dict, over: dict, origin: dict, file: str | None, prefix: str = "") -> dict:
    """*over* merged onto *base*; keys set from *over* are marked as coming from *file*
    (None: already marked, as for a base's tree that recorded its own files)."""
    out = dict(base)
    for key, value in over.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, origin, file, dotted + ".")
        else:
            out[key] = value
            if file is not None:
                _mark(value, origin, file, dotted)
    return out


def _mark(value, origin: dict, file: str, dotted: str) -> None:
    origin[dotted] = file
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(v, origin, file, f"{dotted}.{k}")


def _load_tree(named: Path, chain: tuple, state: dict) -> dict:
    """*named* merged over its bases.  A file reached twice (a diamond of bases) is read and merged once.

    A relative ``base_config`` is joined to the folder of the path the file was *named* by, not of the file a symlink
    points to: mindformers' ``MindFormerConfig._file2dict`` joins ``os.path.dirname(filename)`` before resolving it.
    """
    path = named.resolve()
    if path in chain:
        cycle = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"base_config cycle: {cycle}", file=chain[-1], key=BASE_KEY)
    if path in state["trees"]:
        return state["trees"][path]
    if len(chain) >= MAX_BASE_CHAIN:
        raise ConfigError(f"base_config chains more than {MAX_BASE_CHAIN} files deep", file=chain[-1], key=BASE_KEY)
    if len(state["trees"]) >= MAX_FILES:
        raise ConfigError(f"base_config reaches more than {MAX_FILES} files", file=chain[-1], key=BASE_KEY)
    data, dups, key_lines = read_yaml(path, with_lines=True)
    state["duplicates"].extend((str(path), key, a, b) for key, a, b in dups)
    bases = data.pop(BASE_KEY, None)
    base_line = key_lines.get(BASE_KEY)
    if bases is None or bases == "" or bases == []:
        bases = []
    elif isinstance(bases, str):
        bases = [bases]
    elif not (isinstance(bases, list) and all(isinstance(b, str) for b in bases)):
        raise ConfigError(f"base_config must be a path or a list of paths, not {_short(bases)}", file=path, key=BASE_KEY, line=base_line)
    merged: dict = {}
    for base in bases:
        base_named = _base_path(named, path, base, base_line)
        merged = _merge(merged, _load_tree(base_named, (*chain, path), state), state["origin"], None)
    merged = _merge(merged, data, state["origin"], str(path))
    for dotted, line in key_lines.items():
        if state["origin"].get(dotted) == str(path):
            state["lines"][dotted] = line
    state["files"].append(str(path))
    state["trees"][path] = merged
    return merged


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _base_path(named: Path, including: Path, base: str, line: int | None) -> Path:
    """Where a ``base_config`` entry of *including* (reached as *named*) points, as mindformers joins it: to *named*'s folder,
    unresolved (the name, returned, is what its own bases are joined to); refused unless it is a regular file."""
    where = {"file": including, "key": BASE_KEY, "line": line}
    joined = named.parent / os.path.expanduser(base)
    try:
        base_path = joined.resolve()
        mode = base_path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"base_config {_short(base)} not found (looked for {joined})", **where) from None
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop on older Pythons
        raise ConfigError(f"base_config {_short(base)} cannot be read: {_one_line(getattr(exc, 'strerror', None) or exc)}", **where) from None
    kind = _file_kind(mode)
    if kind != "file":
        raise ConfigError(f"base_config {_short(base)} is {kind} ({base_path}), not a YAML file", **where)
    return joined


def resolve_references(data: dict, loaded: LoadedConfig) -> dict:
    """Resolve ``${a.b}`` (and OmegaConf resolvers such as ``${oc.env:HOME}``) in place of their values.

    Args:
        data: the merged tree.
        loaded: where its keys came from, for error messages.

    Returns:
        A new tree with every reference replaced by its value.
    """
    # deferred: omegaconf (and antlr4), only for a config with ${} references
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

    check_reference_cost(data, loaded)
    try:
        conf = OmegaConf.create(data)
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or None
        msg = _one_line((getattr(exc, "msg", None) or str(exc)).splitlines()[0])
        what = "cannot resolve a ${...} reference" if isinstance(exc, InterpolationResolutionError) or "${" in msg else "cannot resolve ${...} references in it"
        raise ConfigError(f"{what}: {msg}", **(loaded.locate(key) if key else {"file": loaded.path})) from None


_REFERENCE = re.compile(r"\$\{([^${}]*)\}")


def check_reference_cost(data: dict, loaded: LoadedConfig) -> None:
    """Refuse, before resolving, references whose expansion is too large or too slow to compute.

    ``a1: ${a0}${a0}``, ``a2: ${a1}${a1}`` ... doubles with every line: 31
    lines of 400 bytes expand to gigabytes, and OmegaConf, which resolves a
    reference again each time it is used, takes minutes even when the values
    are short.  Both costs are counted here on the reference graph, each key
    once (memoised), so the count itself is linear in the file: the resolved
    length of every value (at most :data:`MAX_RESOLVED_BYTES` in all) and the
    lookups resolution would make (at most :data:`MAX_REFERENCE_STEPS`).
    References msnb cannot follow (resolvers such as ``${oc.env:HOME}``,
    nested ``${a.${b}}``, missing keys) count as one lookup of length zero;
    OmegaConf reports the missing ones itself.

    Raises:
        ConfigError: naming the first key over a bound and the file that set it.
    """
    leaves: dict[str, object] = {}

    def walk(node, prefix):
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            leaves[prefix] = node
            return
        leaves[prefix] = _Container([f"{prefix}.{k}" if prefix else str(k) for k, _ in items])
        for k, v in node.items() if isinstance(node, dict) else enumerate(node):
            walk(v, f"{prefix}.{k}" if prefix else str(k))

    walk(data, "")
    cost: dict[str, tuple[int, int]] = {}  # key -> (resolved length, lookups)
    active: set[str] = set()

    def target(ref: str, key: str) -> str | None:
        ref = ref.strip().replace("[", ".").replace("]", "")
        if ":" in ref:
            return None  # a resolver
        if ref.startswith("."):
            dots = len(ref) - len(ref.lstrip("."))
            parent = key.split(".")[:-dots] if key else []
            ref = ".".join([*parent, ref.lstrip(".")]) if ref.lstrip(".") else ".".join(parent)
        return ref if ref in leaves else None

    def measure(key: str) -> tuple[int, int]:
        done = cost.get(key)
        if done is not None:
            return done
        if key in active:
            return 0, 1  # a cycle: OmegaConf reports it
        active.add(key)
        node = leaves[key]
        if isinstance(node, _Container):
            size = steps = 0
            for child in node.keys:
                s, n = measure(child)
                size, steps = size + s, steps + n
        elif isinstance(node, str) and "${" in node:
            size, steps = len(_REFERENCE.sub("", node)), 0
            for m in _REFERENCE.finditer(node):
                ref = target(m.group(1), key)
                s, n = measure(ref) if ref is not None else (0, 0)
                size, steps = size + s, steps + n + 1
        else:
            size, steps = len(str(node)), 0
        active.discard(key)
        cost[key] = (size, steps)
        if size > MAX_RESOLVED_BYTES or steps > MAX_REFERENCE_STEPS:
            what = (
                f"expand to {size:,} characters (at most {MAX_RESOLVED_BYTES:,})"
                if size > MAX_RESOLVED_BYTES
                else (f"need {steps:,} ${{}} lookups to resolve (at most {MAX_REFERENCE_STEPS:,})")
            )
            raise ConfigError(f"its ${{}} references {what}: each reference is copied where it is used, so a chain of them multiplies", **loaded.locate(key))
        return size, steps

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH + 10 * len(leaves) + 1000))  # a chain of references is as long as the file has keys
    try:
        for key in leaves:
            if key:
                measure(key)
    finally:
        sys.setrecursionlimit(limit)


class _Container:
    """A dict or list in :func:`check_reference_cost`'s table: the keys of its children."""

    __slots__ = ("keys",)

    def __init__(self, keys):
        self.keys = keys


def load_config(path: str | os.PathLike, *, resolve: bool = True) -> LoadedConfig:
    """Load *path* with its base_config files merged under it and references resolved.

    Args:
        path: a mindformers-style YAML file.
        resolve: resolve ``${a.b}`` references (OmegaConf) after merging.

    Returns:
        The :class:`LoadedConfig`.  Anything wrong with the files (missing, not
        regular, too large, not UTF-8, bad YAML, an alias bomb, too deep, a base
        cycle, an unresolvable reference) raises :class:`ConfigError` naming the
        file and, where there is one, the key and line.
    """
    path = Path(path).expanduser()
    state = {"files": [], "origin": {}, "lines": {}, "duplicates": [], "trees": {}}
    try:
        start = path.resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot read: {_one_line(getattr(exc, 'strerror', None) or exc)}", file=path) from None
    data = _load_tree(path, (), state)
    loaded = LoadedConfig(data=data, path=str(start), files=state["files"], origin=state["origin"], duplicates=state["duplicates"], lines=state["lines"])
    loaded.literal = data
    if resolve and _has_reference(data):
        loaded.data = resolve_references(data, loaded)
    return loaded


def _has_reference(data) -> bool:
    """Does any string in *data* hold ``${``?  Without one OmegaConf would only copy the tree (slowly)."""
    todo, seen = [data], set()
    while todo:
        node = todo.pop()
        if isinstance(node, str):
            if "${" in node:
                return True
        elif isinstance(node, (dict, list)):
            if id(node) in seen:
                continue
            seen.add(id(node))
            todo.extend(node.values() if isinstance(node, dict) else node)
    return False
