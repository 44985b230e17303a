"""Every change a smoke makes to a mindformers config: one :class:`Change` each, of one of three kinds, with its reason.

``shrink`` (sizes, batch, steps), ``rehearse`` (what this device cannot run as Ascend does) and ``isolate``
(outputs and inputs redirected into the scratch folder); :class:`Edits` is the only way a plan changes a key, so
nothing is changed without being recorded and said in the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

SHRINK, REHEARSE, ISOLATE = "shrink", "rehearse", "isolate"


KINDS = (SHRINK, REHEARSE, ISOLATE)


DELETE = "<deleted>"  # the value of a Change that removes its key


@dataclass(frozen=True)
class Change:
    """One key the smoke changes in the user's config: its kind (shrink, rehearse, isolate), before, after and why."""

    kind: str
    path: tuple  # keys (str) and list indices (int) from the root
    before: object
    after: object  # DELETE removes the key
    why: str

    @property
    def key(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def override(self) -> dict:
        """What the child applies on mindformers' own config object."""
        if self.after is DELETE:
            return {"path": list(self.path), "delete": True, "before": _jsonable(self.before)}
        return {"path": list(self.path), "value": self.after, "before": _jsonable(self.before)}

    def as_dict(self) -> dict:
        return {"kind": self.kind, "key": self.key, "before": _jsonable(self.before), "after": None if self.after is DELETE else self.after,
                "deleted": self.after is DELETE, "why": self.why}  # fmt: skip


def _jsonable(value):
    return value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)


def _short(value) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _keys_phrase(items: list) -> str:
    """``model.model_config: num_layers 64 -> 2, hidden_size 5120 -> 64, runner_config.batch_size 1 -> 2``: a parent said once."""
    parts, last_parent = [], None
    for c in items:
        parent = Change(c.kind, c.path[:-1], None, None, "").key if len(c.path) > 1 else ""
        leaf = f"[{c.path[-1]}]" if isinstance(c.path[-1], int) else str(c.path[-1])
        after = "removed" if c.after is DELETE else _short(c.after)
        what = f"{leaf} {_short(c.before)} -> {after}"
        parts.append(what if parent == last_parent or not parent else f"{parent}: {what}")
        last_parent = parent
    return ", ".join(parts)


def describe_changes(changes: list) -> dict:
    """kind -> one phrase per reason, listing every key changed for it: ``runner_config: batch_size 1 -> 2 (the smoke's batch)``."""
    grouped: dict = {}
    for c in changes:
        grouped.setdefault(c.kind, {}).setdefault(c.why, []).append(c)
    out = {}
    for kind in KINDS:
        phrases = [f"{_keys_phrase(items)} ({why})" for why, items in grouped.get(kind, {}).items()]
        if phrases:
            out[kind] = phrases
    return out


def change_lines(changes: list) -> list[str]:
    """``shrink:``, ``rehearse:``, ``isolate:``, each followed by its changes one a line (``  - key a -> b (why)``).

    One line a change, not one a kind: a kind's changes on one line made a line of 2,000 characters, and a reason
    holding "; " could not be told from the separator."""
    return [line for kind, phrases in describe_changes(changes).items() for line in [f"{kind}:", *(f"  - {p}" for p in phrases)]]


def unshared(node):
    """A copy in which no two keys share one object: a YAML anchor (``*train_dataset``) is a copy in mindformers' reading too."""
    if isinstance(node, dict):
        return {k: unshared(v) for k, v in node.items()}
    if isinstance(node, list):
        return [unshared(v) for v in node]
    return node


class Edits:
    """The working copy of the config and every change made to it; the only way the plan changes a key."""

    def __init__(self, data: dict):
        self.data = data
        self.changes: list[Change] = []

    def get(self, path: tuple, default=None):
        node = self.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return default
        return node

    def node(self, path: tuple) -> dict | None:
        found = self.get(path)
        return found if isinstance(found, dict) else None

    def set(self, kind: str, path: tuple, value, why: str) -> None:
        """Set *path* to *value* (parents made as mappings) and record it, unless it already holds that value."""
        assert kind in KINDS, kind
        node = self.data
        for part in path[:-1]:
            child = node[part] if isinstance(node, list) else node.get(part)
            if not isinstance(child, (dict, list)):
                child = {}
                node[part] = child
            node = child
        last = path[-1]
        present = (isinstance(node, dict) and last in node) or (isinstance(node, list) and isinstance(last, int) and last < len(node))
        before = node[last] if present else None
        if present and before == value and type(before) is type(value):
            return
        node[last] = value
        self.changes.append(Change(kind, tuple(path), before, value, why))

    def delete(self, kind: str, path: tuple, why: str) -> None:
        parent = self.node(path[:-1]) if len(path) > 1 else self.data
        if parent is None or path[-1] not in parent:
            return
        before = parent.pop(path[-1])
        self.changes.append(Change(kind, tuple(path), before, DELETE, why))
