"""What a simulation schedules: pods from manifests (as `numalign admit` reads them, replicas expanded),
an optional timeline of creations and deletions, or a seeded mix of pod shapes.

Timeline (JSON lines or CSV with a header): `time`, `op` (create | delete) and `name`, the name of a
workload (Deployment, Job, ...) or a pod from the manifests. Without a timeline every workload is
created at time 0 in file order. A mix file lists pod shapes with weights:

    kind: Mix
    count: 2000
    shapes:
    - {weight: 40, pod: {apiVersion: v1, kind: Pod, metadata: {name: web}, spec: {...}}}
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from numalign.errors import InvalidInputError
from numalign.k8s.dra.types import DRAObjects
from numalign.k8s.manifest import WORKLOAD_TEMPLATES, Collector, Expansion, pods_from_object
from numalign.k8s.pod import Pod
from numalign.limits import MAX_GENERATED_PODS, check_count, quote

OPS: Final = ("create", "delete")


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class Placement:
    """What beyond resources decides where a pod may go: spec.nodeSelector and spec.tolerations."""

    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True)
class WorkloadGroup:
    """The pods of one workload (or one bare pod), created and deleted together."""

    name: str
    pods: tuple[Pod, ...]
    placement: Placement = Placement()


@dataclass(frozen=True)
class Event:
    time: float
    op: str
    name: str


@dataclass
class Workload:
    groups: list[WorkloadGroup]
    events: list[Event] = field(default_factory=list)
    source: str = ""
    # Pods already running (a `kubectl get pods` dump): (node name, pod), bound before anything else.
    bound: list[tuple[str, Pod]] = field(default_factory=list)
    # DRA objects read beside the pods (classes, claims, claim templates; cluster/dra.py).
    dra: DRAObjects = field(default_factory=DRAObjects)

    def timeline(self) -> list[Event]:
        if self.events:
            return sorted(self.events, key=lambda e: e.time)
        return [Event(0.0, "create", g.name) for g in self.groups]

    def group(self, name: str) -> WorkloadGroup | None:
        index = self.__dict__.get("_index")
        if index is None or len(index) != len(self.groups):
            index = {g.name: g for g in self.groups}
            self.__dict__["_index"] = index
        found: WorkloadGroup | None = index.get(name)
        return found

    def pod_count(self) -> int:
        return sum(len(g.pods) for g in self.groups)


def _placement(spec: Any) -> Placement:
    if not isinstance(spec, Mapping):
        return Placement()
    sel = spec.get("nodeSelector") or {}
    tols = []
    for t in spec.get("tolerations") or []:
        if isinstance(t, Mapping):
            tols.append(Toleration(str(t.get("key", "")), str(t.get("operator", "Equal")), str(t.get("value", "")),
                                   str(t.get("effect", ""))))
    return Placement(tuple(sorted((str(k), str(v)) for k, v in sel.items())) if isinstance(sel, Mapping) else (),
                     tuple(tols))


def _template_spec(obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec")
    if obj.get("kind") == "Pod" or not isinstance(spec, Mapping):
        return spec
    if obj.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return (spec.get("template") or {}).get("spec")


def groups_from_object(
    obj: Any, where: str, collect: Collector | None = None, expansion: Expansion | None = None,
    skipped: list[str] | None = None,
) -> list[WorkloadGroup]:
    """The workload groups of one document. `expansion`: how many pods each workload gives (its own
    spec.replicas by default) and the notes saying so; `skipped`: objects of other kinds (a Namespace,
    a Service) noted there instead of refused."""
    if isinstance(obj, list):
        return [g for i, o in enumerate(obj)
                for g in groups_from_object(o, f"{where}[{i}]", collect, expansion, skipped)]
    if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"].endswith("List") \
            and isinstance(obj.get("items"), list):
        return [g for i, o in enumerate(obj["items"])
                for g in groups_from_object(o, f"{where}: items[{i}]", collect, expansion, skipped)]
    pods = pods_from_object(obj, where, expand_replicas=expansion if expansion is not None else True,
                            collect=collect, skipped=skipped)
    if not pods:
        return []
    assert isinstance(obj, Mapping)
    meta = obj.get("metadata") or {}
    kind = obj.get("kind", "Pod")
    name = str(meta.get("name", pods[0].name)) if kind in WORKLOAD_TEMPLATES else pods[0].name
    return [WorkloadGroup(name, tuple(pods), _placement(_template_spec(obj)))]


def load_workload(
    paths: Sequence[Path], replicas: int | None = None, notes: list[str] | None = None
) -> Workload:
    """The workload of manifest files. `replicas`: pods per workload over each one's own (--replicas);
    `notes`, when given, hears each workload's expansion and each object of another kind skipped."""
    from numalign.adapters.textfiles import load_documents
    from numalign.k8s.dra.documents import collector

    expansion = Expansion(replicas)
    skipped: list[str] | None = [] if notes is not None else None
    groups: list[WorkloadGroup] = []
    dra = DRAObjects()
    collect = collector(dra)  # DeviceClasses, ResourceClaims and templates beside the pods
    for path in paths:
        docs = load_documents(path, "the workload", "Pod or workload manifests (YAML or JSON)")
        found = []
        before = len(dra)
        said = len(expansion.expanded), len(skipped or ())
        for i, doc in enumerate(docs, start=1):
            if doc is not None:
                found.extend(groups_from_object(doc, f"{path}: document {i}", collect, expansion, skipped))
        if not found and len(dra) == before:
            raise InvalidInputError(f"{path}: no Pod or workload with a pod template found; expected manifests as "
                                    "`numalign admit` takes them")
        groups.extend(found)
        if notes is not None:
            from numalign.k8s.podfields import unknown_pod_field_warnings  # a misspelt `resources`, as admit says

            notes.extend(unknown_pod_field_warnings(docs, str(path)))
            notes.extend(f"{path}: {line}" for line in expansion.expanded[said[0]:])
            notes.extend((skipped or [])[said[1]:])  # these name their document already
    _unique(groups)
    return Workload(groups, source=", ".join(str(p) for p in paths), dra=dra)


