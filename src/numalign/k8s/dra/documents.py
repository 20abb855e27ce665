"""Pods and DRA objects from the same documents, as `kubectl apply -f` takes them: one multi-document
YAML (or a `kubectl get resourceslices,deviceclasses,resourceclaims -A -o json` List) may hold
ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates and pods in any order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InvalidInputError
from numalign.k8s.documents import parse_documents
from numalign.k8s.dra.read import DRA_KINDS, dra_object_from_dict
from numalign.k8s.dra.types import DeviceClass, DRAObjects, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from numalign.k8s.manifest import EXPECTED_MANIFEST, Collector, Expansion, pods_from_documents
from numalign.k8s.pod import Pod
from numalign.limits import MAX_DRA_OBJECTS

EXPECTED_WITH_DRA = EXPECTED_MANIFEST + ", " + ", ".join(DRA_KINDS)


def collector(objects: DRAObjects) -> Collector:
    """A manifest Collector that reads every DRA object into `objects` (a later object of the same kind
    and name replaces the earlier one, as a second `kubectl apply` would)."""

    def collect(obj: Mapping[str, Any], where: str) -> bool:
        if obj.get("kind") not in DRA_KINDS:
            return False
        if len(objects) >= MAX_DRA_OBJECTS:
            raise InvalidInputError(
                f"{where}: more than {MAX_DRA_OBJECTS} DRA objects; split the input or keep the objects of the "
                "nodes in question"
            )
        parsed = dra_object_from_dict(obj, where)
        if isinstance(parsed, DeviceClass):
            objects.classes[parsed.name] = parsed
        elif isinstance(parsed, ResourceClaim):
            objects.claims[parsed.key] = parsed
        elif isinstance(parsed, ResourceClaimTemplate):
            objects.templates[parsed.key] = parsed
        elif isinstance(parsed, ResourceSlice):
            objects.slices[:] = [s for s in objects.slices if s.name != parsed.name]
            objects.slices.append(parsed)
        return True

    return collect


def pods_and_dra_from_documents(
    docs: list[Any], source: str, *, expand_replicas: bool | Expansion = False, skipped: list[str] | None = None
) -> tuple[list[Pod], DRAObjects]:
    """Pods (as k8s.manifest reads them) and the DRA objects beside them."""
    objects = DRAObjects()
    pods = pods_from_documents(docs, source, expand_replicas=expand_replicas, skipped=skipped,
                               collect=collector(objects))
    return pods, objects


def pods_and_dra_from_yaml(
    text: str, source: str = "<input>", *, expand_replicas: bool = False, skipped: list[str] | None = None
) -> tuple[list[Pod], DRAObjects]:
    return pods_and_dra_from_documents(parse_documents(text, source, EXPECTED_WITH_DRA), source,
                                       expand_replicas=expand_replicas, skipped=skipped)
