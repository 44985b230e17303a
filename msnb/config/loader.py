"""Loading mindformers-style YAML: ``base_config`` inheritance and ``${a.b}`` references.

mindformers merges a file over its ``base_config`` files (a path or a list,
relative to the file; later bases over earlier ones; dicts merged key by key,
everything else replaced).  It does not resolve ``${a.b}`` references, though
users write them; msnb resolves them with OmegaConf after merging.  Every error
names the file and, where there is one, the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigError

BASE_KEY = "base_config"


@dataclass
class LoadedConfig:
    """A resolved configuration and where each of its keys came from."""

    data: dict
    path: str
    files: list = field(default_factory=list)  # every file read, the requested one last
    origin: dict = field(default_factory=dict)  # dotted key -> file that set it last
    duplicates: list = field(default_factory=list)  # (file, key, first line, second line)

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


class _Loader(yaml.SafeLoader):
    """SafeLoader that remembers duplicate keys instead of silently keeping the last."""


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


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path) -> tuple[dict, list]:
    """One YAML file as a dict, plus its duplicate keys; syntax errors name file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from None
    loader = _Loader(text)
    loader.duplicates = []
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML: {problem}", file=path, line=mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping of keys, not a {type(data).__name__}", file=path)
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


def _load_tree(path: Path, chain: tuple, files: list, origin: dict, duplicates: list) -> dict:
    path = path.resolve()
    if path in chain:
        cycle = " -> ".join(str(p) for p in (*chain, path))
        raise ConfigError(f"base_config cycle: {cycle}", file=chain[-1], key=BASE_KEY)
    data, dups = read_yaml(path)
    duplicates.extend((str(path), key, a, b) for key, a, b in dups)
    bases = data.pop(BASE_KEY, None)
    if bases is None or bases == "" or bases == []:
        bases = []
    elif isinstance(bases, str):
        bases = [bases]
    elif not (isinstance(bases, list) and all(isinstance(b, str) for b in bases)):
        raise ConfigError(f"base_config must be a path or a list of paths, not {bases!r}", file=path, key=BASE_KEY)
    merged: dict = {}
    for base in bases:
        base_path = (path.parent / os.path.expanduser(base)).resolve()
        if not base_path.exists():
            raise ConfigError(f"base_config {base!r} not found (looked for {base_path})", file=path, key=BASE_KEY)
        merged = _merge(merged, _load_tree(base_path, (*chain, path), files, origin, duplicates), origin, None)
    merged = _merge(merged, data, origin, str(path))
    files.append(str(path))
    return merged


def resolve_references(data: dict, loaded: LoadedConfig) -> dict:
    """Resolve ``${a.b}`` (and OmegaConf resolvers such as ``${oc.env:HOME}``) in place of their values."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        conf = OmegaConf.create(data)
        return OmegaConf.to_container(conf, resolve=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or None
        msg = getattr(exc, "msg", None) or str(exc).splitlines()[0]
        msg = msg.splitlines()[0]
        raise ConfigError(f"cannot resolve a ${{...}} reference: {msg}", file=loaded.where(key) if key else loaded.path, key=key) from None


def load_config(path: str | os.PathLike, *, resolve: bool = True) -> LoadedConfig:
    """Load *path* with its base_config files merged under it and references resolved."""
    path = Path(path).expanduser()
    files: list = []
    origin: dict = {}
    duplicates: list = []
    data = _load_tree(path, (), files, origin, duplicates)
    loaded = LoadedConfig(data=data, path=str(path.resolve()), files=files, origin=origin, duplicates=duplicates)
    if resolve:
        loaded.data = resolve_references(data, loaded)
    return loaded