def _unique(groups: list[WorkloadGroup]) -> None:
    seen: set[str] = set()
    for g in groups:
        if g.name in seen:
            raise InvalidInputError(f"workload {g.name!r} appears twice; expected unique workload and pod names "
                                    "(the timeline refers to them by name); rename one")
        seen.add(g.name)


_TIMELINE_EXPECTED: Final = "JSON lines or CSV with time, op, name"


def load_timeline(path: Path, workload: Workload) -> list[Event]:
    from numalign.adapters.textfiles import read_text_file

    text = read_text_file(path, "the timeline", _TIMELINE_EXPECTED, InvalidInputError)
    rows: list[tuple[str, Mapping[str, Any]]] = []
    if text.lstrip().startswith("{"):
        from numalign.k8s.documents import DuplicateKeyError, duplicate_key_message, loads_json

        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"{path}:{n}", loads_json(line)))
                except DuplicateKeyError as e:
                    # As every other file users give (k8s/documents.py): {"op": "create", "op": "delete"} kept
                    # the last silently. The line is the file's; the key's place within it is not worth a column.
                    e.line = e.first_line = 0
                    raise InvalidInputError(duplicate_key_message(e, f"{path}:{n}", _TIMELINE_EXPECTED)) from None
                except (ValueError, RecursionError):  # RecursionError: a line nested thousands deep
                    raise InvalidInputError(f"{path}:{n}: not a JSON object; expected one "
                                            '{"time": 0, "op": "create", "name": "web"} per line') from None
    else:
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None or not {"time", "op", "name"} <= set(reader.fieldnames):
            raise InvalidInputError(f"{path}: expected a CSV header time,op,name (or JSON lines), got "
                                    f"{reader.fieldnames}")
        seen: set[str] = set()
        for column in reader.fieldnames:  # DictReader would keep the last such column's value silently
            if column in seen:
                raise InvalidInputError(f"{path}: CSV header column {quote(column)} written twice; expected "
                                        f"{_TIMELINE_EXPECTED}; keep one of the two")
            seen.add(column)
        rows = [(f"{path}:{n}", r) for n, r in enumerate(reader, start=2)]
    events = []
    for where, r in rows:
        if not isinstance(r, Mapping):
            raise InvalidInputError(f"{where}: expected an object with time, op, name")
        try:
            t = float(r.get("time", 0))
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: time: {r.get('time')!r} is not a number; expected seconds") from None
        op = str(r.get("op", ""))
        if op not in OPS:
            raise InvalidInputError(f"{where}: op: {op!r}; expected create or delete")
        name = str(r.get("name", ""))
        if workload.group(name) is None:
            known = ", ".join(g.name for g in workload.groups[:5])
            raise InvalidInputError(f"{where}: name: {name!r} names no workload or pod in {workload.source}; "
                                    f"expected one of {known}{', ...' if len(workload.groups) > 5 else ''}")
        events.append(Event(t, op, name))
    return events


