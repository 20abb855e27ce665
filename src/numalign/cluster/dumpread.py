"""Reading a `kubectl get ... -o json|yaml` dump: the objects of one kind it holds, and notes.

A dump comes as kubectl writes it (a List, JSON or YAML), as `kubectl get -o yaml` of one object, or
as several documents (a `---` stream, objects or Lists). Objects of other kinds (a Namespace, a
ConfigMap, an Event list beside the nodes) are skipped with one note naming what was skipped; a file
holding none of the expected kind is an error naming what it holds.

Notes collects what a dump cannot give (facts reconstructed or assumed), one line per fact however
many nodes share it, with how many and which nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from numalign.errors import InvalidInputError

_NAMED: Final = 3  # nodes named in a note before "and N more"


@dataclass
class Notes:
    """One note per fact; the nodes each applies to are counted, a few named."""

    _nodes: dict[str, list[str]] = field(default_factory=dict)

    def add(self, message: str, node: str | None = None) -> None:
        names = self._nodes.setdefault(message, [])
        if node is not None:
            names.append(node)

    def lines(self) -> tuple[str, ...]:
        out = []
        for message, names in self._nodes.items():
            if not names:
                out.append(message)
                continue
            shown = ", ".join(names[:_NAMED]) + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")
            out.append(f"{message} ({len(names)} node{'s' if len(names) != 1 else ''}: {shown})")
        return tuple(out)


def read_objects(
    path: Path, kind: str, command: str, notes: Notes, allow_empty: bool = False
) -> list[tuple[str, Mapping[str, Any]]]:
    """Every object of `kind` in the dump at `path`, each with where it was read ("PATH: items[3]");
    `allow_empty`: a dump of no objects at all is an answer (no pods running), not an error."""
    from numalign.adapters.textfiles import read_text_file
    from numalign.k8s.documents import parse_documents

    expected = f"the output of `{command}` (JSON or YAML)"
    text = read_text_file(path, f"the {kind} dump", expected, InvalidInputError)
    docs = [(d, doc) for d, doc in enumerate(parse_documents(text, str(path), expected), 1) if doc is not None]
    several = len(docs) > 1
    found: list[tuple[str, Mapping[str, Any]]] = []
    skipped: Counter[str] = Counter()
    for d, doc in docs:
        at = f"{path}: document {d}" if several else str(path)
        if isinstance(doc, Mapping) and isinstance(doc.get("items"), list) and \
                str(doc.get("kind", "List")).endswith("List"):
            entries = [(f"{at}: items[{i}]", item) for i, item in enumerate(doc["items"])]
        else:
            entries = [(at, doc)]
        for where, item in entries:
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"{where}: expected a {kind} object, got {type(item).__name__}; is this "
                                        f"{expected}?")
            got = item.get("kind")
            if got in (kind, None):
                found.append((where, item))
            else:
                skipped[str(got)] += 1
    held = ", ".join(f"{k}: {n}" for k, n in skipped.most_common())
    if not found and skipped:
        raise InvalidInputError(f"{path}: no {kind} objects: it holds {sum(skipped.values())} of other kinds "
                                f"({held}); expected {expected}")
    if not found and not allow_empty:
        raise InvalidInputError(f"{path}: no {kind} objects (an empty list); expected {expected} of a cluster "
                                f"with {kind} objects")
    if skipped:
        notes.add(f"{path}: skipped {sum(skipped.values())} object(s) that are not {kind}s ({held})")
    return found