@dataclass(frozen=True)
class Shape:
    name: str
    weight: float
    pod: Pod
    placement: Placement = Placement()


def generate(shapes: Sequence[Shape], count: int, seed: int) -> Workload:
    """`count` pods drawn from the weighted shapes with a seeded generator; each pod its own group."""
    check_count(count, MAX_GENERATED_PODS, "--generate", "pods", "lower it (a few thousand pods show the same "
                "behaviour)")
    from numalign.cluster.resources import pod_shape
    from numalign.k8s.qos import get_pod_qos
    from numalign.kubelet.admission.predicate import held_requests

    for s in shapes:
        # What the scheduler and the kubelet memoise from a pod's spec, worked out once per shape and handed
        # to its copies (Pod.with_identity) rather than once per generated pod.
        pod_shape(s.pod)
        get_pod_qos(s.pod)
        held_requests(s.pod)
    rng = random.Random(seed)
    weights = [s.weight for s in shapes]
    groups = []
    for i in range(count):
        s = rng.choices(shapes, weights)[0]
        name = f"{s.name}-{i}"
        pod = s.pod.with_identity(name=name, uid=f"gen-{seed}-{i}")
        groups.append(WorkloadGroup(name, (pod,), s.placement))
    return Workload(groups, source=f"generated: {count} pods, seed {seed}, shapes "
                    + ", ".join(f"{s.name}:{s.weight:g}" for s in shapes))


def load_mix(path: Path) -> tuple[list[Shape], int | None]:
    from numalign.adapters.textfiles import load_document

    obj = load_document(path, "the mix file", "kind: Mix with shapes [{weight, pod}]")
    return mix_from_dict(obj, str(path))


def mix_from_dict(obj: Any, where: str) -> tuple[list[Shape], int | None]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("shapes"), list) or not obj["shapes"]:
        raise InvalidInputError(f"{where}: expected kind: Mix with a non-empty shapes list of {{weight, pod}}")
    shapes = []
    for i, s in enumerate(obj["shapes"]):
        w = f"{where}: shapes[{i}]"
        if not isinstance(s, Mapping) or not isinstance(s.get("pod"), Mapping):
            raise InvalidInputError(f"{w}: expected {{weight: N, pod: <Pod manifest>}}")
        weight = s.get("weight", 1)
        if not isinstance(weight, int | float) or weight <= 0:
            raise InvalidInputError(f"{w}.weight: expected a number > 0, got {weight!r}")
        found = groups_from_object(s["pod"], f"{w}.pod")
        if not found:
            raise InvalidInputError(f"{w}.pod: no pod found; expected a Pod manifest")
        group = found[0]
        shapes.append(Shape(group.name, float(weight), group.pods[0], group.placement))
    count = obj.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise InvalidInputError(f"{where}: count: expected a whole number >= 1, got {quote(count)}")
    if count is not None:
        check_count(count, MAX_GENERATED_PODS, f"{where}: count", "pods", "lower it")
    return shapes, count
